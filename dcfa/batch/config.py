"""The batch job's configuration: a TOML file, checked key by key.

A job reads a Zarr archive, aligns a target, fits one of the CFA methods (and optionally
GBMAP) and writes a result store. Example (every key but ``input.store``,
``input.variables``, ``target.path`` and ``output.store`` has a default)::

    [input]
    store = "sst.zarr"            # Zarr (2 or 3); netCDF "sst/*.nc"; kerchunk "sst.json"; icechunk
    variables = ["sst"]           # on the same grid; other dims than sample_dim are features
    sample_dim = "time"
    time = ["1991-01", "2021-12"] # optional: a slice of the sample dim
    drop_time = ["1998-07"]       # optional: samples left out (a month absent from the archive)
    select = {lat = [-30, 30], lon = [120, 290]}  # optional: a box of the grid, by labels
    anomalies = true              # remove the mean seasonal cycle per calendar month
    standardize = false           # divide every cell by its standard deviation
    windows = [1, 3, 6, 12]       # time scales: running means over trailing windows (samples),
                                  # each its own feature block (default [1]: the field as is)
    aggregate = "mean"            # "mean" | "sum", or per variable: {precip = "sum"}
    lags = [0, 1, 2]              # predictors at t, t-1, t-2: each lag its own block
                                  # (default [0]); groups never mix variables, windows, lags

    [target]
    path = "soi.nc"               # .zarr, .nc or .csv
    variable = "SOI"              # the variable (Zarr/netCDF) or column (CSV)
    time_column = "time"          # CSV only
    match = "month"               # align on calendar month ("exact": identical stamps)
    calendar = "noleap"           # CSV only: the calendar of its dates (default: standard);
                                  # netCDF/Zarr targets carry their own
    date_format = "%d/%m/%Y"      # CSV only: day-first dates (01/02/2000 is 1 February);
                                  # unset, dates both orders fit are refused
    missing = -99.99              # values that mean a missing month (a number or a list)
    units = "m3 s-1"              # CSV only: the target's units, which the forecast carries
    lead = 3                      # predict the target 3 samples ahead of the predictors
    months = [12, 1, 2]           # optional: fit the target's December-February values only
    transform = "log"             # fit on the log of a skewed target above 0 (a flow);
                                  # dcfa apply's forecast is back in its units (the median)

    [method]
    name = "regionscv"            # regionscv (default) | lincfa | nonlincfa | genlincfa |
                                  # genlincfacv | nonlincfacv
    [method.params]               # the estimator's parameters
    gap = 3                       # months purged around each test block: the lead
                                  # (a method that shuffles takes random_state: default 0,
                                  # printed and recorded in the result's parameters, so a
                                  # job gives the same result run again or resumed)

    [gbmap]                       # optional: GBMAP on the reduced features
    n_boosts = 4                  # (random_state: default 0 too)

    [output]
    store = "result.zarr"         # or "s3://bucket/result.zarr" (any fsspec URL)
    overwrite = false             # replaces only an earlier dcfa result
    work_dir = ""                 # resume state; default <store>.work, or for a URL
                                  # ./<name>-<hash>.work in the working directory; never
                                  # the store, inside it or around it (checked first)

    [input.storage_options]       # for URLs (also [target.storage_options] and
    endpoint_url = "https://..."  # [output.storage_options]): passed to fsspec (s3fs)

    [cluster]
    scheduler = ""                # address of a running scheduler (or $DASK_SCHEDULER_ADDRESS)
    connect_timeout = "30s"       # how long to wait for that scheduler to be up ("10m" for
                                  # one that starts in a separate batch job)
    no_workers_timeout = "10m"    # stop (exit 1, passes kept) once every worker has left
    kind = "local"                # without an address: local | slurm | pbs (dask-jobqueue,
                                  # configured by its jobqueue.yaml; see deploy/)
    n_workers = 2
    threads_per_worker = 1
    memory_limit = "2GiB"         # per worker, for the LocalCluster
    dashboard_address = "127.0.0.1:0"  # the LocalCluster's dashboard: loopback, any free port
                                  # (":8787" listens on every interface; "" turns it off)

Every key can be overridden on the command line: ``--set method.params.neighbors=2``.

Relative paths (``input.store``, ``target.path``, ``output.store``) in a job file are relative
to the file's directory, so a job runs the same from anywhere; relative paths given with
``--set`` or ``--output`` are relative to the working directory. URLs (``s3://...``) are kept
as they are.
"""

