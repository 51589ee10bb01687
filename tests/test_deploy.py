"""deploy/: job files, SLURM/PBS (dask-jobqueue), Kubernetes (Dask operator), Docker.

Nothing is submitted and no cluster, network or Docker engine is needed. The jobqueue configs
become real ``SLURMCluster`` / ``PBSCluster`` objects (a local scheduler, no jobs), and
``dcfa.batch.cluster.make_cluster`` runs against stand-in ``sbatch`` / ``qsub`` that only record
the scripts. The driver scripts run under bash against a stand-in ``dcfa``. The Kubernetes
manifests are validated against the CRD schemas shipped with dask-kubernetes and compared with
what its ``make_cluster_spec`` generates.
"""

from __future__ import annotations

import importlib
import json
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import dask
import pytest
import yaml
from dask.utils import format_bytes, parse_bytes

import dcfa
from dcfa._validation import validate_params
from dcfa.batch.config import load_config
from dcfa.gbmap import GBMAPRegressor

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "kubernetes"
BASH = shutil.which("bash") or "/bin/bash"

ESTIMATORS = {
    "regionscv": dcfa.RegionsCV,
    "lincfa": dcfa.LinCFA,
    "nonlincfa": dcfa.NonLinCFA,
    "genlincfa": dcfa.GenLinCFA,
}
QUEUES = {
    # kind: (jobqueue module attribute, driver script, submit/cancel commands, fake submit output)
    "slurm": ("SLURMCluster", "dcfa-job.sbatch", ("sbatch", "scancel"), "Submitted batch job"),
    "pbs": ("PBSCluster", "dcfa-job.pbs", ("qsub", "qdel"), ""),
}


def _import_quietly(name: str):
    """Import a dask plugin without it copying its default YAML into ~/.config/dask."""
    with tempfile.TemporaryDirectory() as scratch:
        saved, dask.config.PATH = dask.config.PATH, scratch
        try:
            return importlib.import_module(name)
        finally:
            dask.config.PATH = saved


