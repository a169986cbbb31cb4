"""Medians, spread and bootstrap intervals of speedups."""

from __future__ import annotations

import numpy as np
import pytest

from pragma_core.records import Attempt, Speedup, TimingConditions, Verdict
from pragma_core.statistics import beats, bootstrap_speedup, improves_on, summarize


def test_summarize_gives_median_and_interquartile_range():
    timing = summarize([4.0, 1.0, 3.0, 2.0, 100.0])
    assert timing.median_ms == 3.0
    assert timing.iqr_ms == pytest.approx(4.0 - 2.0)
    assert timing.samples_ms == (4.0, 1.0, 3.0, 2.0, 100.0)
    with pytest.raises(ValueError):
        summarize([])


def test_bootstrap_interval_contains_the_true_ratio_and_is_reproducible():
    rng = np.random.default_rng(1)
    reference = 10.0 + rng.normal(0, 0.5, 200)
    candidate = 5.0 + rng.normal(0, 0.25, 200)
    speedup = bootstrap_speedup(reference, candidate)
    assert speedup.low < 2.0 < speedup.high
    assert speedup.high - speedup.low < 0.2
    assert bootstrap_speedup(reference, candidate) == speedup


def test_noisier_samples_give_wider_intervals():
    rng = np.random.default_rng(2)
    quiet = bootstrap_speedup(10 + rng.normal(0, 0.1, 100), 5 + rng.normal(0, 0.05, 100))
    noisy = bootstrap_speedup(10 + rng.normal(0, 2, 100), 5 + rng.normal(0, 1, 100))
    assert (noisy.high - noisy.low) > 5 * (quiet.high - quiet.low)


def test_beats_requires_the_whole_interval_above():
    old = Speedup(value=2.0, low=1.9, high=2.1)
    assert beats(Speedup(value=2.5, low=2.2, high=2.8), old)
    assert not beats(Speedup(value=2.15, low=2.0, high=2.3), old)


def _timed(value: float, low: float, high: float, *, noisy: bool = False) -> Verdict:
    conditions = TimingConditions(threads=2, cpus=(0, 1), noise=("other processes used 1.2 of the 2 CPU(s)",) * noisy)
    return Verdict(
        status="correct", message="ok", speedup=Speedup(value=value, low=low, high=high), conditions=conditions
    )


def test_a_noisy_verdict_never_replaces_a_best_but_can_be_the_first():
    best = Attempt(number=1, verdict=_timed(1.5, 1.4, 1.6))
    assert not improves_on(_timed(9.0, 8.5, 9.5, noisy=True), best)  # inflated by a busy machine
    assert improves_on(_timed(9.0, 8.5, 9.5, noisy=True), None)  # a correct version is still kept
    noisy_best = Attempt(number=1, verdict=_timed(3.0, 2.0, 4.0, noisy=True))
    assert improves_on(_timed(3.2, 3.15, 3.25), noisy_best)  # quiet and above its rough figure
    assert not improves_on(_timed(2.5, 2.45, 2.55), noisy_best)
    assert improves_on(_timed(1.8, 1.7, 1.9), best) and not improves_on(_timed(1.55, 1.5, 1.6), best)