from __future__ import annotations

import datetime
import os
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dcfa._errors import InputError
from dcfa.cfa.methods import METHODS

__all__ = ["ConfigError", "JobConfig", "load_config", "METHODS", "CLUSTER_KINDS"]

CLUSTER_KINDS = ("local", "slurm", "pbs")
#: what ``target.transform`` may be: the target as it is, or its natural logarithm
TRANSFORMS = ("none", "log")


class ConfigError(InputError):
    """A bad configuration: the message names the key (and the file).

    With ``problems`` (several mistakes found at once), the message is ``header`` and then
    one line per problem; ``dcfa``'s command line prints them so.
    """

    def __init__(self, header: str, problems: Sequence[str] = ()) -> None:
        self.header, self.problems = header, tuple(problems)
        super().__init__(header + "".join(f"\n  - {p}" for p in self.problems))


_SCHEMA: dict[str, dict[str, tuple[type | tuple, Any]]] = {
    # section: key: (types, default); a default of ... means required
    "input": {
        "store": (str, ...),
        "variables": (list, ...),
        "sample_dim": (str, "time"),
        "time": (list, None),
        "drop_time": (list, []),
        "select": (dict, {}),
        "anomalies": (bool, False),
        "standardize": (bool, False),
        "windows": (list, [1]),
        "aggregate": ((str, dict), "mean"),
        "lags": (list, [0]),
        "storage_options": (dict, {}),
    },
    "target": {
        "path": (str, ...),
        "variable": ((str, list), None),
        "time_column": (str, "time"),
        "match": (str, "exact"),
        "calendar": (str, None),
        "date_format": (str, None),
        "missing": ((int, float, list), None),
        "units": (str, None),
        "select": (dict, {}),
        "lead": ((int, list), 0),
        "months": (list, None),
        "transform": (str, "none"),
        "storage_options": (dict, {}),
    },
    "method": {
        "name": (str, "regionscv"),
        "params": (dict, {}),
    },
    "gbmap": {},  # free-form: the GBMAP estimator's parameters
    "output": {
        "store": (str, ...),
        "overwrite": (bool, False),
        "storage_options": (dict, {}),
        "work_dir": (str, None),
    },
    "cluster": {
        "scheduler": (str, ""),
        "connect_timeout": (str, "30s"),
        "no_workers_timeout": (str, "10m"),
        "kind": (str, "local"),
        "n_workers": (int, 2),
        "threads_per_worker": (int, 1),
        "memory_limit": (str, "2GiB"),
        "dashboard_address": (str, "127.0.0.1:0"),
    },
}

# The reference of the job file on the documentation site (docs/_ext/config_reference.py) is
# rendered from _SCHEMA and the three mappings below: what each section and key is for (text
# between backquotes is set as code), and the values a key takes where the check allows only
# some. tests/test_docs.py fails when a key of _SCHEMA has no description here.

#: What each section of a job file is for.
SECTION_DESCRIPTIONS: dict[str, str] = {
    "input": "The field: a Zarr archive, its variables, the months taken and how they are "
    "preprocessed into features.",
    "target": "The series the features must predict, aligned on the field's dates.",
    "method": "The CFA estimator fitted (`[method.params]`: its parameters).",
    "gbmap": "Optional: GBMAP on the reduced features. The section is free-form: its keys are "
    "the parameters of `dcfa.GBMAPRegressor` (e.g. `n_boosts = 4`); a `random_state` it does "
    "not set is 0, printed and recorded in the result's `gbmap` attribute.",
    "output": "Where the result is written, and the resume state of the run.",
    "cluster": "The Dask cluster the job runs on: a running scheduler, or one the job starts.",
}

