"""Job-file mistakes a reviewer met, each refused in one line naming the key, before any pass
and with nothing written: a batch-system cluster without its jobqueue settings (it was
dask-jobqueue's message, with a literal newline), a directory given as the job file, lags
longer than the record, a classification task on a continuous target; and ``--output`` counts
as ``output.store``."""

from __future__ import annotations

import re

import dask
import pytest
from support import cli, cli_imports, tree, write_job

from dcfa.batch.cluster import make_cluster
from dcfa.batch.config import ConfigError, load_config
from dcfa.batch.job import run_job


@pytest.mark.parametrize("kind", ["slurm", "pbs"])
def test_missing_jobqueue_settings_name_the_key(kind):
    pytest.importorskip("dask_jobqueue")
    unset = {f"jobqueue.{kind}.cores": None, f"jobqueue.{kind}.memory": None}
    with dask.config.set(unset), pytest.raises(ValueError) as err:
        make_cluster({"kind": kind, "n_workers": 1})
    message = str(err.value)
    assert message.startswith(f"cluster.kind: {kind!r} takes the workers' cores")
    assert f"deploy/{kind}/jobqueue.yaml" in message and "\n" not in message


def _files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_directory_as_the_job_file(tmp_path):
    with pytest.raises(ConfigError, match=r"is a directory; expected a job file \(TOML\)"):
        load_config(tmp_path)


@pytest.mark.parametrize(
    "override, message",
    [
        ("input.lags=[0, 300]", r"^input\.lags: "),
        ("gbmap.task=classification", r"^gbmap\.task: 'classification' needs a target of two "),
        # fsspec's bare 'Protocol not known: S3' named neither the key nor the URL
        ("input.store='S3://bucket/sst.zarr'", r"^input\.store: 'S3://bucket/sst\.zarr': the "),
        ("output.store='gcz://b/r.zarr'", r"^output\.store: 'gcz://b/r\.zarr': the protocol "),
        # a target that crosses 0 has no logarithm: the first such month is named
        ("target.transform=log", r"^target\.transform = 'log' needs a target above 0: \d+ "),
    ],
)
def test_keys_named_before_any_pass(tmp_path, override, message):
    job = write_job(tmp_path)
    before = _files(tmp_path)
    with pytest.raises(ValueError, match=message):
        run_job(load_config(job, [override]), echo=lambda *a: None)
    assert _files(tmp_path) == before


def test_a_bernoulli_family_on_a_quantity_names_its_key(tmp_path):
    """The two-class check asked by GenLinCFA's family, not GBMAP's task, names that key and
    what to use for a quantity, before any pass."""
    params = {"family": "bernoulli", "neighbors": 1}
    job = write_job(tmp_path, method__name="genlincfa", method__params=params)
    before = _files(tmp_path)
    with pytest.raises(ValueError) as err:
        run_job(load_config(job), echo=lambda *a: None)
    assert re.fullmatch(
        r"method\.params\.family: 'bernoulli' needs a target of two classes; 'soi' holds "
        r"\d+ distinct values \([-\d.e]+, [-\d.e]+, [-\d.e]+, [-\d.e]+, \.\.\.\); for a "
        r'quantity, use family = "gaussian"',
        str(err.value),
    ), err.value
    assert _files(tmp_path) == before


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ["target.lead=two"],
            r"target\.lead must be an integer or a list, got 'two' \(given by --set ",
        ),
        (["cluster.n_workers=0"], r">= 1 \(given by --set cluster\.n_workers=0\)$"),
        (
            ["target.transform=sqrt"],
            r"target\.transform must be 'none' or 'log', got .sqrt. \(given by --set ",
        ),
        (["input.store=S3://b/x.zarr"], r"^input\.store: .* \(given by --set input\.store=S3:"),
    ],
)
def test_a_value_given_by_set_is_named_as_given_there(tmp_path, overrides, message):
    """A bad value from the command line was reported as the job file's ('config job.toml:
    target.lead ...'), which sent the user to a file that was right."""
    job = write_job(tmp_path)
    with pytest.raises(ConfigError, match=message):
        load_config(job, ["target.variable=soi", *overrides])
    with pytest.raises(ConfigError) as err:
        load_config(job, ["target.variable=soi", "target.lag=1"])
    assert "--set target.variable" not in str(err.value)  # only the keys the message names


