"""The preprocessing of an archive (cells with data, climatology, spread) from one pass, and
its lazy application."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import xarray as xr

from dcfa._errors import InputError
from dcfa.io.calendars import months_of


@dataclass(frozen=True)
class Preprocessing:
    """What :func:`fit_preprocessing` learned: NaN cells, seasonal cycle, spread.

    Attributes
    ----------
    has_data : DataArray of bool on the grid
        False for cells with no value at any sample (land in an SST archive).
    climatology : DataArray (month, ...grid) or None
        The mean of each calendar month, for anomalies.
    std : DataArray on the grid or None
        Standard deviation of the (anomaly) series, for standardisation.
    """

    has_data: xr.DataArray
    climatology: xr.DataArray | None = None
    std: xr.DataArray | None = None

    def arrays(self, grid, *, lazy: bool = False):
        """The climatology ``(12, *grid)`` (NaN in the months absent from the fit) and the
        spread ``(*grid)``, each None if not learned: NumPy arrays, or with ``lazy`` the Dask
        arrays of a :meth:`held` preprocessing."""
        clim = std = None
        if self.climatology is not None:
            clim = self.climatology.transpose("month", *grid).reindex(month=np.arange(1, 13))
        if self.std is not None:
            std = self.std.transpose(*grid)

        def array(a: xr.DataArray | None):
            if a is None:
                return None
            return a.data if lazy and not isinstance(a.data, np.ndarray) else a.values

        return array(clim), array(std)

    def held(self, client, chunks: dict) -> Preprocessing:
        """This preprocessing with its climatology and spread persisted on the workers of
        ``client`` (a distributed Client), in the field's chunks of each grid dim (``chunks``:
        ``field.chunksizes``), as Dask arrays the passes' graphs refer to: a graph that embeds
        them sends them through the scheduler at every pass (26 MiB at 1 degree with two
        windows and two lags). Persisted, not
        scattered: the scheduler keeps what makes each block, and makes it again when the
        worker that held it is lost. Sent once, so without distributed's warning of a large
        graph, which is for graphs sent again at every compute."""
        import dask
        import dask.array as da

        def persisted(a: xr.DataArray | None):
            if a is None:
                return None
            blocks = da.from_array(a.values, chunks=tuple(chunks.get(d, -1) for d in a.dims))
            return a.copy(data=client.persist(blocks))

        limit = {"distributed.admin.large-graph-warning-threshold": "64GiB"}
        with dask.config.set(limit):
            clim, std = persisted(self.climatology), persisted(self.std)
        return Preprocessing(self.has_data, clim, std)

    def to_dataset(self) -> xr.Dataset:
        ds = xr.Dataset({"has_data": self.has_data})
        if self.climatology is not None:
            ds["climatology"] = self.climatology
        if self.std is not None:
            ds["std"] = self.std
        return ds

    @classmethod
    def from_dataset(cls, ds: xr.Dataset) -> Preprocessing:
        ds = ds.load()
        return cls(
            has_data=ds["has_data"].astype(bool),
            climatology=ds["climatology"] if "climatology" in ds else None,
            std=ds["std"] if "std" in ds else None,
        )


def fit_preprocessing(
    field: xr.DataArray,
    *,
    sample_dim: str = "time",
    anomalies: bool = False,
    standardize: bool = False,
) -> Preprocessing:
    """One pass: cells with data, monthly climatology and anomaly spread (as needed)."""
    return preprocessing_pass(
        field, sample_dim=sample_dim, anomalies=anomalies, standardize=standardize
    )[0]


def preprocessing_pass(
    field: xr.DataArray,
    y=None,
    *,
    sample_dim: str = "time",
    anomalies: bool = False,
    standardize: bool = False,
    radius: int = 0,
    periodic=(),
    blocks=(),
    key: str = "field",
):
    """One pass over the raw field: the preprocessing, and with ``radius >= 1`` the grid
    moments of the preprocessed field (with ``y``) from the same pass.

    A field whose values lie outside :data:`dcfa.stats.summary.SCALE_RANGE` in magnitude is
    refused after the pass, naming ``key``: its spread and anomalies would lose their digits
    (squares below or above float64's range), and a fit on it would depend on its units.

    Calendar months are the pass's segments (:func:`dcfa.stats.grid.grid_pass`): their means
    are the climatology, the moments pooled within them are the anomalies' moments, and the
    anomalies' spread is their diagonal; no second pass over the anomalies, and no
    ``sum of squares - n mean^2`` (the Algorithms page of the documentation, section "Moments:
    one pass over the data").

    Returns
    -------
    (Preprocessing, GridMoments or None)
    """
    from dcfa.stats.grid import grid_pass

    grid = [d for d in field.dims if d != sample_dim]
    months = months_of(field[sample_dim], "input.anomalies") - 1 if anomalies else None
    with warnings.catch_warnings():  # cells without data give all-NaN blocks: expected
        warnings.filterwarnings("ignore", "invalid value encountered", RuntimeWarning)
        warnings.filterwarnings("ignore", "Mean of empty slice", RuntimeWarning)
        done = grid_pass(
            field,
            y,
            radius=radius,
            segments=months,
            n_segments=12 if anomalies else 1,
            sample_dim=sample_dim,
            periodic=periodic,
            blocks=blocks,
        )
    moments = done.moments
    template = field.isel({sample_dim: 0}, drop=True).drop_encoding()
    _check_magnitude(done, key)
    count = moments.count.reshape(template.shape)
    has_data = template.copy(data=count > 0).rename("has_data")
    has_data.attrs = {}
    clim = std = None
    if anomalies:
        present = np.flatnonzero(done.segment_count)
        seen = done.segment_seen[present] > 0
        clim = xr.DataArray(
            np.where(seen, done.segment_mean[present], np.nan),
            dims=("month", *grid),
            coords={"month": present + 1, **{c: template[c] for c in template.coords}},
        )
    if standardize:
        spread = moments.column_std(ddof=1).reshape(template.shape)
        std = template.copy(data=spread).rename(None)
        std.attrs = {}
        std = std.where(std > 0)
        if radius:
            moments = moments.scaled(std.values.ravel())
    return Preprocessing(has_data=has_data, climatology=clim, std=std), (
        moments if radius else None
    )


def _check_magnitude(done, key: str) -> None:
    """Refuse values too small or too large for the statistics (see the pass's docstring):
    each cell's size is the larger of its monthly means' magnitude and its spread."""
    from dcfa.stats.summary import SCALE_RANGE, outside_scale, rescale_hint

    seen = done.segment_seen > 0
    means = np.where(seen, np.abs(done.segment_mean), np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # cells without data: all NaN
        mean_size = np.nanmax(means, axis=0).ravel()
        size = np.fmax(mean_size, done.moments.column_std(ddof=0))
    has = done.moments.count > 0
    out = has & outside_scale(size)
    if not out.any():
        return
    # the spread overflows first: name the means' size where it is finite
    typical = float(np.nanmedian(np.where(np.isfinite(size), size, mean_size)[out]))
    low, high = SCALE_RANGE
    raise InputError(
        f"{key}: {int(out.sum())} of the {int(has.sum())} cells with data hold values of "
        f"magnitude about {typical:.3g}, outside {low:.0e} .. {high:.0e}: float64's sums of "
        "squares lose their digits there and the result would depend on the units; rescale "
        "the data" + rescale_hint(typical)
    )


def apply_preprocessing(
    field: xr.DataArray, prep: Preprocessing, *, sample_dim: str = "time"
) -> xr.DataArray:
    """Anomalies and standardisation, lazily and keeping the field's chunks.

    (xarray's ``groupby(...) - climatology`` would split a Dask field into one time step per
    chunk; here each block subtracts the climatology of its own rows' months.) Cells without
    data stay NaN (and are excluded downstream).
    """
    import dask.array as da

    from dcfa.stats.graph import lazy_anomalies
    from dcfa.stats.kernels import anomaly_block

    if prep.climatology is None and prep.std is None:
        return field
    lazy = isinstance(field.data, da.Array)
    clim, std = prep.arrays(field.dims[1:], lazy=lazy)
    if clim is not None:
        months = months_of(field[sample_dim], "input.anomalies") - 1  # any calendar's dates
    else:
        months = np.zeros(field.sizes[sample_dim], dtype=np.int64)
    # float64: the anomalies keep their digits (the result store casts the features)
    if lazy:
        data = lazy_anomalies(field.data, clim, std, months, np.float64)
    else:
        data = anomaly_block(field.data, clim, std, months, out_dtype=np.float64)
    out = field.copy(data=data)
    out.attrs = dict(field.attrs)
    return out
