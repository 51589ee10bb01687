"""The targets of a job that read the same cells, fitted together (``dcfa.batch.shared``)."""

from __future__ import annotations

import numpy as np
import xarray as xr

import dcfa
from dcfa.batch.shared import SharedFits, cells_digest
from dcfa.io.preprocess import Preprocessing


def _field():
    ds = dcfa.datasets.make_regions_field(120, (6, 12), 4, n_active=2, seed=1)
    return ds.field, ds.target, ds.time.values


def test_targets_on_the_same_months_are_fitted_once_each_as_alone():
    field, y, months = _field()
    shared = SharedFits({"a": months, "b": months}, {"a": y, "b": -y})
    fitted, together = shared.fit("a", dcfa.RegionsCV(), field, "cells")
    assert together == ["a", "b"]
    second, together = shared.fit("b", dcfa.RegionsCV(), field, "cells")
    assert together == ["a", "b"]
    for model, target in ((fitted, y), (second, -y)):
        alone = dcfa.RegionsCV().fit(field, target)
        np.testing.assert_array_equal(model.labels_, alone.labels_)
        xr.testing.assert_identical(model.cv_path_, alone.cv_path_)


def test_a_target_fits_alone_unless_its_cells_are_the_groups():
    field, y, months = _field()
    # other months: no group
    shared = SharedFits({"a": months, "c": months[1:]}, {"a": y, "c": y[1:]})
    assert shared.fit("a", dcfa.RegionsCV(), field, "cells") is None
    # the same months, but other cells once preprocessed: the clone is not used
    shared = SharedFits({"a": months, "b": months}, {"a": y, "b": -y})
    assert shared.fit("a", dcfa.RegionsCV(), field, "cells") is not None
    assert shared.fit("b", dcfa.RegionsCV(), field, "other cells") is None
    # an estimator that shares no work between targets
    shared = SharedFits({"a": months, "b": months}, {"a": y, "b": -y})
    assert shared.fit("a", dcfa.GenLinCFA(), field, "cells") is None


def test_the_digest_changes_with_every_part_of_the_cells():
    months = np.arange(24)
    keep = np.array([0, 1, 3])
    grid = xr.DataArray(np.ones((2, 2), dtype=bool), dims=("lat", "lon"))
    clim = xr.DataArray(np.zeros((12, 2, 2)), dims=("month", "lat", "lon"))
    base = cells_digest(months, keep, Preprocessing(grid, clim))
    assert cells_digest(months.copy(), keep.copy(), Preprocessing(grid, clim.copy())) == base
    assert cells_digest(months + 1, keep, Preprocessing(grid, clim)) != base
    assert cells_digest(months, keep[:2], Preprocessing(grid, clim)) != base
    assert cells_digest(months, keep, Preprocessing(grid, clim + 1e-12)) != base
    assert cells_digest(months, keep, Preprocessing(grid, clim, grid * 2.0)) != base
    assert cells_digest(months, keep, Preprocessing(~grid, clim)) != base
