"""What a job says of cells that miss samples: where one lies, which months it misses, and the
``input.drop_time`` that leaves those months out when the archive lacks them everywhere."""

from __future__ import annotations

import json

import numpy as np
import xarray as xr

from dcfa._errors import NothingToFitError
from dcfa._terminal import counted
from dcfa.io.calendars import date_label, month_numbers


def nothing_to_fit(exc: NothingToFitError, inp: dict, cells: xr.DataArray) -> str:
    """``input.variables: every one of the 37 cells ... was excluded (37 cells: constant ...)``
    (on the grid execution, the cells without data count too: all missing). Where every cell
    with data misses some samples, the samples one of them misses are read and named, with
    ``input.drop_time``: a month absent from the archive looks so."""
    text = (
        f"input.variables: every one of the {len(exc.excluded)} cells of {inp['variables']} "
        f"in {inp['store']!r} was excluded ({exc.reasons('cells')}); there is nothing to fit"
        + (" (with input.time)" if inp["time"] else "")
    )
    codes = {why.code for why in exc.excluded.values()}
    if "gappy" not in codes or not codes <= {"gappy", "all-missing"}:
        return text
    return f"{text}. Every cell with data misses some samples; " + months_missed(
        cells, inp, exc.excluded
    )


def months_missed(cells: xr.DataArray, inp: dict, excluded: dict) -> str:
    """``the cell at lat=.., lon=.. misses 1860-01-16, ...: if the archive has no value there
    in any cell (a month absent from it), leave those samples out with input.drop_time =
    ["1860"]``: one gappy cell's series read, its missing samples named as the key takes
    them (whole years as the year, other months as the month)."""
    where, missed = _samples_a_cell_misses(cells, inp["sample_dim"], excluded)
    shown = [date_label(v) for v in missed[:6]]
    return (
        f"{where} misses {', '.join(shown)}{', ...' if len(missed) > 6 else ''} "
        f"({counted(len(missed), 'sample')}). If the archive has no value there in any cell (a "
        "month absent from it), leave those samples out with input.drop_time = "
        f"{json.dumps(_drop_labels(missed, cells[inp['sample_dim']].values))}"
    )


def _drop_labels(missed: list, every: np.ndarray) -> list[str]:
    """The labels of ``input.drop_time`` that name exactly the samples ``missed``: a year
    whose every sample is missed as the year, the others as their month (dates a month
    apart or more) or their date."""
    keys = month_numbers(missed)
    if keys is None or np.unique(keys).size < keys.size:  # not dates, or several a month
        return [date_label(v) for v in missed]
    years: dict = {}
    for k in month_numbers(every):
        years.setdefault(k // 12, set()).add(k)
    whole = {y for y, months in years.items() if months <= set(keys.tolist())}
    out = [str(y) for y in sorted(whole)]
    out += [f"{k // 12:04d}-{k % 12 + 1:02d}" for k in keys if k // 12 not in whole]
    return out


def _samples_a_cell_misses(cells: xr.DataArray, dim: str, excluded: dict) -> tuple[str, list]:
    """The first gappy cell of ``cells`` (stacked or on the grid: the keys of ``excluded``
    count its cells in order), where it lies, and the labels of the samples it misses (one
    cell's series read). A cell of the field as stored (lag 0, window 1) is preferred: other
    blocks miss the same samples shifted."""
    other = [d for d in cells.dims if d != dim]
    shape = [cells.sizes[d] for d in other]
    gappy = [k for k, why in excluded.items() if why.code == "gappy"]

    def place(k):
        return dict(zip(other, np.unravel_index(k, shape), strict=True))

    def stored(k):
        at = cells.isel(place(k))
        return all(
            name not in at.coords or at[name].item() == base
            for name, base in (("lag", 0), ("window", 1))
        )

    key = next((k for k in gappy[:10_000] if stored(k)), gappy[0])
    cell = cells.isel(place(key))
    values = np.asarray(cell.values, dtype=float)
    where = ", ".join(
        f"{name}={cell[name].item():g}"
        if np.issubdtype(cell[name].dtype, np.number)
        else f"{name}={cell[name].item()}"
        for name in cell.coords
        if name not in (dim, "cell") and cell[name].ndim == 0
    )
    return f"the cell at {where}" if where else "the first cell", list(
        cell[dim].values[np.isnan(values)]
    )
