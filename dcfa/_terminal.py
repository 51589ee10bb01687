"""Text from stores, files and messages printed safely: a store's attribute or a path can hold
any character, and printed raw an ESC, CR or BEL would move the cursor, recolour or rewrite
the terminal. Below the rest of dcfa and free of its imports, so that an error is printed
without loading anything."""

from __future__ import annotations

__all__ = ["counted", "escape", "first_labels"]


def escape(text: str) -> str:
    """``text`` with every non-printable character (ESC, CR, BEL, ...) written as an escape."""
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in str(text)
    )


def counted(n: int, noun: str) -> str:
    """``"1 group"``, ``"2 groups"``: a count with its noun, for the lines a command prints."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def first_labels(labels, shown: int = 5) -> str:
    """``"r1i1p1f1, r2i1p1f1, ..."``: the first ``shown`` labels of a dim, for a message that
    names a label it lacks; ``"none"`` for no labels."""
    labels = list(labels)
    text = ", ".join(map(str, labels[:shown])) + (", ..." if len(labels) > shown else "")
    return text or "none"
