"""A bench's report: its metrics per variant, baseline and category, ``report.md`` and the plots.

Everything here is computed from ``bench.json`` alone, so ``pragma report DIR`` renders a bench
again (after a resume, or on another machine) without running anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from ..files import atomic_write_text
from ..loop.run_summary import same_kernel
from ._metrics import ALL, FAST_P_THRESHOLDS, BenchMetrics, metrics_by_category
from ._plots import write_plots
from .summary import VARIANTS, bench_summary, metrics_json, outcomes, rows_of, usage_summary

__all__ = ["write_report", "report_markdown", "tasks_table", "interval", "flag_text", "measurements_text"]


def write_report(root: Path, document: dict[str, Any]) -> dict[str, Any]:
    """Write ``report.md`` and the plots into ``root``; returns the metrics as stored in
    ``bench.json`` (under ``metrics``)."""
    plots = write_plots(root / "plots", document)
    atomic_write_text(root / "report.md", report_markdown(document, [path.relative_to(root) for path in plots]))
    return metrics_json(document)


# -- report.md ------------------------------------------------------------------------------------


def _percent(value: float) -> str:
    return f"{value:.0%}"


def _interval(metric: Any) -> str:
    if metric is None:
        return "-"
    return f"{metric.value:.2f}x [{metric.low:.2f}-{metric.high:.2f}]"


def _metrics_table(categories: dict[str, BenchMetrics]) -> list[str]:
    head = ["category", "tasks", "correct", *(f"fast_{p:g}" for p in FAST_P_THRESHOLDS), "mean speedup", "geomean"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    for category, metrics in categories.items():
        cells = [
            f"**{category}**" if category == ALL else category,
            str(metrics.tasks),
            str(metrics.correct),
            *(_percent(metrics.fast_p[p]) for p in FAST_P_THRESHOLDS),
            _interval(metrics.mean_speedup),
            _interval(metrics.geomean_speedup),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _ablation(document: dict[str, Any]) -> list[str]:
    """Profiled against unprofiled over the tasks both ran, against eager PyTorch."""
    profiled, unprofiled = rows_of(document, "profiled"), rows_of(document, "unprofiled")
    common = sorted(set(profiled) & set(unprofiled))
    if not common:
        return []
    with_profiles = metrics_by_category(outcomes({k: profiled[k] for k in common}, "eager"))
    without = metrics_by_category(outcomes({k: unprofiled[k] for k in common}, "eager"))
    lines = [
        "## Profiling ablation",
        "",
        f"The same {len(common)} tasks with the profilers (the loop as designed) and without them "
        "(`--no-profile`, the paper's N-PRAGMA), against eager PyTorch.",
        "",
        "| category | tasks | correct, profiled | correct, unprofiled | fast_1, profiled | fast_1, unprofiled "
        "| geomean, profiled | geomean, unprofiled |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for category, metrics in with_profiles.items():
        other = without[category]
        lines.append(
            f"| {category} | {metrics.tasks} | {metrics.correct} | {other.correct} | {_percent(metrics.fast_p[1.0])} | "
            f"{_percent(other.fast_p[1.0])} | {_interval(metrics.geomean_speedup)} | {_interval(other.geomean_speedup)} |"
        )
    return [*lines, "", _pairs_line({k: (profiled[k], unprofiled[k]) for k in common}), ""]


def _pairs_line(pairs: dict[str, tuple[dict[str, Any], dict[str, Any]]]) -> str:
    """How the two halves' bests compare task by task: how many ended with one kernel (their
    speedups differ only by the noise between two timings of it), and of the others, where the
    profiled best is faster or slower than the unprofiled one beyond both intervals."""
    eager = {key: (_eager(a), _eager(b)) for key, (a, b) in pairs.items()}
    timed = {key: (a, b) for key, (a, b) in eager.items() if a and b}
    same = [key for key in timed if same_kernel(*pairs[key])]
    different = [key for key in timed if key not in same]
    ahead = sum(timed[key][0]["low"] > timed[key][1]["high"] for key in different)
    behind = sum(timed[key][1]["low"] > timed[key][0]["high"] for key in different)
    return (
        f"Of the {len(timed)} tasks timed correct in both, {len(same)} ended with the same best kernel in both "
        "(their speedups differ only by the noise between two timings of it); of the other "
        f"{len(different)}, the profiled best is faster beyond both intervals on {ahead} and slower on {behind}."
    )


def _eager(row: dict[str, Any]) -> dict[str, float] | None:
    """A correct row's confirmed speedup over eager, or None."""
    return (row.get("speedup") or {}).get("eager") if row.get("correct") else None


