"""The offline agents over a directory of tasks, with and without profiling: does the loop work, how fast
is what it finds, and does profiling find it sooner?

For every task the offline recipes recognize, runs ``pragma optimize`` with the offline provider twice
(profile-guided, and timing only: the paper's N-PRAGMA ablation), then verifies each run's best once more
against eager PyTorch and ``torch.compile`` for the final numbers. Prints per task and overall: success,
speedup against eager and against torch.compile with 95% intervals, fast_1, roofline attainment and the
attempt that reached the best; checks the issue's targets; writes ``results.json`` and ``speedups.png``.

    python benchmarks/offline_examples.py [DIR ...] [--set NAME=VALUE ...] [--only TEXT ...] [--max-attempts 8] [--out DIR]
    python benchmarks/offline_examples.py --combine RESULTS.json [RESULTS.json ...] --out DIR

Defaults: ``examples/tasks``; results under ``benchmarks/results/offline-<time>``. ``--only`` keeps the
tasks whose key contains one of the texts (run heavy tasks at their own sizes); ``--combine`` prints the
tables and the plot of several earlier runs together.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path
from typing import Any

import attrs
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from pragma_core import PragmaError, VerifySettings, load_tasks, parse_size_assignments, verify
from pragma_core.loop.optimizer import optimize
from pragma_core.loop.run_summary import kernel_identity
from pragma_core.loop.settings import OptimizeSettings
from pragma_core.offline.provider import prepare
from pragma_core.present.speedup_axis import speedup_scale
from pragma_core.records import BoundClass, Task

ROOT = Path(__file__).resolve().parents[1]
MODES = {"profiled": True, "timing only": False}
TARGETS = {
    "success": 0.95,
    "geomean speedup vs eager": 1.5,
    "share faster than torch.compile": 0.5,
    "median attainment, memory-bound": 0.6,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="*", type=Path, default=[ROOT / "examples" / "tasks"])
    parser.add_argument("--set", dest="assignments", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--max-attempts", type=int, default=8)
    parser.add_argument("--patience", type=int, default=3)
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--profilers", default="valgrind")
    parser.add_argument("--only", action="append", default=[], metavar="TEXT")
    parser.add_argument("--combine", nargs="+", type=Path, default=[], metavar="RESULTS")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or ROOT / "benchmarks" / "results" / time.strftime("offline-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    console = Console()
    if args.combine:
        rows = [row for path in args.combine for row in json.loads(path.read_text())["rows"]]
        skipped = {k: v for path in args.combine for k, v in json.loads(path.read_text()).get("skipped", {}).items()}
        _report(rows, skipped, out, console)
        return

    sizes = parse_size_assignments(args.assignments)
    tasks = [
        task
        for directory in args.dirs
        for task in load_tasks(directory, sizes)
        if not args.only or any(text in task.key for text in args.only)
    ]
    recognized, skipped = [], {}
    for task in tasks:
        try:
            prepare(task)
            recognized.append(task)
        except PragmaError as error:
            skipped[task.key] = str(error).split(": a language model")[0]
    console.print(
        f"{len(recognized)} of {len(tasks)} tasks recognized; not recognized: " + (", ".join(skipped) or "none")
    )

    rows: list[dict[str, Any]] = []
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        bar = progress.add_task("optimizing", total=len(recognized) * len(MODES))
        for task in recognized:
            for mode, profiled in MODES.items():
                progress.update(bar, description=f"{task.key} ({mode})")
                rows.append(_run(task, mode, profiled, args, out))
                progress.advance(bar)
                (out / "results.json").write_text(json.dumps({"rows": rows, "skipped": skipped}, indent=2) + "\n")

    _report(rows, skipped, out, console)


def _report(rows: list[dict[str, Any]], skipped: dict[str, str], out: Path, console: Console) -> None:
    console.print(_task_table(rows))
    summary = _summary(rows)
    console.print(_summary_table(summary))
    _plot(rows, out / "speedups.png")
    (out / "results.json").write_text(
        json.dumps({"rows": rows, "skipped": skipped, "summary": summary}, indent=2) + "\n"
    )
    console.print(f"results: {out / 'results.json'}, plot: {out / 'speedups.png'}")


def _run(task: Task, mode: str, profiled: bool, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    verify_settings = VerifySettings(reps=args.reps)
    settings = OptimizeSettings(
        provider="offline",
        profile=profiled,
        max_attempts=args.max_attempts,
        patience=args.patience,
        runs_dir=out / "runs" / mode.replace(" ", "-"),
        profilers=tuple(args.profilers.split(",")),
        verify=verify_settings,
    )
    started = time.monotonic()
    result = optimize(task, settings)
    row: dict[str, Any] = {
        "task": task.key,
        "mode": mode,
        "run": result.run_id,
        "attempts": len(result.attempts),
        "best_attempt": result.best_attempt,
        "stop": result.stop_reason,
        "bound": result.baseline.bound.value if result.baseline and result.baseline.bound else None,
        "minutes": (time.monotonic() - started) / 60,
        "best_kernel": kernel_identity(result.best),
    }
    best = result.best
    if best is None or best.candidate is None:
        return row | {"success": False}
    final = verify(task, best.candidate, attrs.evolve(verify_settings, baseline="compile"))
    if not final.ok or final.speedup is None:
        return row | {"success": False, "final": final.status.value}
    compiled = final.speedup_vs_compiled
    return row | {
        "success": True,
        "speedup": final.speedup.value,
        "speedup_low": final.speedup.low,
        "speedup_high": final.speedup.high,
        "vs_compile": compiled.value if compiled else None,
        "vs_compile_low": compiled.low if compiled else None,
        "vs_compile_high": compiled.high if compiled else None,
        "attainment": final.attainment,
    }


def _summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    summary = {}
    for mode in MODES:
        mine = [row for row in rows if row["mode"] == mode]
        good = [row for row in mine if row.get("success")]
        speedups = [row["speedup"] for row in good]
        compiled = [row["vs_compile"] for row in good if row.get("vs_compile") is not None]
        memory = [
            row["attainment"]
            for row in good
            if row.get("bound") == BoundClass.MEMORY.value and row.get("attainment") is not None
        ]
        summary[mode] = {
            "tasks": len(mine),
            "success": len(good) / len(mine) if mine else 0.0,
            "geomean speedup vs eager": math.exp(statistics.fmean(map(math.log, speedups))) if speedups else 0.0,
            "fast_1": sum(s > 1 for s in speedups) / len(mine) if mine else 0.0,
            "share faster than torch.compile": sum(c > 1 for c in compiled) / len(good) if good else 0.0,
            "median attainment, memory-bound": statistics.median(memory) if memory else 0.0,
            "mean attempt reaching the best": statistics.fmean(row["best_attempt"] for row in good) if good else 0.0,
        }
    return summary


def _task_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title="offline agents per task (final verification, 95% intervals)", title_justify="left")
    for column in ("task", "mode", "ok", "vs eager", "vs torch.compile", "roofline", "best at", "attempts", "min"):
        table.add_column(column, justify="left" if column in ("task", "mode") else "right")
    for row in rows:
        ok = row.get("success")
        table.add_row(
            row["task"],
            row["mode"],
            "yes" if ok else "NO",
            f"{row['speedup']:.2f}x [{row['speedup_low']:.2f}-{row['speedup_high']:.2f}]" if ok else "",
            f"{row['vs_compile']:.2f}x [{row['vs_compile_low']:.2f}-{row['vs_compile_high']:.2f}]"
            if ok and row.get("vs_compile") is not None
            else "",
            f"{row['attainment']:.0%}" if ok and row.get("attainment") is not None else "",
            str(row.get("best_attempt") or ""),
            str(row["attempts"]),
            f"{row['minutes']:.1f}",
        )
    return table


def _summary_table(summary: dict[str, dict[str, Any]]) -> Table:
    table = Table(title="overall, against the targets", title_justify="left")
    table.add_column("measure")
    for mode in MODES:
        table.add_column(mode, justify="right")
    table.add_column("target", justify="right")
    for measure in next(iter(summary.values())):
        values = [summary[mode][measure] for mode in MODES]
        target = TARGETS.get(measure)
        shown = [f"{v:.2f}" if isinstance(v, float) else str(v) for v in values]
        if target is not None:
            shown = [f"{text} {'ok' if v >= target else 'MISSED'}" for text, v in zip(shown, values)]
        table.add_row(measure, *shown, f">= {target}" if target is not None else "")
    profiled, timing = (summary[mode]["mean attempt reaching the best"] for mode in MODES)
    table.add_row("profiled reaches its best sooner", "yes" if profiled < timing else "NO", "", "")
    return table


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(dict.fromkeys(row["task"] for row in rows))
    figure, axis = plt.subplots(figsize=(max(6, len(tasks) * 0.8), 4.5))
    width = 0.38
    drawn: list[float] = []  # the interval ends, for the axis
    for index, mode in enumerate(MODES):
        values, errors = [], [[], []]
        for task in tasks:
            row = next((r for r in rows if r["task"] == task and r["mode"] == mode), {})
            value = row.get("speedup", 0.0) if row.get("success") else 0.0
            values.append(value)
            errors[0].append(value - row.get("speedup_low", value) if value else 0.0)
            errors[1].append(row.get("speedup_high", value) - value if value else 0.0)
            drawn += [row.get("speedup_low", value), row.get("speedup_high", value)] if value else []
        positions = [i + (index - 0.5) * width for i in range(len(tasks))]
        axis.bar(positions, values, width, yerr=errors, capsize=3, label=mode)
    axis.axhline(1.0, color="black", linewidth=0.8)
    speedup_scale(axis, "y", drawn)
    axis.set_xticks(range(len(tasks)), [t.split("/")[-1] for t in tasks], rotation=45, ha="right")
    axis.set_ylabel("speedup over eager PyTorch (95% CI)")
    axis.set_title("offline agents: best candidate per task")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