def _yaml(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def _configmap_toml() -> str:
    return _yaml(K8S / "job-config.yaml")["data"]["job.toml"]


def _check_estimators(config) -> None:
    # unknown parameters: TypeError; bad values: ValueError
    validate_params(ESTIMATORS[config.method["name"]](**config.method["params"]))
    if config.gbmap is not None:
        GBMAPRegressor(**config.gbmap)


# --------------------------------------------------------------------------------------------
# job files


def test_every_deploy_toml_is_a_valid_job(tmp_path):
    tomls = sorted(DEPLOY.rglob("*.toml"))
    assert DEPLOY / "example-job.toml" in tomls
    (tmp_path / "configmap-job.toml").write_text(_configmap_toml())
    for path in [*tomls, tmp_path / "configmap-job.toml"]:
        config = load_config(path)
        _check_estimators(config)
        assert config.input["anomalies"] and config.gbmap, path  # what the README describes
        for kind in ("slurm", "pbs"):  # what the driver scripts add
            assert (
                load_config(path, [f"cluster.kind={kind}", "cluster.n_workers=4"]).cluster["kind"]
                == kind
            )


def test_the_example_job_shows_every_key(tmp_path):
    """``dcfa example-job`` said it commented every section but left out a third of the keys
    (target.missing, units, calendar, date_format, output.work_dir, most of [cluster]...):
    every key of the job file is in it, set or commented out, and each commented one is
    accepted as it is written there."""
    from dcfa.batch.config import _SCHEMA

    text = (DEPLOY / "example-job.toml").read_text()
    sections = re.split(r"^\[", text, flags=re.M)
    shown = {}
    for part in sections[1:]:
        section, _, table = part.split("]", 1)[0].partition(".")  # [method.params]
        keys = re.findall(r"^#? ?([a-z_]+) = ", part, flags=re.M)
        shown.setdefault(section, set()).update([table] if table else keys)
    for section, keys in _SCHEMA.items():
        if section in ("gbmap",):  # free-form: the GBMAP estimator's parameters
            continue
        assert set(keys) <= shown[section], (section, set(keys) - shown[section])
    uncommented = re.sub(r"^# ?([a-z_]+ = )", r"\1", text, flags=re.M)
    uncommented = uncommented.replace('scheduler = "tcp://10.0.0.5:8786"', "")
    (tmp_path / "job.toml").write_text(uncommented)
    config = load_config(tmp_path / "job.toml")
    _check_estimators(config)
    assert config.target["missing"] == [-99.99] and config.output["work_dir"]


def test_configmap_job_is_the_example_job_on_the_volume():
    example = tomllib.loads((DEPLOY / "example-job.toml").read_text())
    embedded = tomllib.loads(_configmap_toml())
    assert "cluster" not in embedded  # the DaskJob's $DASK_SCHEDULER_ADDRESS decides
    for section in ("method", "gbmap"):
        assert embedded[section] == example[section]
    paths = {"input": "store", "target": "path", "output": "store"}
    for section, key in paths.items():
        rest = {k: v for k, v in example[section].items() if k != key}
        assert {k: v for k, v in embedded[section].items() if k != key} == rest
        assert embedded[section][key].startswith("/data/"), (section, key)
        assert Path(embedded[section][key]).name == Path(example[section][key]).name


# --------------------------------------------------------------------------------------------
# SLURM / PBS: jobqueue.yaml -> real dask-jobqueue cluster objects


def _jobqueue_config(kind: str) -> dict:
    """The dask config a driver sees with DASK_CONFIG=deploy/<kind>: package defaults + ours."""
    jq = _import_quietly("dask_jobqueue")
    defaults = Path(jq.__file__).with_name("jobqueue.yaml")
    config = dask.config.collect(paths=[str(defaults), str(DEPLOY / kind)], env={})
    # a test-only change: no fixed dashboard port, and the scheduler on loopback
    config["jobqueue"][kind]["scheduler-options"] = {"dashboard_address": ":0", "host": "127.0.0.1"}
    return config


def _ours(kind: str) -> dict:
    return _yaml(DEPLOY / kind / "jobqueue.yaml")["jobqueue"][kind]


def _walltime_s(text: str) -> int:
    seconds = 0
    for part in text.split(":"):
        seconds = seconds * 60 + int(part)
    return seconds


@pytest.mark.parametrize("kind", list(QUEUES))
def test_jobqueue_yaml_uses_only_known_keys(kind):
    jq = _import_quietly("dask_jobqueue")
    known = _yaml(Path(jq.__file__).with_name("jobqueue.yaml"))["jobqueue"][kind]
    normal = {k.replace("_", "-") for k in known}
    unknown = {k for k in _ours(kind) if k.replace("_", "-") not in normal}
    assert not unknown, f"keys dask-jobqueue ignores: {unknown}"
    assert set(_yaml(DEPLOY / kind / "jobqueue.yaml")) == {"jobqueue"}


@pytest.mark.parametrize("kind", list(QUEUES))
def test_jobqueue_yaml_builds_the_cluster_and_worker_job_script(kind, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # log-directory is created relative to the driver's cwd
    jq = _import_quietly("dask_jobqueue")
    ours = _ours(kind)
    cls = getattr(jq, QUEUES[kind][0])
    with dask.config.set(_jobqueue_config(kind)):
        with cls() as cluster:  # exactly how dcfa.batch.cluster builds it: no arguments
            script = cluster.job_script()
            assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
            assert cluster.scheduler_address in script
    assert (tmp_path / ours["log-directory"]).is_dir()
    lines = script.splitlines()
    worker = next(line for line in lines if "distributed.cli.dask_worker" in line)
    args = shlex.split(worker)

    def arg(flag):
        return args[args.index(flag) + 1]

    # the worker command: threads and memory limit per worker follow from the job's size
    cores, processes, memory = ours["cores"], ours["processes"], ours["memory"]
    assert args[:3] == [ours["python"], "-m", "distributed.cli.dask_worker"]
    assert int(arg("--nthreads")) == cores // processes
    assert int(arg("--nworkers")) == processes
    per_worker = parse_bytes(arg("--memory-limit"))
    assert per_worker == parse_bytes(format_bytes(parse_bytes(memory) / processes))
    assert arg("--memory-limit") == "7.50GiB"  # the number deploy/README.md quotes
    assert arg("--local-directory") == "${TMPDIR:-/tmp}"  # node-local, expanded by the job
    assert "--nanny" in args and int(arg("--death-timeout")) == ours["death-timeout"]
    assert "--interface" not in args  # commented out in the YAML

    # the prologue activates the environment before the worker starts
    prologue = ours["job-script-prologue"]
    assert any("bin/activate" in line for line in prologue)
    where = [lines.index(line) for line in prologue]
    assert where == sorted(where) and max(where) < lines.index(worker)

    # the batch directives
    if kind == "slurm":
        assert f"#SBATCH --cpus-per-task={cores}" in lines
        assert f"#SBATCH --mem={ours['job-mem']}" in lines
        assert f"#SBATCH -t {ours['walltime']}" in lines
        assert "#SBATCH -J dcfa-worker" in lines
        asked = parse_bytes(ours["job-mem"].replace("G", "GiB"))  # SLURM's G is GiB
        assert not any(line.startswith(("#SBATCH -p", "#SBATCH -A")) for line in lines)
    else:
        spec = ours["resource-spec"]
        assert f"#PBS -l {spec}" in lines
        assert f"#PBS -l walltime={ours['walltime']}" in lines
        assert "#PBS -N dcfa-worker" in lines and "#PBS -V" in lines
        assert int(re.search(r"ncpus=(\d+)", spec).group(1)) == cores
        asked = parse_bytes(re.search(r"mem=(\w+)", spec).group(1).replace("gb", "GiB"))
        assert not any(line.startswith(("#PBS -q", "#PBS -A")) for line in lines)
    # the batch system's limit leaves room above the workers' own limits (nannies, OS)
    assert parse_bytes(memory) < asked <= parse_bytes(memory) + processes * parse_bytes("1GiB")
    assert subprocess.run([BASH, "-n"], input=script, text=True).returncode == 0


@pytest.mark.parametrize("kind", list(QUEUES))
def test_make_cluster_submits_the_worker_jobs(kind, tmp_path, monkeypatch):
    """dcfa's own code path (dcfa.batch.cluster.make_cluster) against stand-in sbatch/qsub."""
    from dcfa.batch.cluster import make_cluster

    submit, cancel = QUEUES[kind][2]
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / submit).write_text(
        "#!/bin/bash\n"  # jobs are submitted concurrently: the pid makes the job id
        f'cp "$1" "{tmp_path}/submitted-$$.sh"\n'
        f'echo "$$" >> "{tmp_path}/ids"\n'
        f'echo "{QUEUES[kind][3]} $$.fake"\n'
    )
    (fake / cancel).write_text(f'#!/bin/bash\necho "$@" >> "{tmp_path}/cancelled"\n')
    for tool in (submit, cancel):
        (fake / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{Path(BASH).parent}:/usr/bin:/bin")
    monkeypatch.chdir(tmp_path)
    jq = _import_quietly("dask_jobqueue")
    with dask.config.set(_jobqueue_config(kind)):
        cluster = make_cluster({"kind": kind, "n_workers": 2})
        try:
            assert isinstance(cluster, getattr(jq, QUEUES[kind][0]))
            address = cluster.scheduler_address
        finally:
            cluster.close()
    scripts = sorted(tmp_path.glob("submitted-*.sh"))
    assert len(scripts) == 2  # cluster.n_workers worker jobs
    for script in scripts:
        text = script.read_text()
        assert address in text and "--memory-limit 7.50GiB" in text
        assert "bin/activate" in text
    ids = sorted((tmp_path / "ids").read_text().split())
    assert sorted((tmp_path / "cancelled").read_text().split()) == ids  # closed: jobs cancelled


# --------------------------------------------------------------------------------------------
# the driver scripts


@pytest.mark.parametrize("kind", list(QUEUES))
def test_driver_script_text(kind):
    path = DEPLOY / kind / QUEUES[kind][1]
    text = path.read_text()
    assert text.startswith("#!/bin/bash\n")
    prefix = "#SBATCH" if kind == "slurm" else "#PBS"
    directives = [line for line in text.splitlines() if line.startswith(prefix)]
    assert directives, "no batch directives"
    assert re.search(r"exec dcfa fit \"\$JOB_TOML\"", text)
    assert f"cluster.kind={kind}" in text and "--resume" in text
    assert re.search(rf'export DASK_CONFIG="\$DEPLOY_DIR/{kind}"', text)
    assert subprocess.run([BASH, "-n", str(path)]).returncode == 0
    # the workers' walltime covers the driver's: they must not leave in the middle of a run
    wall = re.search(r"(?:--time=|walltime=)(\d+:\d+:\d+)", "\n".join(directives)).group(1)
    assert _walltime_s(_ours(kind)["walltime"]) >= _walltime_s(wall)


@pytest.mark.parametrize("kind", list(QUEUES))
def test_driver_script_runs_dcfa_fit(kind, tmp_path):
    """Run the script as the batch system would, with a stand-in environment and dcfa."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "activate").write_text(f'export PATH="{venv}/bin:$PATH"\n')
    record = tmp_path / "record.json"
    (venv / "bin" / "dcfa").write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"json.dump({{'argv': sys.argv[1:], 'DASK_CONFIG': os.environ.get('DASK_CONFIG'),"
        f" 'OMP': os.environ.get('OMP_NUM_THREADS')}}, open({str(record)!r}, 'w'))\n"
    )
    (venv / "bin" / "dcfa").chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "DCFA_VENV": str(venv)}
    env["SLURM_SUBMIT_DIR" if kind == "slurm" else "PBS_O_WORKDIR"] = str(ROOT)
    script = DEPLOY / kind / QUEUES[kind][1]
    proc = subprocess.run(
        [BASH, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "dashboard http://" in proc.stdout
    seen = json.loads(record.read_text())
    argv = seen["argv"]
    assert argv[:2] == ["fit", str(DEPLOY / "example-job.toml")]
    assert "--resume" in argv and seen["OMP"] == "1"
    assert Path(seen["DASK_CONFIG"]) == DEPLOY / kind
    assert (Path(seen["DASK_CONFIG"]) / "jobqueue.yaml").is_file()
    sets = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
    config = load_config(argv[1], sets)
    assert config.cluster["kind"] == kind and config.cluster["n_workers"] == 4


# --------------------------------------------------------------------------------------------
# Kubernetes: the Dask operator's resources


MANIFESTS = {
    "daskcluster.yaml": ("kubernetes.dask.org/v1", "DaskCluster"),
    "daskjob.yaml": ("kubernetes.dask.org/v1", "DaskJob"),
    "job-config.yaml": ("v1", "ConfigMap"),
    "data-pvc.yaml": ("v1", "PersistentVolumeClaim"),
}


def _crd_schema(name: str) -> dict:
    """The openAPIV3Schema of a CRD as dask-kubernetes ships it (its Helm chart's crds/)."""
    dk = _import_quietly("dask_kubernetes")
    path = Path(dk.__file__).parent / "operator/deployment/helm/dask-kubernetes-operator/crds"
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crd = yaml.load((path / name).read_text(), Loader=loader)
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return version["schema"]["openAPIV3Schema"]


_TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "integer": int,
    "number": (int, float),
}


def _schema_errors(value, schema: dict, where: str) -> list[str]:
    """Structural validation as the API server does it: types, required and unknown fields."""
    if value is None and schema.get("nullable"):
        return []
    kind = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        ok = isinstance(value, int | str)
    else:
        ok = kind is None or isinstance(value, _TYPES[kind])
    if ok and kind in ("integer", "number") and isinstance(value, bool):
        ok = False
    if not ok:
        return [f"{where}: expected {kind}, got {value!r}"]
    errors = []
    if isinstance(value, dict):
        props, extra = schema.get("properties"), schema.get("additionalProperties")
        errors += [f"{where}.{k}: required" for k in schema.get("required", []) if k not in value]
        for key, item in value.items():
            if props is not None and key in props:
                errors += _schema_errors(item, props[key], f"{where}.{key}")
            elif isinstance(extra, dict):
                errors += _schema_errors(item, extra, f"{where}.{key}")
            elif not schema.get("x-kubernetes-preserve-unknown-fields"):
                errors.append(f"{where}.{key}: unknown field")
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += _schema_errors(item, schema["items"], f"{where}[{i}]")
    return errors


def _container(pod_spec: dict, name: str) -> dict:
    (container,) = [c for c in pod_spec["containers"] if c["name"] == name]
    return container


def _quantity(text) -> float:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9}
    units |= {"m": 1e-3}
    match = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(text))
    return float(match.group(1)) * (units[match.group(2)] if match.group(2) else 1)


