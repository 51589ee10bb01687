"""What a driving region's group takes in at its border: NonLinCFA's margins and the cells
of other regions in the fitted groups, on ``make_regions_field`` (the field of
``bench_regions.py``) in memory.

    python benchmarks/bench_borders.py                        # 1 and 0.5 degree, 500 months
    python benchmarks/bench_borders.py --degrees 0.5 --months 1200
    python benchmarks/bench_borders.py --rule genlincfa --eps 0.75

For every driving region and every resolution it prints its mean series' correlation with the
target, and:

* (NonLinCFA) the margin of its test, ``CV R^2(y ~ [group mean, cell]) - CV R^2(y ~ mean of the
  group with the cell)`` (``KFold(5)``, contiguous folds, on standardised cells), of up to 40
  cells of neighbouring regions tested against the driving region's whole group: below
  ``eps`` the rule lets the cell in; and the same for cells of the driving region tested
  against each neighbouring region's whole group;
* after a fit of the rule (``neighbors=1``), the group that holds most of the region's cells
  and the cells of other regions in it: one such cell makes the region count as not pure in
  ``bench_regions.py``; and for each such cell, whether the driving region's group was
  created before or after the group holding most of the cell's own region, whether the cell
  touches that group, and its margin against it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import dask
import numpy as np
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import KFold, cross_val_score

sys.path.insert(0, str(Path(__file__).parent))
from bench_regions import FIELD, foreign_cells, main_group, strays  # noqa: E402

from dcfa import GenLinCFA, NonLinCFA  # noqa: E402
from dcfa.datasets import make_regions_field  # noqa: E402
from dcfa.neighbors import grid_adjacency  # noqa: E402

RULES = {"nonlincfa": (NonLinCFA, 3e-2), "genlincfa": (GenLinCFA, 0.75)}


def cv_r2(Z: np.ndarray, y: np.ndarray) -> float:
    return float(cross_val_score(LinearRegression(), Z, y, cv=KFold(5), scoring="r2").mean())


def margin(group: np.ndarray, cell: np.ndarray, size: int, y: np.ndarray) -> float:
    """NonLinCFA's margin for ``cell`` joining a group of ``size`` cells whose mean is
    ``group``: bivariate minus univariate CV R^2."""
    joined = (group * size + cell) / (size + 1)
    return cv_r2(np.column_stack([group, cell]), y) - cv_r2(joined[:, None], y)


def border(adjacency, mask: np.ndarray) -> np.ndarray:
    """The cells next to ``mask`` and outside it, flat: the neighbours the fits grow through
    (``neighbors=1`` on a global grid: 8-neighbourhood, periodic in longitude)."""
    mask = mask.ravel()
    return ((adjacency @ mask.astype(np.int8)) > 0) & ~mask


def run(degrees: float, months: int, rule: str, eps: float, n_cells: int) -> None:
    shape = (int(180 / degrees), int(360 / degrees))
    ds = make_regions_field(n_time=months, shape=shape, **FIELD)
    with dask.config.set(scheduler="threads", num_workers=1):
        ds = ds.compute()
    y = ds.target.values
    region = ds.region.values
    flat = region.ravel()
    X = ds.field.values.reshape(months, -1).astype(np.float64)
    ocean = flat >= 0
    Xs = np.zeros_like(X)
    Xs[:, ocean] = (X[:, ocean] - X[:, ocean].mean(0)) / X[:, ocean].std(0)
    adjacency = grid_adjacency(shape, 1, periodic=(1,)).tocsr()
    rng = np.random.default_rng(0)
    driving = np.flatnonzero(ds.beta.values != 0)
    print(f"{degrees} degree ({shape[0]} x {shape[1]} cells), {months} months", flush=True)
    corr = [np.corrcoef(X[:, flat == r].mean(1), y)[0, 1] for r in driving]
    print(
        "  driving regions' mean series, correlation with the target: "
        + ", ".join(f"{r}: {c:+.3f}" for r, c in zip(driving.tolist(), corr, strict=True)),
        flush=True,
    )
    for r in driving if rule == "nonlincfa" else ():
        mine = np.flatnonzero(flat == r)
        mean = Xs[:, mine].mean(1)
        near = np.flatnonzero(border(adjacency, region == r) & (flat >= 0))
        into = [
            margin(mean, Xs[:, j], mine.size, y)
            for j in rng.choice(near, min(n_cells, near.size), replace=False)
        ]
        out = []
        for q in np.unique(flat[near]):
            theirs = np.flatnonzero(flat == q)
            edge = np.flatnonzero(border(adjacency, region == q) & (flat == r))
            for j in rng.choice(edge, min(10, edge.size), replace=False):
                out.append(margin(Xs[:, theirs].mean(1), Xs[:, j], theirs.size, y))
        into, out = np.array(into), np.array(out)
        print(
            f"  region {r} ({mine.size} cells): a neighbour's cell into its group: margin "
            f"median {np.median(into):+.4f}, max {into.max():+.4f}, "
            f"{np.mean(into <= eps):.0%} <= eps ({into.size} cells); "
            f"its cell into a neighbour's group: median {np.median(out):+.4f}, "
            f"min {out.min():+.4f}, {np.mean(out <= eps):.0%} <= eps ({out.size} cells)",
            flush=True,
        )
    cls, _ = RULES[rule]
    t = time.perf_counter()
    model = cls(neighbors=1, eps=eps).fit(ds.field, y)
    labels = model.label_map_.transpose("lat", "lon").values
    foreign = foreign_cells(labels, region, driving)
    print(
        f"  {cls.__name__}(neighbors=1, eps={eps:g}): {model.n_features_out_} groups in "
        f"{time.perf_counter() - t:.0f} s; other regions' cells in the group holding most of "
        f"each driving region: {dict(zip(driving.tolist(), foreign, strict=True))}",
        flush=True,
    )
    for r in driving:
        for line in where_strays_come_from(labels.ravel(), flat, r, adjacency, Xs, y):
            print(line, flush=True)


def where_strays_come_from(labels, flat, r, adjacency, Xs, y) -> list[str]:
    """Where each cell of another region in driving region ``r``'s main group comes from.

    Groups are numbered in order of creation, so comparing the driving group's number with
    that of the group holding most of the stray cell's own region says which grew first: a
    driving group grown later took a cell its own region's group had left out; one grown
    earlier took it before its own region's group started."""
    main = main_group(labels, flat, r)
    size = int(np.sum(flat == r))
    out = []
    for j in strays(labels, flat, r):
        q = int(flat[j])
        home = main_group(labels, flat, q)
        members = np.flatnonzero(labels == home)
        touches = bool(np.isin(adjacency[[j]].indices, members).any())
        m = margin(Xs[:, members].mean(1), Xs[:, j], members.size, y)
        order = "after" if main > home else "before"
        out.append(
            f"    cell {j} of region {q} in group {main} (region {r}, {size} cells), "
            f"grown {order} its own region's group {home} ({members.size} cells); "
            f"next to that group: {touches}; its margin against it now: {m:+.4f}"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--degrees", type=float, nargs="+", default=[1.0, 0.5])
    parser.add_argument("--months", type=int, default=500)
    parser.add_argument("--rule", choices=sorted(RULES), default="nonlincfa")
    parser.add_argument("--eps", type=float, help="default: 3e-2 (NonLinCFA), 0.75 (GenLinCFA)")
    parser.add_argument("--cells", type=int, default=40, help="neighbouring cells per region")
    args = parser.parse_args()
    eps = args.eps if args.eps is not None else RULES[args.rule][1]
    for degrees in args.degrees:
        run(degrees, args.months, args.rule, eps, args.cells)


if __name__ == "__main__":
    main()