#: What each key of a job file is for, by ``(section, key)``.
DESCRIPTIONS: dict[tuple[str, str], str] = {
    ("input", "store"): "The archive of the field: a Zarr store (format 2 or 3), a netCDF "
    "file, a glob of netCDF files (`sst/sst_*.nc`, combined along their coordinates), a "
    "kerchunk reference file (`.json`) or a local icechunk repository (its `main` branch); a "
    "path, relative to the job file, or a Zarr store's URL (`s3://...`, any fsspec URL).",
    ("input", "variables"): "The variables fitted, on the same grid; every dim other than "
    "`sample_dim` is a feature.",
    ("input", "sample_dim"): "The dim of the samples (the months).",
    ("input", "time"): '`[start, stop]`: a slice of the sample dim, e.g. `["1991-01", '
    '"2021-12"]`. Unset: every sample.',
    ("input", "drop_time"): 'Samples left out of the fit, by label: `["1998-07"]` for a month '
    "absent from the archive (no value in any cell, which leaves every cell with a gap). A "
    "partial date leaves out every sample it names; windows and lags reaching a sample left "
    "out drop their own samples, by date. `dcfa apply` reads every month it is given.",
    ("input", "select"): "A box of the grid, by labels: `{lat = [-30, 30], lon = [120, 290]}` "
    "keeps the cells between the two values of each dim named (ends included; a longitude's "
    "eastward from the first, in any convention: `[120, -70]` is the same box); labels that "
    "are names are kept as listed (`{member = 'r1i1p1f1'}`, or a list). Unset: every "
    "cell. `dcfa apply` takes the result's cells from a larger archive by their labels.",
    ("input", "anomalies"): "Remove the mean seasonal cycle, per calendar month.",
    ("input", "standardize"): "Divide every cell by its standard deviation.",
    ("input", "windows"): "Time scales: running means over trailing windows of this many "
    "samples, each its own feature block (e.g. `[1, 3, 6, 12]`); `[1]` is the field as it is.",
    ("input", "aggregate"): "How a window aggregates its samples, for every variable or per "
    'variable: `{precip = "sum"}`.',
    ("input", "lags"): "Predictors at t, t-1, t-2 for `[0, 1, 2]`: each lag its own feature "
    "block. Groups never mix variables, windows or lags.",
    ("input", "storage_options"): "For a URL: passed to fsspec (s3fs), e.g. `endpoint_url`.",
    ("target", "path"): "The target: a `.zarr`, `.nc` or `.csv` file, relative to the job "
    "file, or a URL.",
    ("target", "variable"): "The variable (Zarr, netCDF) or column (CSV) read; needed when the "
    "file holds several. A list of names fits one map per target in one job: the archive is "
    "read once for all of them, and `output.store` holds `{target}`, replaced by each name.",
    ("target", "time_column"): "CSV only: the column of the dates.",
    ("target", "match"): "How the target's dates are aligned with the field's: `exact` "
    "(identical stamps) or `month` (by calendar month). The number of common samples is "
    "printed. `exact` refuses a target with samples inside the input's months but off its "
    "stamps (daily or irregular dates against monthly data).",
    ("target", "calendar"): "CSV only: the CF calendar of its dates (`noleap`, `360_day`, ...). "
    "Unset: the standard calendar. netCDF and Zarr targets carry their own.",
    ("target", "date_format"): "CSV only: the dates' format as `strftime` writes it, e.g. "
    "`%d/%m/%Y` for day-first dates (`01/02/2000` is 1 February). Unset: ISO 8601 and other "
    "unambiguous writings are read as they are; dates written as two numbers and a year are "
    "read in the order every row allows, and refused when both orders fit.",
    ("target", "units"): "CSV only: the target's units (`m3 s-1`), which the result and "
    "`dcfa apply`'s forecast carry. netCDF and Zarr targets carry their own; a `units` that "
    "contradicts them is an error.",
    ("target", "missing"): "Values of the target that mark a missing sample (`-99.99`, or a "
    "list of them), read as missing as an empty CSV cell is. Unset, a value far outside the "
    "target's other values that it repeats or that is written in nines (a missing-value code) "
    "is named in a warning.",
    ("target", "select"): "netCDF and Zarr only: one label of each of the target variable's "
    'dims other than time, such as a member of an ensemble: `{member = "r1i1p1f1"}`.',
    ("target", "months"): "The calendar months (1-12) of the target to fit, such as `[12, 1, "
    "2]` for a winter index: the target's own months, the ones predicted `lead` steps after "
    "the predictors. The others are left out as missing values are (the fit, its skill and "
    "GBMAP see only these), and `dcfa apply` keeps the samples whose target falls in these "
    "months. Unset: every month.",
    ("target", "transform"): "`log`: fit on the natural logarithm of the target, for a "
    "skewed quantity above 0 (a river's flow, a season's rainfall); a value of 0 or below "
    "is an error. The result's target, skill and GBMAP are those of the logarithm; "
    "`dcfa apply` brings its `forecast` and GBMAP `prediction` back to the target's units "
    "with the exponential, which is the target's median, not its mean. `none` (the default): "
    "the target as it is.",
    ("target", "lead"): "Predict the target this many samples ahead of the predictors, in "
    "steps of the target's own dates. A list (`[0, 3, 6]`) fits a map for each lead from one "
    "read of the archive, each in its own result: `output.store` then holds `{lead}`.",
    ("target", "storage_options"): "For a URL: passed to fsspec (s3fs).",
    ("method", "name"): "The estimator, by the name of `dcfa.cfa.methods.METHODS`.",
    ("method", "params"): "The estimator's parameters (`[method.params]`), e.g. `gap = 3` "
    "(months purged around each test block; unset, `target.lead + max(input.lags) + "
    "max(input.windows) - 1`, printed). A method that shuffles gets "
    "`random_state = 0` unless set, printed and recorded in the result's parameters, so a job "
    "gives the same result run again or resumed.",
    ("output", "store"): "The result store: a path, relative to the job file, or a URL "
    "(`s3://bucket/result.zarr`). The command line's `--output` sets it. With several "
    "targets, it holds `{target}` (`regions-{target}.zarr`): one result per target.",
    ("output", "overwrite"): "Replace what is at `store`: only an earlier dcfa result, never a "
    "directory or file that dcfa did not write.",
    ("output", "storage_options"): "For a URL: passed to fsspec (s3fs).",
    ("output", "work_dir"): "The resume state. Unset: `<store>.work`, or for a URL "
    "`./<name>-<hash>.work` in the working directory. Never the store, inside it or around it "
    "(checked first).",
    ("cluster", "scheduler"): "The address of a running scheduler (or "
    "`$DASK_SCHEDULER_ADDRESS`). Empty: the job starts a cluster of `kind`.",
    ("cluster", "connect_timeout"): 'How long to wait for that scheduler to be up (`"10m"` for '
    "one that starts in a batch job of its own).",
    ("cluster", "no_workers_timeout"): "How long a job waits once every worker has left the "
    "cluster (killed, preempted, out of memory) before it stops with exit 1, keeping its "
    "finished passes for `--resume`. A cluster that never had a worker yet (a batch queue "
    "still starting them) is waited for.",
    ("cluster", "kind"): "Without a scheduler address: `local` starts a `LocalCluster`, `slurm` "
    "and `pbs` worker jobs through dask-jobqueue, configured by its `jobqueue.yaml` (see the "
    "deploy folder).",
    ("cluster", "n_workers"): "Workers of the `LocalCluster`, or worker jobs of `slurm` and `pbs`.",
    ("cluster", "threads_per_worker"): "Threads of each worker of the `LocalCluster`.",
    ("cluster", "memory_limit"): 'Memory of each worker of the `LocalCluster`: a size (`"2GiB"`, '
    '`"500MB"`) or `"auto"`.',
    ("cluster", "dashboard_address"): "The `LocalCluster`'s dashboard: loopback, any free port "
    'by default; `":8787"` listens on every interface, `""` turns it off.',
}

