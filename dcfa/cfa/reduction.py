"""A fitted reduction as one value: every feature's group, weight and centre.

:class:`Reduction` is what a CFA estimator's ``transform`` applies (its ``reduction_``) and
what the batch job's features pass and ``dcfa apply`` apply to an archive, so the transform
exists once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dcfa.cfa.aggregate import aggregate, broadcast_back
from dcfa.cfa.inputs import apply_inputs, output_attrs

__all__ = ["Reduction"]


@dataclass(frozen=True, eq=False)
class Reduction:
    """Group ``g``'s value is the mean (or sum) over its members ``k`` of
    ``weights_k * scale_k * (phi(x_k) - centre_k)``.

    Attributes
    ----------
    labels : ndarray of int of shape (n_features,)
        Every feature's group; -1 for a feature in no group.
    scale, centre : ndarray of float64 of shape (n_features,)
        ``1/std`` and the mean for standardised aggregation, else 1 and 0; 0 for a feature
        in no group.
    weights : ndarray of shape (n_features,) or None
        How a group's members are averaged (area weights); None for the plain mean.
    aggregation : {"mean", "sum"}
    inputs : {"identity", "square"} or callable
        ``phi``, applied to the data first.
    nan_aware : bool
        A group's value in a sample is the mean over its members observed in that sample.
    standardized : bool
        Whether the members are standardised (the aggregates are then unitless).
    """

    labels: np.ndarray
    scale: np.ndarray
    centre: np.ndarray
    weights: np.ndarray | None = None
    aggregation: str = "mean"
    inputs: object = "identity"
    nan_aware: bool = False
    standardized: bool = False

    @property
    def n_groups(self) -> int:
        return int(self.labels.max()) + 1 if (self.labels >= 0).any() else 0

    @property
    def plain(self) -> bool:
        """Whether the data enter as they are (identity inputs, no missing values)."""
        return not self.nan_aware and isinstance(self.inputs, str) and self.inputs == "identity"

    def output_units(self, units: str | None) -> str:
        """The units of a group's aggregate of features in ``units``: ``"1"`` when the
        features are standardised, squared for squared inputs, else ``units`` ("" for none)."""
        attrs = {"units": str(units)} if units else {}
        out = output_attrs(attrs, inputs=self.inputs, standardized=self.standardized)
        return out.get("units", "")

    def apply(self, data):
        """The ``(n_samples, n_groups)`` aggregates of ``data`` (NumPy or lazy Dask)."""
        return aggregate(
            apply_inputs(data, self.inputs),
            self.labels,
            self.scale,
            self.centre,
            how=self.aggregation,
            nan_aware=self.nan_aware,
            weights=self.weights,
        )

    def back(self, values: np.ndarray) -> np.ndarray:
        """Every feature gets its group's value, back in its own units (NaN if in no group)."""
        return broadcast_back(values, self.labels, self.scale, self.centre, how=self.aggregation)