def _command(container: dict) -> list[str]:
    return [*container.get("command", []), *container.get("args", [])]


def _cluster_specs() -> dict[str, tuple[str, dict]]:
    """name -> (the DaskCluster name the operator uses, the DaskCluster spec)."""
    cluster, job = _yaml(K8S / "daskcluster.yaml"), _yaml(K8S / "daskjob.yaml")
    return {
        "daskcluster": (cluster["metadata"]["name"], cluster["spec"]),
        "daskjob": (job["metadata"]["name"], job["spec"]["cluster"]["spec"]),
    }


def test_manifests_parse_with_the_right_kinds():
    found = {p.name for p in K8S.iterdir() if p.suffix in (".yaml", ".yml")}
    assert found == set(MANIFESTS)
    for name, (api, kind) in MANIFESTS.items():
        docs = list(yaml.safe_load_all((K8S / name).read_text()))
        assert len(docs) == 1, name
        assert (docs[0]["apiVersion"], docs[0]["kind"]) == (api, kind)
        assert docs[0]["metadata"]["name"]


@pytest.mark.parametrize("name", ["daskcluster.yaml", "daskjob.yaml"])
def test_manifest_validates_against_the_operator_crd(name):
    schema = _crd_schema(name)
    manifest = _yaml(K8S / name)
    assert _schema_errors(manifest["spec"], schema["properties"]["spec"], "spec") == []
    # the check is not vacuous: a misspelt field, a wrong type and a missing key are caught
    broken = json.loads(json.dumps(manifest["spec"]))
    worker = broken["worker"] if name == "daskcluster.yaml" else broken["cluster"]["spec"]["worker"]
    worker["replica"] = worker.pop("replicas")
    worker["spec"]["containers"][0]["resources"]["limits"]["cpu"] = 2
    del worker["spec"]["containers"][0]["name"]
    errors = "\n".join(_schema_errors(broken, schema["properties"]["spec"], "spec"))
    assert "replica: unknown field" in errors
    assert "limits.cpu: expected string" in errors and "containers[0].name: required" in errors


