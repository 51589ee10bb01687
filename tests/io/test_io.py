"""Archives in, results out: real Zarr stores (formats 2 and 3), netCDF and CSV targets."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from support import make_archive

import dcfa
from dcfa import io


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_open_archive_both_formats(tmp_path, zarr_format):
    ds = make_archive(tmp_path / "a.zarr", zarr_format=zarr_format)
    field = io.open_archive(tmp_path / "a.zarr", ["sst"])
    assert field.dims == ("time", "lat", "lon") and field.chunks[0] == (12,) * 4
    np.testing.assert_array_equal(field.values, ds.sst.values)
    part = io.open_archive(tmp_path / "a.zarr", "sst", time=["2001-01", "2001-12"])
    assert part.sizes["time"] == 12


def test_several_variables_become_a_feature_dim(tmp_path):
    make_archive(tmp_path / "a.zarr", extra_var=True)
    field = io.open_archive(tmp_path / "a.zarr", ["sst", "t2m"])
    assert field.dims == ("time", "variable", "lat", "lon")
    assert field["variable"].values.tolist() == ["sst", "t2m"]


@pytest.mark.parametrize(
    "variables, kwargs, err, match",
    [
        (["sst"], dict(store="missing.zarr"), FileNotFoundError, "input.store: no Zarr store"),
        (["slp"], {}, ValueError, r"input.variables: \['slp'\] not in"),
        (["sst", "index"], {}, ValueError, "input.variables: 'index' has only the sample dim"),
        (["sst"], dict(sample_dim="step"), ValueError, "without the sample dim 'step'"),
        (["sst"], dict(time=["1990", "1991"]), ValueError, "input.time: no samples"),
    ],
)
def test_archive_errors_name_the_key(tmp_path, variables, kwargs, err, match):
    make_archive(tmp_path / "a.zarr", extra_var=True)
    store = tmp_path / kwargs.pop("store", "a.zarr")
    with pytest.raises(err, match=match):
        io.open_archive(store, variables, **kwargs)


def test_not_a_store(tmp_path):
    (tmp_path / "junk").mkdir()
    with pytest.raises(ValueError, match="not a readable Zarr store"):
        io.open_archive(tmp_path / "junk", ["sst"])


def test_one_step_chunks_are_rechunked_with_a_warning(tmp_path):
    make_archive(tmp_path / "a.zarr", time_chunk=1, n=96)
    field = io.open_archive(tmp_path / "a.zarr", ["sst"])
    assert len(field.chunks[0]) == 96
    assert io.plan_chunks(field).chunks[0] == (96,)  # small: re-chunked, and silently
    size = f"about {field.nbytes / 2**10:.2f} kiB per pass"  # not "0.00 GiB"
    with pytest.warns(io.ChunkWarning, match=f"96 chunks along 'time'.*{size}"):
        planned = io.plan_chunks(field, target_bytes=4096)  # as if the archive were large
    assert min(planned.chunks[0][:-1]) >= 32
    np.testing.assert_array_equal(planned.values, field.values)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert io.plan_chunks(planned) is planned  # already fine: untouched, no warning


def test_windows_and_lags_of_a_well_chunked_archive_are_read_as_stored(tmp_path):
    """Windows and lags make a block of cells each, one chunk wide: the passes read them as
    such. They were re-chunked to whole blocks, with a warning to store the archive in
    larger time chunks, which it already was (120 months x the whole grid)."""
    from dcfa.forecast import lagged, trailing_windows

    make_archive(tmp_path / "a.zarr", time_chunk=120, n=240)
    field = io.open_archive(tmp_path / "a.zarr", ["sst"])
    field = lagged(trailing_windows(field, [1, 3]), [0, 1])
    assert field.chunksizes["window"] == (1, 1) and field.chunksizes["lag"] == (1, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert io.plan_chunks(field, target_bytes=4096) is field  # as if large: no warning
    # a grid dim split in chunks is still joined, as before
    split = field.chunk({"lon": 3})
    with pytest.warns(io.ChunkWarning):
        assert len(io.plan_chunks(split, target_bytes=4096).chunksizes["lon"]) == 1


@pytest.mark.parametrize("standardize", [False, True])
def test_preprocessing_against_xarray(tmp_path, standardize):
    make_archive(tmp_path / "a.zarr")
    field = io.open_archive(tmp_path / "a.zarr", ["sst"])
    prep = io.fit_preprocessing(field, anomalies=True, standardize=standardize)
    out = io.apply_preprocessing(field, prep)
    assert out.chunks == field.chunks  # no one-step chunks from a groupby
    x = field.astype("float64").load()
    expected = x.groupby("time.month") - x.groupby("time.month").mean()
    if standardize:
        expected = expected / expected.std("time", ddof=1)
    np.testing.assert_allclose(out.values, expected.values, atol=1e-9, equal_nan=True)
    assert prep.has_data.values.sum() == 24 - 2
    assert not prep.has_data.values[0, 0]


def test_standardize_without_anomalies(tmp_path):
    make_archive(tmp_path / "a.zarr")
    field = io.open_archive(tmp_path / "a.zarr", ["sst"])
    out = io.apply_preprocessing(field, io.fit_preprocessing(field, standardize=True))
    x = field.astype("float64").values
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the land cells' all-NaN std
        std = np.nanstd(x, axis=0, ddof=1)
    np.testing.assert_allclose(out.values, x / std, rtol=1e-6)


def test_targets_from_netcdf_zarr_and_csv(tmp_path):
    time = pd.date_range("1999-01-15", periods=30, freq="MS") + pd.Timedelta(days=14)
    soi = xr.DataArray(np.arange(30.0), dims="time", coords={"time": time}, name="SOI")
    soi.to_dataset().to_netcdf(tmp_path / "soi.nc")
    soi.to_dataset().to_zarr(tmp_path / "soi.zarr", consolidated=False)
    pd.DataFrame({"date": time, "soi": np.arange(30.0)}).to_csv(tmp_path / "soi.csv", index=False)
    for path, kw in [("soi.nc", {}), ("soi.zarr", {}), ("soi.csv", dict(time_column="date"))]:
        t = io.open_target(tmp_path / path, **kw)
        assert t.dims == ("time",) and t.size == 30
        np.testing.assert_array_equal(t.values, np.arange(30.0))
    with pytest.raises(ValueError, match="target.time_column: 'time' is not a column") as info:
        io.open_target(tmp_path / "soi.csv")
    assert str(info.value).endswith("(['date', 'soi']); set target.time_column = 'date'")
    with pytest.raises(ValueError, match="target.variable: 'nino' not in"):
        io.open_target(tmp_path / "soi.nc", "nino")
    with pytest.raises(FileNotFoundError, match="target.path"):
        io.open_target(tmp_path / "nope.nc")


def test_a_file_targets_own_name_for_time_is_taken_as_the_sample_dim(tmp_path):
    """A netCDF or Zarr target over 'date' (or ERA5's 'valid_time', with 'time' a
    coordinate along it) was refused as not "a series over 'time'", and no key could say
    otherwise: time_column is for CSV files. Its one dim is its time."""
    time = pd.date_range("2000-01-01", periods=12, freq="MS")
    flow = xr.DataArray(np.arange(12.0), dims="date", coords={"date": time}, name="flow")
    flow.to_dataset().to_netcdf(tmp_path / "date.nc")
    era = flow.rename(date="valid_time").assign_coords(time=("valid_time", time))
    era.to_dataset().to_zarr(tmp_path / "era.zarr", consolidated=False)
    for path in ("date.nc", "era.zarr"):
        for dim in ("time", "valid_time"):
            t = io.open_target(tmp_path / path, sample_dim=dim)
            assert t.dims == (dim,) and (t[dim].values == time.values).all()
            np.testing.assert_array_equal(t.values, np.arange(12.0))
    grid = flow.expand_dims(station=2)  # two series: which to use is not the file's to say
    grid.to_dataset().to_netcdf(tmp_path / "two.nc")
    with pytest.raises(ValueError, match=r"has dims \('station', 'date'\); expected a series"):
        io.open_target(tmp_path / "two.nc")


def test_target_units_are_a_csvs_and_must_agree_with_a_files_own(tmp_path):
    """A CSV target has no units, so a forecast of it had none: ``units`` gives them. A
    netCDF's own units win when they are the same, and contradicting them is refused."""
    time = pd.date_range("2000-01-01", periods=12, freq="MS")
    pd.DataFrame({"time": time, "flow": np.arange(12.0)}).to_csv(tmp_path / "q.csv", index=False)
    flow = xr.DataArray(np.arange(12.0), dims="time", coords={"time": time}, name="flow")
    flow.assign_attrs(units="m3/s").to_dataset().to_netcdf(tmp_path / "q.nc")
    assert "units" not in io.open_target(tmp_path / "q.csv").attrs
    assert io.open_target(tmp_path / "q.csv", units="m3 s-1").attrs["units"] == "m3 s-1"
    assert io.open_target(tmp_path / "q.nc", units="m3 s-1").attrs["units"] == "m3/s"
    with pytest.raises(ValueError) as info:
        io.open_target(tmp_path / "q.nc", units="mm")
    assert str(info.value) == (
        f"target.units: 'mm', but 'flow' in {str(tmp_path / 'q.nc')!r} is in 'm3/s' (a netCDF "
        "or Zarr target carries its units; target.units is for CSV files)"
    )
    for bad in ("", 3):  # before the file is looked for
        with pytest.raises(ValueError, match=r"^target.units: expected a text such as"):
            io.open_target(tmp_path / "nope.csv", units=bad)


