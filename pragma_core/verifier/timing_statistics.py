"""Timing statistics: medians with spread, and speedups with bootstrap confidence intervals.

Raw samples come from the sandbox child; they are reduced here, in the parent, so a candidate
cannot touch the arithmetic that judges it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..records import Attempt, Speedup, Timing, TimingConditions, Verdict

__all__ = ["summarize", "bootstrap_speedup", "beats", "inflation_bound", "improves_on", "best_of", "bar_to_beat"]

BOOTSTRAP_RESAMPLES = 2000


def summarize(samples_ms: Sequence[float]) -> Timing:
    """Median and interquartile range of the samples (all samples kept)."""
    if not samples_ms:
        raise ValueError("no timing samples")
    values = np.asarray(samples_ms, dtype=float)
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return Timing(median_ms=float(median), iqr_ms=float(q3 - q1), samples_ms=tuple(map(float, values)))


def bootstrap_speedup(
    reference_ms: Sequence[float],
    candidate_ms: Sequence[float],
    *,
    confidence: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
    paired: bool | None = None,
) -> Speedup:
    """Speedup = median(reference) / median(candidate), with a percentile bootstrap interval.

    ``paired`` (the default when both have as many samples) says the i-th samples were taken
    together, as the verifier's interleaved repetitions are: repetitions are resampled as pairs, so
    what slowed both programs at once (the machine, not the kernels) stays paired in every resample
    and does not widen the interval. Unpaired samples are resampled independently. The seed is fixed
    so the same samples always give the same interval.
    """
    reference = np.asarray(reference_ms, dtype=float)
    candidate = np.asarray(candidate_ms, dtype=float)
    if reference.size == 0 or candidate.size == 0:
        raise ValueError("no timing samples")
    if np.any(candidate <= 0):
        raise ValueError("candidate times must be positive")
    if paired is None:
        paired = reference.size == candidate.size
    elif paired and reference.size != candidate.size:
        raise ValueError("paired samples must be as many on both sides")
    rng = np.random.default_rng(seed)
    if paired:
        picks = rng.integers(0, reference.size, size=(resamples, reference.size))
        ref_medians = np.median(reference[picks], axis=1)
        cand_medians = np.median(candidate[picks], axis=1)
    else:
        ref_medians = np.median(rng.choice(reference, size=(resamples, reference.size)), axis=1)
        cand_medians = np.median(rng.choice(candidate, size=(resamples, candidate.size)), axis=1)
    ratios = ref_medians / cand_medians
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    value = float(np.median(reference) / np.median(candidate))
    return Speedup(value=value, low=min(float(low), value), high=max(float(high), value), confidence=confidence)


def beats(new: Speedup, old: Speedup) -> bool:
    """True when ``new`` is faster than ``old`` beyond noise: its interval lies wholly above."""
    return new.low > old.high


def inflation_bound(conditions: TimingConditions | None) -> float | None:
    """How many times over a busy machine may have inflated a noisy timing's speedup, or None when
    the readings cannot bound it.

    The calibration kernel runs multithreaded on the timing's CPUs just before and after it, so its
    slowdown over the fastest this machine has run it is what the multithreaded reference suffered
    (a serial candidate suffers less: that is the inflation). A slowed memory slows the reference
    and the candidate, timed interleaved, alike, so the memory probe does not count here. Drift
    between blocks and the share of
    the CPUs others used during the timing multiply it, so a load that came and went between the
    calibrations is not missed. Without a calibration against the machine's best there is no bound.
    """
    if conditions is None or conditions.calibration_ms is None or not conditions.calibration_best_ms:
        return None
    bound = max(1.0, max(conditions.calibration_ms) / conditions.calibration_best_ms)
    bound *= max(1.0, conditions.drift or 1.0)
    taken = (conditions.other_cpu or 0.0) + (conditions.steal or 0.0)
    cpus = max(1, len(conditions.cpus))
    return bound * cpus / max(cpus - taken, cpus / 10)


def improves_on(verdict: Verdict | None, best: Attempt | None) -> bool:
    """The loop's rule for a new best: a correct, timed verdict that beats the best's speedup, or
    any such verdict when there is no timed best yet. A verdict timed side by side with this very
    best (its ``versus_best`` names the best's attempt) replaces it only when the head-to-head's
    interval lies wholly above 1 (divided by the inflation bound when noisy, as below): measured in
    one process on the same inputs, that is the comparison that holds, and a candidate identical in
    code to the best cannot pass it on a lucky draw. Otherwise (no head-to-head, or one against
    another attempt, as in runs recorded before it) the two verdicts' own intervals are compared.
    A correct verdict that could not be timed (a backend that runs interpreted here) replaces only
    a best that is not correct. A noisy verdict
    (timed on a busy machine) replaces a best only when its interval's low end, divided by the
    most the machine could have inflated it (:func:`inflation_bound`), is still above the bar
    (:func:`bar_to_beat`); with no bound it can only be the first best, so a run on a machine
    that never quiets down still keeps a correct version."""
    if verdict is None or not verdict.ok:
        return False
    if verdict.speedup is None:  # correct but untimed (an interpreter): kept when nothing else is
        return best is None or best.verdict is None or not best.verdict.ok
    if best is None or best.verdict is None or best.verdict.speedup is None:
        return True
    versus = verdict.versus_best
    if versus is not None and versus.attempt == best.number:  # timed side by side with this best
        if verdict.noisy:
            inflation = inflation_bound(verdict.conditions)
            return inflation is not None and versus.speedup.low / inflation > 1
        return versus.speedup.low > 1
    if verdict.noisy:
        inflation = inflation_bound(verdict.conditions)
        return inflation is not None and verdict.speedup.low / inflation > _bar(best.verdict)
    if best.verdict.noisy:  # a rough figure: a quiet measurement above it is better evidence
        return verdict.speedup.value > best.verdict.speedup.value
    return beats(verdict.speedup, best.verdict.speedup)


def best_of(attempts: Sequence[Attempt]) -> Attempt | None:
    """The best of a run's attempts, in the order they ran, by :func:`improves_on` (each verdict's
    head-to-head names the best it was timed against, so the choice replays from the attempts alone)."""
    best = None
    for attempt in attempts:
        if improves_on(attempt.verdict, best):
            best = attempt
    return best


def _bar(best: Verdict) -> float:
    """What a new verdict's speedup must exceed to replace ``best`` (timed and correct): the top of
    a quiet best's interval, the point estimate of a noisy one."""
    assert best.speedup is not None
    return best.speedup.value if best.noisy else best.speedup.high


def bar_to_beat(best: Verdict | None) -> float:
    """The speedup below which the exact figure of a new verdict does not matter to the loop: it
    cannot replace ``best`` by :func:`improves_on` (the top of a quiet best's interval, the point
    estimate of a noisy one), and it is slower than the reference, so no better than doing nothing
    (1.0, also the bar before there is a best). The verifier stops timing a candidate clearly
    below it early (``verify(..., to_beat=...)``)."""
    if best is None or not best.ok or best.speedup is None:
        return 1.0
    return max(1.0, _bar(best))
