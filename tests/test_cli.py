"""The command line, run as a user runs it: a separate process."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from support import cli

pytestmark = pytest.mark.slow


ROOT = Path(__file__).resolve().parents[1]


def run(*args, cwd=None):
    return cli(*args, cwd=cwd)


def _paths_and_times(line: str) -> str:
    """A line of output without what differs from run to run: the store's directory and the
    seconds a step took."""
    line = re.sub(r"\S*/enso\.zarr", ".../enso.zarr", line)
    return re.sub(r"\b\d+\.\d s\b", "T s", line)


def test_demo_on_real_observations(tmp_path):
    """``dcfa demo``: the ENSO store, the forecast job (SST and zonal wind -> the SOI 3 months
    later, regionscv) on a LocalCluster, GBMAP against the linear models, the forward-CV table
    at leads 0 and 3, the El Niño / La Niña separation, a PNG map; the result store holds what
    an in-memory RegionsCV fit gives, and each cell's stability."""
    from dcfa import RegionsCV, load_result
    from dcfa.datasets import enso_task

    proc = run("demo", "--workdir", str(tmp_path), "-q")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "[5/5]" in out and "345 samples in common" in out and "lead 3:" in out
    assert "GBMAP forward-CV R²" in out and "against OLS" in out and "linear model" in out
    assert "lead 0: R²" in out and "lead 3: R²" in out
    for model in ("Nino-3.4 box", "PCA/EOF", "PLS", "RidgeCV", "RegionsCV() -> RidgeCV"):
        assert model in out
    assert "Pacific" in out  # where the regions are
    # each region's correlation with its 95 % interval, as the job's summary gives it
    # and how much it recurs across the CV folds, from the store
    shown = re.findall(
        r"\d+ cells?, corr [+-]0\.\d\d \[[+-]0\.\d\d, [+-]0\.\d\d\], recurs (\d\.\d\d), ", out
    )
    assert shown and "recurs: how much of the region the CV folds' maps make again" in out
    assert not re.search(r"\b1 cells", out)
    assert not re.search(r"(?<!\d)0°[NSEW]|180°[EW]", out)  # the equator 0°, the date line 180°
    assert "El Niño and La Niña months" in out and "GBMAP's embedding" in out
    assert re.search(r"they disagree on \d+ months, \d+ of them right in the embedding; "
                     r"McNemar p = \d\.\d\d\)", out)  # fmt: skip
    assert (tmp_path / "regions.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the output the README and the getting-started page quote (shortened) is this one: each
    # of their lines is a line of it, but for the paths and the times
    printed = {_paths_and_times(line) for line in out.splitlines()}
    for page in ("README.md", "docs/getting-started.md"):
        text = (ROOT / page).read_text()
        start = text.index("```\ndemo: the batch job") + 4
        quoted = text[start : text.index("```", start)].splitlines()
        stale = [line for line in quoted if _paths_and_times(line) not in printed]
        assert len(quoted) > 20 and not stale, (page, stale)

    result = xr.open_zarr(tmp_path / "result.zarr").load()
    assert result.attrs["method"] == "RegionsCV"
    assert result.region.dims == ("variable", "lat", "lon")
    sst = xr.open_zarr(tmp_path / "enso.zarr").sst
    land = sst.isnull().all("time").values
    assert land.sum() == 228 and np.isnan(result.region.sel(variable="sst").values[land]).all()
    assert np.isnan(result.stability.sel(variable="sst").values[land]).all()
    assert int(result.group_size.sum()) == 513 + 286
    assert result.features.shape == (345, result.sizes["group"])
    assert result.embedding.dims == ("time", "boost") and result.embedding.shape == (345, 4)
    skill = json.loads(result.attrs["gbmap_skill"])
    assert set(skill["mean"]) == {"gbmap", "ols", "ridge"} and skill["gap"] == 3

    X, y = enso_task(lead=3, variables=["sst", "u10"])  # in memory, no cluster
    ref = RegionsCV(gap=3).fit(X, y)
    np.testing.assert_array_equal(
        np.nan_to_num(result.region.values, nan=-1),
        ref.label_map_.transpose(*result.region.dims).values,
    )
    np.testing.assert_allclose(result.features.values, ref.transform(X).values, rtol=1e-5)
    corr = [np.corrcoef(f, y)[0, 1] for f in ref.transform(X).values.T]
    np.testing.assert_allclose(result.group_target_corr.values, corr, rtol=1e-5)
    kept = result.region.values >= 0
    np.testing.assert_allclose(
        result.stability.values[kept],
        ref.stability_map_.transpose(*result.region.dims).values[kept],
        rtol=1e-6,
    )
    np.testing.assert_allclose(result.group_stability.values, ref.group_stability_, rtol=1e-6)
    # the forecast dcfa apply writes: the ridge forward_cv fits after RegionsCV, on the
    # stored target and features, as a pipeline fitted in memory gives it
    np.testing.assert_array_equal(result.target.values, np.asarray(y))
    Z = ref.transform(X).values
    want = ref.regressor().fit(Z, y).predict(Z)
    fitted = load_result(tmp_path / "result.zarr")
    assert type(fitted.regression[-1]).__name__ == "RidgeCV"
    got = fitted.forecast_of(result.features.astype("float64"))
    np.testing.assert_allclose(got.values, want, rtol=1e-4, atol=1e-4 * np.std(y))
    assert got.attrs["long_name"].startswith(  # the target's own name, kept by the result
        "Southern Oscillation Index (standardized, NOAA CPC) predicted by ridge (penalty "
    )
    by_size = np.argsort(-np.abs(result.group_target_corr.values))  # the order printed
    assert [float(s) for s in shown] == [
        float(f"{v:.2f}") for v in result.group_stability.values[by_size[: len(shown)]]
    ]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_version_and_usage():
    proc = run("--version")
    assert proc.returncode == 0 and proc.stdout.strip()
    assert run().returncode == 2


def test_the_example_job_ships_with_the_package(tmp_path):
    """`dcfa fit --help` pointed to deploy/example-job.toml, which an installed package lacks:
    `dcfa example-job` prints it, a job file the configuration accepts."""
    import fnmatch
    import tomllib
    from pathlib import Path

    from dcfa.batch.config import load_config

    proc = cli("example-job", cwd=tmp_path)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    (tmp_path / "job.toml").write_text(proc.stdout)
    config = load_config(tmp_path / "job.toml")
    assert config.method["name"] == "regionscv" and config.gbmap["n_boosts"] == 4
    root = Path(__file__).parents[1]
    assert proc.stdout == (root / "deploy" / "example-job.toml").read_text()  # one file
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["dcfa"]
    assert any(fnmatch.fnmatch("data/example-job.toml", p) for p in patterns)  # in the wheel
    assert "dcfa example-job > job.toml" in cli("fit", "--help", cwd=tmp_path).stdout


def test_a_file_beside_the_package_is_not_dcfas():
    """Whose a warning is, for the command's lines and for ``outside_stacklevel``: a user's
    folder next to the package, named with its name as a prefix, is not dcfa's (a prefix
    test of the path string took it for dcfa's, and pointed warnings past the user's line)."""
    import dcfa.cli
    from dcfa._errors import in_dcfa, outside_stacklevel

    package = Path(dcfa.cli.__file__).resolve().parent
    assert in_dcfa(dcfa.cli.__file__) and in_dcfa(str(package / "batch" / "job.py"))
    assert not in_dcfa(str(package) + "_scripts/run.py")
    assert not in_dcfa(str(package.parent / "run.py")) and not in_dcfa("<frozen runpy>")
    # a warning issued from that user's file points at its own line
    users = compile("level = outside_stacklevel()", str(package) + "_scripts/run.py", "exec")
    space = {"outside_stacklevel": outside_stacklevel}
    exec(users, space)
    assert space["level"] == 1


def test_only_dcfas_warnings_are_reworded_as_the_commands_lines(capsys, caplog, monkeypatch):
    """dcfa's warnings (its categories, or raised from its files) become ``warning: ...``
    lines of the "dcfa" logger; other libraries' keep Python's form."""
    import logging

    # without the handler an earlier in-process main() left on the logger (bound to a
    # stream pytest has closed since): caplog records what reaches the logger
    monkeypatch.setattr(logging.getLogger("dcfa"), "handlers", [])

    import dcfa.cli
    from dcfa import NoSkillWarning
    from dcfa.cli import _WarningLines

    show = _WarningLines()
    inside = str(Path(dcfa.cli.__file__).parent / "batch" / "job.py")
    with caplog.at_level(logging.INFO, logger="dcfa"):
        show(FutureWarning("renamed"), FutureWarning, "/site/xarray/core.py", 7)
        show(NoSkillWarning("no skill"), NoSkillWarning, "/home/me/run.py", 3)
        show(UserWarning("few months"), UserWarning, inside, 3)
        show(UserWarning("few months"), UserWarning, inside, 9)  # said once
        # dcfa's warnings point at the first line outside dcfa: in a command, its start
        show(FutureWarning("mode renamed"), FutureWarning, "<frozen runpy>", 88)
    assert capsys.readouterr().err == "/site/xarray/core.py:7: FutureWarning: renamed\n"
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        ("dcfa", "WARNING", "warning: no skill"),
        ("dcfa", "WARNING", "warning: few months"),
        ("dcfa", "WARNING", "warning: mode renamed"),
    ]
