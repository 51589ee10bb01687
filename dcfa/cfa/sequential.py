"""The papers' greedy loop: groups grown one at a time in the visiting order.

The three algorithms are one loop with different acceptance rules (:mod:`dcfa.cfa.rules`): open a
group with the first unassigned feature (in a possibly shuffled order), test candidates
against the group, let the passing ones join. What the loop needs from the data is a
:class:`Basis`: the per-segment moments of the (scaled) features and the target. A group's
aggregate ``g = sum_k w_k x_k`` is kept as running linear forms of those moments, so a step
costs O(S D) for all candidates at once and never touches the data.

Loop options (the Algorithms page of the documentation, section "The greedy loop"):

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

The driver (:mod:`dcfa.cfa.driver`) prepares what it reads; :mod:`dcfa.cfa.greedy` is the
order-free variant of LinCFA's Remark 13.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import scipy.sparse as sp

from dcfa.cfa.basis import Basis, BasisGroup
from dcfa.cfa.skips import Allowances, DriftSkips

COMPARE = ("seed", "mean")


SCANS = ("single", "restart")


NEIGHBORHOODS = ("group", "seed")


def sequential_partition(
    basis: Basis,
    accept,
    *,
    order: np.ndarray | None = None,
    compare: str = "seed",
    scan: str = "single",
    neighbors: sp.spmatrix | None = None,
    neighborhood: str = "group",
    blocks: np.ndarray | None = None,
    progress=None,
) -> np.ndarray:
    """Partition the basis features with the greedy loop of the CFA algorithms.

    Parameters
    ----------
    basis : Basis
    accept : callable
        ``accept(PairMoments) -> bool mask`` (a rule of :mod:`dcfa.cfa.rules` with its parameters
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
        the banded moments of ``mode="grid"`` need).
    blocks : ndarray of int of shape (D,), default=None
        Every feature's block: candidates must be in the seed's block (None: one block).
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
    prefetch = basis.prefetch
    # a rule that bounds its margin lets a growing group keep verdicts (dcfa.cfa.skips)
    skips = _skips(basis, accept) if compare == "mean" else None
    numbering = GroupNumbering(labels, progress)

    for seed in order:
        if not unassigned[seed]:
            continue
        if prefetch is not None:
            prefetch(order[unassigned[order]])  # the seeds that may come next
        members = grow_group(
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
            blocks=blocks,
            growing=numbering.growing,
        )
        numbering.add(members)
    return labels


class GroupNumbering:
    """Writes each new group into ``labels``, numbered in order of creation, and reports
    ``progress(n_assigned, D)`` after each (both partition loops)."""

    def __init__(self, labels: np.ndarray, progress=None):
        self.labels = labels
        self.progress = progress
        self.n_groups = 0
        self.n_assigned = 0

    def add(self, members) -> None:
        self.labels[members] = self.n_groups
        self.n_groups += 1
        self.n_assigned += len(members)
        if self.progress is not None:
            self.progress(self.n_assigned, self.labels.size)

    def growing(self, n_members: int) -> None:
        """Report a group still growing (one group of a complete graph can take minutes)."""
        if self.progress is not None:
            self.progress(self.n_assigned + n_members, self.labels.size)


def grow_group(
    basis,
    seed,
    accept,
    *,
    order,
    pos,
    unassigned,
    adj,
    compare,
    scan,
    neighborhood,
    skips=None,
    blocks=None,
    growing=None,
) -> list[int]:
    """The group opened by ``seed``: its members, marked assigned in ``unassigned``.

    ``skips`` (:mod:`dcfa.cfa.skips`, ``compare="mean"``) leaves out
    candidates whose last verdict provably still holds: the same members, fewer tests.
    ``growing(n_members)`` is called after each round of members joins."""
    fixed = compare == "seed"
    group = basis.open_group(seed)
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
        if blocks is not None:  # never two variables, time scales or lags in one group
            cand = cand[blocks[cand] == blocks[seed]]
        if scan == "single":
            cand = cand[pos[cand] > pointer]
        if cand.size == 0:
            break
        if fixed and (adj is None or scan == "restart" or neighborhood == "seed"):
            # tests against the seed do not depend on who joined first: take every pass
            take = cand[test(cand)]
        else:
            # verdicts that provably still stand are not tested again
            unknown, standing = (cand, cand[:0]) if skips is None else skips.split(cand)
            take = _first_passing(unknown, test)
            take = standing if take.size == 0 else take
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
        if growing is not None:
            growing(len(members))
        if fixed and adj is None:
            break  # every candidate has been tested against the seed
    return members


def _skips(basis, accept):
    """What keeps verdicts for this rule and basis: interval bounds (series bases), a drift
    bound, or nothing."""
    if getattr(accept, "bounds", None) is not None and basis.member_drift is not None:
        return Allowances(basis, accept)
    if getattr(accept, "lower_bound", None) is not None:
        return DriftSkips(basis.n_features, accept)
    return None


def _test(accept, group: BasisGroup, verdict: dict | None, cand: np.ndarray) -> np.ndarray:
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