@pytest.mark.parametrize(
    "columns, hint",
    [
        ({"Date": ["31/01/2000", "29/02/2000"], "flow": ["1.5", "n/a"]}, "'Date'"),
        ({"date": ["2000-01", "2000-02"], "site": ["a", "b"], "flow": [1.5, 2.0]}, "'date'"),
        # two columns of dates, or none: no guess
        ({"date": ["2000-01-01", "2000-02-01"], "obs": ["2000-01-03", "2000-02-03"]}, None),
        ({"month": [1, 2], "flow": [1.5, 2.0]}, None),
    ],
)
def test_a_csv_without_a_time_column_names_its_one_column_of_dates(tmp_path, columns, hint):
    """A hydrologist's flow.csv with a 'date' column was refused for its missing 'time'
    column with nothing to say which key reads it."""
    pd.DataFrame(columns).to_csv(tmp_path / "flow.csv", index=False)
    with pytest.raises(ValueError, match="^target.time_column: 'time' is not a column") as info:
        io.open_target(tmp_path / "flow.csv")
    said = str(info.value)
    if hint is None:
        assert "set target.time_column" not in said, said
    else:
        assert said.endswith(f"; set target.time_column = {hint}"), said


def test_align_target_exact_and_by_month(tmp_path):
    make_archive(tmp_path / "a.zarr")  # monthly, 2000-01 .. 2003-12, stamped on the 1st
    field = io.open_archive(tmp_path / "a.zarr", ["sst"])
    time = pd.date_range("1998-06-01", periods=40, freq="MS") + pd.Timedelta(days=14)
    target = xr.DataArray(np.arange(40.0), dims="time", coords={"time": time})
    with pytest.raises(ValueError, match="not on the input's stamps .* 'month' to pair"):
        io.align_target(field, target)  # mid-month against the 1st: named, with the remedy
    f, t, n = io.align_target(field, target, match="month")
    assert n == 21  # 2000-01 .. 2001-09
    np.testing.assert_array_equal(t.time.values, f.time.values)
    assert t.values[0] == 19.0  # 1998-06 + 19 months = 2000-01


