"""The synthetic SYNTH-COS data of the GBMAP paper (Patron et al. 2024, Section 4.1).

SYNTH-COS-R(n, p): ``X_ij ~ N(0, 1)``, ``u`` a random unit vector,
``y = alpha * cos(X) @ u`` with ``alpha = 5``, then centred. Ordinary least squares explains
nothing of it (``E[x cos x] = 0``), while the target is a smooth function of ``X``.
SYNTH-COS-C(n, p): labels ``y in {-1, +1}`` with ``P(y = +1) = sigmoid(y_R)``; a logistic
regression is at chance and the Bayes accuracy is about 0.79.
"""

from __future__ import annotations

import dask.array as da
import numpy as np

__all__ = ["make_synth_cos"]


def _block(n: int, p: int, u: np.ndarray, alpha: float, seed: int) -> np.ndarray:
    """``[X, y_raw, uniform]`` for ``n`` rows (one chunk), from its own seed."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = alpha * (np.cos(X) @ u)
    return np.column_stack([X, y, rng.random(n)])


def make_synth_cos(
    n: int,
    p: int,
    *,
    task: str = "regression",
    alpha: float = 5.0,
    random_state: int | None = None,
    chunks: int | None = None,
):
    """SYNTH-COS-R / SYNTH-COS-C data (the paper's recipe; no intercept column in ``X``).

    Parameters
    ----------
    n, p : int
        Samples and features.
    task : {"regression", "classification"}, default="regression"
    alpha : float, default=5.0
        Amplitude of the target.
    random_state : int or None, default=None
    chunks : int or None, default=None
        Rows per chunk: ``X`` and ``y`` are then Dask arrays generated chunk-wise (the same
        numbers for any ``chunks`` only if ``chunks`` is fixed; each chunk has its own seed).

    Returns
    -------
    X : ndarray or dask.array.Array of shape (n, p)
    y : ndarray or dask.array.Array of shape (n,)
        Centred real target, or labels in {-1, +1} (float).

    Notes
    -----
    The authors' code also rotates ``X`` by a random orthogonal matrix after computing ``y``;
    that leaves GBMAP, OLS and logistic regression unchanged in distribution (isotropic
    ``X``) and is not done here. The target is centred with its sample mean.
    """
    if task not in ("regression", "classification"):
        raise ValueError(f"task: expected 'regression' or 'classification', got {task!r}")
    ss = np.random.SeedSequence(random_state)
    head, *rest = ss.spawn(1 + (1 if chunks is None else -(-n // chunks)))
    v = np.random.default_rng(head).normal(size=p)
    u = v / np.linalg.norm(v)
    if chunks is None:
        seed = int(rest[0].generate_state(1)[0])
        data = _block(n, p, u, alpha, seed)
    else:
        sizes = [min(chunks, n - s) for s in range(0, n, chunks)]
        parts = [
            da.from_delayed(
                _delayed_block(k, p, u, alpha, int(s.generate_state(1)[0])),
                shape=(k, p + 2),
                dtype=np.float64,
            )
            for k, s in zip(sizes, rest, strict=True)
        ]
        data = da.concatenate(parts, axis=0)
    X = data[:, :p]
    y = data[:, p] - data[:, p].mean()
    if task == "classification":
        prob = 1.0 / (1.0 + np.exp(-y))
        y = (data[:, p + 1] < prob) * 2.0 - 1.0
    return X, y


def _delayed_block(n, p, u, alpha, seed):
    import dask

    return dask.delayed(_block, pure=True)(n, p, u, alpha, seed)