#: The values a key takes, where the check allows only some (the others take any value of
#: their type that the check accepts).
CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("input", "aggregate"): ("mean", "sum"),
    ("target", "match"): ("exact", "month"),
    ("method", "name"): tuple(METHODS),
    ("cluster", "kind"): CLUSTER_KINDS,
}


@dataclass(frozen=True)
class JobConfig:
    """A checked job configuration (sections as dicts, every default filled in)."""

    input: dict
    target: dict
    method: dict
    output: dict
    cluster: dict
    gbmap: dict | None = None
    source: str = "<config>"
    raw: dict = field(default_factory=dict, repr=False)


def load_config(
    path: str | Path | None = None,
    overrides: list[str] | None = None,
    *,
    base: dict | None = None,
    output: str | None = None,
) -> JobConfig:
    """Read a TOML file (or ``base``), apply ``key=value`` overrides and ``output`` (the
    command line's ``--output``: ``output.store``, so a job file may leave it out), check every
    key."""
    source = str(path) if path is not None else "<config>"
    if path is not None:
        p = Path(path)
        if p.is_dir():
            raise ConfigError(f"config: {source!r} is a directory; expected a job file (TOML)")
        if not p.is_file():
            raise ConfigError(f"config: no such file {source!r}")
        try:
            raw = tomllib.loads(p.read_text())
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"config: {source!r} is not valid TOML: {exc}") from None
        _resolve_paths(raw, p.resolve().parent)
    else:
        raw = dict(base or {})
    for item in overrides or []:
        _apply_override(raw, item)
    if output is not None:
        section = raw.setdefault("output", {})
        if not isinstance(section, dict):
            raise ConfigError("config: [output] must be a section")
        section["store"] = output
    _resolve_paths(raw, Path.cwd())  # what --set or --output gave (the file's are absolute)
    try:
        config = _check(raw, source)
        _check_protocols(raw)
    except ConfigError as exc:
        if exc.problems:
            named = [_naming_overrides(p, overrides or []) for p in exc.problems]
            raise ConfigError(exc.header, named) from None
        raise ConfigError(_naming_overrides(str(exc), overrides or [])) from None
    return config


