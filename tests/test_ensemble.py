"""An ensemble's members are not cells: a field ``(member, time, lat, lon)`` was taken as a
grid of members x cells, so that regions and their means spanned members (a region of
member 1's and member 2's cells, with a neighbour radius across members). It is refused,
naming the dim and the two ways to fit it; the pooled way the message gives runs as written.
How alike the members' maps are is :func:`dcfa.map_agreement`'s.
"""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest
import xarray as xr
from hypothesis import given
from hypothesis import strategies as st
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline
from support import cli, fails, tree, write_job

import dcfa
from dcfa.datasets import make_regions_field
from dcfa.stacking import ensemble_dim


def _ensemble(n_members: int = 3, dim: str = "member"):
    """Members sharing the regions and the target's relation to them, each its own noise."""
    ds = make_regions_field(120, (8, 12), 6, seed=4)
    rng = np.random.default_rng(0)
    noise = 0.3 * rng.normal(size=(n_members, *ds.field.shape))
    X = (ds.field + xr.DataArray(noise, dims=(dim, *ds.field.dims))).assign_coords(
        {dim: np.arange(1, n_members + 1)}
    )
    y = ds.target + xr.DataArray(0.3 * rng.normal(size=(n_members, 120)), dims=(dim, "time"))
    return X.transpose(dim, "time", ...).assign_attrs(units="K"), y.assign_coords(X[dim].coords)


@pytest.mark.parametrize("make", [lambda: dcfa.LinCFA(neighbors=1), lambda: dcfa.RegionsCV()])
def test_members_as_cells_are_refused_naming_the_dim(make):
    X, y = _ensemble()
    with pytest.raises(ValueError, match=r"^X: its dim 'member' holds 3 ensemble members; ") as e:
        make().fit(X, y.isel(member=0))
    assert "X.sel(member=...)" in str(e.value)
    assert "X.stack(sample=('member', 'time'))" in str(e.value)
    # one member left (a dim of size 1) is one grid, as is another extra dim (a level)
    one = make().fit(X.isel(member=[1]), y.isel(member=1))
    assert one.label_map_.sizes["member"] == 1
    level = X.rename(member="level")
    assert make().fit(level, y.isel(member=0)).label_map_.sizes["level"] == 3


def test_an_ensemble_dim_is_told_by_its_name_or_its_standard_name():
    X, _ = _ensemble(2)
    for name in ("member_id", "realization", "ensemble", "Member"):
        assert ensemble_dim(X.rename(member=name), (name, "lat", "lon")) == name
    number = X.rename(member="number")  # ECMWF's, with the CF standard name
    assert ensemble_dim(number, ("number", "lat", "lon")) is None
    number["number"].attrs["standard_name"] = "realization"
    assert ensemble_dim(number, ("number", "lat", "lon")) == "number"


def test_the_pooled_fit_the_message_gives_runs_and_maps_the_grid():
    """Anomalies of each member, the members stacked into the samples: one map on (lat, lon),
    fitted on every member's months, which predicts a member it did not see."""
    X, y = _ensemble(4)
    A = dcfa.Anomalies().fit_transform(X)  # each member's own climatology
    train = dict(member=[1, 2, 3])
    Xs = A.sel(train).stack(sample=("member", "time")).transpose("sample", ...)
    ys = y.sel(train).stack(sample=("member", "time"))
    model = make_pipeline(dcfa.RegionsCV(sample_dim="sample"), LinearRegression()).fit(Xs, ys)
    regions = model[0]
    assert regions.label_map_.dims == ("lat", "lon")
    assert 2 <= regions.n_features_out_ <= 30
    held_out = A.sel(member=[4]).stack(sample=("member", "time")).transpose("sample", ...)
    r = np.corrcoef(model.predict(held_out), y.sel(member=4))[0, 1]
    assert r > 0.8


