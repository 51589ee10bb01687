"""The package layout stays what the README's layout section says: subpackages by concept,
no import cycle between dcfa's modules (counting imports inside functions), and no private
name imported from another subpackage."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dcfa

ROOT = Path(dcfa.__file__).parent


def _modules() -> dict[str, Path]:
    out = {}
    for p in ROOT.rglob("*.py"):
        parts = p.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts).removesuffix(".__init__")
        out[name] = p
    return out


def _subpackage(module: str, modules: dict[str, Path]) -> str:
    parts = module.split(".")
    if modules[module].name == "__init__.py":
        return parts[1] if len(parts) > 1 else ""
    return parts[1] if len(parts) > 2 else ""


def _imports(modules: dict[str, Path]):
    """(importer, imported module, imported name or None) for every dcfa import."""
    for m, p in modules.items():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dcfa"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    if full in modules:
                        yield m, full, None
                    else:
                        yield m, node.module, alias.name
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("dcfa."):
                        yield m, alias.name, None


def test_no_import_cycle():
    modules = _modules()
    graph = {m: set() for m in modules}
    for m, target, _ in _imports(modules):
        if target in modules and target not in (m, "dcfa"):  # every module implies dcfa
            graph[m].add(target)
    # a depth-first search that reports the first cycle it finds
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return path[path.index(n) :] + [n]
            if n not in state and (cycle := visit(n)):
                return cycle
        state[m] = 2
        path.pop()
        return None

    for m in sorted(graph):
        if m not in state:
            cycle = visit(m)
            assert cycle is None, " -> ".join(cycle)


def test_no_private_name_across_subpackages():
    modules = _modules()
    bad = []
    for m, target, name in _imports(modules):
        if target not in modules or _subpackage(m, modules) == _subpackage(target, modules):
            continue
        private_module = target.rsplit(".", 1)[-1].startswith("_") and _subpackage(target, modules)
        if private_module or (name and name.startswith("_") and name != "__version__"):
            bad.append(f"{m} imports {name or target} from {target}")
    assert not bad, bad


@pytest.mark.parametrize(
    "subpackage", ["stats", "cfa", "io", "batch", "gbmap", "forecast", "memory"]
)
def test_subpackages_are_documented(subpackage):
    readme = (ROOT.parent / "README.md").read_text()
    layout = readme[readme.index("## Layout") :]
    assert f"`dcfa/{subpackage}/`" in layout


def test_every_public_submodule_is_an_attribute_of_a_plain_import():
    """After ``import dcfa`` alone (a fresh interpreter), ``dcfa.gbmap.drift_experiment`` and
    every public subpackage or module is reached as an attribute (the README writes
    ``dcfa.gbmap.drift_experiment``), and the import itself still loads neither xarray nor
    scikit-learn (workers unpickling kernels stay light)."""
    import subprocess
    import sys

    public = sorted(
        p.stem if p.is_file() else p.name
        for p in ROOT.iterdir()
        if not p.name.startswith(("_", "."))
        and (p.suffix == ".py" or (p.is_dir() and any(p.glob("*.py"))))
        and p.stem not in ("cli", "memory")  # the CLI's entry point; memory is imported eagerly
    )
    code = (
        "import sys, dcfa\n"
        "assert 'xarray' not in sys.modules and 'sklearn' not in sys.modules\n"
        "assert callable(dcfa.gbmap.drift_experiment)\n"
        f"for name in {public!r}:\n"
        "    assert getattr(dcfa, name).__name__ == 'dcfa.' + name, name\n"
        "    assert name in dir(dcfa), name\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
