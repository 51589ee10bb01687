"""Whether two ``units`` attributes name the same unit, as users spell units in files.

dcfa converts no units: a field given in other units than the ones it was fitted on is
refused. This module tells a spelling (``kelvin`` for ``K``) from another unit.
"""

from __future__ import annotations

import re

# UDUNITS' names of the two temperature scales a field comes in; any spelling of one is it
_SPELLINGS = {
    "K": ("K", "kelvin", "kelvins", "Kelvin", "degK", "deg_K", "degreeK", "degree_K", "degrees_K"),
    "degC": (
        "degC",
        "deg_C",
        "degreeC",
        "degree_C",
        "degrees_C",
        "celsius",
        "Celsius",
        "degree_Celsius",
        "degrees_Celsius",
        "\N{DEGREE SIGN}C",
    ),
}
_CANONICAL = {spelling: name for name, spellings in _SPELLINGS.items() for spelling in spellings}


def same_units(a: str, b: str) -> bool:
    """Whether two ``units`` attributes name the same unit: equal up to spacing, the
    exponent's spelling (``m s-1``, ``m s**-1``, ``m s^-1``, ``m.s-1``) and the names of
    kelvin and degrees Celsius (``kelvin``, ``degK``; ``Celsius``, ``deg_C``). A unit written
    another way (``m/s``) is not recognised, and is refused as other units."""
    return _unit_words(a) == _unit_words(b)


def _unit_words(units: str) -> tuple[str, ...]:
    text = units.strip()
    text = _CANONICAL.get(text, text)
    for sign in ("**", "^"):
        text = text.replace(sign, "")
    # a dot or a star between factors (m.s-1), not a decimal point (1.5 m)
    return tuple(re.sub(r"(?<=[A-Za-z0-9])[.*](?=[A-Za-z])", " ", text).split())