@pytest.mark.parametrize(
    "override, message",
    [
        ("target.lead=[..]", r"^--set target\.lead: '\[\.\.\]' is not a TOML value \(Invalid "),
        ("input.drop_time=[1998-07]", r"^--set input\.drop_time: '\[1998-07\]' is not a TOML "),
        ("input.lags={0}", r"^--set input\.lags: '\{0\}' is not a TOML value"),
    ],
)
def test_a_set_value_meant_as_toml_that_is_not_is_named_so(tmp_path, override, message):
    """'--set target.lead=[..]' was taken as the string '[..]' and refused as not a list,
    '(given by --set target.lead=[..])'; a value opening a list, a table or a quote is TOML."""
    job = write_job(tmp_path)
    with pytest.raises(ConfigError, match=message) as err:
        load_config(job, [override])
    assert str(err.value).endswith('write a list as [1, 3], a string in a list quoted: ["1998-07"]')
    # a bare word is still a string, and TOML dates are labels of drop_time
    assert load_config(job, ["output.store=plain"]).output["store"].endswith("plain")
    given = load_config(job, ['input.drop_time=[2003-05-01, "2004-01"]']).input["drop_time"]
    assert given == ["2003-05-01", "2004-01"]


@pytest.mark.slow
def test_output_on_the_command_line_is_output_store(tmp_path):
    """A job file without [output], given --output: the README's job file was refused with
    'missing required key output.store' although --help says --output overrides it."""
    import tomllib

    import tomli_w

    job = write_job(tmp_path)
    raw = tomllib.loads(job.read_text())
    del raw["output"]
    job.write_text(tomli_w.dumps(raw))
    assert "[output]" not in job.read_text()
    proc = cli("fit", str(job), "--output", "mine.zarr", "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "mine.zarr").is_dir()


def test_the_registry_gives_each_estimator_by_its_name():
    from dcfa.cfa import lincfa, regions, tolerance
    from dcfa.cfa.methods import METHODS

    assert METHODS["regionscv"] is regions.RegionsCV and METHODS["lincfa"] is lincfa.LinCFA
    assert METHODS["genlincfacv"] is tolerance.GenLinCFACV and len(METHODS) == 6


HEAVY = {"sklearn", "xarray", "dask.array", "dcfa.batch.job"}


@pytest.mark.parametrize(
    "command, changes, message, unneeded",
    [
        (["fit", "job.toml"], {"input__bogus": 1}, "input.bogus", HEAVY),
        (
            ["fit", "job.toml", "--set", "output.store=sst.zarr", "--set", "output.overwrite=true"],
            {},
            "output.store: '{tmp}/sst.zarr' is input.store",
            HEAVY,
        ),
        (
            ["apply", "result.zarr", "sst.zarr", "--output", "sst.zarr/x"],
            {},
            "--output: 'sst.zarr/x' lies inside ARCHIVE 'sst.zarr'",
            HEAVY | {"dcfa.batch.apply"},
        ),
        (
            ["apply", "result.zarr", "sst.zarr", "--output", "out.zarr"],
            {},
            "RESULT: no Zarr store at 'result.zarr'",
            HEAVY | {"dcfa.batch.apply"},
        ),
        (
            ["apply", "sst.zarr", "nothere.zarr", "--output", "out.zarr"],
            {},
            "ARCHIVE: no Zarr store at 'nothere.zarr'",
            HEAVY | {"dcfa.batch.apply"},
        ),
        (["inspect", "nothere.zarr"], {}, "no Zarr store at", {"sklearn"}),
        # an output named as a file of another format would be a Zarr directory so named
        (
            ["apply", "result.zarr", "sst.zarr", "--output", "forecast.csv"],
            {},
            "--output: 'forecast.csv' names a CSV file, but the output is a Zarr store (a "
            "directory); name it e.g. 'forecast.zarr'. Its forecast as CSV: "
            "xarray.open_zarr('forecast.zarr').forecast.to_pandas().to_csv(...)",
            HEAVY | {"dcfa.batch.apply"},
        ),
        (
            ["fit", "job.toml", "--output", "out/result.nc"],
            {},
            "output.store: 'out/result.nc' names a netCDF file, but the output is a Zarr store "
            "(a directory); name it e.g. 'out/result.zarr'. Its region series as CSV: "
            "xarray.open_zarr('out/result.zarr').features.to_pandas().to_csv(...)",
            HEAVY,
        ),
    ],
)
def test_a_refusal_imports_nothing_it_does_not_need(tmp_path, command, changes, message, unneeded):
    """``dcfa fit`` checks the job file and its output paths before it imports the job, and
    the registry names its estimators without importing them (``name in METHODS`` imported
    the estimator's module, and with it scikit-learn); ``dcfa apply`` checks its paths before
    it imports apply, and that the result and the archive are there; ``dcfa inspect`` reads a
    store without the estimators. So these
    refusals take about 0.4 s, not 1.8 s (fit) or 2.2 s (apply)."""
    write_job(tmp_path, **changes)
    before = tree(tmp_path)
    proc = cli_imports(*command, cwd=tmp_path, modules=unneeded)
    assert proc.stdout.strip() == "2 []", (proc.stdout, proc.stderr)
    assert message.format(tmp=tmp_path) in proc.stderr
    assert tree(tmp_path) == before


def test_every_mistake_of_a_job_file_is_named_at_once(tmp_path):
    """A job file with three mistakes was refused three times, one key per run: each rerun of
    ``dcfa fit`` costs its imports and the user's attention. They are now named together, one
    line each, those given by ``--set`` marked so; a single mistake keeps its one line."""
    job = write_job(tmp_path, input__lags=[0, -1], cluster__memory_limit="lots")
    before = tree(tmp_path)
    proc = cli("fit", str(job), "--set", "method.name=lincfaa", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert f"dcfa: error: config {job}: 3 problems:\n" in proc.stderr
    lines = proc.stderr[proc.stderr.index("3 problems:") :].splitlines()[1:4]
    assert [line.split(" must ")[0] for line in lines] == [
        "dcfa:   - input.lags",
        "dcfa:   - method.name",
        "dcfa:   - cluster.memory_limit",
    ]
    assert lines[1].endswith("(given by --set method.name=lincfaa)")
    assert "given by" not in lines[0] + lines[2]
    assert tree(tmp_path) == before
    # mistakes of the file's structure first: the values are checked once the types are right
    (tmp_path / "typo").mkdir()
    typo = write_job(tmp_path / "typo", input__window=[1])
    with pytest.raises(ConfigError) as err:
        load_config(typo, ["input.lags=3", "cluster.n_workers=two"])
    assert str(err.value).splitlines()[1:] == [
        "  - unknown key(s) ['input.window']; [input] takes " + str(sorted(_input_keys())),
        "  - input.lags must be a list, got 3 (given by --set input.lags=3)",
        "  - cluster.n_workers must be an integer, got 'two' "
        "(given by --set cluster.n_workers=two)",
    ]
    with pytest.raises(ConfigError, match=r"^config \S+: input\.lags must be a list of ints >= 0"):
        load_config(job, ["cluster.memory_limit=1GiB", "method.name=lincfa"])


def _input_keys():
    from dcfa.batch.config import _SCHEMA

    return _SCHEMA["input"]


def test_set_with_no_value_unsets_the_key(tmp_path):
    """``--set input.time=`` was the empty string, refused as 'input.time must be a list',
    so a key the job file sets could not be returned to its default from the command line."""
    job = write_job(tmp_path, input__time=["2000-01", "2005-12"], target__lead=2)
    assert load_config(job).input["time"] == ["2000-01", "2005-12"]
    config = load_config(job, ["input.time=", "target.lead= ", "method.params.neighbors="])
    default = load_config(write_job(tmp_path / "plain"))
    assert config.input["time"] == default.input["time"] is None
    assert config.target["lead"] == default.target["lead"]
    assert "neighbors" not in config.method["params"]
    assert config.method["params"]["random_state"] == 0  # only the key named
    # a key the file does not set, or a section it lacks, is left unset
    assert load_config(job, ["input.select=", "gbmap.beta="]).input["select"] == {}
    # a required key unset is refused as missing, naming the --set that unset it
    with pytest.raises(ConfigError, match=r"input\.store.*\(given by --set input\.store=\)"):
        load_config(job, ["input.store="])


def test_set_with_no_value_on_the_command_line(tmp_path):
    job = write_job(tmp_path)
    before = tree(tmp_path)
    proc = cli("fit", str(job), "--set", "input.store=", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "input.store" in proc.stderr.strip().splitlines()[-1]
    assert "(given by --set input.store=)" in proc.stderr
    assert tree(tmp_path) == before
