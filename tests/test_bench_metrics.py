"""KernelBench's metrics over task outcomes: success, fast_p over all tasks, speedups with intervals."""

from __future__ import annotations

import math

import pytest

from pragma_core.bench import BenchMetrics, TaskOutcome, bench_metrics, metrics_by_category


def outcome(name: str, category: str, speedup: float | None, correct: bool = True) -> TaskOutcome:
    return TaskOutcome(task=name, category=category, correct=correct, speedup=speedup if correct else None)


OUTCOMES = [
    outcome("relu", "activation", 2.5),
    outcome("gelu", "activation", 1.2),
    outcome("selu", "activation", 0.5),
    outcome("softmax", "normalization", 3.0),
    outcome("layernorm", "normalization", None, correct=False),
    outcome("matmul", "matmul", 0.9),
    outcome("conv", "conv", None, correct=False),
    outcome("sum", "pooling_reduction", 1.6),
]


def test_fast_p_counts_correct_and_faster_tasks_over_all_tasks():
    metrics = bench_metrics(OUTCOMES)
    assert metrics.tasks == 8 and metrics.correct == 6
    assert metrics.success_rate == pytest.approx(6 / 8)
    assert metrics.fast_p == pytest.approx({0.0: 6 / 8, 1.0: 4 / 8, 1.5: 3 / 8, 2.0: 2 / 8})


def test_speedups_are_over_correct_tasks_with_intervals_that_hold_the_value():
    metrics = bench_metrics(OUTCOMES)
    speedups = [2.5, 1.2, 0.5, 3.0, 0.9, 1.6]
    assert metrics.mean_speedup is not None and metrics.geomean_speedup is not None
    assert metrics.mean_speedup.value == pytest.approx(sum(speedups) / 6)
    assert metrics.geomean_speedup.value == pytest.approx(math.prod(speedups) ** (1 / 6))
    for interval in (metrics.mean_speedup, metrics.geomean_speedup):
        assert min(speedups) <= interval.low < interval.value < interval.high <= max(speedups)
    assert bench_metrics(OUTCOMES) == metrics  # seeded: the same outcomes, the same intervals


def test_a_correct_task_that_could_not_be_timed_counts_for_success_only():
    metrics = bench_metrics([outcome("a", "activation", None), outcome("b", "activation", 2.0)])
    assert metrics.success_rate == 1.0 and metrics.fast_p[0.0] == 1.0 and metrics.fast_p[1.0] == 0.5
    assert metrics.geomean_speedup is not None and metrics.geomean_speedup.value == 2.0


def test_categories_and_the_overall_row():
    rows = metrics_by_category(OUTCOMES)
    assert list(rows) == ["activation", "conv", "matmul", "normalization", "pooling_reduction", "all"]
    assert rows["conv"] == BenchMetrics(
        tasks=1,
        correct=0,
        success_rate=0.0,
        fast_p={0.0: 0.0, 1.0: 0.0, 1.5: 0.0, 2.0: 0.0},
        mean_speedup=None,
        geomean_speedup=None,
    )
    assert rows["activation"].fast_p[1.0] == pytest.approx(2 / 3)
    assert rows["all"] == bench_metrics(OUTCOMES)


def test_no_tasks_and_bad_speedups():
    empty = bench_metrics([])
    assert empty.tasks == 0 and empty.success_rate == 0.0 and empty.mean_speedup is None
    with pytest.raises(ValueError, match="speedup"):
        TaskOutcome(task="x", category="other", correct=True, speedup=0.0)
