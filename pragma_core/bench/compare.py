"""Two benches side by side, task by task (``pragma compare A B``): which tasks each got right, their
speedups over eager PyTorch, and the overall metrics over the tasks both ran."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from ._metrics import bench_metrics
from .store import BenchStore
from .summary import outcomes, rows_of

__all__ = ["compare_benches", "comparison_tables"]


def _speedup(row: dict[str, Any] | None) -> float | None:
    if not row or not row.get("correct"):
        return None
    speedup = (row.get("speedup") or {}).get("eager")
    return speedup["value"] if speedup else None


def compare_benches(first: Path, second: Path) -> dict[str, Any]:
    """Per variant both benches have: each task's outcome in each, and the metrics of each over the
    tasks both ran (``first``, ``second``: bench directories)."""
    a, b = BenchStore(first).load(), BenchStore(second).load()
    result: dict[str, Any] = {"a": str(first), "b": str(second), "variants": {}}
    for variant in sorted(set(a["variants"]) & set(b["variants"])):
        rows_a, rows_b = rows_of(a, variant), rows_of(b, variant)
        common = sorted(set(rows_a) & set(rows_b))
        tasks = []
        for key in sorted(set(rows_a) | set(rows_b)):
            speed_a, speed_b = _speedup(rows_a.get(key)), _speedup(rows_b.get(key))
            tasks.append(
                {
                    "task": key,
                    "a": _state(rows_a.get(key)),
                    "b": _state(rows_b.get(key)),
                    "a_speedup": speed_a,
                    "b_speedup": speed_b,
                    "ratio": speed_b / speed_a if speed_a and speed_b else None,
                }
            )
        metrics = {
            side: bench_metrics(outcomes({key: rows[key] for key in common}, "eager"))
            for side, rows in (("a", rows_a), ("b", rows_b))
        }
        result["variants"][variant] = {"common": len(common), "tasks": tasks, "metrics": metrics}
    return result


def _state(row: dict[str, Any] | None) -> str:
    if row is None:
        return "absent"
    if row.get("status") == "failed":
        return "could not run"
    return "correct" if row.get("correct") else "incorrect"


def comparison_tables(comparison: dict[str, Any]) -> list[Table]:
    """Rich tables: the overall metrics, then the tasks, of each variant compared."""
    tables = []
    for variant, part in comparison["variants"].items():
        overall = Table(
            title=f"{variant}: over the {part['common']} tasks both ran (A = {comparison['a']}, B = {comparison['b']})",
            title_justify="left",
        )
        for column in ("", "correct", "fast_1", "fast_2", "geomean speedup"):
            overall.add_column(column, justify="left" if not column else "right")
        for side in ("a", "b"):
            metrics = part["metrics"][side]
            geomean = metrics.geomean_speedup
            overall.add_row(
                side.upper(),
                f"{metrics.correct}/{metrics.tasks}",
                f"{metrics.fast_p[1.0]:.0%}",
                f"{metrics.fast_p[2.0]:.0%}",
                f"{geomean.value:.2f}x [{geomean.low:.2f}-{geomean.high:.2f}]" if geomean else "-",
            )
        tables.append(overall)
        tasks = Table(title=f"{variant}: task by task (speedup over eager PyTorch)", title_justify="left")
        for column in ("task", "A", "B", "B/A"):
            tasks.add_column(column, justify="left" if column == "task" else "right")
        for task in part["tasks"]:
            tasks.add_row(
                task["task"],
                f"{task['a_speedup']:.2f}x" if task["a_speedup"] else task["a"],
                f"{task['b_speedup']:.2f}x" if task["b_speedup"] else task["b"],
                f"{task['ratio']:.2f}" if task["ratio"] else "-",
            )
        tables.append(tasks)
    return tables
