"""dcfa's own bad-input errors: :class:`InputError` and the subclasses that are also another
built-in error, and the warnings that a fitted map has no skill (:class:`NoSkillWarning`)
or left cells with gaps out (:class:`GappyCellsWarning`).
Below every other part, so that any input check may raise them.

The ``dcfa`` command exits with status 2 for these only (and scikit-learn's
``InvalidParameterError``, a bad estimator parameter); any other exception, a ValueError of a
bug or of a library included, exits 1.
"""

from __future__ import annotations

import inspect
import os
from collections import Counter
from pathlib import Path

__all__ = [
    "LARGEST_TARGET",
    "GappyCellsWarning",
    "InputError",
    "InputNotFoundError",
    "InputTypeError",
    "NoSkillWarning",
    "NothingToFitError",
    "in_dcfa",
    "outside_stacklevel",
]

#: The largest target magnitude the checks accept: its squares summed over up to ~1e7 samples
#: stay finite (float64 overflows at 1.8e308; a square at about 1.3e154). Here, not beside
#: the estimators' checks, so that reading a target imports no scikit-learn.
LARGEST_TARGET = 1e150


class InputError(ValueError):
    """A bad input found by one of dcfa's checks: a configuration key, a command-line argument,
    a path, an input array or an estimator parameter. The message starts with what is wrong
    (``input.variables: ...``, ``X: ...``, ``--storage-options: ...``).

    A :class:`ValueError`, so ``except ValueError`` still catches it;
    :class:`~dcfa.batch.config.ConfigError`, :class:`~dcfa.batch.inputs.InputDataError`,
    :class:`dcfa.MemoryBudgetError` and :class:`~dcfa.storage.store.OutputError` are InputErrors.
    """


class InputTypeError(TypeError, InputError):
    """An input of the wrong type (a Dataset for ``X``, a sparse matrix): a TypeError too."""


class InputNotFoundError(FileNotFoundError, InputError):
    """An input path that is not there (``input.store: no Zarr store at ...``): a
    FileNotFoundError too (without an ``errno``: dcfa's check, not the operating system's)."""


class NothingToFitError(InputError):
    """Every feature of ``X`` was excluded (all missing, gappy, constant...): there is nothing
    to fit. ``excluded`` maps each feature's index to its reason (an ``Exclusion``, whose
    ``code`` names the rule), so a caller can name the input in its own terms."""

    def __init__(self, excluded: dict) -> None:
        self.excluded = excluded
        message = (
            f"X: every one of the {len(excluded)} features was excluded "
            f"({self.reasons('features')}); there is nothing to fit"
        )
        gaps = {why for why in excluded.values() if why.code == "gappy"}
        if len(gaps) == 1:  # one reason for all: a month absent from the archive looks so
            message += (
                f". Every feature with data has {next(iter(gaps)).split(' (')[0]}: if those are "
                "the same samples in every feature (a month absent from the archive), leave "
                "them out first, e.g. X.dropna('time', how='all')"
            )
        super().__init__(message)

    def reasons(self, noun: str) -> str:
        """:func:`exclusion_reasons` of the excluded features."""
        return exclusion_reasons(self.excluded, noun)

    def __reduce__(self):
        return type(self), (self.excluded,)


def exclusion_reasons(excluded: dict, noun: str) -> str:
    """``37 cells: constant (value 0); 2 cells: e.g. 1 of 360 values missing``: how many
    features each rule of ``excluded`` (index -> ``Exclusion``) left out, with its reason
    (one example where they differ)."""
    codes = Counter(why.code for why in excluded.values())
    first = {why.code: why for why in reversed(excluded.values())}
    alike = {c: len({w for w in excluded.values() if w.code == c}) == 1 for c in codes}
    return "; ".join(
        f"{n} {noun}: {'' if alike[code] else 'e.g. '}{first[code]}"
        for code, n in codes.most_common()
    )


class GappyCellsWarning(UserWarning):
    """Features left out of a fit because some, not all, of their values are missing (a sea-ice
    edge, a gauge's gaps): the map cannot use them, wherever they lie. ``excluded_`` lists
    them; the message names the remedy the estimator takes."""


class PatchesWarning(UserWarning):
    """The kept cells form more separate patches than ``max_groups`` (a fine land mask's
    enclosed seas, or many blocks of variables, windows and lags): no region spans two, so
    the map has a region for each of them besides the ``max_groups`` it may make of the
    rest. ``RegionsCV.n_patches_`` counts them."""


class NoSkillWarning(UserWarning):
    """The map a cross-validated estimator kept predicts no better than the climatology (its
    mean CV R^2 is <= 0, or within one standard error of 0 over the folds): the least bad of
    candidates without skill, not a map of predictors. :func:`dcfa.forward_cv` and
    :func:`dcfa.blocked_cv` filter it in their refits, whose skill they return."""


_PACKAGE = Path(__file__).resolve().parent


def in_dcfa(filename: str) -> bool:
    """Whether ``filename`` (a frame's code, or a warning's) is one of dcfa's own modules."""
    return Path(filename).resolve().is_relative_to(_PACKAGE)


# a pipeline's step is called through scikit-learn's own frames, and its first steps' fits
# through joblib's Memory (even with memory=None): the user's line is beyond them
_CALLERS = tuple(f"{os.sep}{name}{os.sep}" for name in ("sklearn", "joblib"))


def outside_stacklevel() -> int:
    """The ``stacklevel`` that points a warning, issued by the function that calls this one,
    at the first line outside dcfa, scikit-learn and joblib: the user's call, however deep in
    dcfa (or in a pipeline) the check is."""
    frame, level = inspect.currentframe().f_back, 1
    while frame is not None and (
        in_dcfa(frame.f_code.co_filename)
        or any(name in frame.f_code.co_filename for name in _CALLERS)
    ):
        frame, level = frame.f_back, level + 1
    return level
