"""The checks of an applied field's units: :func:`dcfa.batch.fitted.same_units` (spellings of
one unit) and :func:`dcfa.batch.apply.far_from_training` (series that are not the training
series' quantity), against values worked by hand."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dcfa._units import same_units
from dcfa._validation import FAR_OFFSET, FAR_RATIO
from dcfa.batch.fitted import far_from_training


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("K", "kelvin"),
        ("K", "degK"),
        ("K", " K "),
        ("degC", "Celsius"),
        ("degC", "degree_Celsius"),
        ("degC", "\N{DEGREE SIGN}C"),
        ("m s-1", "m s**-1"),
        ("m s-1", "m.s-1"),
        ("kg m-2 s-1", "kg m^-2 s^-1"),
        ("kg m-2 s-1", "kg*m**-2*s**-1"),
        ("m s-1", "m/s"),
        ("mm month-1", "mm/month"),
        ("kg m-2 s-1", "kg/m2/s"),
        ("kg m-2 s-1", "s-1 kg m^-2"),
        ("W m-2", "W/m^2"),
        ("degC s-1", "Celsius/s"),
        ("K2", "kelvin^2"),
        # UDUNITS' names in any case, as files spell them
        ("K", "degrees_kelvin"),
        ("K", "Degrees_Kelvin"),
        ("K", "KELVIN"),
        ("K", "degree_K"),
        ("degC", "degrees_celsius"),
        ("degC", "DEG_C"),
        ("K s-1", "degrees_Kelvin/s"),
    ],
)
def test_spellings_of_one_unit_are_the_same(a, b):
    assert same_units(a, b) and same_units(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("K", "degC"),
        ("m s-1", "m s-2"),
        ("mm", "m"),
        ("1.5 m", "15 m"),
        ("m/s", "s/m"),
        ("mm/month", "mm month"),
        ("kg/m2/s", "kg/m2 s-1 s-1"),
        ("1", ""),
        # the symbols are case-sensitive: "k" and "degc" are no units
        ("K", "k"),
        ("degC", "degc"),
        ("kelvin", "degrees_celsius"),
        # a "/" that divides by nothing is not dropped: "m/" was read as "m"
        ("m/", "m"),
        ("/s", "s"),
        ("m//s", "m/s"),
    ],
)
def test_other_units_are_not(a, b):
    assert not same_units(a, b) and not same_units(b, a)


_SYMBOLS = ("m", "s", "kg", "mm", "month", "W", "K", "degC", "Pa")


@given(
    st.dictionaries(st.sampled_from(_SYMBOLS), st.integers(-3, 3).filter(bool), min_size=1),
    st.randoms(use_true_random=False),
)
def test_any_spelling_of_the_factors_is_the_unit_and_another_exponent_is_not(factors, rnd):
    """A unit written from its factors, by a plain reference: the exponents as ``-1``,
    ``**-1``, ``^-1`` or after a ``/``, in any order, joined by spaces, dots or stars."""
    items = list(factors.items())

    def spell(items):
        rnd.shuffle(items)
        text = ""
        for symbol, power in items:
            if power < 0 and text and rnd.random() < 0.5:  # divide by it
                text += "/" + symbol + ("" if power == -1 else str(-power))
                continue
            sign = rnd.choice(["", "**", "^"]) if power != 1 else ""
            word = symbol + (sign + str(power) if power != 1 else "")
            text += (rnd.choice([" ", ".", "*"]) if text else "") + word
        return text

    plain = " ".join(f"{s}{p}" if p != 1 else s for s, p in sorted(factors.items()))
    assert same_units(spell(items), plain), (spell(items), plain)
    symbol = rnd.choice(sorted(factors))
    other = {**factors, symbol: factors[symbol] + rnd.choice([-1, 1])}
    assert not same_units(spell(list(other.items())), plain)


def _series(seed, n=240, groups=5):
    return np.random.default_rng(seed).normal(size=(n, groups))


@given(st.integers(0, 2**32 - 1), st.floats(-5.0, 5.0), st.floats(0.3, 3.0))
def test_series_a_few_deviations_off_pass(seed, shift, scale):
    """A century's warming (a few standard deviations) or a spread a few times the training
    one is not flagged."""
    trained = _series(seed)
    applied = _series(seed + 1, n=60) * scale + shift
    assert far_from_training(applied, trained) is None


def test_an_offset_is_named_with_its_size():
    trained = _series(0) * 0.5 + 0.1
    applied = _series(1, n=24) * 0.5 + 0.1 - 273.15
    words = far_from_training(applied, trained)
    # |(-273.15 + noise) / 0.5|: about 546 standard deviations (as 0.5 is estimated)
    assert re.fullmatch(r"lie a median of 5[0-9]{2} training standard deviations .*", words)
    near = trained + (FAR_OFFSET - 1) * trained.std(axis=0)
    assert far_from_training(near, trained) is None


def test_a_spread_far_off_is_named_unless_there_are_too_few_samples():
    trained = _series(0)
    # a thousandth of the spread, as 24 samples estimate it (a thousand times it lies far
    # from the mean too, which is said first)
    smaller = far_from_training(_series(1, n=24) / 1000.0, trained)
    assert re.fullmatch(r"vary 0\.00[0-9]+ times as much as the training series .*", smaller)
    larger = far_from_training(_series(1, n=24) * 1000.0, trained)
    assert re.fullmatch(r"lie a median of [0-9]{3} training standard deviations .*", larger)
    # a season's three months have a smaller spread than every month's
    assert far_from_training(_series(1, n=3) / 1000.0, trained) is None
    assert far_from_training(_series(1, n=24) * (FAR_RATIO / 2), trained) is None


def test_groups_without_values_are_left_out():
    trained = _series(0)
    trained[:, 0] = np.nan
    trained[:, 1] = 3.0  # no spread: no scale to measure by
    applied = _series(1, n=24)
    applied[:, 0] = 1e6
    assert far_from_training(applied, trained) is None
    assert far_from_training(applied + 100.0, trained) is not None
    assert far_from_training(applied, np.full_like(trained, np.nan)) is None


def test_one_variable_far_off_among_others_is_named_with_its_units():
    """Precipitation x 86 400 (its units attribute unchanged) in 2 of 5 groups: the median
    over all groups was that of the 3 temperature groups, and dcfa apply wrote a forecast of
    mean 3.65e5 for a target of spread 1 without a word. Each variable's groups are judged
    on their own."""
    trained = _series(0)
    applied = _series(1, n=60)
    applied[:, 3:] *= 86400.0
    units = np.array(["degC", "degC", "degC", "kg m-2 s-1", "kg m-2 s-1"])
    assert far_from_training(applied, trained) is None  # pooled: the median hides it
    words = far_from_training(applied, trained, units)
    assert re.fullmatch(r"lie a median of [0-9]+ training standard deviations .* \(its 2 "
                        r"group\(s\) in 'kg m-2 s-1'\)", words), words  # fmt: skip
    assert far_from_training(_series(1, n=60), trained, units) is None
