"""What the CFA estimators aggregate: the inputs ``phi_k(x)`` of the papers and per-feature
weights (``"area"``: cos(latitude) from an xarray grid's coordinates)."""

from __future__ import annotations

import re

import dask.array as da
import numpy as np
import xarray as xr

from dcfa._errors import InputError
from dcfa._units import derived_attrs
from dcfa._validation import InputData, StrOptions

INPUTS = ("identity", "square")
WEIGHTS_OPTIONS = [None, StrOptions({"area"}), "array-like"]
_LATITUDES = ("lat", "latitude")
# one UDUNITS term: a symbol with an optional integer exponent ("K", "m2", "s-1")
_TERM = re.compile(r"^([A-Za-z_%]+)(-?[0-9]+)?$")


def feature_weights(weights, inp: InputData) -> np.ndarray | None:
    """One non-negative weight per feature for ``weights`` (None, "area" or an array)."""
    if weights is None:
        return None
    layout = inp.layout
    if isinstance(weights, str):  # "area": cos(latitude)
        lat = None if layout is None else _latitude(layout)
        if lat is None:
            raise InputError(
                "weights: 'area' needs an xarray.DataArray X with a latitude coordinate "
                f"({' or '.join(map(repr, _LATITUDES))}, or CF units 'degrees_north') over its "
                "feature dims; pass one weight per feature for other inputs"
            )
        w = np.clip(np.cos(np.deg2rad(lat)), 0.0, None)
    else:
        if isinstance(weights, xr.DataArray) and layout is not None:
            weights = weights.transpose(*layout.feature_dims)
        w = np.asarray(weights, dtype=np.float64).ravel()
        if w.size != inp.n_features:
            raise InputError(
                f"weights: {w.size} values for {inp.n_features} features (one per feature)"
            )
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise InputError("weights: expected finite, non-negative weights")
    return w


def _latitude(layout) -> np.ndarray | None:
    """Every feature's latitude in degrees (C order over the feature dims), or None."""
    for name, var in layout.feature_coords.items():
        attrs = getattr(var, "attrs", {})
        is_lat = name in _LATITUDES or attrs.get("units") in ("degrees_north", "degree_north")
        if is_lat and set(var.dims) <= set(layout.feature_dims):
            v = xr.Variable(var.dims, np.asarray(var.values, dtype=np.float64))
            full = v.set_dims(dict(zip(layout.feature_dims, layout.feature_shape, strict=True)))
            return full.transpose(*layout.feature_dims).values.ravel()
    return None


def apply_inputs(data, inputs):
    """The inputs ``phi_k(x)`` of the CFA papers: ``x``, ``x**2`` or a user's elementwise function.

    Lazy on Dask arrays (applied blockwise); the function must keep the shape of a block.
    """
    if isinstance(inputs, str) and inputs == "identity":
        return data
    func = np.square if isinstance(inputs, str) and inputs == "square" else inputs
    if isinstance(data, da.Array):
        return data.map_blocks(func, dtype=np.float64)
    out = np.asarray(func(data))
    if out.shape != np.shape(data):
        raise InputError(
            f"inputs: the function must be elementwise (keep the shape {np.shape(data)}), "
            f"returned shape {out.shape}"
        )
    return out


def squared_units(units: str) -> str:
    """The CF (UDUNITS) units of the square of a quantity in ``units``.

    ``"K"`` -> ``"K2"``, ``"m2"`` -> ``"m4"``, ``"s-1"`` -> ``"s-2"``, ``"1"`` -> ``"1"``; a
    compound unit is grouped: ``"m s-1"`` -> ``"(m s-1)2"``.
    """
    text = str(units).strip()
    if text in ("", "1"):
        return text
    term = _TERM.match(text)
    if term is not None:
        power = 2 * int(term.group(2) or 1)
        return term.group(1) + ("" if power == 1 else str(power))
    return f"({text})2"


def output_attrs(attrs: dict, *, inputs, standardized: bool) -> dict:
    """The attributes of an aggregate of features with ``attrs``: all of them, with the units
    of what is aggregated (dimensionless ``"1"`` when the inputs are standardised, squared for
    ``inputs="square"``, unchanged otherwise) and, where they change, a ``long_name`` that
    says so and no CF ``standard_name`` (:func:`dcfa._units.derived_attrs`)."""
    out = dict(attrs)
    if isinstance(inputs, str) and inputs == "square" and "units" in out:
        out = derived_attrs(out, squared_units(out["units"]), "square of")
    if standardized:
        out = derived_attrs(out, "1", "standardised")
    return out