@pytest.mark.parametrize("which", ["daskcluster", "daskjob"])
def test_cluster_spec_matches_what_dask_kubernetes_generates(which):
    kube = _import_quietly("dask_kubernetes.operator")
    name, spec = _cluster_specs()[which]
    worker = _container(spec["worker"]["spec"], "worker")
    scheduler = _container(spec["scheduler"]["spec"], "scheduler")
    generated = kube.make_cluster_spec(
        name=name,
        image=worker["image"],
        n_workers=spec["worker"]["replicas"],
        resources=worker["resources"],
        worker_command="dask worker",  # the image's ENTRYPOINT is dcfa, so command is set
    )
    assert generated["apiVersion"] == "kubernetes.dask.org/v1"
    g_worker = _container(generated["spec"]["worker"]["spec"], "worker")
    assert spec["worker"]["replicas"] == generated["spec"]["worker"]["replicas"]
    assert worker["ports"] == g_worker["ports"]
    assert worker["resources"] == g_worker["resources"]
    assert _command(worker)[: len(g_worker["args"])] == g_worker["args"]

    g_sched = _container(
        kube.make_scheduler_spec(
            cluster_name=name, image=scheduler["image"], resources=scheduler["resources"]
        )["spec"],
        "scheduler",
    )
    assert scheduler["image"] == worker["image"]
    assert g_sched["args"][0] == "dask-scheduler"  # dask-kubernetes still writes the old name
    assert _command(scheduler) == ["dask", "scheduler", *g_sched["args"][1:]]
    for key in ("ports", "resources", "readinessProbe", "livenessProbe"):
        assert scheduler[key] == g_sched[key], key
    service = kube.make_scheduler_spec(cluster_name=name)["service"]
    assert spec["scheduler"]["service"] == service  # selector names this cluster