def test_a_daily_field_against_a_monthly_target_is_named_not_thinned():
    """Exact stamps kept the 24 days on the 1st of 730 daily fields without a word."""
    days = pd.date_range("2000-01-01", periods=730, freq="D")
    X = xr.DataArray(np.ones((730, 2)), dims=("time", "cell"), coords={"time": days})
    months = pd.date_range("2000-01-01", periods=24, freq="MS")
    y = pd.Series(np.arange(24.0), index=months)
    with pytest.raises(ValueError, match=r"706 of the input's 730 samples in the target's months "
                       r"are not on the target's stamps .*2000-01-02.*up to 31 samples in one "
                       r"month.*average the input to one value a month first"):  # fmt: skip
        dcfa.align(X, y)
    monthly = X.resample(time="MS").mean()  # the remedy named
    Xa, ya = dcfa.align(monthly, y, match="month")
    assert Xa.sizes["time"] == 24 and (ya.values == np.arange(24.0)).all()
    Xa, ya = dcfa.align(X.sel(time=months), y)  # a field on the target's stamps: kept
    assert Xa.sizes["time"] == 24


def test_write_result_is_complete_and_atomic(tmp_path):
    make_archive(tmp_path / "a.zarr")
    field = io.open_archive(tmp_path / "a.zarr", ["sst"])
    y = np.random.default_rng(1).normal(size=field.sizes["time"])
    model = dcfa.LinCFA(random_state=0).fit(field, y)
    ds = io.result_dataset(model, field, attrs={"dcfa_version": dcfa.__version__})
    out = io.write_result(tmp_path / "r.zarr", ds, moments=model.moments_)
    back = xr.open_zarr(out, consolidated=False)
    assert np.isnan(back.region.values[0, 0])  # land cell: NaN once decoded
    labels = model.label_map_.values.astype(float)
    np.testing.assert_array_equal(back.region.values, np.where(labels < 0, np.nan, labels))
    np.testing.assert_allclose(back.features.values, model.transform(field).values, rtol=1e-6)
    assert int(back.group_size.sum()) == 22 and "created" in back.attrs
    np.testing.assert_allclose(dcfa.Moments.load(out / "moments").cross, model.moments_.cross)
    with pytest.raises(FileExistsError, match="output.store"):
        io.write_result(tmp_path / "r.zarr", ds)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.zarr", "r.zarr"]


