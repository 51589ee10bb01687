"""Text from stores, files and messages printed safely: a store's attribute or a path can hold
any character, and printed raw an ESC, CR or BEL would move the cursor, recolour or rewrite
the terminal. Below the rest of dcfa and free of its imports, so that an error is printed
without loading anything."""

from __future__ import annotations

__all__ = ["counted", "escape"]


def escape(text: str) -> str:
    """``text`` with every non-printable character (ESC, CR, BEL, ...) written as an escape."""
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in str(text)
    )


def counted(n: int, noun: str) -> str:
    """``"1 group"``, ``"2 groups"``: a count with its noun, for the lines a command prints."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
