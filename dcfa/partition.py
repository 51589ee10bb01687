"""The greedy partition driver shared by LinCFA, NonLinCFA and GenLinCFA.

The three algorithms are one loop with different acceptance rules (:mod:`dcfa.rules`): open a
group with the first unassigned feature (in a possibly shuffled order), test candidates
against the group, let the passing ones join. What the loop needs from the data is a
:class:`Basis`: the per-segment moments of the (scaled) features and the target. A group's
aggregate ``g = sum_k w_k x_k`` is kept as running linear forms of those moments, so a step
costs O(S D) for all candidates at once and never touches the data.

Loop options (ALGORITHMS.md sections 2 and 3):

``compare="seed"``
    candidates are tested against the group's first feature (LinCFA, Algorithm 1);
``compare="mean"``
    against the current aggregate of the group, which grows as features join
    (NonLinCFA / GenLinCFA, and the authors' LinCFA climate code);
``scan="single"``
    one forward pass per group, as the printed pseudo-code: a candidate rejected once is not
    tested again for that group;
``scan="restart"``
    after every acceptance, rescan all remaining candidates from the first (the authors'
    experiments; the published tables come from this);
``neighbors``
    a sparse ``D x D`` adjacency: only features adjacent to a member of the group are
    candidates.

:func:`greedy_partition` is the order-free variant of LinCFA's Remark 13.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from functools import partial

import numpy as np
import scipy.sparse as sp

from dcfa._moments import ColumnSummary
from dcfa.rules import PairMoments

__all__ = [
    "NEIGHBORHOODS",
    "Basis",
    "MergedMoments",
    "merge_rows",
    "fold_parts",
    "partition_moments",
    "drive",
    "sequential_partition",
    "greedy_partition",
    "grid_partition",
    "COMPARE",
    "SCANS",
    "STRATEGIES",
]

COMPARE = ("seed", "mean")
SCANS = ("single", "restart")
STRATEGIES = ("sequential", "greedy")
NEIGHBORHOODS = ("group", "seed")


def partition_moments(
    parts,
    accept,
    *,
    standardize: bool,
    shuffle: bool = False,
    random_state=None,
    compare: str = "seed",
    scan: str = "single",
    strategy: str = "sequential",
    neighbors=None,
    neighborhood: str = "group",
    target: int = 0,
    progress=None,
    whole=None,
    order=None,
) -> np.ndarray:
    """Labels of every feature from moments and a rule: what the three functional twins share.

    Parameters
    ----------
    parts : Moments or list of Moments
        One value, or several row sets the rule reads (cross-validation folds).
    whole : Moments, default=None
        The moments of all the data, on which exclusions and standardisation are decided
        (default: ``parts`` merged, for disjoint parts).
    accept : callable
        A rule of :mod:`dcfa.rules` with its parameters bound.
    standardize : bool
        Aggregate standardised features (``1/std`` weights) or the features as they are.
    shuffle, random_state, compare, scan, strategy, neighbors, neighborhood, target, progress
        See :func:`sequential_partition` and :func:`greedy_partition`.
    order : ndarray of shape (n_features,), default=None
        The order features are visited in before any shuffle (a permutation of all features,
        e.g. :meth:`dcfa.stacking.FeatureLayout.visit_order`); ``None``: ``0 .. D-1``.
        ``shuffle`` permutes this order.

    Returns
    -------
    labels : ndarray of shape (n_features,)
        Group of each feature in order of creation; -1 for excluded features.
    """
    from dcfa._moments import Moments

    parts = [parts] if isinstance(parts, Moments) else list(parts)
    if whole is None:
        whole = parts[0] if len(parts) == 1 else merge_rows(parts)
    return drive(
        whole,
        lambda valid, scale: Basis.from_moments(parts, valid, scale, target),
        accept,
        standardize=standardize,
        shuffle=shuffle,
        random_state=random_state,
        compare=compare,
        scan=scan,
        strategy=strategy,
        neighbors=neighbors,
        neighborhood=neighborhood,
        progress=progress,
        order=order,
    )


def drive(
    whole,
    make_basis,
    accept,
    *,
    standardize: bool,
    shuffle: bool = False,
    random_state=None,
    compare: str = "seed",
    scan: str = "single",
    strategy: str = "sequential",
    neighbors=None,
    neighborhood: str = "group",
    progress=None,
    order=None,
) -> np.ndarray:
    """The one partition driver: exclusions, scaling, visiting order, then the loop.

    ``whole`` answers ``n_features``, ``valid`` and ``column_std`` (any moments summary);
    ``make_basis(valid, scale)`` builds what the loop reads for the kept features (the dense
    :class:`Basis`, the seed rows' or the series' basis). Every execution but the grid's
    runs through here, so they visit features in the same order and give the same labels.
    """
    from sklearn.utils import check_random_state

    valid = np.flatnonzero(whole.valid)
    labels = np.full(whole.n_features, -1, dtype=np.int64)
    if valid.size == 0:
        return labels
    scale = 1.0 / whole.column_std(ddof=1)[valid] if standardize else np.ones(valid.size)
    basis = make_basis(valid, scale)
    adj = None if neighbors is None else sp.csr_array(neighbors)[valid][:, valid]
    if strategy == "greedy":
        if adj is not None:
            raise ValueError("neighbors: not supported with strategy='greedy'")
        sub = greedy_partition(basis, accept, progress=progress)
    else:
        base = _base_order(order, valid, whole.n_features)
        visit = base
        if shuffle:
            perm = check_random_state(random_state).permutation(valid.size)
            visit = perm if base is None else base[perm]
        sub = sequential_partition(
            basis,
            accept,
            order=visit,
            compare=compare,
            scan=scan,
            neighbors=adj,
            neighborhood=neighborhood,
            progress=progress,
        )
    labels[valid] = sub
    return labels


def _base_order(order, valid: np.ndarray, n_features: int) -> np.ndarray | None:
    """``order`` (over all features) as positions among the ``valid`` ones, or None."""
    if order is None:
        return None
    order = np.asarray(order, dtype=np.int64)
    if order.shape != (n_features,):
        raise ValueError(f"order: expected a permutation of {n_features} features")
    where = np.full(n_features, -1, dtype=np.int64)
    where[valid] = np.arange(valid.size)
    base = where[order]
    return base[base >= 0]


@dataclass(frozen=True)
class Basis:
    """Per-segment moments of ``D`` scaled features and one target (last column).

    A view on :class:`~dcfa.Moments`: the ``p x p`` matrices are kept as they are and only the
    rows the driver touches are gathered and scaled, so building a basis costs O(D), not
    O(D^2). Column ``k`` of the basis is column ``cols[k]`` of the moments times ``scale[k]``.

    Attributes
    ----------
    n : ndarray of shape (S,)
        Rows per segment.
    mean, diag, target : ndarray of shape (S, D + 1)
        Scaled means, variances-like diagonal, and cross-products with the target.
    crosses : list of S ndarrays of shape (p, p)
        The segments' centred cross-products (or the correlation matrix, pairwise).
    cols, scale : ndarray of shape (D + 1,)
    count : ndarray of shape (p, p) or None
        Pairwise-complete counts (one segment only): the ``n`` of a test is then the
        smallest count between the candidate and a member of the group.
    """

    n: np.ndarray
    mean: np.ndarray
    diag: np.ndarray
    target: np.ndarray
    crosses: list
    cols: np.ndarray
    scale: np.ndarray
    count: np.ndarray | None = None

    @property
    def n_features(self) -> int:
        return self.cols.size - 1

    @property
    def n_segments(self) -> int:
        return len(self.crosses)

    def row(self, j: int) -> np.ndarray:
        """Scaled cross-products of basis column ``j`` with every column, shape (S, D + 1)."""
        c = self.cols[j]
        cols = None if self._all_columns else self.cols
        rows = [_cross_row(m, c, cols) for m in self.crosses]
        return np.stack(rows) * (self.scale[j] * self.scale)

    def count_row(self, j: int) -> np.ndarray:
        c = self.cols[j]
        return self.count[c] if self._all_columns else self.count[c, self.cols]

    def dense(self) -> np.ndarray:
        """All scaled cross-products, shape (S, D + 1, D + 1) (a copy)."""
        cols, scale = self.cols, self.scale
        K = np.empty((self.n_segments, cols.size, cols.size))
        for s, m in enumerate(self.crosses):  # by row blocks: no second p x p temporary
            for b in _row_blocks(cols.size):
                if isinstance(m, MergedMoments):
                    K[s, b] = m.block(cols[b], cols)
                else:
                    K[s, b] = m[np.ix_(cols[b], cols)]
                K[s, b] *= np.outer(scale[b], scale)
        return K

    def dense_count(self) -> np.ndarray | None:
        return None if self.count is None else self.count[np.ix_(self.cols, self.cols)]

    @property
    def _all_columns(self) -> bool:
        p = self.crosses[0].shape[0]
        return self.cols.size == p and bool((self.cols == np.arange(p)).all())

    @classmethod
    def from_moments(cls, parts, features: np.ndarray, scale: np.ndarray, target: int = 0):
        """Basis over ``features`` (indices) of one or several :class:`~dcfa.Moments`.

        Feature ``k`` is multiplied by ``scale[k]`` (``1/std`` to average standardised
        features, ``1`` to aggregate them as they are).
        """
        parts = list(parts)
        cols = np.append(np.asarray(features), parts[0].n_features + target)
        w = np.append(np.asarray(scale, dtype=np.float64), 1.0)
        y = cols[-1]
        if parts[0].pairwise:
            if len(parts) != 1:
                raise ValueError("pairwise-complete statistics support a single segment only")
            m = parts[0]
            # correlation space: unit scale, zero means; counts carry the sample sizes
            corr = m.corr()
            sign = np.sign(w)
            return cls(
                n=np.array([m.n]),
                mean=np.zeros((1, cols.size)),
                diag=np.ones((1, cols.size)),
                target=(corr[cols, y] * sign)[None],
                crosses=[corr],
                cols=cols,
                scale=sign,
                count=m.count,
            )
        return cls(
            n=np.array([m.n for m in parts]),
            mean=np.stack([m.mean[cols] * w for m in parts]),
            diag=np.stack([_cross_diagonal(m)[cols] * w * w for m in parts]),
            target=np.stack([_cross_column(m, cols, y) * w for m in parts]),
            crosses=[m if isinstance(m, MergedMoments) else m.cross for m in parts],
            cols=cols,
            scale=w,
        )


def fold_parts(parts, folds):
    """NonLinCFA's row sets from per-segment moments: each fold's training sets, then their
    test sets (merged row by row when read, :class:`MergedMoments`), and all rows."""
    train = [merge_rows([parts[s] for s in tr]) for tr, _ in folds.splits]
    test = [merge_rows([parts[s] for s in te]) for _, te in folds.splits]
    return train + test, merge_rows(parts)


def merge_rows(parts):
    """The union of disjoint row sets for the partition: the one part itself, a
    :class:`MergedMoments` (no new ``p x p`` matrix), or for pairwise statistics the merge."""
    from dcfa._moments import Moments

    parts = list(parts)
    if len(parts) == 1:
        return parts[0]
    if any(p.pairwise or p.n == 0 for p in parts):
        return Moments.merge_all(parts)
    return MergedMoments(parts)


def _row_blocks(n_rows: int, n_cols: int | None = None, nbytes: int = 2**24) -> list[slice]:
    """Row slices of an ``n_rows x n_cols`` float64 array, about ``nbytes`` each."""
    step = max(1, nbytes // (8 * max(n_cols or n_rows, 1)))
    return [slice(i, i + step) for i in range(0, n_rows, step)]


def _cross_row(m, c: int, cols) -> np.ndarray:
    """Row ``c`` of a cross-product matrix (or of :class:`MergedMoments`), at ``cols``."""
    if isinstance(m, MergedMoments):
        return m.row(c, cols)
    return m[c] if cols is None else m[c, cols]


def _cross_column(m, rows: np.ndarray, c: int) -> np.ndarray:
    return m.column(rows, c) if isinstance(m, MergedMoments) else m.cross[rows, c]


def _cross_diagonal(m) -> np.ndarray:
    return m.column_m2 if isinstance(m, MergedMoments) else np.diagonal(m.cross)


class MergedMoments(ColumnSummary):
    """``Moments.merge_all(parts)`` without its ``p x p`` matrix: the same numbers, by rows.

    Merging disjoint row sets (a cross-validation fold's training segments) builds a new
    ``p x p`` matrix per merge, plus temporaries. The partition reads only a few rows of each,
    so they are computed when asked for: counts, means and the diagonal at once (O(S p)), a row
    or a column of the cross-products as the same chain of Chan updates that
    :meth:`dcfa.Moments.merge` applies to the whole matrix, restricted to that row. Every
    operation is elementwise, so each number equals the merged matrix's bit for bit.

    Answers what the partition needs (``n``, ``n_features``, ``valid``, ``column_std``, ``mean``
    and the rows of :class:`Basis`) in O(S p) memory besides the parts.
    """

    pairwise = False
    missing = "exclude"

    def __init__(self, parts):
        parts = list(parts)
        if not parts or any(p.pairwise or p.n == 0 for p in parts):
            raise ValueError("MergedMoments: non-empty parts of missing='exclude' moments only")
        first = parts[0]
        self.parts = parts
        self.n_targets = first.n_targets
        n, mean, count = first.n, first.mean, first.count
        diag = np.diagonal(first.cross)
        self._steps = []
        for p in parts[1:]:  # dcfa._moments._merge_exclude, then finalize (shift 0)
            total = n + p.n
            f = n * p.n / total
            d = p.mean - mean
            self._steps.append((p.cross, d, f))
            diag = diag + np.diagonal(p.cross) + d * d * f
            mean = mean + d * (p.n / total) + 0.0
            count = count + p.count
            n = total
        self.n, self.mean, self.count, self.column_m2 = n, mean, count, diag

    @property
    def n_columns(self) -> int:
        return self.mean.size

    @property
    def n_features(self) -> int:
        return self.n_columns - self.n_targets

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n_columns, self.n_columns)

    def row(self, c: int, cols=None) -> np.ndarray:
        """Row ``c`` of the merged cross-products, at ``cols`` (every column by default)."""
        r = np.array(self.parts[0].cross[c], dtype=np.float64)
        t = np.empty_like(r)
        for cross, d, f in self._steps:  # r + cross[c] + d[c] * d * f, in place
            np.multiply(d[c], d, out=t)
            t *= f
            r += cross[c]
            r += t
        return r if cols is None else r[cols]

    def column(self, rows, c: int) -> np.ndarray:
        """Column ``c`` of the merged cross-products, at ``rows``."""
        r = self.parts[0].cross[rows, c]
        for cross, d, f in self._steps:
            r = r + cross[rows, c] + d[rows] * d[c] * f
        return r

    def block(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """The merged cross-products at ``np.ix_(rows, cols)`` (a copy)."""
        return np.stack([self.row(c, cols) for c in rows])


class _Group:
    """Running moments of a group aggregate ``g = sum of its (scaled) members``."""

    def __init__(self, basis: Basis, seed: int):
        self.basis = basis
        self.u = basis.row(seed)  # cross(g, every column), (S, D+1)
        self.q = basis.diag[:, seed].copy()  # cross(g, g), (S,)
        self.m = basis.mean[:, seed].copy()  # mean(g), (S,)
        self.nmin = None if basis.count is None else basis.count_row(seed).copy()

    def add(self, j: int) -> None:
        b = self.basis
        self.q += 2.0 * self.u[:, j] + b.diag[:, j]
        self.u += b.row(j)
        self.m += b.mean[:, j]
        if self.nmin is not None:
            np.minimum(self.nmin, b.count_row(j), out=self.nmin)

    def pair_moments(self, cand: np.ndarray) -> PairMoments:
        b = self.basis
        y = b.n_features
        if self.nmin is None:
            n = np.broadcast_to(b.n[:, None].astype(np.float64), (b.n_segments, cand.size))
        else:
            n = self.nmin[cand][None, :].astype(np.float64)
        return _pair_moments(
            gg=self.q,
            gc=self.u[:, cand],
            gy=self.u[:, y],
            gm=self.m,
            cc=b.diag[:, cand],
            cy=b.target[:, cand],
            yy=b.target[:, y],
            cm=b.mean[:, cand],
            ym=b.mean[:, y],
            n=n,
        )


def _pair_moments(*, gg, gc, gy, gm, cc, cy, yy, cm, ym, n) -> PairMoments:
    """Moments of ``[g, c, y]`` per segment for candidates ``c`` from the pieces.

    ``gg, gy, gm, yy, ym`` are per segment (S,); ``gc, cc, cy, cm, n`` per segment and
    candidate (S, J).
    """
    S, J = gc.shape
    cross = np.empty((S, J, 3, 3))
    cross[:, :, 0, 0] = gg[:, None]
    cross[:, :, 0, 1] = cross[:, :, 1, 0] = gc
    cross[:, :, 0, 2] = cross[:, :, 2, 0] = gy[:, None]
    cross[:, :, 1, 1] = cc
    cross[:, :, 1, 2] = cross[:, :, 2, 1] = cy
    cross[:, :, 2, 2] = yy[:, None]
    mean = np.empty((S, J, 3))
    mean[:, :, 0] = gm[:, None]
    mean[:, :, 1] = cm
    mean[:, :, 2] = ym[:, None]
    return PairMoments(n=n, mean=mean, cross=cross)


def sequential_partition(
    basis: Basis,
    accept,
    *,
    order: np.ndarray | None = None,
    compare: str = "seed",
    scan: str = "single",
    neighbors: sp.spmatrix | None = None,
    neighborhood: str = "group",
    progress=None,
) -> np.ndarray:
    """Partition the basis features with the greedy loop of the CFA algorithms.

    Parameters
    ----------
    basis : Basis
    accept : callable
        ``accept(PairMoments) -> bool mask`` (a rule of :mod:`dcfa.rules` with its parameters
        bound).
    order : ndarray of shape (D,), default=None
        The order in which features are visited (a permutation; ``None`` for ``0..D-1``).
    compare : {"seed", "mean"}
    scan : {"single", "restart"}
    neighbors : sparse matrix of shape (D, D), default=None
        Adjacency: candidates must be adjacent to a member of the group.
    neighborhood : {"group", "seed"}, default="group"
        With ``neighbors``: adjacent to any member (groups grow across the grid, the authors'
        climate runs) or to the seed only (a group stays within the seed's neighbourhood; what
        the banded moments of ``mode="neighbors"`` need).
    progress : callable, default=None
        Called as ``progress(n_assigned, D)`` after each group.

    Returns
    -------
    labels : ndarray of shape (D,)
        Group index of every feature, numbered in order of creation.
    """
    D = basis.n_features
    order = np.arange(D) if order is None else np.asarray(order)
    pos = np.empty(D, dtype=np.int64)
    pos[order] = np.arange(D)
    labels = np.full(D, -1, dtype=np.int64)
    unassigned = np.ones(D, dtype=bool)
    adj = None if neighbors is None else sp.csr_array(neighbors)
    prefetch = getattr(basis, "prefetch", None)
    # a rule with a drift bound lets a growing group skip candidates known to fail
    bounded = getattr(accept, "lower_bound", None) is not None
    skips = _Skips(D, accept) if bounded and compare == "mean" else None
    n_groups = 0
    n_assigned = 0

    for seed in order:
        if not unassigned[seed]:
            continue
        if prefetch is not None:
            prefetch(order[unassigned[order]])  # the seeds that may come next
        members = _grow_group(
            basis,
            seed,
            accept,
            order=order,
            pos=pos,
            unassigned=unassigned,
            adj=adj,
            compare=compare,
            scan=scan,
            neighborhood=neighborhood,
            skips=skips,
        )
        labels[members] = n_groups
        n_groups += 1
        n_assigned += len(members)
        if progress is not None:
            progress(n_assigned, D)
    return labels


def _grow_group(
    basis, seed, accept, *, order, pos, unassigned, adj, compare, scan, neighborhood, skips=None
) -> list[int]:
    """The group opened by ``seed``: its members, marked assigned in ``unassigned``.

    ``skips`` (:class:`_Skips`, ``compare="mean"``) leaves out candidates whose last test
    failed by more than the group has moved since: the same members, fewer tests."""
    fixed = compare == "seed"
    group = basis.open_group(seed) if hasattr(basis, "open_group") else _Group(basis, seed)
    members = [seed]
    unassigned[seed] = False
    front = _Frontier(adj, unassigned, grow=neighborhood == "group")
    front.add(seed)
    pointer = pos[seed]
    # seed mode with neighbours: a candidate's verdict never changes, cache it
    test = partial(_test, accept, group, {} if fixed and adj is not None else None)
    if skips is not None and not fixed:
        skips.open()
        test = partial(skips.test, group)
    else:
        skips = None
    while True:
        if adj is None:
            cand = order[unassigned[order]]  # what is left, in visiting order
        else:
            cand = front.candidates()
            cand = cand[np.argsort(pos[cand], kind="stable")]
        if scan == "single":
            cand = cand[pos[cand] > pointer]
        if cand.size == 0:
            break
        if fixed and (adj is None or scan == "restart" or neighborhood == "seed"):
            # tests against the seed do not depend on who joined first: take every pass
            take = cand[test(cand)]
        else:
            # candidates that provably still fail are not tested again
            take = _first_passing(cand if skips is None else skips.keep(cand), test)
        if take.size == 0:
            break
        for j in take:
            unassigned[j] = False
            members.append(j)
            front.add(j)
            if not fixed:
                group.add(j)
            if skips is not None:
                skips.moved(j)
        pointer = pos[take].max() if scan == "single" else pointer
        if fixed and adj is None:
            break  # every candidate has been tested against the seed
    return members


class _Skips:
    """Which candidates a growing group need not test again (rules with a drift bound).

    Between two tests of a candidate ``c`` the group's sum ``s`` changes; what a test reads of
    ``s`` alone (its variance, its cross-product with the target) is known exactly at every
    step, and only the correlation ``rho`` of ``s`` and ``c`` is not. That moves by at most the
    angle ``s`` has turned through since, the sum of the angles between ``s`` and ``s + x_j``
    over the members ``x_j`` joined (each exact from ``x_j``'s own test). The rule's
    ``lower_bound`` turns that into the smallest margin the candidate can have now: while it
    is above 0 the candidate still fails and is not tested. Skipping only what provably fails
    keeps the partition exactly that of testing everything (:class:`dcfa.rules.DriftBoundRule`).
    """

    TOL = 1e-9  # margins this close to 0 are always retested (rounding)

    def __init__(self, n_features: int, accept):
        self.accept = accept
        self.group = np.full(n_features, -1, dtype=np.int64)  # which group tested it
        self.rho = np.zeros(n_features)  # its correlation with the group then
        self.turn = np.zeros(n_features)  # the group's turning angle then
        self.gc = np.zeros(n_features)
        self.cc = np.zeros(n_features)
        self.cy = np.zeros(n_features)
        self.serial = -1

    def open(self) -> None:
        self.serial += 1
        self.turned = 0.0
        self.state = None  # (n, gg, gy, yy) of the group now, from its last test

    def test(self, group, cand: np.ndarray) -> np.ndarray:
        pm = group.pair_moments(cand)
        margin = self.accept.margin(pm)
        if pm.n.shape[0] == 1 and cand.size:  # one row set: the bound applies
            x = pm.cross[0]
            self.state = (
                float(pm.n[0, 0]),
                float(x[0, 0, 0]),
                float(x[0, 0, 2]),
                float(x[0, 2, 2]),
            )
            self.rho[cand] = _cosine(x[:, 0, 1], x[:, 0, 0] * x[:, 1, 1])
            self.gc[cand] = x[:, 0, 1]
            self.cc[cand] = x[:, 1, 1]
            self.cy[cand] = x[:, 1, 2]
            self.group[cand] = self.serial
            self.turn[cand] = self.turned
        return margin <= 0.0

    def keep(self, cand: np.ndarray) -> np.ndarray:
        """``cand`` without the candidates that still provably fail."""
        if self.state is None:
            return cand
        known = self.group[cand] == self.serial
        if not known.any():
            return cand
        c = cand[known]
        n, gg, gy, yy = self.state
        lower = self.accept.lower_bound(
            n, gg, gy, yy, self.cc[c], self.cy[c], self.rho[c], self.turned - self.turn[c]
        )
        fails = np.zeros(cand.size, dtype=bool)
        fails[known] = lower > self.TOL
        return cand[~fails]

    def moved(self, j: int) -> None:
        """``j`` joined (tested at this step, in this state): the group's sum turns and grows."""
        if self.state is None or self.group[j] != self.serial:
            self.serial += 1  # nothing known of j: forget every verdict of this group
            self.state = None
            return
        n, gg, gy, yy = self.state
        gc, cc = self.gc[j], self.cc[j]
        root = np.sqrt(gg)
        ortho = np.sqrt(max(cc - gc * gc / gg, 0.0)) if gg > 0 else np.inf
        self.turned += float(np.arctan2(ortho, root + gc / root)) if gg > 0 else np.pi
        self.state = (n, gg + 2.0 * gc + cc, gy + self.cy[j], yy)


def _cosine(a: np.ndarray, squared_norms: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(squared_norms > 0, a / np.sqrt(squared_norms), 0.0)


def _test(accept, group: _Group, verdict: dict | None, cand: np.ndarray) -> np.ndarray:
    if verdict is None:
        return accept(group.pair_moments(cand))
    new = np.array([c for c in cand.tolist() if c not in verdict], dtype=np.int64)
    if new.size:
        verdict.update(zip(new.tolist(), accept(group.pair_moments(new)).tolist(), strict=True))
    return np.fromiter((verdict[c] for c in cand.tolist()), bool, cand.size)


def _first_passing(cand: np.ndarray, test, first_block: int = 32) -> np.ndarray:
    """The first candidate (in the given order) that passes, as a length-0 or 1 array.

    Candidates are tested in blocks of growing size (32, 128, 512, ...), so a step where an
    early candidate passes costs a block, and a step where none does costs at most 4/3 of
    one vectorised test of all of them.
    """
    start, size = 0, first_block
    while start < cand.size:
        block = cand[start : start + size]
        ok = test(block)
        if ok.any():
            return block[[int(np.argmax(ok))]]
        start += size
        size *= 4
    return cand[:0]


class _Frontier:
    """Unassigned features adjacent to a group (only used with ``neighbors``).

    ``grow=False``: adjacent to the seed only (``neighborhood="seed"``), so a group stays
    within the seed's neighbourhood.
    """

    def __init__(self, adj, unassigned, grow: bool = True):
        self.adj = adj
        self.unassigned = unassigned
        self.grow = grow
        self.members: set[int] = set()
        self.seeded = False

    def add(self, j: int) -> None:
        self.members.discard(int(j))
        if self.adj is None or (self.seeded and not self.grow):
            return
        self.seeded = True
        row = self.adj.indices[self.adj.indptr[j] : self.adj.indptr[j + 1]]
        self.members.update(int(k) for k in row[self.unassigned[row]])

    def candidates(self) -> np.ndarray:
        """The live members (unordered: the caller orders them)."""
        front = np.fromiter(self.members, dtype=np.int64, count=len(self.members))
        live = front[self.unassigned[front]]
        if live.size < front.size:
            self.members = set(live.tolist())
        return live


def greedy_partition(basis: Basis, accept, *, progress=None) -> np.ndarray:
    """Order-free greedy aggregation (LinCFA journal, Remark 13).

    Repeatedly take the most correlated pair of current groups that passes the test and
    replace it by its aggregate, until no pair passes. Pairs of original features are tested
    all at once and kept in a sorted array; a merged group is tested against every other
    group when it is formed. Needs the full ``D x D`` moments; O(D^2 log D) time.
    """
    D = basis.n_features
    y = D
    K = basis.dense()  # group x group moments, in the slot of the group's first member
    mean = basis.mean.copy()
    count = basis.dense_count()
    active = np.ones(D, dtype=bool)
    merged = np.zeros(D, dtype=bool)  # slot holds a merged group: its original pairs are stale
    version = np.zeros(D, dtype=np.int64)
    labels = np.arange(D)

    def passing(a: int, others: np.ndarray):
        if count is None:
            n = np.broadcast_to(basis.n[:, None].astype(np.float64), (K.shape[0], others.size))
        else:
            n = count[a, others][None, :].astype(np.float64)
        pm = _pair_moments(
            gg=K[:, a, a],
            gc=K[:, a, others],
            gy=K[:, a, y],
            gm=mean[:, a],
            cc=K[:, others, others],
            cy=K[:, others, y],
            yy=K[:, y, y],
            cm=mean[:, others],
            ym=mean[:, y],
            n=n,
        )
        ok = accept(pm)
        c = pm.cross[:, ok].sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.nan_to_num(c[:, 0, 1] / np.sqrt(c[:, 0, 0] * c[:, 1, 1]))
        return others[ok], r

    # every original pair that passes, in decreasing correlation
    rs, As, Bs = [], [], []
    for a in range(D - 1):
        b, r = passing(a, np.arange(a + 1, D))
        rs.append(r)
        As.append(np.full(b.size, a))
        Bs.append(b)
    rs = np.concatenate(rs) if rs else np.zeros(0)
    idx = np.argsort(-rs, kind="stable")
    s_r, s_a, s_b = rs[idx], np.concatenate(As or [[]])[idx], np.concatenate(Bs or [[]])[idx]
    s_a, s_b = s_a.astype(np.int64), s_b.astype(np.int64)
    ptr = 0
    heap: list = []  # pairs involving a merged group: (-r, a, b, version a, version b)

    while True:
        while ptr < s_r.size and (
            merged[s_a[ptr]] or merged[s_b[ptr]] or not (active[s_a[ptr]] and active[s_b[ptr]])
        ):
            ptr += 1
        while heap and not _heap_valid(heap[0], active, version):
            heapq.heappop(heap)
        if ptr < s_r.size and (not heap or s_r[ptr] >= -heap[0][0]):
            a, b = int(s_a[ptr]), int(s_b[ptr])
            ptr += 1
        elif heap:
            _, a, b, _, _ = heapq.heappop(heap)
        else:
            break
        K[:, a, :] += K[:, b, :]
        K[:, :, a] += K[:, :, b]
        mean[:, a] += mean[:, b]
        if count is not None:
            count[a] = count[:, a] = np.minimum(count[a], count[b])
        active[b] = False
        merged[a] = True
        version[a] += 1
        labels[labels == b] = a
        others = np.flatnonzero(active)
        others = others[others != a]
        if others.size:
            ok, r = passing(a, others)
            for rv, o in zip(r.tolist(), ok.tolist(), strict=True):
                lo, hi = (a, o) if a < o else (o, a)
                heapq.heappush(heap, (-rv, lo, hi, int(version[lo]), int(version[hi])))
        if progress is not None:
            progress(D - int(active.sum()), D)

    # number groups in order of their first member
    _, first = np.unique(labels, return_index=True)
    roots = labels[np.sort(first)]
    rank = np.empty(D, dtype=np.int64)
    rank[roots] = np.arange(roots.size)
    return rank[labels]


def _heap_valid(entry, active, version) -> bool:
    _, a, b, va, vb = entry
    return bool(active[a] and active[b] and version[a] == va and version[b] == vb)


def grid_partition(
    gm,
    accept,
    *,
    radius: int,
    standardize: bool = True,
    shuffle: bool = False,
    random_state=None,
    compare: str = "seed",
    scan: str = "single",
    progress=None,
    order=None,
    segments=None,
    folds=None,
) -> np.ndarray:
    """The neighbour mode: a group holds its seed and cells within ``radius`` of it.

    Works from :class:`~dcfa._stencil.GridMoments` (the moments of nearby cells only), never a
    ``D x D`` matrix, and gives exactly the partition of :func:`sequential_partition` with the
    grid adjacency and ``neighborhood="seed"`` (and the same ``order``, see
    :func:`partition_moments`). With ``compare="seed"`` every test is between
    a cell and one of its neighbours: all ``D x k`` of them are evaluated in a few vectorised
    calls and the loop only looks verdicts up. With ``compare="mean"`` each group grows on a
    local basis of its seed's neighbourhood (the moments must reach ``2 radius``).

    ``segments`` (one :class:`~dcfa._stencil.GridMoments` per row segment, ``gm`` their merge)
    and ``folds`` give the rule the row sets of :func:`fold_parts` (NonLinCFA): every group
    then grows on a local basis of its fold sets (the moments must reach ``2 radius``).

    Returns
    -------
    labels : ndarray of shape (D,)
        -1 for excluded cells.
    """
    from sklearn.utils import check_random_state

    need = radius if compare == "seed" and segments is None else 2 * radius
    if gm.radius < need:
        raise ValueError(
            f"radius: compare={compare!r} with a radius of {radius} needs the moments of cells "
            f"up to {need} apart; these reach {gm.radius}"
        )
    D = gm.n_features
    valid = gm.valid
    idx = np.flatnonzero(valid)
    if order is not None:  # the given visiting order, restricted to the valid cells
        order = np.asarray(order, dtype=np.int64)
        if order.shape != (D,):
            raise ValueError(f"order: expected a permutation of {D} cells")
        idx = order[valid[order]]
    order = idx[check_random_state(random_state).permutation(idx.size)] if shuffle else idx
    pos = np.full(D, D, dtype=np.int64)
    pos[order] = np.arange(order.size)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(valid, 1.0 / gm.column_std(ddof=1) if standardize else 1.0, 0.0)
    nbr, _ = gm.neighbours(np.arange(D), radius)
    nbr = np.where((nbr >= 0) & valid[np.maximum(nbr, 0)], nbr, -1)
    labels = np.full(D, -1, dtype=np.int64)
    unassigned = valid.copy()
    seed_tests = compare == "seed" and segments is None
    verdict = _neighbour_verdicts(gm, accept, nbr, w) if seed_tests else None
    n_groups = n_assigned = 0
    for seed in order:
        if not unassigned[seed]:
            continue
        row = nbr[seed]
        live = (row >= 0) & unassigned[np.maximum(row, 0)]
        if verdict is not None:  # seed tests: order-free, all passing candidates join
            members = [seed, *row[live & verdict[seed]].tolist()]
        else:
            cand = row[live]
            cand = cand[np.argsort(pos[cand], kind="stable")]
            cells = np.concatenate([[seed], cand])
            if segments is None:
                local = _local_basis(gm, cells, w)
            else:
                local = _local_fold_basis(segments, folds, cells, w)
            L = cells.size
            grown = _grow_group(
                local,
                0,
                accept,
                order=np.arange(L),
                pos=np.arange(L),
                unassigned=np.ones(L, dtype=bool),
                adj=None,
                compare=compare,
                scan=scan,
                neighborhood="seed",
            )
            members = cells[grown].tolist()
        unassigned[members] = False
        labels[members] = n_groups
        n_groups += 1
        n_assigned += len(members)
        if progress is not None:
            progress(n_assigned, D)
    return labels


def _neighbour_verdicts(
    gm, accept, nbr: np.ndarray, w: np.ndarray, block: int = 500_000
) -> np.ndarray:
    """``accept`` for every (cell, neighbour) pair: (D, K) booleans, False off the grid."""
    D, K = nbr.shape
    flat_a = np.repeat(np.arange(D), K)
    flat_b = nbr.ravel()
    verdict = np.zeros(D * K, dtype=bool)
    ok = np.flatnonzero(flat_b >= 0)
    ym = gm.target_mean
    for s in range(0, ok.size, block):
        sel = ok[s : s + block]
        a, b = flat_a[sel], flat_b[sel]
        J = sel.size
        cross = np.empty((1, J, 3, 3))
        cross[0, :, 0, 0] = w[a] ** 2 * gm.diag[a]
        cross[0, :, 0, 1] = cross[0, :, 1, 0] = w[a] * w[b] * gm.pair_cross(a, b)
        cross[0, :, 0, 2] = cross[0, :, 2, 0] = w[a] * gm.target_cross[a]
        cross[0, :, 1, 1] = w[b] ** 2 * gm.diag[b]
        cross[0, :, 1, 2] = cross[0, :, 2, 1] = w[b] * gm.target_cross[b]
        cross[0, :, 2, 2] = gm.target_ss
        mean = np.stack([w[a] * gm.mean[a], w[b] * gm.mean[b], np.full(J, ym)], axis=-1)[None]
        n = np.full((1, J), float(gm.n))
        verdict[sel] = accept(PairMoments(n=n, mean=mean, cross=cross))
    return verdict.reshape(D, K)


def _local_fold_basis(segments, folds, cells: np.ndarray, w: np.ndarray) -> Basis:
    """:func:`_local_basis` on the row sets of :func:`fold_parts`: the few cells' moments in
    every segment, merged into each fold's training and test rows."""
    from dcfa._moments import Moments

    local = []
    for gm in segments:
        L = cells.size
        M = np.empty((L + 1, L + 1))
        M[:L, :L] = gm.pair_cross(cells[:, None], cells[None, :])
        M[:L, L] = M[L, :L] = gm.target_cross[cells]
        M[L, L] = gm.target_ss
        mean = np.append(gm.mean[cells], gm.target_mean)
        count = np.append(gm.count[cells], gm.n)
        local.append(Moments(n=gm.n, n_targets=1, count=count, mean=mean, cross=M))
    sets, _ = fold_parts(local, folds)
    return Basis.from_moments(sets, np.arange(cells.size), w[cells])


def _local_basis(gm, cells: np.ndarray, w: np.ndarray) -> Basis:
    """A dense basis of a few cells (all within ``gm.radius`` of each other) and the target."""
    L = cells.size
    M = np.empty((L + 1, L + 1))
    wc = w[cells]
    M[:L, :L] = np.outer(wc, wc) * gm.pair_cross(cells[:, None], cells[None, :])
    M[:L, L] = M[L, :L] = wc * gm.target_cross[cells]
    M[L, L] = gm.target_ss
    mean = np.append(wc * gm.mean[cells], gm.target_mean)
    return Basis(
        n=np.array([gm.n]),
        mean=mean[None],
        diag=np.diagonal(M).copy()[None],
        target=M[:, L].copy()[None],
        crosses=[M],
        cols=np.arange(L + 1),
        scale=np.ones(L + 1),
    )
