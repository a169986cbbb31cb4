"""Benchmarks of the loop over many tasks (``pragma bench``): the metrics KernelBench defines
(:mod:`.metrics`)."""

from __future__ import annotations

from ._metrics import FAST_P_THRESHOLDS, BenchMetrics, Interval, TaskOutcome, bench_metrics, metrics_by_category

__all__ = ["FAST_P_THRESHOLDS", "BenchMetrics", "Interval", "TaskOutcome", "bench_metrics", "metrics_by_category"]
