"""core.claims inference on independent units: Student t, exact sign-flip and sign tests, hierarchical and block
bootstraps, the minimum detectable effect — each against a hand computation, a brute force or a closed form."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icml25.core.claims import (block_bootstrap, hierarchical_bootstrap, mde, sign_flip_test, sign_test,
                                summarize, t_interval)


def test_t_interval_matches_scipy_and_the_hand_value():
    from scipy import stats

    x = np.array([0.1, 0.2, 0.3])
    lo, hi = t_interval(x)
    ref = stats.t.interval(0.95, 2, loc=0.2, scale=stats.sem(x))
    assert (lo, hi) == pytest.approx(ref, abs=1e-12)
    assert (lo, hi) == pytest.approx((-0.048414, 0.448414), abs=1e-6)


def test_sign_flip_test_is_exact_against_brute_force():
    d = np.array([0.3, -0.1, 0.5, 0.2, 0.4])
    flips = [np.mean(np.array(s) * d) for s in itertools.product([-1, 1], repeat=5)]
    obs = d.mean()
    assert sign_flip_test(d, alternative="greater") == pytest.approx(np.mean([f >= obs - 1e-12 for f in flips]))
    assert sign_flip_test(d) == pytest.approx(np.mean([abs(f) >= abs(obs) - 1e-12 for f in flips]))
    # all three positive: the smallest one-sided p at n = 3 is 1/8
    assert sign_flip_test([1.0, 2.0, 3.0], alternative="greater") == 0.125
    assert sign_flip_test([1.0, 2.0, 3.0], alternative="less") == 1.0


def test_sign_flip_monte_carlo_agrees_with_exact_for_large_n():
    rng = np.random.default_rng(1)
    d = rng.normal(0.3, 1.0, size=20)
    p = sign_flip_test(d, alternative="greater", n_resamples=40000)
    from scipy import stats

    ref = stats.permutation_test((d,), np.mean, permutation_type="samples", alternative="greater",
                                 n_resamples=np.inf).pvalue
    assert p == pytest.approx(ref, abs=0.01)


def test_sign_test_binomial():
    assert sign_test([1, 2, 3], alternative="greater") == pytest.approx(0.125)
    assert sign_test([1, -2, 3, 0], alternative="two-sided") == pytest.approx(1.0)
    assert sign_test([0.0, 0.0]) == 1.0


def test_mde_hand_computed():
    """n = 3, sd = 0.1: (t_{0.975,2} + t_{0.8,2}) · 0.1/√3 = (4.302653 + 1.060660) · 0.057735 = 0.309651."""
    assert mde(3, 0.1) == pytest.approx((4.302652729911275 + 1.0606601717798212) * 0.1 / math.sqrt(3), rel=1e-9)
    assert mde(3, 0.1) == pytest.approx(0.309651, abs=1e-6)
    assert math.isnan(mde(1, 0.1))
    assert mde(30, 1.0) < mde(10, 1.0) < mde(3, 1.0)


def test_hierarchical_bootstrap_reflects_between_unit_variance():
    """Units whose means differ widely: the interval must be as wide as the spread of unit means allows, far wider
    than pooling all points as independent would give."""
    rng = np.random.default_rng(0)
    groups = [rng.normal(mu, 0.01, size=200) for mu in (-1.0, -0.5, 0.0, 0.5, 1.0, 0.2)]
    lo, hi = hierarchical_bootstrap(groups, seed=1)
    pooled = np.concatenate(groups)
    naive_half = 1.96 * pooled.std() / math.sqrt(pooled.size)
    assert hi - lo > 10 * 2 * naive_half
    assert lo < pooled.mean() < hi
    with pytest.raises(ValueError, match="3 top-level units < 5"):
        hierarchical_bootstrap(groups[:3])


def test_block_bootstrap_widens_for_dependent_windows():
    """A random walk's increments averaged over overlapping windows: neighbours are nearly equal, so the block
    bootstrap interval must be much wider than the i.i.d. one."""
    rng = np.random.default_rng(2)
    e = rng.normal(size=2000)
    windows = np.convolve(e, np.ones(48) / 48, mode="valid")  # stride-1 windows sharing 47 of 48 values
    lo, hi = block_bootstrap(windows, block=48, seed=0)
    iid = 2 * 1.96 * windows.std() / math.sqrt(windows.size)
    assert hi - lo > 3 * iid
    with pytest.raises(ValueError, match="too few independent blocks"):
        block_bootstrap(windows[:100], block=48)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-10, 10, allow_nan=False), min_size=2, max_size=12),
       st.floats(0.1, 10), st.floats(-5, 5))
def test_summarize_is_affine_equivariant(values, a, b):
    """The t interval of a·x + b is a·CI(x) + b (a > 0): an identity of location-scale statistics."""
    s, t = summarize(values), summarize([a * v + b for v in values])
    assert t["ci_low"] == pytest.approx(a * s["ci_low"] + b, abs=1e-6)
    assert t["ci_high"] == pytest.approx(a * s["ci_high"] + b, abs=1e-6)
