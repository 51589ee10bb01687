"""Whether two ``units`` attributes name the same unit, as users spell units in files.

dcfa converts no units: a field given in other units than the ones it was fitted on is
refused. This module tells a spelling (``kelvin`` for ``K``) from another unit.
"""

from __future__ import annotations

import re

# UDUNITS' names of the two temperature scales a field comes in; any spelling of one is it,
# in any case (files hold "degrees_kelvin" and "Degrees_Celsius"), but the symbols "K" and
# "degC", which are case-sensitive: "k" is no unit
_SPELLINGS = {
    "K": ("kelvin", "kelvins", "degK", "deg_K", "degreeK", "degree_K", "degrees_K",
          "degree_kelvin", "degrees_kelvin", "deg_kelvin"),
    "degC": ("deg_C", "degreeC", "degree_C", "degrees_C", "celsius", "degree_celsius",
             "degrees_celsius", "deg_celsius", "\N{DEGREE SIGN}C"),
}  # fmt: skip
_CANONICAL = {
    spelling.casefold(): name for name, spellings in _SPELLINGS.items() for spelling in spellings
}


def derived_attrs(attrs: dict, units: str, how: str) -> dict:
    """The attributes of a quantity derived from the one ``attrs`` describe, in other
    ``units``: its ``long_name`` says ``how`` (``"standardised"``, ``"square of"``), and CF's
    ``standard_name``, which fixes the units, is dropped (``sea_surface_temperature`` in
    ``"1"`` is no CF variable)."""
    out = {k: v for k, v in attrs.items() if k != "standard_name"}
    out["units"] = units
    if "long_name" in out:
        name = str(out["long_name"])
        out["long_name"] = f"{how} {name}" if how.endswith(" of") else f"{name}, {how}"
    return out


def same_units(a: str, b: str) -> bool:
    """Whether two ``units`` attributes name the same unit: the same factors with the same
    exponents, however the exponents and the division are written (``m s-1``, ``m s**-1``,
    ``m s^-1``, ``m.s-1``, ``m/s``; ``mm month-1``, ``mm/month``), in any order, with the
    names of kelvin and degrees Celsius in any case (``kelvin``, ``degK``,
    ``degrees_Kelvin``; ``Celsius``, ``deg_C``). A
    unit in another unit's terms (``mm`` and ``m``, ``1.5 m`` and ``15 m``) is another unit.
    A unit with parentheses, or a ``/`` that divides by nothing (``m/``), is compared as
    written."""
    return _factors(a) == _factors(b)


def _factors(units: str) -> frozenset[tuple[str, int]] | tuple[str, ...]:
    text = units.strip()
    for sign in ("**", "^"):
        text = text.replace(sign, "")
    # a dot or a star between factors (m.s-1), not a decimal point (1.5 m)
    words = re.sub(r"(?<=[A-Za-z0-9])[.*](?=[A-Za-z])", " ", text).replace("/", " / ").split()
    # a "/" with nothing to divide by ("m/", "/s", "m//s") is no unit dcfa can read
    dangling = bool(words) and "/" in (words[0], words[-1])
    if "(" in text or dangling or "/ /" in " ".join(words):
        return tuple(words)
    exponents: dict[str, int] = {}
    divide = False
    for word in words:
        if word == "/":
            divide = True
            continue
        symbol, power = _power(word)
        symbol = _CANONICAL.get(symbol.casefold(), symbol)
        # UDUNITS reads "kg/m2/s" left to right: each "/" divides by the next factor only
        exponents[symbol] = exponents.get(symbol, 0) + (-power if divide else power)
        divide = False
    return frozenset((symbol, power) for symbol, power in exponents.items() if power)


def _power(word: str) -> tuple[str, int]:
    """A factor and its exponent: ``s-1`` is ``("s", -1)``, ``m2`` ``("m", 2)``; a number
    (``1.5``, ``1e-3``) is a factor of its own."""
    try:
        float(word)
    except ValueError:
        pass
    else:
        return word, 1
    match = re.fullmatch(r"(.*?[^\d+-])([+-]?\d+)", word)
    return (match[1], int(match[2])) if match else (word, 1)
