"""What the fitted GBMAP embedding tells: distances, the drift score, local coefficients.

:class:`_EmbeddingMixin` holds the public methods that use a fitted model's embedding
(Patron et al. 2024, Sections 4.5 and 5.2): the embedding distance of Eq. (7), the kNN
drift score, the local linear coefficients and the path distance of Eq. (6). It is a base
of :class:`dcfa.gbmap._base._BaseGBMAP` and relies on what that class provides:
``_check_input``, ``_embed``, ``_scores``, ``_wrap_samples``, ``_learners``,
``_standardizer``, ``_out_scale`` and ``_activation``, the fitted ``coef_``, ``bias_``,
``signs_`` and ``train_embedding_``, and the subclasses' ``_train_values``.
"""

from __future__ import annotations

from numbers import Integral

import dask.array as da
import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from dcfa._compute import compute
from dcfa._errors import InputError, InputTypeError
from dcfa.gbmap import drift as _drift
from dcfa.gbmap._losses import local_coef_block, path_distance_block


class _EmbeddingMixin:
    """The uses of the fitted embedding (not for direct use; see :class:`_BaseGBMAP`)."""

    def embedding_distance(
        self,
        X: ArrayLike | da.Array | xr.DataArray,
        Y: ArrayLike | da.Array | xr.DataArray | None = None,
    ) -> np.ndarray | da.Array:
        """Pairwise L1 distances between the embeddings of ``X`` and ``Y`` (Eq. 7).

        Parameters
        ----------
        X : array-like, dask.array.Array or xarray.DataArray of shape (n_a, n_features)
        Y : same as X of shape (n_b, n_features), default=None
            ``None`` means ``Y = X``.

        Returns
        -------
        D : ndarray or dask.array.Array of shape (n_a, n_b)
            Lazy if ``X`` or ``Y`` is a Dask array.
        """
        A = self._embed(self._check_input(X).data)
        B = A if Y is None else self._embed(self._check_input(Y, "Y").data)
        return _drift.embedding_distance(A, B)

    def drift_score(
        self, X: ArrayLike | da.Array | xr.DataArray, n_neighbors: int = 5
    ) -> np.ndarray | da.Array | xr.DataArray:
        """Drift / out-of-distribution score of new points (Section 4.5 of the paper).

        ``|f(x*) - kNN(x*)|`` with ``kNN(x*)`` the mean, over the ``n_neighbors`` nearest
        training points in the embedding distance, of the training targets (regressor, target
        units) or of the model's training scores (classifier). See
        :func:`dcfa.gbmap.drift.drift_score`.

        Parameters
        ----------
        X : array-like, dask.array.Array or xarray.DataArray of shape (n_samples, n_features)
        n_neighbors : int, default=5

        Returns
        -------
        score : ndarray, dask.array.Array or xarray.DataArray of shape (n_samples,)
            Lazy for Dask ``X``. For in-memory ``X`` after a fit on Dask data, the training
            set is re-read chunk-wise (one compute).
        """
        inp = self._check_input(X)
        E = self._embed(inp.data)
        out = _drift.drift_score(
            E, self._scores(E, inp.data), self.train_embedding_, self._train_values(), n_neighbors
        )
        if isinstance(out, da.Array) and not inp.is_dask:
            (out,) = compute(out)
        return self._wrap_samples(out, inp, "drift_score", self._score_attrs("GBMAP drift score"))

    def local_coef(
        self, X: ArrayLike | da.Array | xr.DataArray, *, standardized: bool = False
    ) -> np.ndarray | da.Array | xr.DataArray:
        """Local linear coefficients of every sample (Section 5.2, Fig. 3 of the paper).

        The gradient of the boosted model ``sum_j f_j`` at each sample,

        .. math:: \\nabla_x f(x) = \\sum_j b_j\\, g'(w_j^\\top [z(x), 1])\\, w_j / s,

        with ``g' = sigmoid(beta u)`` and ``s`` the features' scales: near ``x`` the model
        is the linear model ``f(x') ~ f(x) + coef . (x' - x)``. As ``beta -> inf`` it tends
        to the paper's ``sum`` of ``b_j w_j`` over the learners active at ``x``.

        Parameters
        ----------
        X : array-like, dask.array.Array or xarray.DataArray of shape (n_samples, n_features)
        standardized : bool, default=False
            False: per unit of each raw feature. True: per standard deviation of the feature
            (``coef * scale_``), the paper's coefficients on standardised data, comparable
            across features as importances.

        Returns
        -------
        coef : ndarray, dask.array.Array or xarray.DataArray of shape (n_samples, n_features)
            In target units (regressor) or logit units (classifier) per feature unit; lazy
            for Dask input; a DataArray ``(sample_dim, *feature dims)`` for DataArray input.
            An estimator ``f0`` is not differentiated: it is not included.
        """
        if not isinstance(standardized, bool | np.bool_):
            raise InputTypeError(f"standardized: expected a bool, got {standardized!r}")
        inp = self._check_input(X)
        args = (
            self._standardizer,
            self.coef_,
            self.bias_,
            self.signs_,
            float(self.beta),
            self._activation,
            self._out_scale,
            bool(standardized),
        )
        data = inp.data
        if isinstance(data, da.Array):
            data = data.rechunk({1: -1})
            G = data.map_blocks(
                local_coef_block, *args, dtype=np.float64, meta=np.empty((0, 0), dtype=np.float64)
            )
        else:
            G = local_coef_block(data, *args)
        if inp.layout is None:
            return G
        lay = inp.layout
        return xr.DataArray(
            G.reshape((G.shape[0],) + tuple(lay.feature_shape)),
            dims=(lay.sample_dim,) + tuple(lay.feature_dims),
            coords={**dict(lay.sample_coords), **dict(lay.feature_coords)},
            name="local_coef",
        )

    def path_distance(
        self,
        X: ArrayLike | da.Array | xr.DataArray,
        Y: ArrayLike | da.Array | xr.DataArray,
        *,
        n_grid: int = 64,
    ) -> np.ndarray | da.Array | xr.DataArray:
        """The path distance of Eq. (6) between the paired rows of ``X`` and ``Y``.

        ``d_path(x, y) = int_0^1 |d/dt f(x + t (y - x))| dt``: the total change of the model
        along the segment, between ``|f(y) - f(x)|`` and the embedding distance (Eq. 8).
        Computed exactly as the total variation over the segment's turning points (Lemma 3),
        located on a grid of ``n_grid`` points plus every learner's knee and refined by
        bisection; a turning point pair closer than the grid step is missed (a lower bound).

        Parameters
        ----------
        X, Y : array-like, dask.array.Array or xarray.DataArray of shape (n_samples, n_features)
            The pairs ``(X[i], Y[i])``.
        n_grid : int, default=64

        Returns
        -------
        d : ndarray, dask.array.Array or xarray.DataArray of shape (n_samples,)
            In target (regressor) or logit (classifier) units; lazy if ``X`` or ``Y`` is a
            Dask array; a DataArray over ``X``'s samples (else ``Y``'s) if either is one. Of
            ``sum_j f_j``: an estimator ``f0`` is not included.
        """
        a, b = self._check_input(X), self._check_input(Y, "Y")
        if a.n_samples != b.n_samples:
            raise InputError(
                f"X and Y: expected paired rows, got {a.n_samples} and {b.n_samples} samples"
            )
        if isinstance(n_grid, bool) or not isinstance(n_grid, Integral) or n_grid < 2:
            raise InputError(f"n_grid: expected an int >= 2, got {n_grid!r}")
        args = (*self._learners, int(n_grid))
        A, B = a.data, b.data
        if not isinstance(A, da.Array) and not isinstance(B, da.Array):
            d = path_distance_block(A, B, *args)
        else:
            A = _drift._as_dask(A).rechunk({1: -1})
            B = _drift._as_dask(B).rechunk({0: A.chunks[0], 1: -1})
            d = da.map_blocks(
                path_distance_block, A, B, *args, drop_axis=1, dtype=np.float64,
                meta=np.empty((0,), dtype=np.float64),
            )  # fmt: skip
        return self._wrap_samples(
            d,
            a if a.layout is not None else b,
            name="path_distance",
            attrs=self._score_attrs("GBMAP path distance"),
        )
