"""The package layout stays what the layout section of docs/contributing.md says: subpackages
by concept, imported in one order only (:data:`LAYERS`), no import cycle between dcfa's
modules (counting imports inside functions), and no private name imported from another
subpackage."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dcfa

ROOT = Path(dcfa.__file__).parent
DOCS = Path(__file__).parents[1] / "docs"
CONTRIBUTING = DOCS / "contributing.md"  # the layout section, moved out of the README


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


SUBPACKAGES = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and any(p.glob("*.py")))


def test_the_subpackage_scan_finds_them():
    assert {"stats", "cfa", "io", "batch", "gbmap", "plot"} <= set(SUBPACKAGES)


@pytest.mark.parametrize("subpackage", SUBPACKAGES)
def test_subpackages_are_documented(subpackage):
    """Every subpackage has its row in the layout table (or, for the smaller ones, its
    entry in the ``dcfa/`` row)."""
    page = CONTRIBUTING.read_text()
    layout = page[page.index("## Layout") :]
    assert f"`dcfa/{subpackage}/`" in layout or f"`{subpackage}/`" in layout, (
        f"docs/contributing.md: add dcfa/{subpackage}/ to the layout table"
    )


def test_every_public_submodule_is_an_attribute_of_a_plain_import():
    """After ``import dcfa`` alone (a fresh interpreter), ``dcfa.gbmap.drift_experiment`` and
    every public subpackage or module is reached as an attribute (the docs write
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


# The order of dcfa's parts, bottom first: a part is a subpackage (``stats``) or a top-level
# module (``geo``); the parts of one layer are independent of each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "_compute",
        "_errors",
        "_interrupts",
        "_lazy",
        "_terminal",
        "_units",
        "_version",
        "geo",
        "storage",
    ),
    ("stacking",),
    ("_validation", "neighbors"),
    ("stats",),
    ("memory",),
    ("io",),
    ("anomalies", "forecast", "labelled", "skill", "targets"),
    ("cfa",),
    ("gbmap",),
    ("datasets", "plot"),
    ("batch",),
    ("cli",),
)
# ``python -m dcfa`` is the CLI; the package itself (``dcfa/__init__.py``, the facade of the
# public names) stands above every layer
_PART_OF = {"__main__": "cli"}
_FACADE = "dcfa"


def _part(module: str) -> str:
    parts = module.split(".")
    return _FACADE if len(parts) == 1 else _PART_OF.get(parts[1], parts[1])


def _resolve(name: str, modules: dict[str, Path]) -> str:
    """The dcfa module that ``name`` (a module, or a name in one) lives in."""
    while name not in modules:
        name = name.rsplit(".", 1)[0]
    return name


def _edges(modules: dict[str, Path]):
    """``(importer, imported module, line number, inside a function, the line)`` for every
    import of a dcfa module, at module level or inside a function. ``from dcfa import Name``
    resolves ``Name`` through the facade's table to the module defining it."""
    for m, p in modules.items():
        text = p.read_text()
        lines = text.splitlines()
        tree = ast.parse(text)
        nested = {
            id(node)
            for f in ast.walk(tree)
            if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            for node in ast.walk(f)
        }
        package = m if p.name == "__init__.py" else m.rsplit(".", 1)[0]
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                if base != "dcfa" and not base.startswith("dcfa."):
                    continue
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    if full in modules:
                        targets.append(full)
                    elif base == _FACADE and alias.name in dcfa._EXPORTS:
                        targets.append(dcfa._EXPORTS[alias.name])
                    else:
                        targets.append(_resolve(base, modules))
            elif isinstance(node, ast.Import):
                targets = [
                    _resolve(a.name, modules)
                    for a in node.names
                    if a.name == "dcfa" or a.name.startswith("dcfa.")
                ]
            for t in targets:
                yield m, t, node.lineno, id(node) in nested, lines[node.lineno - 1]


def test_layers_name_every_part_once():
    modules = _modules()
    listed = [part for layer in LAYERS for part in layer]
    assert len(listed) == len(set(listed)), listed
    parts = {_part(m) for m in modules} - {_FACADE}
    assert parts <= set(listed), f"place {sorted(parts - set(listed))} in LAYERS"
    assert set(listed) <= parts, f"LAYERS names no part {sorted(set(listed) - parts)}"


def test_parts_import_in_one_order():
    """Every import of another part of dcfa goes down the order of :data:`LAYERS`:

    - an import at module level goes to a part of a lower layer or of the same layer;
    - an import inside a function goes to a part of a lower layer only, unless its line says
      why it may not (a ``# layout: ...`` comment) and it stays in the same layer. A lazy
      import never goes up: it cannot hide a tie the other way (the ties of issue 37 were
      such imports);
    - imports within one part (a subpackage's own modules) are free here (the cycle test
      covers them); so are imports of other packages, lazy or not (optional dependencies);
    - the package ``dcfa`` itself (the facade of the public names) may import any part; a
      part imports from it only a public name, counted as an import of the module defining
      it (the version is in ``dcfa._version``, below every part).
    """
    modules = _modules()
    layer = {part: i for i, parts in enumerate(LAYERS) for part in parts}
    layer[_FACADE] = len(LAYERS)
    bad = set()
    for m, target, line, lazy, text in _edges(modules):
        a, b = _part(m), _part(target)
        if a == b or a == _FACADE:
            continue
        up = layer[b] > layer[a]
        sideways = layer[b] == layer[a] and lazy and "# layout:" not in text
        if up or sideways:
            where = modules[m].relative_to(ROOT.parent)
            how = "up" if up else "sideways"
            bad.add(
                f"{where}:{line}: {m} -> {target} ({a} -> {b}: {how}"
                f"{', inside a function' if lazy else ''})"
            )
    order = " < ".join("/".join(parts) for parts in LAYERS)
    assert not bad, f"imports against the order {order}:\n" + "\n".join(sorted(bad))


def test_the_docs_state_the_order():
    page = CONTRIBUTING.read_text()
    layout = page[page.index("## Layout") :]
    order = " < ".join(", ".join(f"`{p}`" for p in parts) for parts in LAYERS)
    assert order in " ".join(layout.split()), order


def test_the_tests_mirror_the_subpackages():
    """Every dcfa subpackage has its tests' directory, every test directory is a subpackage,
    and no test module imports another (what they share is in tests/support.py)."""
    import ast

    tests = Path(__file__).parent
    subpackages = {
        p.name
        for p in ROOT.iterdir()
        if (p / "__init__.py").exists() or (p.is_dir() and any(p.glob("*.py")) and p.name != "data")
    }
    dirs = {p.name for p in tests.iterdir() if p.is_dir() and any(p.glob("test_*.py"))}
    assert dirs <= subpackages, dirs - subpackages
    missing = {"stats", "cfa", "gbmap", "io", "batch", "memory", "forecast"} - dirs
    assert not missing, missing
    crossed = []
    for path in tests.rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("test_"):
                crossed.append(f"{path.relative_to(tests)} imports {node.module}")
    assert not crossed, crossed