def _naming_overrides(message: str, overrides: list[str]) -> str:
    """``message`` with the ``--set`` items whose keys it names: a value given on the command
    line is not the job file's to fix."""
    given = [
        item
        for item in overrides
        if re.search(rf"\b{re.escape(item.split('=', 1)[0].strip())}\b", message)
    ]
    return message + "".join(f" (given by --set {item})" for item in given)


PATH_KEYS = (("input", "store"), ("target", "path"), ("output", "store"), ("output", "work_dir"))


def _resolve_paths(raw: dict, base: Path) -> None:
    """Make the relative local paths of ``raw`` absolute, relative to ``base``."""
    for section, key in PATH_KEYS:
        value = raw.get(section, {}).get(key) if isinstance(raw.get(section), dict) else None
        if isinstance(value, str) and value and "://" not in value:
            raw[section][key] = os.path.normpath(base / Path(value).expanduser())


def _check_protocols(raw: dict) -> None:
    """A URL whose protocol fsspec does not know (``S3://``, a typo) is named with its key,
    before fsspec's bare 'Protocol not known' could surface from the first pass."""
    from dcfa.storage.objectstore import check_protocol

    for section, key in PATH_KEYS:
        value = raw.get(section, {}).get(key) if isinstance(raw.get(section), dict) else None
        if isinstance(value, str):
            try:
                check_protocol(value, f"{section}.{key}")
            except InputError as exc:
                raise ConfigError(str(exc)) from None


def _apply_override(raw: dict, item: str) -> None:
    if "=" not in item:
        raise ConfigError(f"--set: expected section.key=value, got {item!r}")
    key, value = item.split("=", 1)
    parts = key.strip().split(".")
    if len(parts) < 2 or not all(parts):
        raise ConfigError(f"--set: expected section.key=value, got {item!r}")
    section = parts[0]
    if section not in _SCHEMA:
        raise ConfigError(f"--set {key}: unknown section {section!r}; expected {sorted(_SCHEMA)}")
    if section != "gbmap" and parts[1] not in _SCHEMA[section]:  # [gbmap]: GBMAP's parameters
        raise ConfigError(
            f"--set {key}: unknown key {section}.{parts[1]}; [{section}] takes "
            f"{sorted(_SCHEMA[section])}"
        )
    if not value.strip():  # `--set key=`: unset, so the key takes its default
        _unset(raw, parts)
        return
    try:
        parsed = tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError as exc:
        if value.strip().startswith(("[", "{", '"', "'")):  # meant as TOML, not a bare word
            raise ConfigError(
                f"--set {key}: {value!r} is not a TOML value ({exc}); write a list as [1, 3], "
                'a string in a list quoted: ["1998-07"]'
            ) from None
        parsed = value  # a bare word: a string
    node = raw
    for p in parts[:-1]:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set: {key!r}: {p!r} is not a section")
    node[parts[-1]] = parsed


def _unset(raw: dict, parts: list[str]) -> None:
    """Remove the key at ``parts`` from ``raw``, if the job file sets it."""
    node = raw
    for p in parts[:-1]:
        node = node.get(p)
        if not isinstance(node, dict):
            return
    node.pop(parts[-1], None)