def test_daskjob_and_daskcluster_run_the_same_pods():
    (c_name, cluster), (j_name, job) = _cluster_specs().values()
    assert cluster["worker"] == job["worker"]
    assert cluster["scheduler"]["spec"] == job["scheduler"]["spec"]
    service = json.dumps(job["scheduler"]["service"]).replace(j_name, c_name)
    assert json.loads(service) == cluster["scheduler"]["service"]


def test_worker_memory_and_threads_fit_the_containers():
    for _, spec in _cluster_specs().values():
        worker = _container(spec["worker"]["spec"], "worker")
        cmd = _command(worker)
        assert cmd[:2] == ["dask", "worker"]
        limits, requests = worker["resources"]["limits"], worker["resources"]["requests"]
        dask_limit = parse_bytes(cmd[cmd.index("--memory-limit") + 1])
        container = _quantity(limits["memory"])
        assert dask_limit < container <= dask_limit + parse_bytes("2GiB")
        assert int(cmd[cmd.index("--nthreads") + 1]) <= _quantity(limits["cpu"])
        assert requests == limits  # Guaranteed QoS: not the first evicted
        spill = cmd[cmd.index("--local-directory") + 1]
        assert any(m["mountPath"] == spill for m in worker["volumeMounts"])


def test_daskjob_runs_dcfa_fit_on_the_mounted_config():
    job = _yaml(K8S / "daskjob.yaml")
    configmap, pvc = _yaml(K8S / "job-config.yaml"), _yaml(K8S / "data-pvc.yaml")
    pod = job["spec"]["job"]["spec"]
    runner = _container(pod, "job")
    cmd = _command(runner)
    assert cmd[:2] == ["dcfa", "fit"] and "-q" in cmd and "--resume" in cmd
    config_path = Path(cmd[2])
    assert pod["restartPolicy"] == "OnFailure"  # the default Always would rerun a finished job
    assert "DASK_SCHEDULER_ADDRESS" not in json.dumps(pod)  # the operator injects it

    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in runner["volumeMounts"]}
    mount = mounts[str(config_path.parent)]
    assert mount.get("readOnly") is True
    assert volumes[mount["name"]]["configMap"]["name"] == configmap["metadata"]["name"]
    assert config_path.name in configmap["data"]

    # the runner and every worker see the job's paths on the same volume
    config = tomllib.loads(configmap["data"][config_path.name])
    for spec in [pod, *(s["worker"]["spec"] for _, s in _cluster_specs().values())]:
        claims = {
            v["name"]: v["persistentVolumeClaim"]["claimName"]
            for v in spec["volumes"]
            if "persistentVolumeClaim" in v
        }
        container = spec["containers"][0]
        data = [
            m for m in container["volumeMounts"] if claims.get(m["name"]) == pvc["metadata"]["name"]
        ]
        assert len(data) == 1 and not data[0].get("readOnly")
        for path in (config["input"]["store"], config["target"]["path"], config["output"]["store"]):
            assert path.startswith(data[0]["mountPath"] + "/"), path
    assert "ReadWriteMany" in pvc["spec"]["accessModes"]


