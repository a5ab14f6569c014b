"""Hand-computed examples for the monitors' statistics."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from schemas.metrics import histogram_quantile
from streams.monitors.stats import (
    adjusted_difference,
    bernoulli_llr,
    chi_square_sf,
    cusum_step,
    difference,
    gaussian_llr,
    poisson_llr,
    relative_change,
    wilson_interval,
    z_for_confidence,
)


def test_wilson_interval_of_five_in_ten() -> None:
    # p = .5; centre stays .5; half = 1.96·sqrt(.025 + 3.8416/400) / 1.38416 = .263411
    lo, hi = wilson_interval(5, 10, 1.96)
    assert lo == pytest.approx(0.236589, abs=1e-6)
    assert hi == pytest.approx(0.763411, abs=1e-6)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_log_likelihood_ratios() -> None:
    # 3·ln(.25/.5) + 7·ln(.75/.5) = −2.079442 + 2.838256
    assert bernoulli_llr(3, 10, 0.5, 0.25) == pytest.approx(0.758814, abs=1e-6)
    # n·δ/σ²·(mean − μ0 − δ/2) = 4·1/4·(1 − 0.5)
    assert gaussian_llr(4, 1.0, 0.0, 2.0, 1.0) == pytest.approx(0.5)
    # 10·ln(10/20) − (10 − 20)
    assert poisson_llr(10, 20, 10) == pytest.approx(3.068528, abs=1e-6)


def test_cusum_floors_at_zero_and_caps() -> None:
    assert cusum_step(1.0, -2.0, 10.0) == 0.0
    assert cusum_step(9.0, 5.0, 10.0) == 10.0
    assert cusum_step(2.0, 1.5, 10.0) == 3.5


def test_histogram_quantile_interpolates_inside_the_bucket() -> None:
    assert histogram_quantile([2, 2, 0], 0.5, (10.0, 20.0)) == pytest.approx(10.0)
    assert histogram_quantile([2, 2, 0], 0.75, (10.0, 20.0)) == pytest.approx(15.0)
    assert histogram_quantile([0, 0, 3], 0.5, (10.0, 20.0)) == 20.0  # open bucket
    assert math.isnan(histogram_quantile([0, 0, 0], 0.5, (10.0, 20.0)))


def test_relative_change_delta_method() -> None:
    # ratio 1.1; se = sqrt(9/100 + 1.21·4/100) / 10 = .0372022
    rel, lo, hi = relative_change(10, 4, 100, 11, 9, 100, 1.96)
    assert rel == pytest.approx(0.1)
    assert lo == pytest.approx(0.1 - 1.96 * 0.0372022, abs=1e-6)
    assert hi == pytest.approx(0.1 + 1.96 * 0.0372022, abs=1e-6)


def test_a_collapsing_rate_never_falls_more_than_all_of_it() -> None:
    # edit rate 0.975 (n=160) → 0.027 (n=37): the symmetric interval would reach −102.6%
    rel, lo, hi = relative_change(0.975, 0.975 * 0.025, 160, 0.027, 0.027 * 0.973, 37, 1.96)
    assert rel == pytest.approx(-0.9723, abs=1e-4)
    assert lo == -1.0 and hi == pytest.approx(-0.919, abs=1e-3)
    # a mean that can be negative keeps its symmetric interval
    rel, lo, _ = relative_change(0.5, 1.0, 20, -0.1, 1.0, 20, 1.96)
    assert lo < -1.0


def test_difference_welch_normal_interval() -> None:
    # −0.2 − 0.3 = −0.5; se = sqrt(1.96/80 + 1.69/80) = .2136001
    diff, lo, hi = difference(0.3, 1.96, 80, -0.2, 1.69, 80, 1.959964)
    assert diff == pytest.approx(-0.5)
    assert (lo, hi) == (pytest.approx(-0.5 - 1.959964 * 0.2136001, abs=1e-6),
                        pytest.approx(-0.5 + 1.959964 * 0.2136001, abs=1e-6))
    assert all(math.isnan(x) for x in difference(0.3, 1.0, 0, 0.1, 1.0, 5, 1.96))


@pytest.mark.parametrize("statistic, df", [(3.841459, 1), (5.991465, 2), (7.814728, 3),
                                           (9.487729, 4), (11.0705, 5)])
def test_chi_square_tail_at_the_5_percent_critical_values(statistic: float, df: int) -> None:
    assert chi_square_sf(statistic, df) == pytest.approx(0.05, abs=1e-5)


def test_chi_square_srm_example() -> None:
    # 44,000 vs 45,000 on a 50/50 split: χ² = 2·500²/44,500 = 11.236, p ≈ 0.0008
    assert chi_square_sf(2 * 500**2 / 44_500, 1) == pytest.approx(0.000802, abs=2e-6)


def test_z_for_confidence() -> None:
    assert z_for_confidence(0.95) == pytest.approx(1.959964, abs=1e-6)


def _groups(effect: float, noise: float, rng: random.Random,
            n: int = 80) -> tuple[list[tuple[float, float | None]], ...]:
    """Tasks of spread-out difficulty x; y = x + noise (+ effect on the candidate's tasks)."""
    def group(shift: float) -> list[tuple[float, float | None]]:
        out: list[tuple[float, float | None]] = []
        for _ in range(n):
            x = rng.gauss(0, 1.3)
            out.append((x + shift + rng.gauss(0, noise), x))
        return out
    return group(0.0), group(effect)


def test_without_covariates_the_adjusted_difference_is_welchs() -> None:
    rng = random.Random(1)
    base, cand = _groups(0.3, 0.5, rng)
    bare = [(y, None) for y, _ in base], [(y, None) for y, _ in cand]
    diff, lo, hi, reduction = adjusted_difference(*bare, 1.96)
    ys0, ys1 = [y for y, _ in base], [y for y, _ in cand]
    expected = difference(statistics.fmean(ys0), statistics.variance(ys0), 80,
                          statistics.fmean(ys1), statistics.variance(ys1), 80, 1.96)
    assert (diff, lo, hi) == pytest.approx(expected)
    assert reduction == 0.0


def test_a_covariate_that_explains_most_of_the_spread_narrows_the_interval() -> None:
    rng = random.Random(2)
    base, cand = _groups(0.3, 0.5, rng)
    diff, lo, hi, reduction = adjusted_difference(base, cand, 1.96)
    _, raw_lo, raw_hi, _ = adjusted_difference([(y, None) for y, _ in base],
                                               [(y, None) for y, _ in cand], 1.96)
    assert hi - lo < 0.5 * (raw_hi - raw_lo)
    assert reduction > 0.75  # ρ² = 1.69 / (1.69 + 0.25) ≈ 0.87
    assert lo < 0.3 < hi


def test_the_adjustment_stays_unbiased_over_many_splits() -> None:
    rng = random.Random(3)
    diffs, covered = [], 0
    for _ in range(400):
        base, cand = _groups(0.3, 0.5, rng, n=40)
        diff, lo, hi, _ = adjusted_difference(base, cand, 1.96)
        diffs.append(diff)
        covered += lo <= 0.3 <= hi
    assert statistics.fmean(diffs) == pytest.approx(0.3, abs=0.03)
    assert 0.9 <= covered / 400 <= 0.99  # the 95% interval covers the true effect


def test_missing_covariates_count_as_the_mean_and_too_few_records_give_no_interval() -> None:
    rng = random.Random(4)
    base, cand = _groups(0.3, 0.5, rng)
    holed = [(y, None) if i % 2 else (y, x) for i, (y, x) in enumerate(base)]
    diff, lo, hi, reduction = adjusted_difference(holed, cand, 1.96)
    assert lo < diff < hi and 0 < reduction < 0.87
    assert all(math.isnan(v) for v in adjusted_difference(base[:1], cand, 1.96)[:3])