def _check(raw: dict, source: str) -> JobConfig:
    """The job's sections with their defaults, every key checked; every problem found is
    said at once, in one :class:`ConfigError` (a job fixed one typo at a time is rerun once
    per typo)."""
    where = f"config {source}:"
    problems: list[str] = []
    unknown = set(raw) - set(_SCHEMA)
    if unknown:
        problems.append(f"unknown section(s) {sorted(unknown)}; expected {sorted(_SCHEMA)}")
    out: dict[str, dict] = {}
    for section, keys in _SCHEMA.items():
        given = raw.get(section)
        if given is None:
            if section == "gbmap":
                continue
            given = {}
        if not isinstance(given, dict):
            problems.append(f"[{section}] must be a table")
            continue
        if section == "gbmap":
            out[section] = dict(given)
            continue
        out[section] = _typed_section(section, keys, given, problems)
    if not problems:  # the values' checks read keys of the right types
        for check in _VALUE_CHECKS:
            try:
                check(out, where)
            except ConfigError as exc:
                problems.append(str(exc).removeprefix(where).strip())
    if len(problems) == 1:
        raise ConfigError(f"{where} {problems[0]}")
    if problems:
        raise ConfigError(f"{where} {len(problems)} problems:", problems)
    return JobConfig(
        input=out["input"],
        target=out["target"],
        method=out["method"],
        output=out["output"],
        cluster=out["cluster"],
        gbmap=out.get("gbmap"),
        source=source,
        raw=raw,
    )


def _typed_section(section: str, keys: dict, given: dict, problems: list[str]) -> dict:
    """The keys of ``section`` as ``given``, the missing ones at their defaults; an unknown
    key, a missing required one or a value of the wrong type is added to ``problems``."""
    extra = set(given) - set(keys)
    if extra:
        problems.append(
            f"unknown key(s) {sorted(f'{section}.{k}' for k in extra)}; "
            f"[{section}] takes {sorted(keys)}"
        )
    checked = {}
    for key, (types, default) in keys.items():
        if key not in given:
            if default is ...:
                problems.append(f"missing required key {section}.{key}")
            checked[key] = default
            continue
        value = given[key]
        if not isinstance(value, types) or (types is int and isinstance(value, bool)):
            problems.append(f"{section}.{key} must be {_type_name(types)}, got {_toml(value)}")
        checked[key] = value
    return checked


def _check_input(c: dict, where: str) -> None:
    variables = c["input"]["variables"]
    if not variables or not all(isinstance(v, str) and v for v in variables):
        raise ConfigError(f"{where} input.variables must be a non-empty list of names")
    twice = sorted({v for v in variables if variables.count(v) > 1})
    if twice:  # a second block of the same cells: every region would be said twice
        raise ConfigError(f"{where} input.variables names {twice} more than once")
    if c["input"]["time"] is not None and len(c["input"]["time"]) != 2:
        raise ConfigError(
            f"{where} input.time must be [start, stop], got {_toml(c['input']['time'])}"
        )


def _check_drop_time(c: dict, where: str) -> None:
    dropped = c["input"]["drop_time"] = [  # TOML dates (unquoted 1998-07-01) as labels
        v.isoformat() if isinstance(v, datetime.date) else v for v in c["input"]["drop_time"]
    ]
    if not all(isinstance(v, str) and v or _is_int(v) for v in dropped):
        raise ConfigError(
            f"{where} input.drop_time must be a list of labels of the sample dim (dates such as "
            f"'1998-07'), got {_toml(dropped)}"
        )


def select_names(bounds) -> list[str] | None:
    """The labels an ``input.select`` entry names, when they are names (CMIP's member ids):
    one, or a non-empty list of them; None for a box of numbers or a bad entry."""
    names = [bounds] if isinstance(bounds, str) else bounds
    if isinstance(names, list) and names and all(isinstance(v, str) and v for v in names):
        return names
    return None


