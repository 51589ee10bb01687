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


def lincfa_greedy(X, y, *, strict=True, neighbors=None):
    """Remark 13: merge the most correlated passing pair of groups until none passes; with
    ``neighbors`` (a dense 0/1 adjacency) only pairs of groups with adjacent members."""
    n, D = X.shape
    Z = standardize(X)
    groups = [[k] for k in range(D)]
    while True:
        best = None
        for a in range(len(groups)):
            for b in range(a + 1, len(groups)):
                if neighbors is not None and not neighbors[np.ix_(groups[a], groups[b])].any():
                    continue
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


############################################################################################
# NonLinCFA / GenLinCFA, as the authors' code computes each test


def zscore0(x: np.ndarray) -> np.ndarray:
    """The authors' StandardScaler (ddof=0)."""
    return (x - x.mean(axis=0)) / x.std(axis=0)


def cfa_loop(D, joins, *, scan="restart", order=None):
    """The greedy loop of the CFA papers around a test ``joins(group, j)``.

    ``scan="restart"``: the authors' code (the first passing column joins, then rescan);
    ``scan="single"``: the printed pseudo-code (one pass per group).
    """
    order = list(range(D)) if order is None else [int(i) for i in order]
    labels = np.full(D, -1)
    g = 0
    if scan == "restart":
        cols = list(order)
        cur: list[int] = []
        while cols or cur:
            if not cur:
                cur = [cols.pop(0)]
            hit = next((j for j in cols if joins(cur, j)), None)
            if hit is None:
                labels[cur] = g
                g += 1
                cur = []
            else:
                cur.append(hit)
                cols.remove(hit)
        return labels
    for ii, i in enumerate(order):
        if labels[i] >= 0:
            continue
        group = [i]
        labels[i] = g
        for j in order[ii + 1 :]:
            if labels[j] < 0 and joins(group, j):
                group.append(j)
                labels[j] = g
        g += 1
    return labels


def _aggregate(Phi, group, how, compare):
    cols = group[:1] if compare == "seed" else group
    return Phi[:, cols].mean(axis=1) if how == "mean" else Phi[:, cols].sum(axis=1)


def nonlincfa_authors(
    Phi, y, *, eps, cv=5, scan="restart", compare="mean", how="mean", order=None, scoring="r2"
):
    """NonLinCFA with the authors' test: z-score, then cross_val_score of LinearRegression
    on [h(group), phi_j] and on h(group + j); join iff the mean R^2 gain <= eps."""
    from sklearn.linear_model import LinearRegression
    from sklearn.model_selection import cross_val_score

    yy = zscore0(y)

    def joins(group, j):
        x1 = zscore0(_aggregate(Phi, group, how, compare))
        x2 = zscore0(Phi[:, j])
        xa = zscore0(
            _aggregate(Phi, group + [j], how, "mean")
            if compare == "mean"
            else _aggregate(Phi, [group[0], j], how, "mean")
        )
        biv = cross_val_score(
            LinearRegression(), np.column_stack([x1, x2]), yy, cv=cv, scoring=scoring
        ).mean()
        uni = cross_val_score(LinearRegression(), xa[:, None], yy, cv=cv, scoring=scoring)
        uni = uni.mean()
        return biv - uni <= eps

    return cfa_loop(Phi.shape[1], joins, scan=scan, order=order)


def genlincfa_authors(
    Phi, y, *, eps, eps2=1.0, form="full", scan="restart", compare="mean", how="mean", order=None
):
    """GenLinCFA with the authors' test (GenLinCFA_anyFunction / GenLinCFA.py)."""
    yy = zscore0(y)

    def cov(a, b):
        return np.cov(a, b)[0, 1]

    def joins(group, j):
        x1 = zscore0(_aggregate(Phi, group, how, compare))
        x2 = zscore0(Phi[:, j])
        members = group + [j] if compare == "mean" else [group[0], j]
        xa = zscore0(_aggregate(Phi, members, how, "mean"))
        if form == "simple":
            return abs(cov(x1, yy)) + abs(cov(x2, yy)) - eps * 0.5 * np.var(x1 + x2) <= 0
        left = abs(cov(x1, yy)) + abs(cov(x2, yy)) + eps2 * 0.5 * np.var(xa)
        return left - eps * (abs(cov(xa, yy)) + eps2 * 0.5 * np.var(x1 + x2)) <= 0

    return cfa_loop(Phi.shape[1], joins, scan=scan, order=order)
