"""What ``[method]`` and ``[gbmap]`` of a job file ask to fit: the estimators, their parameters
checked before any pass, and the seeds a job fixes when the file sets none."""

from __future__ import annotations

import dataclasses

import numpy as np
import xarray as xr

from dcfa._errors import InputError
from dcfa.batch.config import ConfigError, JobConfig
from dcfa.cfa.methods import METHODS

__all__ = [
    "DEFAULT_RANDOM_STATE",
    "PURGE_RULE",
    "binary_key",
    "build_estimator",
    "build_gbmap",
    "check_classes",
    "check_record",
    "purge",
    "purged",
    "seeded",
]

# the seed of a shuffling method (and of GBMAP) when the job does not choose one: the same job
# gives the same result, run again or resumed
DEFAULT_RANDOM_STATE = 0


def _checked(cls, params: dict, key: str, reserved: frozenset = frozenset()):
    """``cls(**params)`` with its parameters checked now (before any pass); errors name
    ``key``, the config section they come from."""
    from dcfa._validation import validate_params

    allowed = set(cls().get_params()) - reserved
    unknown = set(params) - allowed
    if unknown:
        raise ConfigError(
            f"{key}: unknown or reserved parameter(s) {sorted(unknown)} for {cls.__name__}; it "
            f"takes {sorted(allowed)}"
        )
    estimator = cls(**params)
    try:
        validate_params(estimator)
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}") from None
    return estimator


def build_estimator(method: dict):
    """The estimator named in ``[method]``, its parameters checked now."""
    return _checked(METHODS[method["name"]], dict(method["params"]), "method.params")


def check_record(
    estimator, n_samples: int, config: JobConfig, *, filled_gap: int | None = None
) -> None:
    """The method's own check of the record (enough samples for its test and for the folds
    it cuts, less their gap), before any pass: the error names the key to change and how
    many samples there are. A gap the job set itself (``filled_gap``, from :func:`purged`)
    is blamed on ``target.lead``, the key the file does set."""
    try:
        estimator.check_n_samples(n_samples)
    except ValueError as exc:
        text = str(exc)
        name, _, rest = text.partition(":")
        key = f"method.params.{name}" if name in estimator.get_params() else "target"
        lead = config.target["lead"]
        head = f"{key}:"
        if name == "gap" and filled_gap is not None:
            head = (
                f"target.lead: {lead} sets method.params.gap = {filled_gap} (not in the file: "
                f"{PURGE_RULE});"
            )
        raise ConfigError(
            f"{head}{rest} (the input and the target have {n_samples} samples in common"
            + (f" at target.lead = {lead}: a shorter lead leaves more" if lead else "")
            + ")"
        ) from None


def seeded(config: JobConfig) -> tuple[JobConfig, list[str]]:
    """``config`` with :data:`DEFAULT_RANDOM_STATE` for every ``random_state`` it leaves unset
    (the method's, if it takes one, and GBMAP's), and the keys so set."""
    keys = []
    method = config.method
    params = method["params"]
    takes = "random_state" in METHODS[method["name"]]().get_params()
    if takes and "random_state" not in params:
        method = {**method, "params": {**params, "random_state": DEFAULT_RANDOM_STATE}}
        keys.append("method.params.random_state")
    gbmap = config.gbmap
    if gbmap is not None and "random_state" not in gbmap:
        gbmap = {**gbmap, "random_state": DEFAULT_RANDOM_STATE}
        keys.append("gbmap.random_state")
    return dataclasses.replace(config, method=method, gbmap=gbmap), keys


# the purge the job sets when the file leaves method.params.gap unset, as it is said
PURGE_RULE = "target.lead + max(input.lags) + max(input.windows) - 1"


def purge(config: JobConfig) -> int:
    """The samples a training sample's months reach into a test block's:
    ``target.lead + max(input.lags) + max(input.windows) - 1``, the shortest purge of a
    time-ordered CV that leaves no training sample sharing a month with a test sample."""
    inp = config.input
    return config.target["lead"] + max(inp["lags"], default=0) + max(inp["windows"], default=1) - 1


def purged(config: JobConfig) -> tuple[JobConfig, int | None]:
    """``config`` with ``method.params.gap`` set to :func:`purge` when the method takes a
    purge and the file sets none. Returns the gap so set, or None."""
    method = config.method
    takes = "gap" in METHODS[method["name"]]().get_params()
    gap = purge(config)
    if not takes or "gap" in method["params"] or gap <= 0:
        return config, None
    method = {**method, "params": {**method["params"], "gap": int(gap)}}
    return dataclasses.replace(config, method=method), int(gap)


def binary_key(family: str | None, gbmap) -> tuple[str, str, str] | None:
    """The job key that makes the task one of two classes, its value and the setting to use
    for a quantity instead; None when the task is a quantity.

    ``family`` is GenLinCFA's (``method.params.family``), ``gbmap`` the job's GBMAP (None
    without one): every check of a binary task asks here, so that they all name the same key.
    """
    if family == "bernoulli":
        return "method.params.family", "bernoulli", 'family = "gaussian"'
    from sklearn.base import is_classifier

    if gbmap is not None and is_classifier(gbmap):
        return "gbmap.task", "classification", 'task = "regression"'
    return None


def check_classes(gbmap, config: JobConfig, target: xr.DataArray) -> None:
    """A binary task (a GBMAP classifier, a ``bernoulli`` family) needs a target of two
    classes: checked on the target, before any pass, naming the key that asks for it."""
    binary = binary_key(config.method["params"].get("family"), gbmap)
    values = np.unique(target.values[np.isfinite(target.values)])
    if binary is None or values.size == 2:
        return
    key, value, instead = binary
    listed = ", ".join(f"{v:g}" for v in values[:4]) + (", ..." if values.size > 4 else "")
    raise InputError(
        f"{key}: {value!r} needs a target of two classes; {config.target['variable']!r} "
        f"holds {values.size} distinct values ({listed}); for a quantity, use {instead}"
    )


def build_gbmap(config: JobConfig):
    """The GBMAP estimator of ``[gbmap]`` (None without one), its parameters checked now.

    ``task = "regression"`` or ``"classification"`` picks the estimator (default: regression,
    classification for GenLinCFA with ``family = "bernoulli"``); every other key is a
    parameter of :class:`~dcfa.GBMAPRegressor` / :class:`~dcfa.GBMAPClassifier`.
    """
    if config.gbmap is None:
        return None
    from dcfa import GBMAPClassifier, GBMAPRegressor

    params = dict(config.gbmap)
    family = config.method["params"].get("family")
    task = params.pop("task", "classification" if family == "bernoulli" else "regression")
    if task not in ("regression", "classification"):
        raise ConfigError(f"gbmap.task must be 'regression' or 'classification', got {task!r}")
    cls = GBMAPClassifier if task == "classification" else GBMAPRegressor
    # checkpoints go to the job's work directory
    return _checked(cls, params, "gbmap", reserved=frozenset({"checkpoint"}))