def test_a_result_written_from_python_names_how_a_python_fit_is_applied(tmp_path):
    """load_result of a store written by write_result said it came from "an earlier dcfa"
    and to run the job again with this version; it came from this one, in Python."""
    make_archive(tmp_path / "a.zarr")
    field = io.open_archive(tmp_path / "a.zarr", ["sst"])
    y = np.random.default_rng(1).normal(size=field.sizes["time"])
    model = dcfa.LinCFA(random_state=0).fit(field, y)
    out = io.write_result(tmp_path / "r.zarr", io.result_dataset(model, field))
    with pytest.raises(ValueError, match="written from Python") as e:
        dcfa.load_result(out)
    assert "applied by its fitted estimator or pipeline" in str(e.value)
    assert "earlier dcfa;" not in str(e.value)


def test_write_result_of_a_sliced_archive(tmp_path):
    """Slicing time out of line with the stored chunks gives uneven chunks; Zarr needs even."""
    make_archive(tmp_path / "a.zarr", n=60, time_chunk=12)
    field = io.open_archive(tmp_path / "a.zarr", ["sst"], time=["2000-04", "2004-11"])
    assert len(set(field.chunks[0][:-1])) > 1 or field.chunks[0][0] != field.chunks[0][1]
    y = np.random.default_rng(1).normal(size=field.sizes["time"])
    model = dcfa.LinCFA(random_state=0).fit(field, y)
    out = io.write_result(tmp_path / "r.zarr", io.result_dataset(model, field))
    back = xr.open_zarr(out, consolidated=False)
    np.testing.assert_allclose(back.features.values, model.transform(field).values, rtol=1e-6)