# --------------------------------------------------------------------------------------------
# Docker


def _dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = (DEPLOY / "Dockerfile").read_text()
    logical, parts = [], []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            parts.append(line[:-1].strip())
            continue
        logical.append(" ".join([*parts, line]))
        parts = []
    assert not parts, "a continuation at the end of the Dockerfile"
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in logical]


def test_dockerfile():
    steps = _dockerfile()
    kinds = [k for k, _ in steps]
    assert steps[0][0] == "FROM" and steps[0][1].startswith("python:3.11")
    assert kinds.count("FROM") == 1 and kinds.count("ENTRYPOINT") == 1
    assert json.loads(dict(steps)["ENTRYPOINT"]) == ["dcfa"]

    copied = [a for k, a in steps if k == "COPY"]
    sources = {s for a in copied for s in a.split()[:-1] if not s.startswith("--")}
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert {"pyproject.toml", pyproject["project"]["readme"], "dcfa"} <= sources
    (install,) = [a for k, a in steps if k == "RUN" and "pip install" in a]
    extras = re.search(r'pip install "?/tmp/dcfa-src\[([a-z,]+)\]"?', install).group(1).split(",")
    assert set(extras) <= set(pyproject["project"]["optional-dependencies"])
    assert {"deploy", "demo"} <= set(extras)  # the image runs `dcfa demo` (its header says so)
    # `dask scheduler` / `dask worker` (what the operator's pods run) are checked at build time
    assert "dask scheduler --help" in install and "dask worker --help" in install
    assert any(d.startswith("distributed") for d in pyproject["project"]["dependencies"])

    # a non-root user, switched to after the install and before the entrypoint
    (user,) = [a for k, a in steps if k == "USER"]
    assert user.split(":")[0] not in ("root", "0")
    assert kinds.index("RUN", kinds.index("COPY")) < kinds.index("USER") < kinds.index("ENTRYPOINT")
    runs = "\n".join(a for k, a in steps if k == "RUN")
    uid = re.search(r"useradd\b.*--uid (\d+).*\b" + re.escape(user) + r"\b", runs)
    assert uid, "the USER is created with a fixed uid"
    for _, spec in _cluster_specs().values():  # the manifests run as that uid
        for part in ("worker", "scheduler"):
            assert spec[part]["spec"]["securityContext"]["runAsUser"] == int(uid.group(1))


