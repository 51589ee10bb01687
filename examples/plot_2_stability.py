"""
How much to trust a map: the stability map
==========================================

:class:`dcfa.RegionsCV` chooses its map by cross-validation, and in every fold it makes a map
from the fold's training months too. ``stability_map_`` says, for every cell, how much its
region recurs across those maps (the mean Jaccard index of its region in the chosen map and
in each fold's): 1 where the region holds the same cells in every fold.

Two fields on a 4 degree grid (45 x 90 cells, 240 months): one made of regions, and a smooth
field, made of overlapping modes of variability with no regions in it.
"""

# %%
import matplotlib.pyplot as plt

import dcfa
from dcfa.datasets import make_regions_field, make_smooth_field
from dcfa.plot import plot_stability

fields = {
    "a field of regions": make_regions_field(240, (45, 90), 12, seed=1),
    "a smooth field": make_smooth_field(240, (45, 90), seed=0),
}
models = {}
for name, ds in fields.items():
    models[name] = model = dcfa.RegionsCV(neighbors=1).fit(ds.field, ds.target)
    print(f"{name}: {model.n_features_out_} regions")
    # how alike each fold's map and the chosen map are
    print("  adjusted Rand index per fold:", model.fold_ari_.round(2))

# %%
# The maps
# --------
# The region borders are drawn in white. On the field of regions every region recurs cell
# for cell (stability 1 everywhere). On the smooth field the map changes from fold to fold:
# there are no regions to find, and the stability map shows where the borders are arbitrary.
fig, axes = plt.subplots(2, 1, figsize=(7, 7), layout="constrained")
for ax, (name, model) in zip(axes, models.items(), strict=True):
    plot_stability(
        model.stability_map_,
        ax=ax,
        region=model.label_map_,
        coastlines=False,
        title=f"{name}: {model.n_features_out_} regions",
    )
plt.show()
