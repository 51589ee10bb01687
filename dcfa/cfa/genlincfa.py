"""GenLinCFA: generalised linear correlated features aggregation (regression, classification)."""

from __future__ import annotations

from numbers import Real
from typing import TYPE_CHECKING

import numpy as np

from dcfa._errors import InputError
from dcfa._validation import Interval, StrOptions, single_target
from dcfa.cfa.base import CFA_PARAMETERS, INPUT_PARAMETERS, BaseCFA
from dcfa.cfa.driver import partition_moments
from dcfa.cfa.rules import RULES
from dcfa.stats.moments import MISSING_POLICIES, Moments

if TYPE_CHECKING:
    from collections.abc import Callable

    import scipy.sparse as sp

__all__ = ["GenLinCFA", "genlincfa", "FAMILIES"]

# b''(0) of the canonical exponential family: Gaussian b = t^2/2, Bernoulli log(1 + e^t),
# Poisson e^t
FAMILIES = {"gaussian": 1.0, "bernoulli": 0.25, "poisson": 1.0}
FORMS = ("full", "simple")


def genlincfa(
    moments: Moments,
    *,
    eps: float = 0.75,
    curvature: float = 1.0,
    form: str = "full",
    standardize: bool = False,
    compare: str = "mean",
    scan: str = "restart",
    shuffle: bool = False,
    random_state: int | np.random.RandomState | None = None,
    neighbors: sp.sparray | sp.spmatrix | None = None,
    neighborhood: str = "group",
    target: int = 0,
    progress: Callable[..., None] | None = None,
    order: np.ndarray | None = None,
) -> np.ndarray:
    """GenLinCFA partition from moments already gathered: :class:`GenLinCFA`'s rule and loop
    (the estimator reaches the loop through its executions).

    ``curvature`` is ``b''(0)`` of the family (see :data:`FAMILIES`); the other parameters are
    those of :class:`GenLinCFA`; ``order`` is the visiting order before any shuffle (see
    :func:`dcfa.cfa.driver.partition_moments`). Returns labels, -1 for excluded features.
    """
    return partition_moments(
        moments,
        RULES["genlincfa"](eps, curvature, form),
        standardize=standardize,
        shuffle=shuffle,
        random_state=random_state,
        compare=compare,
        scan=scan,
        neighbors=neighbors,
        neighborhood=neighborhood,
        target=target,
        progress=progress,
        order=order,
    )