def test_dockerignore_keeps_what_the_build_copies():
    patterns = [
        line.strip()
        for line in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]

    def ignored(rel: str) -> bool:
        parts = Path(rel).parts
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        return any(
            fnmatch(p, pat) or fnmatch(p, pat.removeprefix("**/"))
            for p in prefixes
            for pat in patterns
        )

    for rel in (".git/HEAD", ".venv/bin/python", "dcfa/__pycache__/x.pyc", "data/sst.zarr/.zattrs"):
        assert ignored(rel), rel
    copied = [a for k, a in _dockerfile() if k == "COPY"]
    for source in {s for a in copied for s in a.split()[:-1]}:
        assert (ROOT / source).exists(), source
        files = (
            [source]
            if (ROOT / source).is_file()
            else [
                str(p.relative_to(ROOT))
                for p in (ROOT / source).rglob("*.py")
                if "__pycache__" not in p.parts
            ]
        )
        assert files and not any(ignored(f) for f in files), source


# --------------------------------------------------------------------------------------------
# the README


def test_readme_covers_every_file_and_command():
    readme = (DEPLOY / "README.md").read_text()
    for path in DEPLOY.rglob("*"):
        if path.is_file() and path.name != "README.md":
            assert str(path.relative_to(DEPLOY)) in readme, path
    for command in (
        "sbatch deploy/slurm/dcfa-job.sbatch",
        "qsub deploy/pbs/dcfa-job.pbs",
        "kubectl apply -f deploy/kubernetes/daskjob.yaml",
        "docker build -f deploy/Dockerfile -t dcfa:0.1.0 .",
        "--resume",
        "8787",
    ):
        assert command in readme, command
