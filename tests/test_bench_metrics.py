"""KernelBench's metrics over task outcomes: success, fast_p over all tasks, speedups with intervals; and
the figure a bench reports of a best measured again (the agreement rule, the median, the flags)."""

from __future__ import annotations

import math

import pytest

from pragma_core.bench import BenchMetrics, TaskOutcome, bench_metrics, metrics_by_category
from pragma_core.bench.confirmations import (
    AGREEMENT,
    DISAGREED,
    DISTURBED,
    EXTRA_CONFIRMATIONS,
    UNSETTLED,
    confirmed,
    lands,
    speedups_agree,
)
from pragma_core.records import Speedup, TimingConditions, Verdict


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


# -- a best measured again: the agreement rule and the reported figure ---------------------------


def speedup(value: float, width: float = 0.02) -> Speedup:
    return Speedup(value=value, low=value * (1 - width), high=value * (1 + width))


def verdict(value: float, *, noise: tuple[str, ...] = (), compiled: float | None = None) -> Verdict:
    return Verdict(
        status="correct",
        message="correct",
        speedup=speedup(value),
        speedup_vs_compiled=speedup(compiled) if compiled is not None else None,
        conditions=TimingConditions(threads=2, cpus=(0, 1), noise=noise),
    )


def test_two_speedups_agree_when_their_intervals_overlap_or_their_values_are_within_ten_percent():
    assert AGREEMENT == 0.10
    assert speedups_agree(Speedup(value=2.0, low=1.5, high=2.5), Speedup(value=3.0, low=2.4, high=3.6))  # overlap
    assert speedups_agree(speedup(2.0), speedup(2.19))  # apart, but within 10%
    assert not speedups_agree(speedup(2.0), speedup(2.3))
    # the argmin: 7.93x [7.77-8.08] in the loop, 3.90x [3.69-4.24] confirmed a minute later
    assert not speedups_agree(Speedup(value=7.93, low=7.77, high=8.08), Speedup(value=3.90, low=3.69, high=4.24))
    reported = Speedup(value=4.0, low=3.9, high=4.1)
    assert lands(4.05, reported) and lands(4.4, reported) and lands(3.7, reported)
    assert not lands(4.5, reported) and not lands(3.5, reported)


def test_a_confirmation_that_agrees_and_was_undisturbed_is_reported_as_it_is():
    result = confirmed(verdict(2.1), [verdict(2.0, compiled=1.1)], ("eager", "compile"))
    assert result.flags == () and not result.due and result.correct
    assert result.speedups["eager"] == speedup(2.0) and result.speedups["compile"] == speedup(1.1)
    assert result.spread["eager"] == (2.0, 2.1)


def test_a_disagreement_is_timed_again_and_reported_as_the_median_flagged():
    loop, first = verdict(7.93), verdict(3.90, compiled=2.0)
    waiting = confirmed(loop, [first], ("eager", "compile"))
    assert waiting.flags == (DISAGREED,) and waiting.due
    settled = confirmed(loop, [first, verdict(8.2, compiled=4.1)], ("eager", "compile"))
    assert settled.flags == (DISAGREED,) and not settled.due
    assert settled.speedups["eager"] == speedup(7.93)  # the median of 7.93, 3.90 and 8.2, with its interval
    assert settled.speedups["compile"] == speedup(2.0)  # of two: the lower, never more than was measured twice
    assert settled.spread["eager"] == (3.90, 8.2)


def test_a_disturbed_confirmation_is_timed_again_even_where_it_agrees():
    loop = verdict(2.0)
    disturbed = verdict(2.05, noise=("the memory probe took 1.4x as long after the timing",))
    assert confirmed(loop, [disturbed], ("eager",)).due
    result = confirmed(loop, [disturbed, verdict(1.98)], ("eager",))
    assert result.flags == (DISTURBED,) and not result.due and result.speedups["eager"] == speedup(2.0)


