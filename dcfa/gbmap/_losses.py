"""GBMAP arithmetic on in-memory blocks: activations, losses, and the per-chunk loss/gradient.

Nothing here imports Dask: every function takes NumPy arrays (one row chunk, or the whole data
in memory) and :mod:`dcfa.gbmap._rows` maps them over the row chunks of a Dask array. The
layout follows dask-glm's ``families``: each loss and activation is a class of static,
array-agnostic methods (plain NumPy ufuncs, so they also work elementwise on Dask arrays), and
the registries :data:`LOSSES` and :data:`ACTIVATIONS` feed the parameter validation.

Notation (Patron et al. 2024, Eqs. 2-4). A row chunk holds the standardised features
``Z`` (``n_c x p``, *without* the intercept column), the target ``y`` and the current ensemble
score ``F``. One weak learner is the parameter vector

``theta = [a, w_1, ..., w_p, c]``

where ``a`` is its additive offset, ``w`` the projection of the standardised features and ``c``
the weight of the intercept column of ones (the bias inside the nonlinearity). Its output is
``f(z) = a + b * g(w . z + c)`` with the sign ``b`` in {-1, +1} and ``g`` the activation. The
intercept column is never materialised: ``[Z, 1] @ [w, c] = Z @ w + c``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "ACTIVATIONS",
    "LOSSES",
    "Identity",
    "LogisticLoss",
    "RowChunks",
    "Softplus",
    "SquaredLoss",
    "Standardizer",
    "chunk_sums",
    "chunk_sums_many",
    "learner_output",
    "learner_outputs",
    "objective",
    "penalty_value",
    "sigmoid",
]

# Rows per sub-block inside one chunk: ``Z @ w`` and ``Z.T @ r`` of every learner evaluated
# together run on the same sub-block while it is still in cache (at p = 200 a block is 6.5 MB:
# the L3), so a chunk is read from memory once per pass, not twice per learner. Part of the
# arithmetic: the gradient is summed block by block, so another size rounds differently.
_BLOCK_ROWS = 4096


def sigmoid(x):
    """The logistic function ``1 / (1 + exp(-x))`` without overflow."""
    return _log1pexp_and_sigmoid(x)[1]


def _log1pexp_and_sigmoid(x):
    """``log(1 + exp(x))`` and ``sigmoid(x)`` from one ``exp`` (stable for any ``x``).

    With ``e = exp(-|x|)`` (never overflows): ``log(1 + exp(x)) = max(x, 0) + log1p(e)`` and
    ``sigmoid(x) = 1 / (1 + e)`` for ``x >= 0``, ``e / (1 + e)`` otherwise. Cheaper than
    ``np.logaddexp`` followed by a separate sigmoid (this is the inner loop of every fit).
    """
    e = np.exp(-np.abs(x))
    softplus = np.maximum(x, 0.0) + np.log1p(e)
    sig = np.where(x >= 0, 1.0, e) / (1.0 + e)
    return softplus, sig


############################################################################################
# activations g (Eq. 2)


class Softplus:
    """Softplus with sharpness ``beta``: ``g(u) = log(1 + exp(beta * u)) / beta``.

    ``g -> max(0, u)`` (ReLU) as ``beta -> inf``; ``g'(u) = sigmoid(beta * u)``.
    """

    @staticmethod
    def value(u, beta: float):
        return np.logaddexp(0.0, beta * u) / beta

    @staticmethod
    def derivative(u, beta: float):
        return sigmoid(beta * u)

    @staticmethod
    def value_and_derivative(u, beta: float):
        softplus, sig = _log1pexp_and_sigmoid(beta * u)
        return softplus / beta, sig


class Identity:
    """``g(u) = u``: GBMAP without its nonlinearity (Lemma 1 of the paper; for tests)."""

    @staticmethod
    def value(u, beta: float):
        return u

    @staticmethod
    def derivative(u, beta: float):
        return np.ones_like(u)

    @staticmethod
    def value_and_derivative(u, beta: float):
        return u, np.ones_like(u)


ACTIVATIONS = {"softplus": Softplus, "identity": Identity}


############################################################################################
# losses l(y, f) (Section 3.1)


class SquaredLoss:
    """Quadratic loss ``(y - f)**2`` (regression)."""

    @staticmethod
    def pointwise_loss(y, f):
        return (y - f) ** 2

    @staticmethod
    def loss_and_gradient(y, f):
        r = y - f
        return r * r, -2.0 * r


class LogisticLoss:
    """Logistic loss ``log(1 + exp(-y f))`` for labels ``y`` in {-1, +1} (classification)."""

    @staticmethod
    def pointwise_loss(y, f):
        return np.logaddexp(0.0, -y * f)

    @staticmethod
    def loss_and_gradient(y, f):
        loss, sig = _log1pexp_and_sigmoid(-y * f)
        return loss, -y * sig


LOSSES = {"squared": SquaredLoss, "logistic": LogisticLoss}


############################################################################################
# one row chunk: sums of loss and gradient


def chunk_sums(
    Z: np.ndarray,
    y: np.ndarray,
    F: np.ndarray,
    theta: np.ndarray,
    sign: float,
    beta: float,
    loss: str = "squared",
    activation: str = "softplus",
) -> np.ndarray:
    """Sum over the rows of one chunk of the loss and of its gradient in ``theta``.

    Parameters
    ----------
    Z : ndarray of shape (n_c, p)
        Standardised features of the chunk (no intercept column).
    y, F : ndarray of shape (n_c,)
        Target (standardised, or labels in {-1, +1}) and current ensemble score.
    theta : ndarray of shape (p + 2,)
        ``[a, w_1, ..., w_p, c]`` (module docstring).
    sign : {-1.0, 1.0}
        The sign ``b`` of the learner.
    beta : float
        Softplus sharpness.
    loss, activation : str
        Keys of :data:`LOSSES` and :data:`ACTIVATIONS`.

    Returns
    -------
    sums : ndarray of shape (p + 3,)
        ``[sum_i l_i, d/dtheta sum_i l_i]`` in float64: the unnormalised loss and gradient
        (the mean and the penalty are added by :func:`objective` once all chunks are summed).
    """
    return chunk_sums_many(Z, y, F, (theta,), (sign,), beta, loss, activation)[0]


def chunk_sums_many(
    Z: np.ndarray,
    y: np.ndarray,
    F: np.ndarray,
    thetas,
    signs,
    beta: float,
    loss: str = "squared",
    activation: str = "softplus",
) -> np.ndarray:
    """:func:`chunk_sums` for several learners ``(thetas[i], signs[i])`` in one pass over ``Z``.

    Each row block of ``_BLOCK_ROWS`` rows is read from memory once and used by every
    learner while it is in cache. Row ``i`` of the result is bit for bit
    ``chunk_sums(Z, y, F, thetas[i], signs[i], ...)``: each learner gets the same products
    (one matrix-vector product each way per block, never a matrix-matrix product, which may
    round differently) and the same additions in the same order, whatever the other learners.

    Parameters
    ----------
    Z, y, F, beta, loss, activation
        As in :func:`chunk_sums`.
    thetas : sequence of k ndarrays of shape (p + 2,)
        The learners' parameters ``[a, w_1, ..., w_p, c]``.
    signs : sequence of k floats in {-1.0, 1.0}
        Their signs ``b``.

    Returns
    -------
    sums : ndarray of shape (k, p + 3)
        One row of :func:`chunk_sums` per learner.
    """
    lossf = LOSSES[loss]
    act = ACTIVATIONS[activation]
    params = []
    for theta, sign in zip(thetas, signs, strict=True):
        theta = np.asarray(theta, dtype=np.float64)
        params.append((theta[0], theta[1:-1], theta[-1], float(sign)))
    p = Z.shape[1]
    out = np.zeros((len(params), p + 3))
    n = Z.shape[0]
    for start in range(0, n, _BLOCK_ROWS):
        stop = min(start + _BLOCK_ROWS, n)
        # Aligned: NumPy computes products of a misaligned array (a chunk deserialised from
        # another Dask worker's message) without BLAS, which rounds differently.
        Zb = np.require(Z[start:stop], dtype=np.float64, requirements="A")
        yb, Fb = y[start:stop], F[start:stop]
        for (a, w, c, sign), o in zip(params, out, strict=True):
            u = Zb @ w + c
            g, dg = act.value_and_derivative(u, beta)
            f = Fb + a + sign * g
            lb, dl = lossf.loss_and_gradient(yb, f)
            dz = sign * dl * dg
            o[0] += lb.sum()
            o[1] += dl.sum()
            o[2 : p + 2] += Zb.T @ dz
            o[p + 2] += dz.sum()
    return out


def penalty_value(theta: np.ndarray, penalty: float) -> float:
    """The ridge term ``lambda * mean(w_full**2)`` of Eq. (4), ``w_full = [w, c]``."""
    w_full = np.asarray(theta)[1:]
    return float(penalty * np.mean(w_full**2))


def objective(
    sums: np.ndarray, theta: np.ndarray, n: int, penalty: float
) -> tuple[float, np.ndarray]:
    """Finish an evaluation on the driver: ``J = sum_l / n + lambda * mean(w_full**2)``.

    ``sums`` is the total of :func:`chunk_sums` over all chunks; returns ``(J, dJ/dtheta)``.
    The offset ``a`` is not penalised; the intercept-column weight ``c`` is (as in the paper,
    where it is one of the ``p + 1`` entries of ``w``).
    """
    theta = np.asarray(theta, dtype=np.float64)
    k = theta.shape[0] - 1  # p + 1 penalised weights
    value = sums[0] / n + penalty_value(theta, penalty)
    grad = sums[1:] / n
    grad[1:] += 2.0 * penalty / k * theta[1:]
    return float(value), grad


class RowChunks:
    """Some row chunks of ``Z``, ``y`` and ``F`` held in one process, with the two things a
    fit asks of them: the sums of several learners, and adding a fitted learner to ``F``.

    :mod:`dcfa.gbmap._rows` places one per worker as a Dask actor, holding the chunks that
    worker already stores, so a pass is one direct call per worker; the arithmetic is
    :func:`chunk_sums_many` per chunk, unchanged. Every call names how many learners the
    caller has added to ``F``: an actor that Dask recreated after losing its worker starts
    from the first ``F`` again, and must refuse rather than answer for the wrong ensemble.
    """

    def __init__(self, Z: list, y: list, F: list):
        self.Z, self.y, self.F = list(Z), list(y), list(F)
        self.added = 0

    def _check(self, added: int) -> None:
        if added != self.added:
            raise RuntimeError(f"rows hold {self.added} added learners, the fit {added}")

    def sums(self, thetas, signs, beta: float, loss: str, activation: str, added: int) -> list:
        """One ``(k, p + 3)`` array of :func:`chunk_sums_many` per held chunk, in order."""
        self._check(added)
        return [
            chunk_sums_many(Z, y, F, thetas, signs, beta, loss, activation)
            for Z, y, F in zip(self.Z, self.y, self.F, strict=True)
        ]

    def add(self, intercept, coef, bias, sign, beta: float, activation: str, added: int):
        """``F += f_j(Z)`` for one fitted learner (length-1 parameter arrays)."""
        self._check(added)
        self.F = [
            F + learner_output(Z, intercept, coef, bias, sign, beta, activation)
            for Z, F in zip(self.Z, self.F, strict=True)
        ]
        self.added += 1


@dataclass(frozen=True)
class Standardizer:
    """``z = ((x - shift) - centre) / scale``: the column standardisation of GBMAP.

    ``shift`` is the reference value the moments were taken around (zeros if none was
    needed) and ``centre`` the mean of ``x - shift``; subtracting them one after the other
    keeps the digits of data with a large offset (``mean = shift + centre`` rounded to float64
    can be off by half an ulp of the offset, a visible error when the spread is small).
    """

    shift: np.ndarray
    centre: np.ndarray
    scale: np.ndarray

    @property
    def mean(self) -> np.ndarray:
        return self.shift + self.centre

    @classmethod
    def from_summary(cls, summary: dict) -> tuple[Standardizer, int]:
        """From :func:`dcfa.stats.graph.column_summary`: population std, scale 1 for a constant
        column; with the number of non-finite entries (scale 1 everywhere if any)."""
        shift, centre, bad = summary["shift"], summary["centre"], summary["nonfinite"]
        if bad:
            return cls(shift, centre, np.ones_like(centre)), bad
        std = np.sqrt(summary["m2"] / summary["n"])
        return cls(shift, centre, np.where(summary["constant"], 1.0, std)), 0

    def __call__(self, X: np.ndarray) -> np.ndarray:
        return ((np.asarray(X, dtype=np.float64) - self.shift) - self.centre) / self.scale


############################################################################################
# outputs of fitted learners (transform)


def learner_outputs(
    Z: np.ndarray,
    intercept: np.ndarray,
    coef: np.ndarray,
    bias: np.ndarray,
    sign: np.ndarray,
    beta: float,
    activation: str = "softplus",
) -> np.ndarray:
    """The embedding ``phi_j(z) = a_j + b_j g(w_j . z + c_j)`` of standardised rows (Eq. 5).

    Parameters
    ----------
    Z : ndarray of shape (n_c, p)
    intercept, bias, sign : ndarray of shape (m,)
        ``a_j``, ``c_j`` and ``b_j``.
    coef : ndarray of shape (m, p)
        ``w_j``.

    Returns
    -------
    phi : ndarray of shape (n_c, m)
    """
    act = ACTIVATIONS[activation]
    U = np.asarray(Z, dtype=np.float64) @ np.asarray(coef, dtype=np.float64).T + bias
    return intercept + sign * act.value_and_derivative(U, beta)[0]


def learner_output(Z, intercept, coef, bias, sign, beta, activation) -> np.ndarray:
    """Output ``f_j(z)`` of one learner (length-1 parameter arrays) on a row chunk."""
    return learner_outputs(Z, intercept, coef, bias, sign, beta, activation)[:, 0]


def standardize(X: np.ndarray, standardizer: Standardizer) -> np.ndarray:
    """Standardised float64 rows of one chunk."""
    return standardizer(X)


def embed_block(
    X: np.ndarray,
    standardizer: Standardizer,
    intercept: np.ndarray,
    coef: np.ndarray,
    bias: np.ndarray,
    sign: np.ndarray,
    beta: float,
    activation: str,
    out_scale: float,
) -> np.ndarray:
    """Raw rows -> embedding, times ``out_scale`` (the target scale of the regressor)."""
    phi = learner_outputs(standardizer(X), intercept, coef, bias, sign, beta, activation)
    return phi * out_scale


############################################################################################
# explanations: local linear coefficients (Section 5.2) and the path distance (Eq. 6)


def local_coef_block(
    X: np.ndarray,
    standardizer: Standardizer,
    coef: np.ndarray,
    bias: np.ndarray,
    sign: np.ndarray,
    beta: float,
    activation: str,
    out_scale: float,
    standardized: bool,
) -> np.ndarray:
    """Gradient of ``sum_j f_j`` at raw rows: ``out_scale * sum_j b_j g'(u_j) w_j``.

    Per raw feature unit (divided by ``scale``) unless ``standardized``, then per standard
    deviation of the feature (the paper's coefficients on standardised data).
    """
    act = ACTIVATIONS[activation]
    W = np.asarray(coef, dtype=np.float64)
    U = standardizer(X) @ W.T + bias
    G = (sign * act.derivative(U, beta)) @ W * out_scale
    return G if standardized else G / standardizer.scale


def _boosted_along(U0, dU, t, intercept, sign, beta, activation):
    """``sum_j f_j`` (standardised units) at ``u = U0 + t dU`` for ``t`` of shape (n, K)."""
    act = ACTIVATIONS[activation]
    U = U0[:, None, :] + t[:, :, None] * dU[:, None, :]
    return (intercept + sign * act.value(U, beta)).sum(axis=-1)


def _slope_along(U0, dU, t, sign, beta, activation):
    """``d/dt sum_j f_j`` at ``u = U0 + t dU``."""
    act = ACTIVATIONS[activation]
    U = U0[:, None, :] + t[:, :, None] * dU[:, None, :]
    return (sign * act.derivative(U, beta) * dU[:, None, :]).sum(axis=-1)


_PATH_ROWS = 256  # pairs per sub-block: (rows, points, m) temporaries stay small
_BISECTIONS = 60


def path_distance_block(
    X: np.ndarray,
    Y: np.ndarray,
    standardizer: Standardizer,
    intercept: np.ndarray,
    coef: np.ndarray,
    bias: np.ndarray,
    sign: np.ndarray,
    beta: float,
    activation: str,
    out_scale: float,
    n_grid: int,
) -> np.ndarray:
    """Eq. (6) for the row pairs ``(X[i], Y[i])``: the total variation of ``sum_j f_j`` on
    the segment between them.

    Along ``x_t = x + t (y - x)`` every ``u_j`` is affine in ``t``, so ``f(x_t)`` is a sum of
    softplus functions of ``t``. The total variation is the sum of ``|f(t_l) - f(t_{l-1})|``
    over the points where ``df/dt`` changes sign (Lemma 3). They are found on a grid of
    ``n_grid`` points plus every learner's knee ``t_j = -u_j(0) / du_j``, each sign change
    of the slope between neighbours refined by bisection. Exact (to rounding) when no two
    turning points fall between neighbouring points; otherwise a lower bound that misses the
    variation of ``f`` between them.
    """
    W = np.asarray(coef, dtype=np.float64)
    ZX, ZY = standardizer(X), standardizer(Y)
    out = np.empty(ZX.shape[0])
    grid = np.linspace(0.0, 1.0, max(int(n_grid), 2))
    for s in range(0, ZX.shape[0], _PATH_ROWS):
        U0 = ZX[s : s + _PATH_ROWS] @ W.T + bias
        dU = ZY[s : s + _PATH_ROWS] @ W.T + bias - U0
        n = U0.shape[0]
        with np.errstate(divide="ignore", invalid="ignore"):
            knees = np.clip(np.nan_to_num(-U0 / dU, nan=0.0, posinf=1.0, neginf=0.0), 0, 1)
        t = np.sort(np.concatenate([np.broadcast_to(grid, (n, grid.size)), knees], axis=1))
        slope = _slope_along(U0, dU, t, sign, beta, activation)
        turn = np.sign(slope[:, :-1]) * np.sign(slope[:, 1:]) < 0
        rows, cols = np.nonzero(turn)
        lo, hi = t[rows, cols], t[rows, cols + 1]
        s_lo = slope[rows, cols]
        for _ in range(_BISECTIONS):
            mid = 0.5 * (lo + hi)
            s_mid = _slope_along(U0[rows], dU[rows], mid[:, None], sign, beta, activation)[:, 0]
            same = np.sign(s_mid) == np.sign(s_lo)
            lo, hi = np.where(same, mid, lo), np.where(same, hi, mid)
        roots = np.full(t.shape[:1] + (max(int(turn.sum(axis=1).max(initial=0)), 0),), 1.0)
        if rows.size:
            slot = np.concatenate([np.arange(c) for c in np.bincount(rows, minlength=n)])
            roots[rows, slot] = 0.5 * (lo + hi)
        pts = np.sort(np.concatenate([t, roots], axis=1), axis=1)
        F = _boosted_along(U0, dU, pts, intercept, sign, beta, activation)
        out[s : s + n] = np.abs(np.diff(F, axis=1)).sum(axis=1)
    return out * out_scale