def test_align_pairs_a_mid_month_field_with_an_index_on_the_first_as_a_job_does(tmp_path):
    """In Python, fit refused a target on other stamps and xarray.align(join='inner') left 0
    samples; dcfa.align(match='month'), which the error names, pairs them and drops NaN months
    as the batch job does."""
    import pandas as pd

    make_archive(tmp_path / "a.zarr", n=60)  # monthly, stamped on the 1st
    field = io.open_archive(tmp_path / "a.zarr", ["sst"]).load()
    field = field.assign_coords(time=field.time + np.timedelta64(14, "D"))  # mid-month
    months = pd.date_range("1999-07-01", periods=70, freq="MS")
    values = np.random.default_rng(2).standard_normal(70)
    values[30] = np.nan  # a missing month of the index
    index = pd.Series(values, index=months, name="soi")
    with pytest.raises(ValueError, match=r"dcfa.align\(X, y, match='month'\) pairs calendar"):
        dcfa.GenLinCFA(neighbors=1).fit(field, index)
    assert xr.align(field, index.to_xarray().rename(index="time"), join="inner")[0].size == 0
    X, y = dcfa.align(field, index, match="month")
    assert y.sizes["time"] == 59  # 2000-01 .. 2004-12 but the NaN month
    np.testing.assert_array_equal(y.time.values, X.time.values)  # y on X's stamps
    kept = pd.DatetimeIndex(X.time.values).to_period("M")
    np.testing.assert_array_equal(y.values, index[kept.to_timestamp()].to_numpy())
    assert dcfa.GenLinCFA(neighbors=1).fit(X, y).n_features_out_ >= 1
    # the job's own pairing, from the same series in a CSV file
    index.rename_axis("time").to_csv(tmp_path / "soi.csv")
    target = io.open_target(tmp_path / "soi.csv")
    _, t, n = io.align_target(field, target, match="month")
    assert n == 59 and np.array_equal(t.values, y.values)
    # dcfa.align's errors name its arguments, not the job's keys (target.match)
    with pytest.raises(
        ValueError, match=r"^match: 59 of the target's 59 samples .*; set match='month' to pair"
    ):
        dcfa.align(field, index)
    with pytest.raises(ValueError, match=r"^match must be 'exact' or 'month'"):
        dcfa.align(field, index, match="year")


def test_groups_are_named_by_their_variable_and_place(tmp_path):
    """The group coordinate was bare integers: each group is named after the variable its
    cells share and its centre (sst_2S_129W), uniquely."""
    import re

    make_archive(tmp_path / "a.zarr", n=120, extra_var=True)  # sst and t2m on one grid
    field = io.open_archive(tmp_path / "a.zarr", ["sst", "t2m"])
    y = np.random.default_rng(3).normal(size=120)
    model = dcfa.LinCFA(random_state=0, neighbors=1).fit(field, y)
    ds = io.result_dataset(model, field, target=y)
    names = ds["group_name"].values
    assert len(set(names)) == names.size == model.n_features_out_
    for g, name in enumerate(names):
        var, lat, lon = re.fullmatch(r"(sst|t2m)_(\d+[NS])_(\d+[EW])(?:_\d+)?", name).groups()
        cells = model.label_map_ == g
        assert bool(cells.sel(variable=var).any()) and not bool(
            cells.sel(variable={"sst": "t2m", "t2m": "sst"}[var]).any()
        )
        want_lat, want_lon = float(ds.group_lat[g]), (float(ds.group_lon[g]) + 180) % 360 - 180
        assert lat == f"{abs(round(want_lat))}{'S' if round(want_lat) < 0 else 'N'}"
        assert lon == f"{abs(round(want_lon))}{'W' if round(want_lon) < 0 else 'E'}"
    out = io.write_result(tmp_path / "r.zarr", ds)
    back = xr.open_zarr(out, consolidated=False)
    np.testing.assert_array_equal(back["group_name"].values, names)


def test_a_group_around_another_is_named_by_its_extent():
    """A background group around a driving region has its centre inside that region, so it
    took nearly its name (1N_158W against 0N_160W). A group whose centre is more than one
    and a half grid steps from its nearest cell is named by its extent; the others, and a
    C-shaped group whose centre is on itself, keep their centre's name."""
    from dcfa.io.result import group_centres, group_names

    labels = np.zeros((10, 12), dtype=int)
    labels[3:6, 4:7] = 1  # a region inside the background 0
    labels[8:, 9:] = 2
    labels[9, 10] = 3  # a cell inside group 2's corner: 2's centre is still on itself
    lon = np.arange(170.0, 194.0, 2.0)  # across the dateline, in 0..360
    region = xr.DataArray(
        labels, dims=("lat", "lon"), coords={"lat": np.arange(-9.0, 11.0, 2.0), "lon": lon}
    )
    names = group_names(region, group_centres(region, 4), 4)
    assert list(names) == ["9S-9N_170E-168W", "1S_180W", "8N_170W", "9N_170W"]
    # the same map on a stacked cell dim, ocean cells only, in another order
    cells = region.stack(cell=("lat", "lon")).isel(cell=slice(None, None, -1))
    assert list(group_names(cells, group_centres(cells, 4), 4)) == list(names)
    # a band all round the globe has no centre: named by its number, without a NaN warning
    # (dcfa's RuntimeWarnings are errors here; the extent check took NaN centres in)
    band = xr.DataArray(
        [[0, 0, 0, 0], [1, 1, 1, 1]], dims=("lat", "lon"),
        coords={"lat": [0.0, 10.0], "lon": [0.0, 90.0, 180.0, 270.0]},
    )  # fmt: skip
    assert list(group_names(band, group_centres(band, 2), 2)) == ["g0", "g1"]


