"""How much two maps of regions agree: each cell's region recurring in the other maps, and the
adjusted Rand index of the partitions.

* :func:`comembership`: the pure function, on flat labels (RegionsCV's stability across its
  folds).
* :func:`map_agreement`: the same for maps on a grid (``label_map_``, a result's ``region``),
  the maps of other members of an ensemble, other periods or resamples of the years.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xarray as xr

from dcfa._errors import InputError, InputTypeError
from dcfa._validation import region_labels

__all__ = ["comembership", "map_agreement"]


def comembership(labels: np.ndarray, others: list[np.ndarray]) -> np.ndarray:
    """How much of each item's group recurs in each of ``others``: the mean over the other
    maps of the Jaccard index of the item's two groups (1: the same cells around it in every
    map). Items labelled -1 in ``labels`` get NaN; an item labelled -1 in another map counts 0
    for that map.
    """
    labels = np.asarray(labels)
    out = np.zeros(labels.size)
    keep = labels >= 0
    if not others:
        return np.where(keep, 1.0, np.nan)
    for other in others:
        other = np.asarray(other)
        both = keep & (other >= 0)
        a, b = labels[both], other[both]
        # contingency of the two maps over the items both keep
        na, nb = int(labels[keep].max()) + 1, int(other.max()) + 1
        pair = a * nb + b
        inter = np.bincount(pair, minlength=na * nb)
        size_a = np.bincount(labels[keep], minlength=na)
        size_b = np.bincount(other[other >= 0], minlength=nb)
        union = size_a[a] + size_b[b] - inter[pair]
        jac = np.zeros(labels.size)
        jac[both] = inter[pair] / union
        out += jac
    out /= len(others)
    return np.where(keep, out, np.nan)


def map_agreement(
    reference: xr.DataArray, others: xr.DataArray | Sequence[xr.DataArray]
) -> xr.Dataset:
    """How much the map ``reference`` recurs in ``others``: maps of regions on the same grid.

    Parameters
    ----------
    reference : xarray.DataArray
        Integer region labels on a grid, e.g. ``label_map_`` of a fitted estimator or a
        result store's ``region``; -1 or NaN marks a cell in no region (land, no data).
    others : xarray.DataArray or sequence of them
        Maps on the same grid (the same dims, in any order, and the same labels of each), e.g.
        the maps fitted on other members of an ensemble, other periods, or resamples of the
        years. Their region numbers need not match ``reference``'s.

    Returns
    -------
    xarray.Dataset
        - ``recurrence`` on the grid: for each cell, the mean over ``others`` of the Jaccard
          index of its region in ``reference`` and its region in that map (1: the same cells
          around it in every map; a cell another map leaves out counts 0 there); NaN where
          ``reference`` has no region. :func:`dcfa.plot.plot_stability` draws it.
        - ``group_recurrence`` (``group``): each region's cells' mean, how much the region
          recurs.
        - ``ari`` (``map``): the adjusted Rand index of ``reference`` and each map, over the
          cells both place in a region (1: the same partition; about 0: no more alike than
          chance).

        The maps' scalar coordinates (each one's ``member``) label the ``map`` dim;
        ``reference``'s are in the attrs (``reference = "member = r1i1p1f1"``).

    Notes
    -----
    These are the measures of :class:`dcfa.RegionsCV`'s ``stability_map_``,
    ``group_stability_`` and ``fold_ari_``, which compare its map with its folds' maps.
    """
    from sklearn.metrics import adjusted_rand_score

    from dcfa.geo import group_mean

    ref = _labels(reference, "reference")
    maps = [others] if isinstance(others, xr.DataArray) else list(others)
    if not maps:
        raise InputError("others: expected at least one map to compare with")
    flat, labelled = [], []
    for k, other in enumerate(maps):
        name = f"others[{k}]" if not isinstance(others, xr.DataArray) else "others"
        other = _labels(other, name)
        if set(other.dims) != set(ref.dims):
            raise InputError(f"{name}: expected the dims of reference {ref.dims}, got {other.dims}")
        other = other.transpose(*ref.dims)
        for d in ref.dims:
            if d in ref.indexes and not ref.indexes[d].equals(other.indexes.get(d)):
                raise InputError(
                    f"{name}: its {d!r} labels differ from reference's; compare maps of one grid"
                )
        if other.shape != ref.shape:
            raise InputError(f"{name}: shape {other.shape}, reference's {ref.shape}")
        flat.append(other.values.ravel())
        labelled.append({c: other[c].item() for c in other.coords if other[c].ndim == 0})
    labels = ref.values.ravel()
    recurrence = comembership(labels, flat)
    n_groups = int(labels.max()) + 1 if (labels >= 0).any() else 0
    both = [(labels >= 0) & (f >= 0) for f in flat]
    ari = [
        adjusted_rand_score(labels[b], f[b]) if b.any() else np.nan
        for f, b in zip(flat, both, strict=True)
    ]
    # a scalar coordinate of the maps (each one's member) labels them; the reference's is
    # said in the attrs, not left as if every value were about it
    scalar = [c for c in ref.coords if ref[c].ndim == 0]
    out = xr.Dataset(
        {
            "recurrence": ref.drop_vars(scalar)
            .copy(data=recurrence.reshape(ref.shape))
            .assign_attrs(
                long_name="recurrence of each cell's region in the other maps",
                description="mean Jaccard index of the cell's region in reference and in "
                "each other map",
                units="1",
            ),
            "group_recurrence": (
                "group",
                group_mean(labels, recurrence, n_groups),
                {"long_name": "mean recurrence of the region's cells", "units": "1"},
            ),
            "ari": (
                "map",
                np.asarray(ari, dtype=np.float64),
                {"long_name": "adjusted Rand index of reference and the map"},
            ),
        },
        attrs={"reference": ", ".join(f"{c} = {ref[c].item()}" for c in scalar)} if scalar else {},
    )
    names = set.intersection(*(set(d) for d in labelled))
    return out.assign_coords({c: ("map", [d[c] for d in labelled]) for c in sorted(names)})


def _labels(region, name: str) -> xr.DataArray:
    """``region`` as integer labels, -1 for cells in no region (NaN or negative)."""
    if not isinstance(region, xr.DataArray):
        raise InputTypeError(
            f"{name}: expected an xarray.DataArray of region labels on a grid (label_map_, a "
            f"result's region), got {type(region).__name__}"
        )
    return region.copy(data=region_labels(region.values, name)).rename(None)
