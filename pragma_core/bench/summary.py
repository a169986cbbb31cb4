"""A bench's document read as results: the rows that ended, each task's outcome, and the metrics
by variant, baseline and category that ``bench.json`` stores and the report and plots show."""

from __future__ import annotations

import math
from typing import Any

from ..serialization import to_dict
from ._metrics import BenchMetrics, TaskOutcome, metrics_by_category

__all__ = ["VARIANTS", "rows_of", "outcomes", "bench_summary", "usage_summary", "metrics_json"]

VARIANTS = ("profiled", "unprofiled")


def rows_of(document: dict[str, Any], variant: str) -> dict[str, dict[str, Any]]:
    """The variant's task rows that ended (a crashed task is not a result yet)."""
    tasks = document.get("variants", {}).get(variant, {}).get("tasks", {})
    return {key: row for key, row in tasks.items() if row.get("status") in ("finished", "failed")}


def outcomes(rows: dict[str, dict[str, Any]], baseline: str) -> list[TaskOutcome]:
    """Each task's outcome against ``baseline`` (a failed task is an incorrect one)."""
    found = []
    for key, row in rows.items():
        speedup = (row.get("speedup") or {}).get(baseline)
        found.append(
            TaskOutcome(
                task=key,
                category=row.get("category") or "other",
                correct=bool(row.get("correct")),
                speedup=speedup["value"] if speedup else None,
            )
        )
    return found


def bench_summary(document: dict[str, Any]) -> dict[str, dict[str, dict[str, BenchMetrics]]]:
    """variant -> baseline -> category (and ``all``) -> metrics."""
    summary: dict[str, dict[str, dict[str, BenchMetrics]]] = {}
    for variant, part in document.get("variants", {}).items():
        rows = rows_of(document, variant)
        if not rows:
            continue
        summary[variant] = {
            baseline: metrics_by_category(outcomes(rows, baseline)) for baseline in part["settings"]["baselines"]
        }
    return summary


def usage_summary(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Tokens and cost over the variant's tasks (cost None when no provider reported one)."""
    prompt = sum((row.get("tokens") or {}).get("prompt", 0) for row in rows.values())
    completion = sum((row.get("tokens") or {}).get("completion", 0) for row in rows.values())
    costs = [row["cost_usd"] for row in rows.values() if row.get("cost_usd") is not None]
    return {"prompt_tokens": prompt, "completion_tokens": completion, "cost_usd": math.fsum(costs) if costs else None}


def metrics_json(document: dict[str, Any]) -> dict[str, Any]:
    """The summary as plain JSON (fast_p keys as text: ``"1.5"``)."""
    result: dict[str, Any] = {}
    for variant, baselines in bench_summary(document).items():
        result[variant] = {
            baseline: {
                category: to_dict(metrics) | {"fast_p": {f"{p:g}": share for p, share in metrics.fast_p.items()}}
                for category, metrics in categories.items()
            }
            for baseline, categories in baselines.items()
        }
        result[variant]["usage"] = usage_summary(rows_of(document, variant))
    return result