def interval(speedup: dict[str, float] | None) -> str:
    """A row's speedup as ``7.93x [7.77-8.08]``; ``-`` when there is none."""
    if not speedup:
        return "-"
    return f"{speedup['value']:.2f}x [{speedup['low']:.2f}-{speedup['high']:.2f}]"


def flag_text(row: dict[str, Any]) -> str:
    """Why a task's best was timed again (``disagreed``, ``disturbed``), whether that settled it
    (``unsettled``), and whether another timing is still due; empty for a confirmation that agreed."""
    said = list(row.get("flags") or [])
    if ((row.get("confirmation") or {}).get("due")) and said:
        said.append("to be timed again")
    return ", ".join(said)


def measurements_text(row: dict[str, Any]) -> str:
    """How many confirmations the reported figure rests on and, when more than one, the lowest and
    highest speedup over eager of every measurement (the loop's best among them)."""
    confirmation = row.get("confirmation") or {}
    measurements = confirmation.get("measurements")
    if not measurements:
        return "-"
    count = sum(1 for m in measurements if m.get("source") != "loop")
    spread = (confirmation.get("spread") or {}).get("eager")
    if count < 2 or not spread:
        return str(count)
    return f"{count}: {spread[0]:.2f}-{spread[1]:.2f}"


_TASK_COLUMNS = ("task", "category", "result", "loop's best", "confirmed", "confirmations", "flag")
_LEFT = ("variant", "task", "category", "result", "flag", "stopped")


def _task_cells(key: str, row: dict[str, Any], baselines: list[str]) -> list[str]:
    if row.get("status") == "failed":
        result = "could not run"
    else:
        result = "correct" if row.get("correct") else "no correct candidate"
    speedups = row.get("speedup") or {}
    return [
        key,
        row.get("category") or "-",
        result,
        interval(row.get("loop_best")) if row.get("correct") else "-",
        interval(speedups.get("eager")),
        measurements_text(row) if row.get("correct") else "-",
        flag_text(row) or "-",
        *(interval(speedups.get(baseline)) for baseline in baselines if baseline != "eager"),
        _roofline_text(row.get("roofline")),
        str(row.get("best_attempt") or "-"),
        str(row.get("attempts", "-")),
        row.get("stop_reason") or "-",
        f"{row.get('loop_seconds', row.get('seconds', 0)) / 60:.1f}",
    ]


def _task_head(baselines: list[str]) -> list[str]:
    others = [f"confirmed vs {baseline}" for baseline in baselines if baseline != "eager"]
    return [*_TASK_COLUMNS, *others, "roofline (library)", "best at", "attempts", "stopped", "minutes"]


def _roofline_text(roofline: dict[str, Any] | None) -> str:
    """The confirmed best's share of the physical floor, and in brackets of the floor at torch's
    own rates: ``62% (95%)``."""
    if not roofline or roofline.get("attainment") is None:
        return "-"
    library = roofline.get("library_attainment")
    return f"{roofline['attainment']:.0%}" + (f" ({library:.0%})" if library is not None else "")


def _task_table(rows: dict[str, dict[str, Any]], baselines: list[str]) -> list[str]:
    head = _task_head(baselines)
    aligned = ["---" if column in _LEFT else "---:" for column in head]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(aligned) + "|"]
    for key, row in sorted(rows.items()):
        lines.append("| " + " | ".join(_task_cells(key, row, baselines)) + " |")
    return lines