def test_a_job_on_an_ensemble_store_exits_2_and_runs_on_one_member(tmp_path):
    X, y = _ensemble(2)
    job = write_job(tmp_path, input__store="ens.zarr", input__anomalies=False)
    X.rename("sst").to_dataset().to_zarr(tmp_path / "ens.zarr", consolidated=False)
    y.sel(member=2).drop_vars("member").rename("soi").to_pandas().to_csv(tmp_path / "soi.csv")
    before = tree(tmp_path)
    proc = cli("fit", str(job), "-q", cwd=tmp_path)
    fails(proc, 2, "input.store: its dim 'member' holds 2 ensemble members",
          "input.select = {member = [k, k]}")  # fmt: skip
    assert tree(tmp_path) == before
    proc = cli("fit", str(job), "-q", "--set", "input.select.member=[2, 2]", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # one member is a label of the archive: the map is (lat, lon), for any member's store
    result = xr.open_zarr(tmp_path / "result.zarr")
    assert result.region.dims == ("lat", "lon")
    member_1 = X.sel(member=[1]).rename("sst").to_dataset()
    member_1.attrs = {
        "experiment_id": "ssp585",
        "history": "2020-01-01: written by a model",
        "method": "a model's own",
    }
    member_1.to_zarr(tmp_path / "m1.zarr", consolidated=False)
    before = tree(tmp_path)
    proc = cli("apply", "result.zarr", "ens.zarr", "--output", "all.zarr", cwd=tmp_path)
    fails(proc, 2, "ARCHIVE: 'sst' has grid dims ('member', 'lat', 'lon'), the result's grid "
          "is ('lat', 'lon'); its dim 'member' holds 2 ensemble members: apply the result to "
          "one member at a time")  # fmt: skip
    assert tree(tmp_path) == before
    proc = cli("apply", "result.zarr", "m1.zarr", "--output", "m1-out.zarr", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = xr.open_zarr(tmp_path / "m1-out.zarr")
    applied = out.features.load()
    member_1 = dcfa.load_result(tmp_path / "result.zarr").transform(X.sel(member=1).rename("sst"))
    np.testing.assert_allclose(applied.values, member_1.values, rtol=1e-6)
    # the output says which member and run it is of: the label, the archive's attributes,
    # and its history with dcfa's line added
    assert int(out.features["member"]) == int(out.forecast["member"]) == 1
    assert out.attrs["experiment_id"] == "ssp585"
    first, added = out.attrs["history"].split("\n")
    assert first == "2020-01-01: written by a model"
    assert added.endswith(f"dcfa apply {tmp_path / 'result.zarr'} {tmp_path / 'm1.zarr'}")
    assert out.attrs["method"] == "LinCFA"  # dcfa's own attribute over the archive's
    own = result.features.values  # member 2's own features differ from member 1's
    assert not np.allclose(applied.values, own, rtol=1e-3)


def _recurrence_by_sets(ref: np.ndarray, others: list[np.ndarray]) -> np.ndarray:
    """Each cell's Jaccard index of its two regions, as Python sets, averaged over maps."""
    out = np.full(ref.size, np.nan)
    for i in np.flatnonzero(ref >= 0):
        mine = set(np.flatnonzero(ref == ref[i]).tolist())
        scores = []
        for other in others:
            theirs = set(np.flatnonzero(other == other[i]).tolist()) if other[i] >= 0 else set()
            scores.append(len(mine & theirs) / len(mine | theirs))
        out[i] = np.mean(scores)
    return out


@given(
    st.lists(st.integers(-1, 3), min_size=12, max_size=12),
    st.lists(st.lists(st.integers(-1, 4), min_size=12, max_size=12), min_size=1, max_size=3),
)
def test_map_agreement_against_sets_and_its_invariants(ref, others):
    """Recurrence against sets, cell by cell; the same map (renumbered) recurs fully and
    has an ARI of 1; the dims' order of the other maps does not matter."""
    from sklearn.metrics import adjusted_rand_score

    ref, others = np.array(ref), [np.array(o) for o in others]
    if not (ref >= 0).any():
        return
    grid = {"lat": [0.0, 1.0, 2.0], "lon": [10.0, 20.0, 30.0, 40.0]}

    def on_grid(a):
        return xr.DataArray(a.reshape(3, 4).astype(float), dims=("lat", "lon"), coords=grid)

    got = dcfa.map_agreement(on_grid(ref), [on_grid(o).T for o in others])
    np.testing.assert_allclose(
        got.recurrence.values.ravel(), _recurrence_by_sets(ref, others), equal_nan=True
    )
    for k, o in enumerate(others):
        both = (ref >= 0) & (o >= 0)
        if both.any():
            assert got.ari.values[k] == pytest.approx(adjusted_rand_score(ref[both], o[both]))
    renumbered = np.where(ref >= 0, 3 - ref, -1)
    same = dcfa.map_agreement(on_grid(ref), on_grid(renumbered))
    assert np.all(same.recurrence.values[np.isfinite(same.recurrence.values)] == 1.0)
    assert same.ari.values[0] == pytest.approx(1.0)


def test_maps_of_members_are_compared_and_other_grids_refused():
    """The map of each member, fitted alone, against the first member's: drawn by
    plot_stability; maps of other grids or labels are refused, naming them."""
    X, y = _ensemble(3)
    maps = [dcfa.RegionsCV().fit(X.sel(member=m), y.sel(member=m)).label_map_ for m in (1, 2, 3)]
    agree = dcfa.map_agreement(maps[0], maps[1:])
    assert agree.recurrence.dims == maps[0].dims and agree.sizes["map"] == 2
    assert agree.sizes["group"] == int(maps[0].max()) + 1
    assert np.all((agree.ari.values > 0.3) & (agree.ari.values <= 1))
    from dcfa.plot import plot_stability

    plot_stability(agree.recurrence, region=maps[0], coastlines=False)
    with pytest.raises(ValueError, match=r"^others\[0\]: its 'lon' labels differ"):
        dcfa.map_agreement(maps[0], [maps[1].assign_coords(lon=maps[1].lon + 1)])
    with pytest.raises(ValueError, match=r"^others: expected the dims of reference"):
        dcfa.map_agreement(maps[0], maps[1].rename(lat="y"))
    with pytest.raises(TypeError, match=r"^reference: expected an xarray.DataArray"):
        dcfa.map_agreement(maps[0].values, maps[1])


def _named(X: xr.DataArray, y: xr.DataArray):
    """The members as CMIP names them (a string coordinate)."""
    ids = [f"r{m}i1p1f1" for m in X.member.values]
    return X.assign_coords(member=ids), y.assign_coords(member=ids)


def test_anomalies_of_other_members_are_refused_naming_them():
    """Anomalies fitted on members r1-r3, given r2-r4 (a scenario run's members): a bare
    NumPy TypeError ('Cannot interpret StringDtype as a data type') from the labels' check;
    given the held-out member alone, a size mismatch with no way forward."""
    X, _ = _named(*_ensemble(4))
    fitted = dcfa.Anomalies().fit(X.isel(member=[0, 1, 2]))
    advice = r"\(its members: each fitted member's climatology is its own; fit on the new "
    with pytest.raises(ValueError, match=r"^X: the 'member' coordinate differs .*" + advice):
        fitted.transform(X.isel(member=[1, 2, 3]))
    with pytest.raises(ValueError, match=r"^X: dim 'member' has 1 entries, .*" + advice):
        fitted.transform(X.isel(member=[3]))
    # the same members in another order are the fitted ones
    np.testing.assert_array_equal(
        fitted.transform(X.isel(member=[2, 0, 1])).sel(member="r1i1p1f1").values,
        fitted.transform(X.isel(member=[0, 1, 2])).sel(member="r1i1p1f1").values,
    )


def test_map_agreement_labels_each_map_by_its_member():
    X, y = _named(*_ensemble(3))
    maps = [dcfa.RegionsCV().fit(X.isel(member=m), y.isel(member=m)).label_map_ for m in range(3)]
    agree = dcfa.map_agreement(maps[0], maps[1:])
    assert list(agree["member"].values) == ["r2i1p1f1", "r3i1p1f1"]
    assert agree["member"].dims == ("map",)
    assert agree.attrs["reference"] == "member = r1i1p1f1"
    assert "member" not in agree.recurrence.coords


def test_a_job_selects_a_member_by_its_name(tmp_path):
    """input.select took only [start, stop] numbers, so a CMIP member id could not be kept:
    'must be [start, stop], two numbers'. A name, or a list of them, is kept as given."""
    X, y = _named(*_ensemble(2))
    job = write_job(tmp_path, input__store="ens.zarr", input__anomalies=False)
    X.rename("sst").to_dataset().to_zarr(tmp_path / "ens.zarr", consolidated=False)
    y.isel(member=1).drop_vars("member").rename("soi").to_pandas().to_csv(tmp_path / "soi.csv")
    before = tree(tmp_path)
    proc = cli("fit", str(job), "--set", "input.select.member=r3i1p1f1", cwd=tmp_path)
    fails(proc, 2, "input.select.member: ['r3i1p1f1'] not among the 'member' labels of the "
          "archive (r1i1p1f1, r2i1p1f1)")  # fmt: skip
    proc = cli("fit", str(job), "--set", "input.select.member=[true]", cwd=tmp_path)
    fails(proc, 2, "input.select.member must be [start, stop], two numbers")
    assert tree(tmp_path) == before
    proc = cli("fit", str(job), "--set", "input.select.member=r2i1p1f1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "      input.select: member 1 of 2 (r2i1p1f1)" in proc.stdout
    result = xr.open_zarr(tmp_path / "result.zarr")
    assert result.region.dims == ("lat", "lon")
    member_2 = dcfa.load_result(tmp_path / "result.zarr").transform(X.isel(member=1).rename("sst"))
    np.testing.assert_allclose(result.features.values, member_2.values, rtol=1e-6)


def test_open_target_keeps_one_member_of_a_member_time_series(tmp_path):
    """A (member, time) target was refused as 'expected a series over one dim', with no way
    to say which member. target.select keeps one label, by name or by number; every
    mistake names the key."""
    X, y = _named(*_ensemble(3))
    y = y.rename("soi").assign_coords(number=("member", [1, 2, 3]))
    y.to_dataset().to_zarr(tmp_path / "y.zarr", consolidated=False)
    y.to_pandas().T.to_csv(tmp_path / "y.csv")
    path = tmp_path / "y.zarr"
    hint = "its time; keep one label of each other dim with target.select = {member = 'r1i1p1f1'}"
    with pytest.raises(ValueError, match=re.escape(hint)):
        dcfa.io.open_target(path, "soi")
    got = dcfa.io.open_target(path, "soi", select={"member": "r2i1p1f1"})
    assert got.dims == ("time",) and "member" not in got.coords
    np.testing.assert_array_equal(got.values, y.isel(member=1).values)
    renamed = y.swap_dims(member="number").drop_vars("member")
    renamed.to_dataset().to_zarr(tmp_path / "n.zarr", consolidated=False)
    by_number = dcfa.io.open_target(tmp_path / "n.zarr", "soi", select={"number": 3})
    np.testing.assert_array_equal(by_number.values, y.isel(member=2).values)
    for select, message in [
        ({"member": "r9i1p1f1"}, "target.select.member: 'r9i1p1f1' is not among the 'member' "
         "labels of 'soi' (r1i1p1f1, r2i1p1f1, r3i1p1f1)"),
        ({"member": 2}, "target.select.member: 2 is not among"),
        ({"lat": 0}, "target.select.lat: 'lat' is not a dim of 'soi'"),
        ({"time": "2000-01"}, "target.select.time: the target's dates are paired"),
    ]:  # fmt: skip
        with pytest.raises(ValueError, match=re.escape(message)):
            dcfa.io.open_target(path, "soi", select=select)
    with pytest.raises(ValueError, match="target.select: .* is a CSV file"):
        dcfa.io.open_target(tmp_path / "y.csv", "r1i1p1f1", select={"member": "r1i1p1f1"})


def test_a_job_reads_one_members_target_from_the_ensemble_store(tmp_path):
    """The target (member, time) beside the field in one store: the job names target.select
    and exits 2, nothing written; with it, the map and features are those of the same
    member's target written as a CSV file."""
    X, y = _named(*_ensemble(2))
    job = write_job(tmp_path, input__store="ens.zarr", input__anomalies=False,
                    input__select={"member": "r2i1p1f1"})  # fmt: skip
    xr.Dataset({"sst": X, "soi": y}).to_zarr(tmp_path / "ens.zarr", consolidated=False)
    y.isel(member=1).drop_vars("member").rename("soi").to_pandas().to_csv(tmp_path / "soi.csv")
    assert cli("fit", str(job), "-q", cwd=tmp_path).returncode == 0
    from_csv = xr.open_zarr(tmp_path / "result.zarr").load()
    shutil.rmtree(tmp_path / "result.zarr")
    store = ["--set", f"target.path={tmp_path / 'ens.zarr'}"]
    before = tree(tmp_path)
    proc = cli("fit", str(job), "-q", *store, cwd=tmp_path)
    hint = "its time; keep one label of each other dim with target.select = {member = 'r1i1p1f1'}"
    fails(proc, 2, "has dims ('time', 'member'); expected a series over one dim, " + hint)
    assert tree(tmp_path) == before
    proc = cli("fit", str(job), "--set", "target.select.member=[2]", *store, cwd=tmp_path)
    fails(proc, 2, "target.select.member must be one label of 'member', a name or a number")
    assert tree(tmp_path) == before
    proc = cli("fit", str(job), "-q", "--set", "target.select.member=r2i1p1f1", *store,
               cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    from_store = xr.open_zarr(tmp_path / "result.zarr").load()
    xr.testing.assert_equal(from_store.region, from_csv.region)
    np.testing.assert_allclose(from_store.features.values, from_csv.features.values)