def test_each_group_carries_its_variables_units(tmp_path):
    """A time-series panel of groups mixing degC and m/s had no units at all: each group
    carries those of its variable's aggregate, and the features theirs when all share them."""
    make_archive(tmp_path / "a.zarr", n=120, extra_var=True)  # sst and t2m on one grid
    field = io.open_archive(tmp_path / "a.zarr", ["sst", "t2m"])
    y = np.random.default_rng(3).normal(size=120)
    units = {"sst": "K", "t2m": "m s-1"}
    means = dcfa.RegionsCV().fit(field, y)  # plain means of the cells: the field's units
    ds = io.result_dataset(means, field, target=y, units=units)
    for g in range(means.n_features_out_):
        var = "sst" if bool((means.label_map_.sel(variable="sst") == g).any()) else "t2m"
        assert ds["group_units"].values[g] == units[var]
    assert set(ds["group_units"].values) == {"K", "m s-1"} and "units" not in ds.features.attrs
    standardised = dcfa.LinCFA(random_state=0, neighbors=1).fit(field, y)
    ds = io.result_dataset(standardised, field, target=y, units=units)
    assert set(ds["group_units"].values) == {"1"} and ds.features.attrs["units"] == "1"
    one = field.sel(variable="sst", drop=True).assign_attrs(units="K")
    ds = io.result_dataset(dcfa.RegionsCV().fit(one, y), one, target=y)
    assert ds.features.attrs["units"] == "K" and set(ds["group_units"].values) == {"K"}
    back = xr.open_zarr(io.write_result(tmp_path / "r.zarr", ds), consolidated=False)
    assert back.features.attrs["units"] == "K"
    # no units anywhere: nothing is made up
    ds = io.result_dataset(standardised, field.assign_attrs(units=None), target=y)
    assert "group_units" not in ds.coords


