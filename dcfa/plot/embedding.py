"""GBMAP's embedding of the samples, and its drift score over time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dcfa._errors import InputError
from dcfa.plot._figure import pyplot as _pyplot
from dcfa.plot._figure import sample_axis

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.colors import Colormap

__all__ = ["plot_drift", "plot_embedding"]


def plot_embedding(
    embedding: Any,
    y: Any = None,
    *,
    ax: Axes | None = None,
    components: tuple[int, int] = (0, 1),
    cmap: str | Colormap = "viridis",
    title: str | None = None,
    scale: bool = True,
) -> Axes:
    """Scatter plot of two components of a GBMAP embedding.

    Parameters
    ----------
    embedding : array-like, dask.array.Array or xarray.DataArray of shape (n_samples, m)
        The embedding ``(f_1(x), ..., f_m(x))``, e.g. ``GBMAPRegressor.transform(X)``
        (computed here if lazy). A 1-D array is one component.
    y : array-like of shape (n_samples,), optional
        Colours the points (with a colorbar), e.g. the target or the model's prediction;
        class labels (strings, booleans, a categorical) get a colour per class and a legend.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on; a new figure by default.
    components : (int, int), default=(0, 1)
        0-based columns drawn on the x and y axes (labelled 1-based, ``f_1(x)`` ...).
    cmap : str or matplotlib.colors.Colormap, default="viridis"
        Colormap of ``y``.
    title : str, optional
        Title of the Axes; none by default.
    scale : bool, default=True
        Draw each component over its standard deviation (axes labelled ``f_1(x) / sd``):
        GBMAP's learners can output values orders of magnitude apart, and the scatter of the
        raw components is then a line along one axis. False: the raw values.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes; ``ax.collections[0]`` is the scatter.

    Notes
    -----
    With a single component (m == 1), it is drawn against the sample index, or against ``y``
    when given (then without colours).

    Raises
    ------
    ValueError
        If ``embedding`` is not 1-D or 2-D, ``components`` are not two distinct columns of
        it, or ``y`` has not one value per sample.
    """
    E = np.asarray(embedding, dtype=np.float64)
    if E.ndim == 1:
        E = E[:, None]
    if E.ndim != 2:
        raise InputError(f"embedding: expected shape (n_samples, m), got {E.shape}")
    n, m = E.shape
    yv = None
    if y is not None:
        yv = np.asarray(y).reshape(-1)
        if yv.shape[0] != n:
            raise InputError(f"y: expected {n} values (one per sample), got {yv.shape[0]}")
    y_label = _name(y, "y")
    unit = ""
    if scale:
        spread = E.std(axis=0)
        E = E / np.where(spread > 0, spread, 1.0)
        unit = " / sd"

    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(layout="constrained")
    if m == 1:
        x = np.arange(n) if yv is None else yv
        ax.scatter(x, E[:, 0], s=12)
        ax.set_xlabel("sample" if yv is None else y_label)
        ax.set_ylabel(f"f_1(x){unit}")
    else:
        i, j = _components(components, m)
        if yv is None:
            ax.scatter(E[:, i], E[:, j], s=12)
        elif not np.issubdtype(yv.dtype, np.number) or yv.dtype == bool:
            # class labels ("yes"/"no", a classifier's predict): a colour and a legend entry
            # per class, not a colorbar
            for k, label in enumerate(np.unique(yv)):
                ax.scatter(*E[yv == label][:, [i, j]].T, s=12, color=f"C{k}", label=str(label))
            ax.legend(title=y_label, frameon=False)
        else:
            points = ax.scatter(E[:, i], E[:, j], c=yv, cmap=cmap, s=12)
            ax.figure.colorbar(points, ax=ax, label=y_label)
        ax.set_xlabel(f"f_{i + 1}(x){unit}")
        ax.set_ylabel(f"f_{j + 1}(x){unit}")
    if title is not None:
        ax.set_title(title)
    return ax


def _components(components: Sequence[int], m: int) -> tuple[int, int]:
    try:
        i, j = (int(c) for c in components)
    except (TypeError, ValueError) as err:
        raise InputError(f"components: expected two column indices, got {components!r}") from err
    if not (0 <= i < m and 0 <= j < m) or i == j:
        raise InputError(
            f"components: expected two distinct columns in 0..{m - 1}, got {components!r}"
        )
    return i, j


def _name(values: Any, default: str) -> str:
    name = getattr(values, "name", None)
    return str(name) if isinstance(name, str) and name else default


def plot_drift(
    score: Any,
    time: Any = None,
    *,
    ax: Axes | None = None,
    threshold: float | None = None,
    title: str | None = None,
    reference: Any = None,
) -> Axes:
    """GBMAP drift score over time, with the points above a threshold highlighted.

    Parameters
    ----------
    score : array-like, dask.array.Array or xarray.DataArray of shape (n_samples,)
        Drift score ``|f(x) - kNN mean|``, e.g. ``GBMAPRegressor.drift_score(X)``. A
        DataArray's coordinate along its dimension, or a pandas Series' index, gives the x
        values.
    time : array-like of shape (n_samples,), optional
        x values (numbers or datetimes); overrides the DataArray's coordinate. By default the
        coordinate, or the sample index.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on; a new figure by default.
    threshold : float, optional
        Draws a horizontal line at this level and marks the points strictly above it.
    title : str, optional
        Title of the Axes; none by default.
    reference : float or array-like, optional
        What the score of a month like those fitted on reaches: the drift scores of the
        training months (their 95th percentile is drawn) or a number, as a dotted grey line.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes; ``ax.lines[0]`` is the score, then the threshold's line (when given) and
        the reference's (when given); ``ax.collections[0]`` the points above the threshold.

    Raises
    ------
    ValueError
        If ``score`` is not 1-D or ``time`` has not one value per score.
    """
    s = np.asarray(score, dtype=np.float64)
    if s.ndim != 1:
        raise InputError(f"score: expected shape (n_samples,), got {s.shape}")
    n = s.shape[0]
    if time is not None:
        x = np.asarray(time)
        if x.shape != (n,):
            raise InputError(f"time: expected shape ({n},), got {x.shape}")
        x_label = _name(time, "time")
    else:
        x, x_label = sample_axis(score, n)

    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(layout="constrained")
    ax.plot(x, s, lw=1.2, color="C0", label="drift score")
    if threshold is not None:
        above = s > threshold
        ax.axhline(threshold, ls="--", lw=1, color="C3", label=f"threshold {threshold:g}")
        ax.scatter(
            x[above], s[above], s=20, color="C3", zorder=3, label=f"above ({int(above.sum())})"
        )
    if reference is not None:
        ref = np.asarray(reference, dtype=np.float64)
        level = float(np.nanpercentile(ref, 95)) if ref.ndim else float(ref)
        what = "95th percentile of the reference" if ref.ndim else "reference"
        ax.axhline(level, ls=":", lw=1.2, color="grey", label=f"{what} ({level:.3g})")
    if threshold is not None or reference is not None:
        ax.legend(loc="best", fontsize="small")
    ax.set_xlabel(x_label)
    ax.set_ylabel("drift score |f(x) − kNN mean|")
    if title is not None:
        ax.set_title(title)
    return ax
