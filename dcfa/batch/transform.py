"""``target.transform``: the job fits on the logarithm of a skewed target, and ``dcfa apply``
brings its forecasts back with the exponential.

A river's flow or a season's rainfall is above 0 and skewed: a few large values dominate a
least-squares fit of the target itself. Fitted on its logarithm, the regression's errors are
relative ones, and the exponential of its forecast is the target's median (not its mean).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from dcfa._errors import InputError
from dcfa._terminal import counted
from dcfa.io.calendars import date_label
from dcfa.io.result import LOG_OF, LOG_OF_UNITS

__all__ = ["back_note", "back_transformed", "check_transform", "transformed_target"]


def transformed_target(target: xr.DataArray, transform: str, dates) -> xr.DataArray:
    """The target the job fits: ``target`` itself, or (``transform = "log"``) its natural
    logarithm, after checking that it is above 0 in every sample (missing ones aside), and
    naming the first that is not by its own date (``dates``: each value's)."""
    if transform == "none":
        return target
    values = np.asarray(target.values, dtype=np.float64)
    bad = np.flatnonzero(np.isfinite(values) & ~(values > 0))
    if bad.size:
        first = bad[0]
        when = date_label(np.asarray(dates)[first])
        raise InputError(
            f"target.transform = 'log' needs a target above 0: {counted(bad.size, 'sample')} "
            f"of {int(np.isfinite(values).sum())} {'is' if bad.size == 1 else 'are'} not "
            f"(the first, {when}: "
            f"{values[first]:g}); set target.transform = 'none', or mark such values as "
            "missing with target.missing"
        )
    name = target.attrs.get("long_name") or target.name
    out = np.log(target)
    out.attrs = {"long_name": f"log of {name}" if name else "log of the target", "units": "1"}
    if name:
        out.attrs[LOG_OF] = str(name)
    if target.attrs.get("units") is not None:
        out.attrs[LOG_OF_UNITS] = str(target.attrs["units"])
    return out


def check_transform(transform: str, method_params: dict, gbmap) -> None:
    """A log target is a quantity, not two classes: refuse it with a classifier."""
    if transform == "none":
        return
    from dcfa.batch.method import binary_key

    binary = binary_key(method_params.get("family"), gbmap)
    if binary is None:
        return
    key, value, _ = binary
    raise InputError(
        "target.transform = 'log' is for a quantity above 0, not for the two classes "
        f"that {key} = {value!r} needs"
    )


def back_transformed(prediction: xr.DataArray, transform: str) -> xr.DataArray:
    """A prediction of the fitted target in the target's own units: the exponential of a
    prediction of its logarithm (its median), lazy for Dask."""
    if transform == "none":
        return prediction
    return np.exp(prediction)


def back_note(transform: str) -> str:
    """What a prediction brought back by :func:`back_transformed` is, said after its name."""
    if transform == "none":
        return ""
    return " (the exponential of its logarithm's prediction: the median)"
