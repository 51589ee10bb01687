"""
Regions that predict a target
=============================

A synthetic field on a 2 degree global grid (90 x 180 cells, 240 months) made of 12 regions,
each a patch of cells that share one signal; the target is built from the signals of 4 of
them. :class:`dcfa.RegionsCV` is given the field and the target only, and returns a map of
contiguous regions, how many chosen by cross-validation, with one time series per region.
"""

# %%
# The field and the target
# ------------------------
# :func:`dcfa.datasets.make_regions_field` builds the field lazily (Dask) with the true
# regions and the coefficient of each region's signal in the target (``beta``: 0 for the
# regions the target does not use).
import matplotlib.pyplot as plt
import numpy as np

import dcfa
from dcfa.plot import plot_regions

ds = dcfa.datasets.make_regions_field(
    n_time=240,
    shape=(90, 180),
    n_regions=12,
    n_active=4,
    seed=0,
)
print(ds.field.dims, ds.field.shape)
driving = np.flatnonzero(ds.beta.values)
print("regions driving the target:", driving.tolist())

# %%
# The fit
# -------
# ``neighbors=1``: a region grows only between cells one grid step apart (longitude wraps
# around the globe).
model = dcfa.RegionsCV(neighbors=1).fit(ds.field, ds.target)
print(model.n_features_out_, "regions; pieces at correlation", model.level_)

# %%
# The map
# -------
# The true regions (top) and the regions found (bottom). The labels differ (a region's number is the
# order it was found in), the patches are the same: the four regions that drive the target
# come out as regions of their own, and the regions that do not are merged.
fig, axes = plt.subplots(2, 1, figsize=(7, 7), layout="constrained")
plot_regions(ds.region, ax=axes[0], coastlines=False, title="true")
plot_regions(model.label_map_, ax=axes[1], coastlines=False, title="found")
plt.show()

# %%
# The region series
# -----------------
# ``transform`` gives one series per region (the mean of its cells); their correlation with
# the target tells the driving regions apart.
series = np.asarray(model.transform(ds.field))
target = ds.target.values
corr = [np.corrcoef(column, target)[0, 1] for column in series.T]
fig, ax = plt.subplots(figsize=(8, 3), layout="constrained")
ax.bar(range(len(corr)), corr)
ax.set_xlabel("region")
ax.set_ylabel("correlation with the target")
ax.axhline(0, color="k", lw=0.8)
plt.show()
