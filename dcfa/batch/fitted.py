"""A fitted result applied to new data: :class:`FittedResult`, as
:func:`dcfa.batch.results.load_result` gives it.

``transform`` runs the job's own steps lazily (the job's trailing windows and lags,
``dcfa.batch.inputs.time_scales``, then :func:`dcfa.io.plan_chunks`,
:func:`dcfa.io.apply_preprocessing`, the job's stacking of the cells, and
:func:`dcfa.cfa.aggregate.aggregate` with the stored weights), so a result applied to its own
training months gives its ``features`` exactly; ``embedding``, ``predict`` and
``gbmap_outputs`` the GBMAP's. Every check of the field (its grid, labels, coordinates,
sampling and months) comes before any read. ``dcfa apply`` is :mod:`dcfa.batch.apply`.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field

import dask.array as da
import numpy as np
import xarray as xr

from dcfa import io
from dcfa._errors import InputError, InputTypeError, outside_stacklevel
from dcfa._units import same_units
from dcfa._validation import far_off, gaps_text, label_positions, same_coordinates
from dcfa.batch.destination import PYTHON_NAMES
from dcfa.batch.transform import back_note, back_transformed
from dcfa.forecast.leads import steps_text, target_time
from dcfa.geo import is_longitude
from dcfa.io.archive import select_time
from dcfa.io.calendars import calendar_of, months_of, need_dates
from dcfa.stacking import ensemble_dim, isel_positions, single_members


@dataclass
class FittedResult:
    """A fitted result, ready to be applied to new months (from :func:`load_result`).

    Attributes
    ----------
    path : str
        The result store.
    variables : list of str
        The input variables, in the job's order.
    sample_dim : str
    region : xarray.DataArray of int on the grid
        Every cell's group, -1 where a cell is not used; its dims and coordinates are the grid
        a field must have.
    preprocessing : dcfa.io.Preprocessing
        The climatology and spread the features are computed with.
    method : str
        The CFA estimator (``"LinCFA"``, ...); ``estimator`` is it, unfitted, with the job's
        parameters.
    gbmap : GBMAPRegressor, GBMAPClassifier or None
        The fitted GBMAP of the result (``transform``, ``predict``, ...), when the result
        holds one with everything needed to apply it.
    regression : scikit-learn regressor or None
        The regression of the result's target on its features (``forecast``), fitted when
        the result is loaded, as :func:`dcfa.forward_cv` fits it after the estimator: ridge
        on the standardised region means for RegionsCV, OLS for the others. None, with
        ``regression_missing`` saying why, for a result without its target (written by an
        older dcfa) or of a target of two classes.
    attrs : dict
        The result's attributes (provenance).
    time_scales : dict
        The job's ``input.windows``, ``input.lags`` and ``input.aggregate``: ``transform``
        computes them (``dcfa.batch.inputs.time_scales``) before anything else, so a field is given
        as the archive stores it and the result's ``window`` / ``lag`` dims are made here.
    lead : int
        The job's ``target.lead``: the features (and the GBMAP's prediction) of sample ``t``
        predict the target at ``t + lead`` steps of its dates.
    lead_step : str
        The step ``lead`` counts: ``"month"`` for monthly dates, ``"day"``, ...;
        ``"sample"`` for labels on no regular step (and for results that do not say).
    target_months : list of int or None
        The job's ``target.months``: the calendar months of the target it fitted.
        :meth:`transform` keeps the samples whose target (``lead`` steps later) falls in
        them, so every series, forecast and GBMAP value is for those months.
    """

    path: str
    variables: list
    sample_dim: str
    region: xr.DataArray
    preprocessing: io.Preprocessing
    method: str
    estimator: object
    keep: np.ndarray  # flat grid index of every input of the reduction, in its order
    labels: np.ndarray  # their groups
    scale: np.ndarray  # s_k
    centre: np.ndarray  # mu_k
    aggregation: str
    weight: np.ndarray | None = None  # w_k of weighted means (method.params.weights), or None
    gbmap: object = None
    gbmap_missing: str | None = None  # why a stored GBMAP cannot be applied
    regression: object = None
    regression_missing: str | None = None  # why there is no regression to forecast with
    target_units: str | None = None
    #: the target's own name (its ``long_name``, else its variable's), which its forecast
    #: is named by
    target_name: str | None = None
    #: ``target.transform``: ``"log"`` when the job fitted the target's logarithm (its
    #: forecasts are brought back with the exponential)
    target_transform: str = "none"
    attrs: dict = field(default_factory=dict, repr=False)
    time_scales: dict = field(default_factory=dict)
    lead: int = 0
    lead_step: str = "sample"
    target_months: list | None = None
    # whether the job's samples were one per calendar month (its windows, lags, climatology
    # and spread are of monthly values); None when the store does not say
    monthly: bool | None = None
    # the result's features' group coordinates (group_name, group_units) and units, which
    # the series of a field carry too
    group_coords: dict = field(default_factory=dict)
    units: str | None = None
    # the result's own features (sample, group), what transform's series of a field in memory
    # are checked against (far_from_training); None when the store has none
    trained: np.ndarray | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        # the arrays (the map, the climatology, every cell's weight) are for code, not a
        # notebook's echo: say what the result is, as dcfa inspect does
        grid = ", ".join(f"{d}: {n}" for d, n in self.region.sizes.items())
        return (
            f"FittedResult({self.path!r}: {self.method}, {self.n_groups} groups on ({grid}); "
            f"variables {self.variables}, sample_dim {self.sample_dim!r}"
            + (f", lead {self.lead_text}" if self.lead else "")
            + (
                f", forecast by {regression_text(self.regression)}"
                if self.regression is not None
                else ""
            )
            + (", with a GBMAP" if self.gbmap is not None else "")
            + ")"
        )

    @property
    def lead_text(self) -> str:
        """The lead with its step: ``"3 months"``, ``"14 days"``."""
        return steps_text(self.lead, self.lead_step)

    @property
    def n_groups(self) -> int:
        return int(self.labels.max()) + 1 if (self.labels >= 0).any() else 0

    @property
    def grid(self) -> tuple:
        """The dims of the reduction's grid (with ``window`` / ``lag`` when the job made them)."""
        return tuple(self.region.dims)

    @property
    def windows(self) -> list:
        return list(self.time_scales.get("windows", [1]))

    @property
    def lags(self) -> list:
        return list(self.time_scales.get("lags", [0]))

    @property
    def history(self) -> int:
        """Earlier samples the first computed one needs: ``max(windows) - 1 + max(lags)``."""
        return max(self.windows) - 1 + max(self.lags)

    @property
    def added_dims(self) -> tuple:
        """The grid dims the job's windows and lags add to the archive's."""
        return (("window",) if self.windows != [1] else ()) + (("lag",) if self.lags != [0] else ())

    @property
    def archive_grid(self) -> tuple:
        """The grid dims a field must have: the result's, without ``window`` / ``lag``."""
        return tuple(d for d in self.grid if d not in self.added_dims)

    # -- the region series -------------------------------------------------------------------

    def transform(self, field, *, time=None, _names: dict | None = None) -> xr.DataArray:
        """The region series of ``field``: a lazy ``(sample_dim, group)`` float64 DataArray.

        ``field`` is a Dataset holding the result's variables, or a DataArray as
        :func:`dcfa.io.open_archive` gives (the variables along a ``variable`` dim when there
        are several), on the result's grid or a larger one that holds its cells, taken by
        their labels (without the ``window`` / ``lag`` dims: those are made here). The job's
        steps are applied in its order: its trailing windows and lags
        (``dcfa.batch.inputs.time_scales``; the first ``history`` samples, whose windows or lags
        reach before the field's start, are dropped), chunks planned
        (:func:`dcfa.io.plan_chunks`, Dask fields), the stored climatology and spread
        (:func:`dcfa.io.apply_preprocessing`), the cells taken in the reduction's order, and
        :func:`dcfa.cfa.aggregate.aggregate` with the stored weights. Nothing is computed for a
        Dask-backed field. The result store keeps these values as float32.

        ``time = (start, stop)`` keeps the samples between these labels (inclusive), selected
        after the windows and lags are computed: the first selected samples take their windows
        and lags from the samples before them, which the field must hold (``history`` of
        them; a ValueError names ``time`` otherwise).

        A field opened as the job opens its input (:func:`dcfa.io.open_archive`, or
        ``xr.open_zarr(..., chunks={})``) gives the stored features bit for bit. Other chunks
        of the grid (or an in-memory field) sum each group's cells in other blocks: the same
        values up to float64 rounding, which the float32 features almost always hide.
        """
        names = _names or {**PYTHON_NAMES, "archive": "field"}
        field = self._checked_field(field, names, time)
        out = self._series(field)
        if isinstance(out.data, da.Array):  # not read here: dcfa apply says what it computes
            return out
        if out.isnull().any():
            grid = field.transpose(self.sample_dim, *self.region.dims).values
            cells = grid.reshape(grid.shape[0], -1)[:, self.keep]
            gaps = gaps_text(cells, self.labels, self.keep, self.region)
            if gaps is not None:
                warnings.warn(
                    f"{names['archive']}: {gaps}: their groups' series, forecast and GBMAP "
                    "values are NaN in those samples (a month missing, a changed land mask or a "
                    "sea-ice edge does this)",
                    UserWarning,
                    stacklevel=outside_stacklevel(),
                )
        if self.trained is not None:  # in memory: checked at no cost
            blocks = self.group_coords.get("group_units")
            far = far_from_training(out.values, self.trained, None if blocks is None else blocks[1])
            if far is not None:
                warnings.warn(
                    f"{names['archive']}: its series {far}, far outside what the result was "
                    "fitted on: a field in other units or of another quantity does this, and "
                    "its forecast is off by as much",
                    UserWarning,
                    stacklevel=outside_stacklevel(),
                )
        return out

    def forecast(self, field) -> xr.DataArray:
        """The target predicted from ``field`` by ``regression``: a lazy ``(sample_dim,)``
        DataArray (:meth:`forecast_of` of :meth:`transform`)."""
        return self.forecast_of(self.transform(field))

    def forecast_of(self, features: xr.DataArray) -> xr.DataArray:
        """The target predicted from the region series ``features`` (:meth:`transform`) by
        ``regression``, lazy for Dask: that of sample ``t`` is for the target at
        ``t + lead``, its coordinate ``target_time`` (:func:`dcfa.forecast.leads.target_time`;
        none for samples on no regular step). NaN in the samples where a group's series is
        missing."""
        if self.regression is None:
            raise InputError(f"result {self.path!r}: {self.regression_missing}")
        # a linear model: its prediction is features . coef + intercept, which Dask and
        # xarray compute lazily and which is NaN where a feature is
        p = self.regression.n_features_in_
        intercept = float(self.regression.predict(np.zeros((1, p)))[0])
        coef = self.regression.predict(np.eye(p)) - intercept
        out = xr.dot(features, xr.DataArray(coef, dims="group"), dim="group") + intercept
        out = self._in_target_units(out, regression_text(self.regression))
        return self._for_target_time(out.rename("forecast"))

    def _in_target_units(self, out: xr.DataArray, by: str) -> xr.DataArray:
        """``out``, a prediction of the fitted target made by ``by``, in the target's own
        units (the exponential of a prediction of its logarithm), with the target's name and
        units in its attrs, not the features'."""
        out = back_transformed(out, self.target_transform)
        name = self.target_name or "the target"
        out.attrs = {"long_name": f"{name} predicted by {by}" + back_note(self.target_transform)}
        if self.target_units is not None:
            out.attrs["units"] = self.target_units
        return out

    def _for_target_time(self, out: xr.DataArray) -> xr.DataArray:
        """``out`` (a prediction along the sample dim) with the ``target_time`` coordinate of
        :func:`dcfa.forecast.leads.target_time`: what each value predicts, ``lead`` steps
        after its sample; unchanged when the samples have no labels to add the lead to."""
        dim = self.sample_dim
        if dim not in out.coords:
            return out
        later = target_time(out[dim], self.lead, self.lead_step)
        return out if later is None else out.assign_coords(target_time=later)

    def embedding(self, field) -> xr.DataArray:
        """The GBMAP embedding ``(sample_dim, boost)`` of ``field`` (lazy for Dask); NaN in
        the samples where a group's series is missing (:meth:`gbmap_outputs`)."""
        return self.gbmap_outputs(self.transform(field), names=["embedding"])["embedding"]

    def predict(self, field) -> xr.DataArray:
        """The GBMAP prediction of ``field``: the target (regressor) or the class (classifier);
        NaN in the samples where a group's series is missing (:meth:`gbmap_outputs`)."""
        return self.gbmap_outputs(self.transform(field), names=["prediction"])["prediction"]

    def gbmap_outputs(
        self, features: xr.DataArray, names: list[str] | None = None
    ) -> dict[str, xr.DataArray]:
        """The GBMAP's ``embedding``, ``prediction`` and (classifier) ``decision_function`` of
        the region series ``features`` (:meth:`transform`), lazy for Dask; ``names``: only
        these (an in-memory field computes each one asked for).

        A sample where some group's series is missing (a month absent from the archive, a
        group whose cells are all NaN that month) has no GBMAP value: NaN there, and the
        other samples as the GBMAP gives them (it needs every feature of a sample).
        """
        from sklearn.base import is_classifier

        gbmap = self._require_gbmap()
        classifier = is_classifier(gbmap)
        methods = {"embedding": gbmap.transform}
        if classifier:
            methods["decision_function"] = gbmap.decision_function
        methods["prediction"] = gbmap.predict
        names = list(methods) if names is None else list(names)
        unknown = [n for n in names if n not in methods]
        if unknown:
            raise InputError(f"names: {unknown} are not among this GBMAP's outputs {list(methods)}")
        complete = features.notnull().all([d for d in features.dims if d != self.sample_dim])
        filled = features.where(complete, 0.0)  # any finite value: masked below
        out = {n: methods[n](filled).where(complete).rename(n) for n in names}
        if "prediction" in out and not classifier:  # of the fitted target
            out["prediction"] = self._in_target_units(out["prediction"], "GBMAP")
        # the prediction is of the target at t + lead, as the forecast is
        return {n: v if n == "embedding" else self._for_target_time(v) for n, v in out.items()}

    def _require_gbmap(self):
        if self.gbmap is None:
            why = self.gbmap_missing or "the result holds no GBMAP"
            # predict, embedding: a user after the target wants the regression's forecast
            other = (
                "; forecast gives the target from the regions"
                if self.regression is not None
                else ""
            )
            raise InputError(f"result {self.path!r}: {why}{other}")
        return self.gbmap

    def _series(self, field: xr.DataArray) -> xr.DataArray:
        from dcfa.batch.features import region_series
        from dcfa.cfa.executions import EXECUTIONS, current_name
        from dcfa.cfa.reduction import Reduction

        dim = self.sample_dim
        if isinstance(field.data, da.Array):
            field = io.plan_chunks(field, sample_dim=dim)
        estimator = self.estimator
        if "execution" in self.attrs:  # the execution the job ran
            execution = current_name(self.attrs["execution"])
            grid_run = execution in EXECUTIONS and EXECUTIONS[execution].whole_grid
        else:  # results written before dcfa recorded it
            grid_run = estimator.grid_pass_request(field) is not None
            execution = "grid"
        if grid_run and not np.array_equal(self.keep, np.arange(self.region.size)):
            # the job's grid execution: the reduction read every cell of the grid, in order
            raise InputError(
                f"result {self.path!r}: cell_index does not cover the grid in order, as "
                f"mode={execution!r} has it"
            )
        opts = estimator.fit_options()
        reduction = Reduction(
            labels=self.labels,
            scale=self.scale,
            centre=self.centre,
            weights=self.weight,
            aggregation=self.aggregation,
            inputs=opts.inputs,
            nan_aware=opts.missing == "pairwise",
        )
        out = region_series(field, self.preprocessing, reduction, self.keep, sample_dim=dim)
        out.attrs = {"long_name": f"{self.method} group aggregates"}
        if self.units is not None:
            out.attrs["units"] = self.units
        # the field's labels of one value (a member kept, a height of 2 m) stay its series'
        scalars = {name: c.variable for name, c in field.coords.items() if c.ndim == 0}
        return out.assign_coords({**scalars, **self.group_coords})

    # -- checks ------------------------------------------------------------------------------

    def check_units(self, field, key: str, *, where: str = "") -> None:
        """Refuse a field whose variables carry other ``units`` or another ``standard_name``
        than the ones the result was fitted on (both known): the features would be off by
        the conversion, or of another quantity, silently. ``field`` is a Dataset, or a
        DataArray of the result's one variable (a stacked one's attrs are not its variables');
        ``where`` is added after the variable's name in the message."""
        if isinstance(field, xr.Dataset):
            attrs = {v: field[v].attrs for v in self.variables if v in field.data_vars}
        elif isinstance(field, xr.DataArray) and len(self.variables) == 1:
            attrs = {self.variables[0]: field.attrs}
        else:
            return
        fitted_in = json.loads(self.attrs.get("input_units", "{}"))
        fitted_on = json.loads(self.attrs.get("input_standard_names", "{}"))
        for v, a in attrs.items():
            ours, theirs = fitted_in.get(v), a.get("units")
            if ours is not None and theirs is not None and not same_units(ours, str(theirs)):
                raise InputError(
                    f"{key}: {v!r}{where} is in {str(theirs)!r}, the result was fitted on "
                    f"{ours!r}; dcfa does not convert units: convert it to {ours!r} first"
                )
            ours, theirs = fitted_on.get(v), a.get("standard_name")
            if ours is not None and theirs is not None and ours.strip() != str(theirs).strip():
                raise InputError(
                    f"{key}: {v!r}{where} is {str(theirs)!r} (standard_name), the result was "
                    f"fitted on {ours!r}: another quantity under the same name"
                )

    def _checked_field(self, field, names: dict, time=None) -> xr.DataArray:
        """``field`` as one DataArray ``(sample_dim, *grid)``, checked against the result, with
        the job's windows and lags, the samples of ``time``."""
        key = names["archive"]
        dim = self.sample_dim
        self.check_units(field, key)
        if isinstance(field, xr.Dataset):
            missing = [v for v in self.variables if v not in field.data_vars]
            if missing:
                raise InputError(
                    f"{key}: variable(s) {missing} of the result are not in it (it has "
                    f"{sorted(map(str, field.data_vars))})"
                )
            if len(self.variables) == 1:
                field = field[self.variables[0]]
            else:
                for v in self.variables:
                    if dim not in field[v].dims:
                        raise InputError(
                            f"{key}: {v!r} has dims {field[v].dims}, without the sample dim {dim!r}"
                        )
                field = field[self.variables].to_array("variable")
        if not isinstance(field, xr.DataArray):
            raise InputTypeError(
                f"{key}: expected an xarray Dataset or DataArray, got {type(field).__name__}"
            )
        if dim not in field.dims:
            raise InputError(f"{key}: dims {field.dims} lack the result's sample dim {dim!r}")
        expect = self.archive_grid  # the windows and lags are made here, not given
        # one member is a label, as the job took it: the result applies to any member's
        # store, and its features keep the label (a scalar coordinate)
        field = field.squeeze(single_members(field, expect))
        grid = tuple(d for d in field.dims if d != dim)
        if set(grid) != set(expect):
            hint = members_hint(field, set(grid) - set(expect))
            if not hint and self.added_dims and set(grid) == set(self.grid):
                hint = (
                    f"; give it without the {list(self.added_dims)} dims, as the archive stores "
                    "it: the result's windows and lags are computed from it"
                )
            raise InputError(f"{key}: its grid dims {grid} differ from the result's {expect}{hint}")
        order = self._grid_order(field)
        for d in expect:
            if field.sizes[d] != self.region.sizes[d] and d not in order:
                raise InputError(
                    f"{key}: dim {d!r} has {field.sizes[d]} cells, the result's grid "
                    f"{self.region.sizes[d]}"
                    + (
                        f", and its labels do not hold the result's ({_span(self.region[d])})"
                        if field.sizes[d] > self.region.sizes[d] and d in self.region.coords
                        else ""
                    )
                )
        field = field.transpose(dim, *expect)
        if order:  # the result's cells in its order, matched by their labels
            field = field.isel({d: isel_positions(p) for d, p in order.items()})
        self._check_coords(field, key, archive=True)
        if field.dtype.kind not in "iuf":
            raise InputError(f"{key}: holds {field.dtype} values; expected numbers")
        if field.sizes[dim] == 0:
            raise InputError(f"{key}: no samples")
        field = self._for_target_months(self._time_scaled(field, names, time), key)
        self._check_sampling(field[dim], names)
        self._check_months(field[dim], names)
        return field

    def _for_target_months(self, field: xr.DataArray, key: str) -> xr.DataArray:
        """The samples of ``field`` whose target, ``lead`` steps later, falls in
        ``target_months`` (every sample without them): the months the result was fitted for,
        as the job kept them."""
        if not self.target_months:
            return field
        dim = self.sample_dim
        months = f"the target's months {self.target_months} (target.months)"
        need = f"the result was fitted for {months}, which need dates"
        when = field[dim]
        need_dates(when, key, need)  # numbers refused before the lead moves them
        if self.lead:
            when = target_time(when, self.lead, self.lead_step)
            if when is None:  # lead_step "sample": the job took the target's own dates
                raise InputError(
                    f"{key}: the result was fitted for {months} at a lead of {self.lead} "
                    "samples on no regular step, so the dates of these samples' targets are "
                    "unknown"
                )
        keep = np.flatnonzero(np.isin(months_of(when, key, need), self.target_months))
        if keep.size == 0:
            raise InputError(f"{key}: none of its samples is for {months}")
        return field.isel({dim: keep})

    def _check_sampling(self, coord: xr.DataArray, names: dict) -> None:
        """Monthly samples for a result fitted on monthly ones: daily values would be divided
        by the monthly anomalies' spread and summed in windows of days, not months."""
        if not self.monthly or calendar_of(coord) is None or coord.size < 2:
            return
        _, first, counts = np.unique(_months(coord), return_index=True, return_counts=True)
        if (counts > 1).any():
            at = int(first[np.flatnonzero(counts > 1)[0]])
            raise InputError(
                f"{names['archive']}: holds {int(counts.max())} samples in one calendar month "
                f"(first {_date(coord.values[at])}): finer than the result's, which was fitted "
                "on one sample per month; give monthly means (e.g. ds.resample(time='MS')"
                ".mean())"
            )

    def _grid_order(self, field: xr.DataArray) -> dict:
        """``{dim: positions}`` for each archive grid dim whose labels are the result's in
        another order (a flipped latitude, longitudes from -180 instead of 0), or hold them
        among others (a result of ``input.select``, or fitted on a box of this archive): the
        position in ``field`` of each of the result's labels. Labels that are not the
        result's are left to :meth:`_check_coords`, which names the first that differs."""
        order = {}
        for d in self.archive_grid:
            ours = self.region.coords.get(d)
            if ours is None or ours.dims != (d,) or d not in field.coords or field[d].dims != (d,):
                continue
            circular = (
                {d} if is_longitude(d, ours.attrs) or is_longitude(d, field[d].attrs) else set()
            )
            positions = label_positions(ours.to_index(), field[d].to_index(), circular, subset=True)
            if positions is not None and not np.array_equal(positions, np.arange(field.sizes[d])):
                order[d] = positions
        return order

    def _check_coords(self, field: xr.DataArray, key: str, *, archive: bool) -> None:
        """The result's grid coordinates in ``field``: those of the archive's grid
        (``archive``), or those along the dims the windows and lags add."""
        added = set(self.added_dims)
        for name, coord in self.region.coords.items():
            if bool(added & set(coord.dims)) == archive:
                continue
            if name not in field.coords:
                raise InputError(f"{key}: it has no coordinate {name!r}; the result's grid has one")
            theirs = field[name]
            # a longitude is the same point in either convention (180 is -180)
            circular = is_longitude(str(name), coord.attrs) or is_longitude(str(name), theirs.attrs)
            if set(theirs.dims) != set(coord.dims) or not same_coordinates(
                coord.values, theirs.transpose(*coord.dims).values, circular=circular
            ):
                raise InputError(
                    f"{key}: coordinate {name!r} differs from the result's grid "
                    f"({_first_difference(coord, field[name])})"
                )

    def _time_scaled(self, field: xr.DataArray, names: dict, time) -> xr.DataArray:
        """The job's windows and lags of ``field`` (``dcfa.batch.inputs.time_scales``), then the
        samples of ``time``: each selected sample's windows and lags from the ones before."""
        from dcfa.batch.inputs import time_scales

        key, dim, need = names["archive"], self.sample_dim, self.history
        n = field.sizes[dim]
        what = " and ".join(
            f"input.{k} {v}"
            for k, v, default in (("windows", self.windows, [1]), ("lags", self.lags, [0]))
            if v != default
        )
        if n <= need:
            raise InputError(
                f"{key}: holds {n} sample(s) along {dim!r}; the result's {what} need {need} "
                f"earlier sample(s) before the first one computed, so at least {need + 1}"
            )
        if time is not None:
            if isinstance(time, str | bytes) or len(time) != 2:
                got = time if isinstance(time, str | bytes) else list(time)
                raise InputError(f"{names['time']}: expected START END, got {got!r}")
            where = str(field.attrs.get("source", key))
            position = xr.DataArray(np.arange(n), dims=dim, coords={dim: field[dim].variable})
            chosen = select_time(position, time, sample_dim=dim, key=names["time"], where=where)
            first, last = int(chosen.values[0]), int(chosen.values[-1])
            if first < need:
                raise InputError(
                    f"{names['time']}: its first sample, {_date(field[dim].values[first])}, "
                    f"has {first} earlier sample(s) in {key}; the result's {what} need {need}: "
                    f"start {names['time']} at {_date(field[dim].values[need])} or later, or "
                    f"give {key} with {need - first} earlier sample(s)"
                )
            # exactly the selected samples, and the ones their windows and lags reach back to
            field = field.isel({dim: slice(first - need, last + 1)})
        if not self.added_dims:
            return field
        inp = {
            "sample_dim": dim,
            "variables": self.variables,
            "windows": self.windows,
            "lags": self.lags,
            "aggregate": self.time_scales.get("aggregate", "mean"),
        }
        field = time_scales(field, inp)
        self._check_coords(field, key, archive=False)
        return field.transpose(dim, *self.grid)

    def _check_months(self, coord: xr.DataArray, names: dict) -> None:
        clim = self.preprocessing.climatology
        if clim is None:
            return
        key = names["archive"]
        months = np.unique(months_of(coord, key, "the result's monthly climatology needs dates"))
        known = set(np.asarray(clim["month"].values, dtype=np.int64).tolist())
        outside = [int(m) for m in months if int(m) not in known]
        if outside:
            first = coord.isel({coord.dims[0]: np.flatnonzero(coord.dt.month.isin(outside))[:1]})
            raise InputError(
                f"{key}: calendar month(s) {outside} of its samples (first "
                f"{_date(first.values[0])}) are not in the result's climatology, which has "
                f"months {sorted(known)}; select other samples (with {names['time']})"
            )


