"""The metrics a kernel optimizer is judged by on a benchmark, as KernelBench defines them.

Over ``n`` tasks, each ending correct or not with a speedup over a baseline (eager PyTorch, or
``torch.compile``):

- **success rate**: correct tasks over all tasks;
- **fast_p**: tasks that are correct *and* faster than ``p`` times the baseline, over *all* tasks
  (KernelBench's ``fastp`` in ``src/score.py``: ``fast_0`` is the success rate, ``fast_1`` the
  share that beat the baseline at all);
- **mean** and **geometric mean** of the speedups of the correct tasks, each with a bootstrap 95%
  interval over tasks (resampling the tasks, so the interval says how much the figure depends on
  which tasks happened to be in the benchmark).

Everything is per category (the paper's six) and over all tasks, with :func:`metrics_by_category`.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Iterable, Sequence

import attrs
from attrs import validators as v

__all__ = ["FAST_P_THRESHOLDS", "TaskOutcome", "Interval", "BenchMetrics", "bench_metrics", "metrics_by_category"]

FAST_P_THRESHOLDS = (0.0, 1.0, 1.5, 2.0)
"""The ``p`` of the fast_p rates reported: correct at all, faster, 1.5x and 2x the baseline."""

ALL = "all"
"""The name of the row over every task."""


def _positive_or_none(_instance: object, attribute: attrs.Attribute, value: float | None) -> None:
    if value is not None and not (isinstance(value, (int, float)) and 0 < value < math.inf):
        raise ValueError(f"{attribute.name} must be a finite number > 0 or None, got {value!r}")


@attrs.frozen(kw_only=True)
class TaskOutcome:
    """How one task ended: its category, whether its best candidate was correct, and that
    candidate's speedup over the baseline (None when it was not correct, or not timed)."""

    task: str = attrs.field(validator=v.min_len(1))
    category: str = attrs.field(validator=v.min_len(1))
    correct: bool
    speedup: float | None = attrs.field(default=None, validator=_positive_or_none)


@attrs.frozen(kw_only=True)
class Interval:
    """A figure with its bootstrap 95% interval."""

    value: float
    low: float
    high: float


@attrs.frozen(kw_only=True)
class BenchMetrics:
    """The metrics of a set of tasks (:func:`bench_metrics`)."""

    tasks: int
    correct: int
    success_rate: float
    fast_p: dict[float, float]
    mean_speedup: Interval | None
    geomean_speedup: Interval | None


def bench_metrics(
    outcomes: Sequence[TaskOutcome],
    *,
    thresholds: Sequence[float] = FAST_P_THRESHOLDS,
    resamples: int = 2000,
    seed: int = 0,
) -> BenchMetrics:
    """Success rate, fast_p for each threshold, and the mean and geometric-mean speedups of the
    correct, timed tasks with bootstrap intervals (``resamples`` resamplings, seeded: the same
    outcomes give the same intervals)."""
    n = len(outcomes)
    correct = [outcome for outcome in outcomes if outcome.correct]
    speedups = [outcome.speedup for outcome in correct if outcome.speedup is not None]
    fast_p = {p: (sum(s > p for s in speedups) / n if n else 0.0) for p in thresholds}
    if 0.0 in fast_p:  # correct counts for fast_0 even when it was not timed (an interpreter)
        fast_p[0.0] = len(correct) / n if n else 0.0
    rng = random.Random(seed)
    return BenchMetrics(
        tasks=n,
        correct=len(correct),
        success_rate=len(correct) / n if n else 0.0,
        fast_p=fast_p,
        mean_speedup=_bootstrap(speedups, statistics.fmean, resamples, rng),
        geomean_speedup=_bootstrap(speedups, _geomean, resamples, rng),
    )


def metrics_by_category(outcomes: Iterable[TaskOutcome], **options: object) -> dict[str, BenchMetrics]:
    """:func:`bench_metrics` of each category present, in name order, then of every task (``"all"``)."""
    outcomes = list(outcomes)
    categories = sorted({outcome.category for outcome in outcomes})
    rows = {
        category: bench_metrics([o for o in outcomes if o.category == category], **options)  # type: ignore[arg-type]
        for category in categories
    }
    rows[ALL] = bench_metrics(outcomes, **options)  # type: ignore[arg-type]
    return rows


def _geomean(values: Sequence[float]) -> float:
    return math.exp(statistics.fmean(math.log(value) for value in values))


def _bootstrap(
    values: Sequence[float], statistic: Callable[[Sequence[float]], float], resamples: int, rng: random.Random
) -> Interval | None:
    """``statistic`` of ``values`` with the 2.5th and 97.5th percentiles of its bootstrap
    distribution; None with no values, the value itself as both bounds with one."""
    if not values:
        return None
    value = statistic(values)
    if len(values) == 1 or resamples < 1:
        return Interval(value=value, low=value, high=value)
    estimates = sorted(statistic(rng.choices(values, k=len(values))) for _ in range(resamples))
    low = estimates[int(0.025 * (resamples - 1))]
    high = estimates[int(math.ceil(0.975 * (resamples - 1)))]
    return Interval(value=value, low=min(low, value), high=max(high, value))