class GenLinCFA(BaseCFA):
    """Generalised linear correlated features aggregation (GLM targets: regression, classes).

    Groups inputs greedily with the second-order bound of the paper's Theorem 4 (Algorithm 2):
    no model is fitted, only correlations of the group aggregate, the candidate, their union
    and the target enter. Works unchanged for binary targets.

    Parameters
    ----------
    eps : float, default=0.75
        Plays ``m/M`` in (0, 1]: larger values aggregate more. It must be tuned per dataset
        (the papers use 0.71-0.80 on their synthetic data, 0.06-0.5 on real data with the
        simple form).
    family : {"gaussian", "bernoulli", "poisson"}, default="gaussian"
        The GLM of the target; gives ``b''(0)`` = 1, 1/4, 1. ``"bernoulli"`` takes any two
        labels (the larger, in sorted order, is the positive class).
    curvature : float or None, default=None
        Overrides ``b''(0)``. The authors' experiments use 1 for every linear task,
        classification included, and 1/2 for their quadratic classification; with the
        Bernoulli value 1/4 the full rule aggregates far less at the same ``eps``, so pass
        ``curvature=1`` to use the published ``eps`` values.
    form : {"full", "simple"}, default="full"
        ``"full"``: Algorithm 2, ``k(|r_P| + |r_j|) + b/2 - eps [k |r_(P+j)| + b (1 + rho)] <= 0``;
        ``"simple"``: ``k(|r_P| + |r_j|) <= eps (1 + rho)``, the rule of the authors' real-data
        notebooks.
    inputs, aggregation, standardize, compare, scan, shuffle, random_state, neighbors,
    neighborhood, periodic, weights, sample_dim
        As in :class:`NonLinCFA`.
    mode : {"auto", "dense", "series", "grid", "rows"}, default="auto"
        Where the statistics come from (see :class:`LinCFA`).
    row_batch : int, default=256
        ``mode="rows"``: seeds whose rows one pass computes.
    missing : {"exclude", "pairwise"}, default="exclude"
        As in :class:`LinCFA`.

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
        The two labels, for ``family="bernoulli"``.
    labels_, n_features_out_, group_sizes_, excluded_, mean_, scale_, moments_, label_map_,
    n_features_in_, feature_names_in_
        As in :class:`LinCFA`.

    Notes
    -----
    In correlations, with ``k = n/(n-1)`` (the authors z-score with ``ddof=0`` and take
    covariances with ``ddof=1``), only four correlations per candidate are needed; they come
    from the moments of one pass (the Algorithms page of the documentation, section
    "GenLinCFA").

    Memory: ``mode="dense"`` holds a ``(D+1) x (D+1)`` float64 matrix (on Dask input its
    upper tiles, about half of it). Before the pass, ``fit`` compares it with the Dask config
    key ``dcfa.memory_budget`` (default 0.5 of the available memory; see :mod:`dcfa.memory`):
    ``mode="auto"`` then runs the series execution (``n x D`` float64 in memory, the same
    partition), an explicit ``"dense"`` raises :class:`dcfa.MemoryBudgetError` (a
    ``ValueError``), computing nothing.

    Examples
    --------
    >>> import numpy as np
    >>> from dcfa import GenLinCFA
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=(500, 2))
    >>> X = np.repeat(z, 3, axis=1) + 0.3 * rng.normal(size=(500, 6))
    >>> labels = np.where(z[:, 0] - z[:, 1] + rng.normal(size=500) > 0, "wet", "dry")
    >>> model = GenLinCFA(eps=0.6, family="bernoulli", form="simple").fit(X, labels)
    >>> model.classes_.tolist(), model.labels_.tolist()
    (['dry', 'wet'], [0, 0, 0, 1, 1, 1])
    """

    _parameter_constraints: dict = {
        **CFA_PARAMETERS,
        **INPUT_PARAMETERS,
        "eps": [Interval(Real, 0, 1, closed="right")],
        "family": [StrOptions(set(FAMILIES))],
        "curvature": [None, Interval(Real, 0, None, closed="left")],
        "form": [StrOptions(set(FORMS))],
        "missing": [StrOptions(set(MISSING_POLICIES))],
    }

    def __init__(
        self,
        *,
        eps=0.75,
        family="gaussian",
        curvature=None,
        form="full",
        inputs="identity",
        aggregation="mean",
        standardize=False,
        compare="mean",
        scan="restart",
        shuffle=False,
        random_state=None,
        neighbors=None,
        neighborhood="group",
        periodic="auto",
        missing="exclude",
        weights=None,
        mode="auto",
        row_batch=256,
        sample_dim="time",
    ):
        self.eps = eps
        self.family = family
        self.curvature = curvature
        self.form = form
        self.inputs = inputs
        self.aggregation = aggregation
        self.standardize = standardize
        self.compare = compare
        self.scan = scan
        self.shuffle = shuffle
        self.random_state = random_state
        self.neighbors = neighbors
        self.neighborhood = neighborhood
        self.periodic = periodic
        self.missing = missing
        self.weights = weights
        self.mode = mode
        self.row_batch = row_batch
        self.sample_dim = sample_dim

    def _check_target(self, y, inp):
        if self.family != "bernoulli":
            Y = super()._check_target(y, inp)
            if self.family == "poisson" and Y.min() < 0:
                raise InputError(
                    f"y: the poisson family needs non-negative targets (counts), got min "
                    f"{Y.min():g}"
                )
            return Y
        values = single_target(y, inp, numeric=False)
        classes = np.unique(values[:, 0])
        if classes.size != 2:
            shown = classes[:5].tolist()
            raise InputError(
                f"y: the bernoulli family needs exactly two classes, got {classes.size} "
                f"({shown}{'...' if classes.size > 5 else ''})"
            )
        self.classes_ = classes
        return (values == classes[1]).astype(np.float64)

    @property
    def _curvature(self) -> float:
        return FAMILIES[self.family] if self.curvature is None else self.curvature

    def _accept(self):
        return RULES["genlincfa"](self.eps, self._curvature, self.form)