def members_hint(field: xr.DataArray | xr.Dataset, extra) -> str:
    """What to do when the dims ``extra``, outside the result's grid, hold an ensemble's
    members; empty otherwise."""
    members = ensemble_dim(field, sorted(extra, key=str))
    if members is None:
        return ""
    return (
        f"; its dim {members!r} holds {field.sizes[members]} ensemble members: apply the "
        "result to one member at a time"
    )


def far_from_training(
    applied: np.ndarray, trained: np.ndarray, blocks: np.ndarray | None = None
) -> str | None:
    """How the applied series ``(sample, group)`` lie outside the training ones, in words, or
    None (:func:`dcfa._validation.far_off`, the rule the estimators' ``transform`` applies to
    their own inputs).

    ``blocks`` labels each group with what it is made of (its variable's units): each block
    is judged on its own, so that one variable in other units is found among the groups of
    the others (precipitation x 86 400 in two groups of five)."""
    trained = np.asarray(trained, dtype=np.float64)
    applied = np.asarray(applied, dtype=np.float64)
    labels = np.zeros(trained.shape[1], dtype=int) if blocks is None else np.asarray(blocks)
    kinds = list(dict.fromkeys(labels.tolist()))
    for kind in kinds:
        mine = labels == kind
        far = _far(applied[:, mine], trained[:, mine])
        if far is not None:
            if len(kinds) > 1:
                far += f" (its {int(mine.sum())} group(s) in {kind!r})"
            return far
    return None