def test_a_figure_that_never_settles_is_the_median_of_the_last_three_flagged_unsettled():
    loop = verdict(8.0)
    confirmations = [verdict(4.0), verdict(6.0, noise=("busy",)), verdict(11.0)]
    assert len(confirmations) == 1 + EXTRA_CONFIRMATIONS
    assert confirmed(loop, confirmations[:2], ("eager",)).due
    result = confirmed(loop, confirmations, ("eager",))
    assert not result.due and result.flags == (DISAGREED, DISTURBED, UNSETTLED)
    assert result.speedups["eager"] == speedup(6.0)  # the median of 4, 6 and 11: the loop's best is the oldest
    assert result.spread["eager"] == (4.0, 11.0)


def test_a_best_that_fails_a_later_confirmation_is_not_correct():
    failed = Verdict(status="wrong_output", message="output 0 differs at [3]")
    result = confirmed(verdict(7.9), [verdict(3.9), failed], ("eager",))
    assert not result.correct and not result.due and result.verdict == failed


def test_the_by_attempt_plot_shows_slowdowns_with_readable_ticks(tmp_path):
    """A slowdown is not drawn as 1x: half as fast and twice as fast average to 1x, not above it;
    the speedup axis has ticks at powers of two (0.5x, 1x) and the attempts are integers."""
    import matplotlib.image

    from pragma_core.bench._plots import _curve, write_plots

    rows = {
        "slower": {"status": "finished", "correct": True, "best_by_attempt": [0.5, 0.5]},
        "faster": {"status": "finished", "correct": True, "best_by_attempt": [None, 2.0]},
    }
    attempts, geomeans, fast_1 = _curve(rows)
    assert attempts == [1, 2]
    assert geomeans == pytest.approx([math.sqrt(0.5), 1.0])  # no correct candidate yet counts as 1x
    assert fast_1 == [0.0, 0.5]
    speedups = {"slower": 0.5, "faster": 2.0}
    for key, row in rows.items():
        row.update(category="activation", speedup={"eager": {"value": speedups[key], "low": 0.4, "high": 2.2}})
    document = {"variants": {"profiled": {"settings": {"baselines": ["eager"]}, "tasks": rows}}}
    written = write_plots(tmp_path, document)
    assert {path.name for path in written} == {"speedup_by_category.png", "speedup_by_attempt.png"}
    assert all(matplotlib.image.imread(path).shape[0] > 100 for path in written)
    import matplotlib.pyplot as plt

    from pragma_core.bench._plots import _by_attempt

    figure = _by_attempt(plt, document, ["profiled"])
    figure.canvas.draw()
    speedup_axis, _ = figure.axes
    assert [label.get_text() for label in speedup_axis.get_yticklabels()] == ["0.5x", "1x"]
    assert all(float(tick).is_integer() for tick in speedup_axis.get_xticks())
    plt.close(figure)


def test_a_tasks_line_and_its_table_row_say_why_its_run_stopped():
    """'best at attempt 1 of 1' under --max-attempts 3 reads as a setting ignored unless the reason
    is beside it."""
    from rich.console import Console

    from pragma_core.bench.report import tasks_table
    from pragma_core.bench.runner import _row_line

    reason = "roofline attainment 93% reached the target 90%"
    speedup = {"value": 1.5, "low": 1.4, "high": 1.6}
    row = {
        "status": "finished",
        "correct": True,
        "category": "activation",
        "speedup": {"eager": speedup},
        "loop_best": speedup,
        "best_attempt": 1,
        "attempts": 1,
        "stop_reason": reason,
        "loop_seconds": 30.0,
    }
    assert _row_line("level1/19_ReLU", row).endswith(f"best at attempt 1 of 1; stopped: {reason} (0.5 min)")
    document = {"variants": {"profiled": {"settings": {"baselines": ["eager"]}, "tasks": {"level1/19_ReLU": row}}}}
    console = Console(record=True, width=400)
    console.print(tasks_table(document))
    assert reason in console.export_text()
