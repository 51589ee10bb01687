"""Naive implementations straight from the papers, to check dcfa against.

Dense, loop-per-pair, refitting a regression for every test: slow, but each line can be held
against the printed pseudo-code. Nothing here imports dcfa.
"""

from __future__ import annotations

import numpy as np


def standardize(x: np.ndarray) -> np.ndarray:
    return (x - x.mean(axis=0)) / x.std(axis=0, ddof=1)


def ols(A: np.ndarray, y: np.ndarray):
    """OLS of y on A with an intercept: (intercept, coefficients, residual sum of squares)."""
    A1 = np.column_stack([np.ones(len(y)), A])
    coef, *_ = np.linalg.lstsq(A1, y, rcond=None)
    resid = y - A1 @ coef
    return coef[0], coef[1:], float(resid @ resid)


def lincfa_pair_test(a: np.ndarray, b: np.ndarray, y: np.ndarray, *, strict: bool = True) -> bool:
    """Eq. 17 with the bivariate OLS plug-ins (journal App. C, Eq. C12), as the authors do.

    ``a`` and ``b`` are standardised; the regression is y ~ 1 + a + b.
    """
    n = len(y)
    c = np.corrcoef(a, b)[0, 1]
    _, w, rss = ols(np.column_stack([a, b]), y)
    s2 = rss / (n - 3)
    if w[0] == w[1]:
        return True
    bound = 1 - 2 * s2 / ((n - 1) * (w[0] - w[1]) ** 2)
    return bool(c > bound) if strict else bool(c >= bound)


def lincfa_algorithm1(X, y, *, order=None, strict=True, compare="seed", scan="single"):
    """LinCFA Algorithm 1 (journal), with the ``j not in V`` check the pseudo-code omits.

    ``compare="mean"`` tests a candidate against the mean of the standardised members so far
    (re-standardised); ``scan="restart"`` rescans the remaining features after each
    acceptance (the authors' NonLinCFA code). Returns labels in order of group creation.
    """
    n, D = X.shape
    Z = standardize(X)
    order = list(range(D)) if order is None else [int(i) for i in order]
    labels = np.full(D, -1)
    V: set[int] = set()

    def joins(G, j):
        agg = Z[:, G[0]] if compare == "seed" else standardize(Z[:, G].mean(axis=1))
        return lincfa_pair_test(agg, Z[:, j], y, strict=strict)

    g = 0
    for ii, i in enumerate(order):
        if i in V:
            continue
        G = [i]
        V.add(i)
        if scan == "single":
            for j in order[ii + 1 :]:
                if j not in V and joins(G, j):
                    G.append(j)
                    V.add(j)
        else:
            while True:
                for j in order[ii + 1 :]:
                    if j not in V and joins(G, j):
                        G.append(j)
                        V.add(j)
                        break
                else:
                    break
        labels[G] = g
        g += 1
    return labels


def lincfa_greedy(X, y, *, strict=True):
    """Remark 13: merge the most correlated passing pair of groups until none passes."""
    n, D = X.shape
    Z = standardize(X)
    groups = [[k] for k in range(D)]
    while True:
        best = None
        for a in range(len(groups)):
            for b in range(a + 1, len(groups)):
                ga = Z[:, groups[a]].sum(axis=1)
                gb = Z[:, groups[b]].sum(axis=1)
                r = np.corrcoef(ga, gb)[0, 1]
                if best is not None and r <= best[0]:
                    continue
                if lincfa_pair_test(standardize(ga), standardize(gb), y, strict=strict):
                    best = (r, a, b)
        if best is None:
            break
        _, a, b = best
        groups[a] = groups[a] + groups[b]
        del groups[b]
    labels = np.full(D, -1)
    for g, members in enumerate(sorted(groups, key=min)):
        labels[members] = g
    return labels


def same_partition(a, b) -> bool:
    """Whether two label vectors describe the same partition (up to renumbering)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    pairs = set(zip(a.tolist(), b.tolist(), strict=True))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))