def _far(applied: np.ndarray, trained: np.ndarray) -> str | None:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a group without values: NaN
        mean, sd = np.nanmean(trained, axis=0), np.nanstd(trained, axis=0)
    n = int(np.isfinite(trained).sum(axis=0).min()) if trained.size else 0
    return far_off(applied, mean, sd, n, fitted="the result", columns="groups")


def regression_text(regression) -> str:
    """``regression`` in words: ``"ridge (penalty 12.6) on the standardised features"``."""
    from sklearn.pipeline import Pipeline

    last = regression[-1] if isinstance(regression, Pipeline) else regression
    scaled = isinstance(regression, Pipeline) and len(regression) > 1
    where = "the standardised features" if scaled else "the features"
    alpha = getattr(last, "alpha_", None)
    name = "OLS" if alpha is None else f"ridge (penalty {alpha:.3g})"
    return f"{name} on {where}"


def _first_difference(ours: xr.DataArray, theirs: xr.DataArray) -> str:
    a, b = np.asarray(ours.values), np.asarray(theirs.values)
    if set(ours.dims) != set(theirs.dims) or a.shape != np.asarray(b).shape:
        return f"result {dict(ours.sizes)}, here {dict(theirs.sizes)}"
    b = theirs.transpose(*ours.dims).values
    try:
        where = np.argwhere(~np.isclose(a.astype(np.float64), b.astype(np.float64)))
    except (TypeError, ValueError):
        where = np.argwhere(a != b)
    if not where.size:
        return "the values differ"
    i = tuple(int(k) for k in where[0])
    # positions, not labels: "lon=0" would read as 0 degrees
    if len(i) == 1:
        at = f"index {i[0]} along {ours.dims[0]!r}"
    else:
        at = f"index {i} along {tuple(map(str, ours.dims))}"
    return f"at {at}: result {a[i]}, here {b[i]}"


def _date(value) -> str:
    text = str(value)
    return text[:10] if len(text) >= 10 else text


def _months(coord: xr.DataArray) -> np.ndarray:
    """The calendar month of each date as one number (``12 * year + month``)."""
    return np.asarray(coord.dt.year.values, dtype=np.int64) * 12 + np.asarray(
        coord.dt.month.values, dtype=np.int64
    )


def _span(coord: xr.DataArray) -> str:
    """``-5 .. 5``: a coordinate's first and last labels."""
    first, last = coord.values[0], coord.values[-1]
    return f"{first:g} .. {last:g}" if coord.dtype.kind in "iuf" else f"{first} .. {last}"