def _is_number(value) -> bool:
    """A TOML number (a bool is not one, though Python takes it for an int)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_select(c: dict, where: str) -> None:
    for name, bounds in c["input"]["select"].items():
        box = isinstance(bounds, list) and len(bounds) == 2 and all(_is_number(v) for v in bounds)
        if not (box or select_names(bounds) is not None):
            raise ConfigError(
                f"{where} input.select.{name} must be [start, stop], two numbers (labels of "
                f"{name!r}), or labels that are names ('r1i1p1f1' or a list of them), got "
                f"{_toml(bounds)}"
            )


def _check_target(c: dict, where: str) -> None:
    missing = c["target"]["missing"]
    codes = [] if missing is None else missing if isinstance(missing, list) else [missing]
    if not all(_is_number(v) for v in codes):
        raise ConfigError(
            f"{where} target.missing must be a number or a list of numbers (the values that "
            f"mark a missing sample), got {_toml(missing)}"
        )
    c["target"]["missing"] = [float(v) for v in codes]
    for name, label in c["target"]["select"].items():
        if not (isinstance(label, str) and label or _is_number(label)):
            raise ConfigError(
                f"{where} target.select.{name} must be one label of {name!r}, a name or a "
                f"number ('r1i1p1f1', 2), got {_toml(label)}"
            )
    if c["target"]["match"] not in ("exact", "month"):
        raise ConfigError(f"{where} target.match must be 'exact' or 'month'")
    months = c["target"]["months"]
    if months is not None and not (
        months
        and all(_is_int(m) and 1 <= m <= 12 for m in months)
        and len(set(months)) == len(months)
    ):
        raise ConfigError(
            f"{where} target.months must be a non-empty list of calendar months 1-12, each "
            f"once (December-February: [12, 1, 2]), got {_toml(months)}"
        )
    if c["target"]["transform"] not in TRANSFORMS:
        raise ConfigError(
            f"{where} target.transform must be 'none' or 'log', got "
            f"{_toml(c['target']['transform'])}"
        )


def _check_method(c: dict, where: str) -> None:
    if c["method"]["name"] not in METHODS:
        raise ConfigError(
            f"{where} method.name must be one of {tuple(METHODS)}, got {c['method']['name']!r}"
        )


def _check_cluster(c: dict, where: str) -> None:
    if c["cluster"]["kind"] not in CLUSTER_KINDS:
        raise ConfigError(
            f"{where} cluster.kind must be one of {CLUSTER_KINDS}, got {c['cluster']['kind']!r}"
        )
    if c["cluster"]["n_workers"] < 1 or c["cluster"]["threads_per_worker"] < 1:
        raise ConfigError(f"{where} cluster.n_workers and threads_per_worker must be >= 1")


def _check_cluster_limits(c: dict, where: str) -> None:
    from dask.utils import parse_bytes

    check_duration(c["cluster"]["connect_timeout"], f"{where} cluster.connect_timeout")
    check_duration(c["cluster"]["no_workers_timeout"], f"{where} cluster.no_workers_timeout")
    limit = c["cluster"]["memory_limit"]
    try:
        if limit.strip().lower() != "auto" and parse_bytes(limit) <= 0:
            raise ValueError
    except ValueError:
        raise ConfigError(
            f"{where} cluster.memory_limit must be a size per worker such as '2GiB' or "
            f"'500MB' (or 'auto'), got {limit!r}"
        ) from None


def target_names(config: JobConfig) -> list[str | None]:
    """The job's targets: ``target.variable`` as a list (``[None]``: a file's only one)."""
    names = config.target["variable"]
    return list(names) if isinstance(names, list) else [names]


def target_leads(config: JobConfig) -> list[int]:
    """The job's leads: ``target.lead`` as a list."""
    leads = config.target["lead"]
    return list(leads) if isinstance(leads, list) else [leads]


def for_target(config: JobConfig, name: str | None, lead: int) -> JobConfig:
    """The job of one of ``config``'s targets at one of its leads: ``target.variable = name``
    and ``target.lead = lead``, with ``{target}`` and ``{lead}`` in ``output.store`` and
    ``output.work_dir`` replaced by them."""
    c = {"target": config.target, "output": config.output}
    _check_targets(c, "config:")
    _check_leads(c, "config:")
    output = dict(config.output)
    for key in ("store", "work_dir"):
        if output[key]:
            output[key] = output[key].replace(TARGET_FIELD, str(name))
            output[key] = output[key].replace(LEAD_FIELD, str(lead))
    target = {**config.target, "variable": name, "lead": lead}
    raw = dict(config.raw)
    if isinstance(raw.get("target"), dict) and isinstance(raw["target"].get("lead"), list):
        # the job file as this result's: load_result and dcfa inspect read its lead there
        raw["target"] = {**raw["target"], "lead": lead}
    return replace(config, target=target, output=output, raw=raw)


#: what output.store holds when a job has several targets
TARGET_FIELD = "{target}"
#: what output.store holds when a job has several leads
LEAD_FIELD = "{lead}"