def tasks_table(document: dict[str, Any]) -> Table:
    """Every task of every variant on the terminal: the loop's best beside its confirmation."""
    variants = [variant for variant in VARIANTS if rows_of(document, variant)]
    baselines = sorted(
        {b for v in variants for b in document["variants"][v]["settings"]["baselines"]}, key=["eager", "compile"].index
    )
    table = Table(title="bench: every task (speedups over eager unless said; 95% intervals)", title_justify="left")
    for column in ("variant", *_task_head(baselines)):
        table.add_column(column, justify="left" if column in _LEFT else "right")
    for variant in variants:
        for key, row in sorted(rows_of(document, variant).items()):
            table.add_row(variant, *_task_cells(key, row, baselines))
    return table


def report_markdown(document: dict[str, Any], plots: list[Path]) -> str:
    """The report: settings, the metric tables per variant and baseline, the ablation, usage, every
    task, and what could not load or run."""
    lines = [
        "# pragma bench",
        "",
        f"Tasks from `{document.get('tree')}`, on {document.get('machine', {}).get('node', '?')} "
        f"({document.get('machine', {}).get('processor', '?')}), pragma {document.get('pragma')}, "
        f"started {document.get('created')}, updated {document.get('updated', '-')}.",
        "",
        "fast_p: tasks whose best is correct and more than p times as fast as the baseline, over all tasks "
        "(fast_0 is the success rate). Mean and geometric-mean speedups are over the correct tasks, with "
        "bootstrap 95% intervals over tasks. See docs/bench.md.",
        "",
        "Per task: the loop's best is the loop's own figure of its best (the largest of several noisy "
        "ones); confirmed is the figure the metrics use, a fresh verification of that best. Where the two "
        "disagreed (intervals apart and values more than 10% apart) or a confirmation was timed while the "
        "machine was disturbed, the best was timed again later: confirmed is then the median measurement, "
        "confirmations says how many with the lowest and highest speedup seen, and flag says why "
        "(unsettled: after the extra confirmations, still no undisturbed one agreed with an earlier figure). "
        "Roofline is the confirmed best's share of the task's physical floor (this machine's FMA and "
        "streaming peaks), and in brackets of the floor at torch's own sgemm and copy rates.",
        "",
    ]
    summary = bench_summary(document)
    for variant in sorted(summary, key=lambda name: VARIANTS.index(name) if name in VARIANTS else 9):
        settings = document["variants"][variant]["settings"]
        rows = rows_of(document, variant)
        lines += [f"## {variant}", ""]
        lines.append(
            "Settings: "
            + ", ".join(f"{name}={value}" for name, value in settings.items() if value not in (None, [], {}))
            + "."
        )
        lines.append("")
        for baseline, categories in summary[variant].items():
            lines += [f"### against {'eager PyTorch' if baseline == 'eager' else 'torch.compile'}", ""]
            lines += [*_metrics_table(categories), ""]
        usage = usage_summary(rows)
        if usage["prompt_tokens"] or usage["completion_tokens"]:
            cost = f"${usage['cost_usd']:.2f}" if usage["cost_usd"] is not None else "not reported by the provider"
            lines += [
                f"Model use: {usage['prompt_tokens']:,} prompt and {usage['completion_tokens']:,} completion "
                f"tokens; cost {cost}.",
                "",
            ]
        lines += ["#### Tasks", "", *_task_table(rows, settings["baselines"]), ""]
        failed = {key: row for key, row in rows.items() if row.get("status") == "failed"}
        if failed:
            lines += ["Could not run:", ""]
            lines += [f"- `{key}`: {row.get('error')}" for key, row in sorted(failed.items())]
            lines.append("")
    lines += _ablation(document)
    unloadable = document.get("unloadable") or {}
    if unloadable:
        lines += ["## Files that could not load", ""]
        lines += [f"- `{key}`: {error}" for key, error in sorted(unloadable.items())]
        lines.append("")
    if plots:
        lines += ["## Plots", ""]
        lines += [f"![{path.stem}]({path.as_posix()})" for path in plots]
        lines.append("")
    return "\n".join(lines)
