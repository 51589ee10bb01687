"""
GBMAP: skill against the embedding's dimension
==============================================

:class:`dcfa.GBMAPRegressor` fits ``m`` one-neuron softplus learners stagewise; their outputs
are a supervised embedding of the samples (``transform``), and their sum is the prediction.
On SYNTH-COS-R (:func:`dcfa.gbmap.datasets.make_synth_cos`: ``y = 5 cos(X) u`` with a random
unit vector ``u``, no linear signal), the test skill grows with every learner.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.linear_model import LinearRegression
from sklearn.metrics import r2_score

import dcfa
from dcfa.gbmap.datasets import make_synth_cos

X, y = make_synth_cos(4000, 20, random_state=0)
X_train, X_test, y_train, y_test = X[:2000], X[2000:], y[:2000], y[2000:]
model = dcfa.GBMAPRegressor(n_boosts=24, random_state=0).fit(X_train, y_train)

# %%
# Skill against m
# ---------------
# ``predict`` is the target's mean plus the sum of the learners' outputs, so the model of
# the first ``m`` learners is a partial sum of ``transform``'s columns.
embedding = np.asarray(model.transform(X_test))
steps = np.arange(1, model.n_boosts + 1)
r2 = [r2_score(y_test, model.y_mean_ + embedding[:, :m].sum(axis=1)) for m in steps]
linear = r2_score(y_test, LinearRegression().fit(X_train, y_train).predict(X_test))

fig, ax = plt.subplots(figsize=(6, 3.5), layout="constrained")
ax.plot(steps, r2, "o-", label="GBMAP, first m learners")
ax.axhline(linear, color="C3", ls="--", label="linear regression")
ax.set_xlabel("m (learners, the embedding's dimension)")
ax.set_ylabel("test R²")
ax.legend()
plt.show()
print(f"test R² with {steps[-1]} learners: {r2[-1]:.3f}; linear: {linear:.3f}")

# %%
# Predicted against observed
# --------------------------
# The test samples: the target against the model's prediction with all the learners.
fig, ax = plt.subplots(figsize=(4.5, 4.5), layout="constrained")
ax.scatter(y_test, model.predict(X_test), s=6, alpha=0.5)
lims = [min(y_test.min(), -1), max(y_test.max(), 1)]
ax.plot(lims, lims, color="k", lw=0.8)
ax.set_xlabel("observed y")
ax.set_ylabel("predicted y")
plt.show()