def _check_leads(c: dict, where: str) -> None:
    leads = c["target"]["lead"]
    many = isinstance(leads, list)
    values = leads if many else [leads]
    if not values or not all(_is_int(v) and v >= 0 for v in values):
        raise ConfigError(
            f"{where} target.lead must be an int >= 0 (steps of the dates) or a non-empty list "
            f"of them, got {_toml(leads)}"
        )
    if many and len(set(leads)) < len(leads):
        raise ConfigError(f"{where} target.lead names a lead twice: {_toml(leads)}")
    if many and len(leads) > 1:
        _check_outputs_hold(c, where, LEAD_FIELD, f"target.lead names {len(leads)} leads")


def _check_targets(c: dict, where: str) -> None:
    names = c["target"]["variable"]
    if names is None and TARGET_FIELD in c["output"]["store"]:
        raise ConfigError(
            f"{where} output.store holds {TARGET_FIELD}, replaced by target.variable's name, "
            "but target.variable is not set"
        )
    if not isinstance(names, list):
        return
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ConfigError(f"{where} target.variable must be a name or a non-empty list of names")
    if len(set(names)) < len(names):
        raise ConfigError(f"{where} target.variable names a target twice: {names!r}")
    if len(names) > 1:
        _check_outputs_hold(c, where, TARGET_FIELD, f"target.variable names {len(names)} targets")


def _check_outputs_hold(c: dict, where: str, field: str, why: str) -> None:
    """``output.store`` (and ``output.work_dir``, when set) hold ``field``: one per result."""
    for key in ("store", "work_dir"):
        value = c["output"][key]
        if (value or key == "store") and field not in (value or ""):
            raise ConfigError(
                f"{where} output.{key} must hold {field} when {why} (one result each), e.g. "
                f"'regions-{field}.zarr'; got {value!r}"
            )


def check_duration(value: str, key: str) -> None:
    """Raise :class:`ConfigError` naming ``key`` unless ``value`` is a positive duration as
    Dask reads them (``"30s"``, ``"10m"``, ``"1h"``)."""
    from dask.utils import parse_timedelta

    try:
        if parse_timedelta(value) <= 0:
            raise ValueError
    except (ValueError, KeyError, TypeError):
        raise ConfigError(
            f"{key} must be a duration such as '30s' or '10m', got {value!r}"
        ) from None


def _check_time_scales(c: dict, where: str) -> None:
    inp = c["input"]
    windows, lags = inp["windows"], inp["lags"]
    if not windows or not all(_is_int(w) and w >= 1 for w in windows):
        raise ConfigError(
            f"{where} input.windows must be a list of ints >= 1, got {_toml(windows)}"
        )
    if len(set(windows)) != len(windows):
        raise ConfigError(f"{where} input.windows has repeated values: {_toml(windows)}")
    if not lags or not all(_is_int(k) and k >= 0 for k in lags):
        raise ConfigError(f"{where} input.lags must be a list of ints >= 0, got {_toml(lags)}")
    if len(set(lags)) != len(lags):
        raise ConfigError(f"{where} input.lags has repeated values: {_toml(lags)}")
    agg = inp["aggregate"]
    per = agg if isinstance(agg, dict) else {"": agg}
    for var, how in per.items():
        if how not in ("mean", "sum"):
            key = f"input.aggregate.{var}" if var else "input.aggregate"
            raise ConfigError(f"{where} {key} must be 'mean' or 'sum', got {how!r}")
    unknown = set(per) - {""} - set(inp["variables"])
    if unknown:
        raise ConfigError(
            f"{where} input.aggregate names {sorted(unknown)}, not among input.variables "
            f"{inp['variables']}"
        )
    _check_leads(c, where)


# each says its first problem; _check runs them all
_VALUE_CHECKS = (
    _check_input,
    _check_drop_time,
    _check_select,
    _check_time_scales,
    _check_targets,
    _check_target,
    _check_method,
    _check_cluster,
    _check_cluster_limits,
)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _toml(value) -> str:
    """A value as a job file writes it (``true``, not Python's ``True``), for messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    if hasattr(value, "isoformat"):  # a TOML date or time
        return value.isoformat()
    return repr(value)


def _type_name(types) -> str:
    names = {
        str: "a string",
        list: "a list",
        bool: "a boolean (true/false)",
        int: "an integer",
        float: "a number",
        dict: "a table",
    }
    if isinstance(types, tuple):
        kinds = [t for t in types if not (t is int and float in types)]  # a number covers both
        return " or ".join(names.get(t, str(t)) for t in kinds)
    return names.get(types, str(types))
