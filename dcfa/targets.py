"""Several targets, one read of the field: a map per target from the same archive."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from dcfa._errors import InputError

if TYPE_CHECKING:  # hints only: scikit-learn, Dask and xarray are imported when fitting
    import dask.array as da
    import xarray as xr
    from numpy.typing import ArrayLike
    from sklearn.base import BaseEstimator

__all__ = ["fit_each"]


def fit_each(
    estimator: BaseEstimator, X: ArrayLike | da.Array | xr.DataArray, targets: Any
) -> dict:
    """Fit a clone of ``estimator`` to each target, reading ``X`` once.

    A Dask-backed ``X`` (an archive opened lazily) is read once and held: on the workers of
    the active ``distributed`` client (which spill to their disks what exceeds their memory),
    else in this process, within ``dcfa.memory_budget``. Every fit then reads the held data,
    not the archive. ``dcfa fit`` does the same for a job whose ``target.variable`` is a list.
    An estimator with a ``fit_targets(X, targets)`` method (:meth:`dcfa.RegionsCV.fit_targets`:
    the pieces, which depend on ``X`` alone, made once) fits them all in one call.

    Parameters
    ----------
    estimator : estimator
        Unfitted, e.g. ``dcfa.RegionsCV()``; cloned per target (``sklearn.base.clone``).
    X : array-like, dask.array.Array or xarray.DataArray of shape (n_samples, ...)
        As the estimator's ``fit`` takes it.
    targets : dict of str to array-like, pandas.DataFrame, xarray.Dataset or 2-D array-like
        One series of ``n_samples`` per target: a dict (its keys name them), a DataFrame's
        columns, a Dataset's data variables, or the columns of an ``(n_samples, n_targets)``
        array (named ``"0"``, ``"1"``, ...). Each is aligned with ``X`` as ``fit`` expects
        (:func:`dcfa.align` pairs a dated target by calendar month).

    Returns
    -------
    dict of str to estimator
        The fitted clone of each target, in the targets' order.

    Raises
    ------
    ValueError
        No target, or targets of another length than ``X``'s samples (naming the target).
    MemoryBudgetError
        Without a client, when ``X`` does not fit ``dcfa.memory_budget`` (before any read).

    Examples
    --------
    >>> import dcfa
    >>> ds = dcfa.datasets.make_regions_field(240, (18, 36), 6, n_active=2, seed=1)
    >>> y = ds.target.values
    >>> models = dcfa.fit_each(dcfa.RegionsCV(), ds.field, {"y": y, "-y": -y})
    >>> list(models), models["y"].n_features_out_ == models["-y"].n_features_out_
    (['y', '-y'], True)
    """
    from sklearn.base import clone

    from dcfa._validation import sample_dim_of

    named = _named_targets(targets)
    n = _n_samples(X, sample_dim_of(estimator))
    for name, y in named.items():
        if len(y) != n:
            raise InputError(f"targets[{name!r}]: {len(y)} samples, X has {n}")
    held = _held(X)
    shared = getattr(estimator, "fit_targets", None)  # an estimator that shares work
    if shared is not None:
        return shared(held, named)
    return {name: clone(estimator).fit(held, y) for name, y in named.items()}


def _named_targets(targets) -> dict:
    if isinstance(targets, dict):
        named = {str(k): v for k, v in targets.items()}
    elif hasattr(targets, "columns"):  # a DataFrame
        named = {str(c): targets[c] for c in targets.columns}
    elif hasattr(targets, "data_vars"):  # a Dataset
        named = {str(v): targets[v] for v in targets.data_vars}
    else:
        values = np.asarray(getattr(targets, "values", targets))
        if values.ndim != 2:
            raise InputError(
                f"targets: expected a dict, a DataFrame, a Dataset or a 2-D array, got an "
                f"array of shape {values.shape}"
            )
        named = {str(j): values[:, j] for j in range(values.shape[1])}
    if not named:
        raise InputError("targets: no target given")
    return named


def _n_samples(X, sample_dim) -> int:
    """Samples of ``X``: along its ``sample_dim`` (a DataArray, in any position), else its
    first axis."""
    sizes = getattr(X, "sizes", None)
    if isinstance(sample_dim, str) and sizes is not None and sample_dim in sizes:
        return int(sizes[sample_dim])
    shape = getattr(X, "shape", None)
    return int(shape[0]) if shape is not None else len(X)


def _held(X):
    """``X`` read once: persisted on the cluster, or in this process within the budget."""
    import dask
    import dask.array as da

    data = getattr(X, "data", X)
    if not isinstance(data, da.Array):
        return X
    from dcfa._compute import active_client

    if active_client() is None:
        from dcfa.memory import MemoryBudgetError, gib, memory_budget

        budget = memory_budget()
        if data.nbytes > budget.driver:
            raise MemoryBudgetError(
                f"X: reading it once for every target holds {gib(data.nbytes)} in "
                f"this process, over the memory budget of {gib(budget.driver)} "
                f"({budget.source}); with a distributed client it is held on the workers "
                "instead, or fit one target at a time"
            )
    (held,) = dask.persist(X)
    return held