def test_an_era5_expver_coordinate_follows_the_rechunked_data(tmp_path):
    """ERA5 from the CDS carries ``expver`` (strings) along ``valid_time``; stored in its own
    chunks, it made the passes' re-chunking fail: 'Object has inconsistent chunks along
    dimension valid_time'."""
    n = 120
    t = pd.date_range("1990-01-01", periods=n, freq="MS")
    values = np.random.default_rng(0).normal(size=(n, 4, 6)).astype("float32")
    ds = xr.Dataset(
        {"sst": (("valid_time", "latitude", "longitude"), values, {"units": "K"})},
        coords={
            "valid_time": t,
            "latitude": [30.0, 10.0, -10.0, -30.0],
            "longitude": np.arange(0.0, 360.0, 60.0),
            "expver": ("valid_time", np.array(["0001"] * (n - 3) + ["0005"] * 3)),
            "cell_area": (("latitude", "longitude"), np.ones((4, 6))),
            "mask": (("valid_time", "latitude", "longitude"), np.ones((n, 4, 6))),
        },
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zarr's warning about fixed-length strings in v3
        ds.chunk({"valid_time": 7}).to_zarr(tmp_path / "era5.zarr", consolidated=False)
    field = io.open_archive(tmp_path / "era5.zarr", ["sst"], sample_dim="valid_time")
    assert "mask" not in field.coords  # as large as the data: nothing reads it
    planned = io.plan_chunks(field, sample_dim="valid_time")  # raised before
    assert planned.chunksizes["valid_time"][0] == n
    np.testing.assert_array_equal(planned.expver.values[-4:], ["0001", "0005", "0005", "0005"])
    np.testing.assert_array_equal(planned.values, values)


@pytest.mark.parametrize("names", [("lat", "lon"), ("latitude", "longitude")])
def test_the_summary_places_each_group_whatever_the_coordinates_are_called(tmp_path, names):
    """With latitude/longitude coordinates (ERA5's), the job's summary and dcfa inspect
    gave no place: they read group_lat only. Each group is placed by its cells' extent."""
    from dcfa.batch.output import print_groups

    make_archive(tmp_path / "a.zarr", n=120)
    field = io.open_archive(tmp_path / "a.zarr", ["sst"]).rename({"lat": names[0], "lon": names[1]})
    y = np.random.default_rng(3).normal(size=120)
    model = dcfa.LinCFA(random_state=0, neighbors=1).fit(field, y)
    ds = io.result_dataset(model, field, target=y)
    lines = []
    print_groups(ds, lines.append)
    order = np.argsort(-np.abs(ds["group_target_corr"].values))[:8]
    lat2d, lon2d = xr.broadcast(ds[names[0]], ds[names[1]])
    for line, g in zip(lines[1 : 1 + order.size], order, strict=True):
        # each group's latitudes and longitudes, by hand (a Pacific grid in 0..360, off 180)
        cells = (ds["region"] == g).transpose(*lat2d.dims).values
        lat, lon = lat2d.values[cells], lon2d.values[cells]
        south, north = (f"{abs(round(v))}°{'S' if v < 0 else 'N'}" if round(v) else "0°"
                        for v in (lat.min(), lat.max()))  # fmt: skip
        west, east = (f"{round(v)}°E" if round(v) < 180 else f"{360 - round(v)}°W"
                      for v in (lon.min(), lon.max()))  # fmt: skip
        lats = south if south == north else f"{south}-{north}"
        lons = west if west == east else f"{west}-{east}"
        assert f" cells, {lats}, {lons}, corr" in line or f" cell, {lats}, {lons}, corr" in line, (
            line
        )


def test_the_summary_counts_the_groups_it_does_not_list(tmp_path):
    """The job's summary listed 8 of 18 groups, and dcfa inspect 5, with no word of the
    others: a reader took the list for the whole map."""
    from dcfa.batch.output import print_groups

    make_archive(tmp_path / "a.zarr", n=120)
    field = io.open_archive(tmp_path / "a.zarr", ["sst"])
    y = np.random.default_rng(3).normal(size=120)
    ds = io.result_dataset(dcfa.GenLinCFA(neighbors=1, eps=0.1).fit(field, y), field, target=y)
    n_groups = ds.sizes["group"]
    assert n_groups > 8
    for top in (8, 5, n_groups):
        lines = []
        print_groups(ds, lines.append, top=top, indent="  ")
        listed = [line for line in lines if line.startswith("    group ")]
        assert len(listed) == top
        more = [f"    ... and {n_groups - top} more (all in the result)"] if top < n_groups else []
        assert lines[1 + top :] == more


@pytest.mark.slow
def test_the_preprocessing_held_on_the_workers_outlives_a_lost_worker(tmp_path):
    """A job's climatology and spread are held on the workers for the passes to refer to.
    Scattered, they were lost with the worker that held them, and every later pass with
    them; persisted, the scheduler makes them again."""
    import contextlib
    import os
    import time

    from conftest import local_client
    from distributed import wait
    from distributed.comm.core import CommClosedError

    make_archive(tmp_path / "a.zarr", n=48)
    field = io.open_archive(tmp_path / "a.zarr", ["sst"]).chunk({"lat": 2})
    prep = io.fit_preprocessing(field, anomalies=True, standardize=True)
    want = io.apply_preprocessing(field, prep).values
    with local_client() as client:
        held = prep.held(client, dict(field.chunksizes))
        assert held.climatology.data.chunks[1] == field.chunks[1]  # the field's blocks
        wait([held.climatology.data, held.std.data])
        holders = {w for ws in client.who_has().values() for w in ws}
        lost = sorted(holders)[0]
        with contextlib.suppress(CommClosedError):  # it dies as it is asked
            client.run(os._exit, 1, workers=[lost])  # a worker lost, not retired
        deadline = time.monotonic() + 30
        while lost in client.scheduler_info()["workers"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert lost not in client.scheduler_info()["workers"]
        got = io.apply_preprocessing(field, held).compute(scheduler=client.get)
    np.testing.assert_array_equal(got.values, want)
