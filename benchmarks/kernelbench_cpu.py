"""KernelBench on this CPU: the offline agents over the real KernelBench files at fitted sizes.

Each file is loaded as KernelBench ships it, checked against the recipes at a small size (a file no
recipe knows is listed and left out), fitted so its eager reference takes about ``--fit-ms`` here
(``pragma --fit-ms``: the input-shaping constants scaled by one factor), then optimized by the
offline loop (profile-guided, or timing only with ``--no-profile``; ``--max-attempts``), and its
best verified once more against eager PyTorch and ``torch.compile``. Prints per task and per recipe
family: success, geometric mean speedup over eager and over torch.compile (with the geometric means
of the per-task 95% interval ends: a conservative interval), the share faster than torch.compile,
median roofline attainment of the memory-bound tasks, and, where both loops ran, the profiled loop
against the timing-only one family by family; writes ``results.json``, ``kernelbench_cpu.png`` (every
task) and ``kernelbench_cpu_families.png`` (per family).

    python benchmarks/kernelbench_cpu.py [DIR | --levels 1,2] [--fit-ms 20] [--max-attempts 6] [--no-profile] [--only TEXT ...] [--out DIR]
    python benchmarks/kernelbench_cpu.py --combine RESULTS.json [RESULTS.json ...] --out DIR

Running it again with the same ``--out`` continues: tasks already in its ``results.json`` in the same
mode are not run again, so a profiled run and a ``--no-profile`` run can share one ``--out``; the
second of the two takes each task at the sizes the first was fitted to, not fitted again.
``--combine`` reports several runs as one; a task in more than one (in the same mode) keeps the row
of the last file.

``--levels`` takes KernelBench's levels from ``shared/kernelbench`` beside the clone (or
``$PRAGMA_KERNELBENCH``); DIR is one folder of task files instead; the default is level 1. Each
level is reported on its own, against its issue's targets (level 1: issue 40; level 2, whose families
are named by the main operator: issue 41), with its plots (``kernelbench_cpu_level2.png``...).
Run it on a quiet machine: nothing else running, no tests, no builds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from pragma_core import PragmaError, load_task
from pragma_core.loop.run_summary import same_kernel
from pragma_core.offline.coder import recognized
from pragma_core.present.speedup_axis import speedup_scale
from pragma_core.records import BoundClass
from pragma_core.sizes.fitting import FittedTask, fit_task
from pragma_core.sizes.shrinking import at_sizes, shrink_task
from pragma_core.tasks.loading import find_task_files

sys.path.insert(0, str(Path(__file__).resolve().parent))
from offline_examples import _run  # noqa: E402 - the same optimize-then-verify step as the examples' benchmark

ROOT = Path(__file__).resolve().parents[1]
KERNELBENCH = Path(os.environ.get("PRAGMA_KERNELBENCH") or ROOT.parent / "shared" / "kernelbench")
TARGETS = {
    "level1": {"success": 0.97, "geomean vs eager": 2.0},
    "level2": {
        "success": 0.8,
        "geomean vs eager": 1.5,
        "geomean vs torch.compile": 1.2,
        "share faster than torch.compile": 0.5,
    },
}
"""The targets over a whole level, 6 attempts: issue 40's for level 1 (97 of 100 files correct, 2x
over eager), issue 41's for level 2 (80 of 100 correct, 1.5x over eager and 1.2x over torch.compile
on the correct ones, faster than torch.compile on half)."""
FAMILY_TARGETS = {"convolution": 1.0, "conv_transposed": 1.0, "pool": 1.5}
"""Issue 40's geometric means over eager for the level-1 families that target less than the whole."""
MODES = {False: "profiled", True: "no profile"}
"""The mode a row was run in, by ``--no-profile``."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", type=Path, default=None)
    parser.add_argument("--levels", default="1", help="KernelBench levels, comma-separated (1,2)")
    parser.add_argument("--fit-ms", type=float, default=20.0)
    parser.add_argument("--max-attempts", type=int, default=6)
    parser.add_argument("--patience", type=int, default=6)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--profilers", default="valgrind")
    parser.add_argument("--no-profile", action="store_true", help="timing only: the N-PRAGMA ablation")
    parser.add_argument("--only", action="append", default=[], metavar="TEXT")
    parser.add_argument("--combine", nargs="+", type=Path, default=[], metavar="RESULTS")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or ROOT / "benchmarks" / "results" / time.strftime("kernelbench-cpu-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    console = Console(width=200)
    if args.combine:
        documents = [json.loads(path.read_text()) for path in args.combine]
        # A task measured again (after a fix) keeps its latest row: later files replace earlier ones.
        latest = {_key(row): row for document in documents for row in document["rows"]}
        rows = list(latest.values())
        skipped = {key: why for document in documents for key, why in document.get("skipped", {}).items()}
        _report(rows, skipped, out, console)
        return
    mode = MODES[args.no_profile]
    earlier = json.loads((out / "results.json").read_text()) if (out / "results.json").is_file() else {}

    folders = (
        [args.directory] if args.directory else [KERNELBENCH / f"level{n.strip()}" for n in args.levels.split(",")]
    )
    files = [
        path
        for folder in folders
        for path in find_task_files(folder)
        if not args.only or any(t in path.name for t in args.only)
    ]
    rows: list[dict[str, Any]] = list(earlier.get("rows", []))
    skipped: dict[str, str] = dict(earlier.get("skipped", {}))
    done = {_key(row) for row in rows}
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        bar = progress.add_task("KernelBench", total=len(files))
        for path in files:
            if (f"{path.parent.name}/{path.stem}", mode) in done or f"{path.parent.name}/{path.stem}" in skipped:
                progress.advance(bar)
                continue
            progress.update(bar, description=f"{path.stem}: fitting")
            try:
                task = load_task(path)
                family = recognized(shrink_task(task, 64 * 1024, intensity_kept=0.0).task)[0].family
                fitted = _fitted(task, rows, f"{path.parent.name}/{path.stem}", args.fit_ms)
            except PragmaError as error:
                skipped[f"{path.parent.name}/{path.stem}"] = str(error).split(": a language model")[0]
                progress.advance(bar)
                continue
            progress.update(bar, description=f"{path.stem}: optimizing")
            row = _run(fitted.task, mode, not args.no_profile, args, out)
            rows.append(row | {"family": family, "sizes": fitted.sizes, "reference_ms": fitted.ms})
            progress.advance(bar)
            (out / "results.json").write_text(json.dumps({"rows": rows, "skipped": skipped}, indent=2) + "\n")
    _report(rows, skipped, out, console)


def _fitted(task: Any, rows: list[dict[str, Any]], name: str, fit_ms: float) -> FittedTask:
    """The task fitted to ``fit_ms``; or, where the other mode (profiled or ``--no-profile``) already
    ran it into this ``--out``, at the sizes that run was fitted to: a second fit lands a few
    percent away, often on other sizes, and the two halves of the ablation would not time the same
    task."""
    other = next((row for row in rows if row["task"] == name and "sizes" in row), None)
    if other is not None:
        resized = at_sizes(task, other["sizes"])
        if resized is not None:
            return FittedTask(task=resized, sizes=other["sizes"], ms=other["reference_ms"], target_ms=fit_ms)
    return fit_task(task, fit_ms)


def _key(row: dict[str, Any]) -> tuple[str, str]:
    return row["task"], row.get("mode", MODES[False])


def _level(name: str) -> str:
    """``level2`` of a row's task (``level2/12_Gemm_...``) or a skipped file's key; ``level1`` for
    a name written before keys carried their level."""
    return name.split("/")[0] if "/" in name else "level1"


def _report(rows: list[dict[str, Any]], skipped: dict[str, str], out: Path, console: Console) -> None:
    """Per level and mode: the task table, the family table against the level's targets, the
    profiled loop against the timing-only one where both ran, and the plots."""
    levels = sorted({_level(row["task"]) for row in rows} | {_level(key) for key in skipped})
    everything: dict[str, dict[str, Any]] = {}
    plots = []
    for level in levels:
        mine = [row for row in rows if _level(row["task"]) == level]
        left_out = {key: why for key, why in skipped.items() if _level(key) == level}
        modes = [mode for mode in MODES.values() if any(row.get("mode", MODES[False]) == mode for row in mine)]
        summaries = {}
        for mode in modes:
            measured = [row for row in mine if row.get("mode", MODES[False]) == mode]
            console.print(_task_table(measured, f"{level}, {mode}"))
            families = sorted({row["family"] for row in measured})
            summaries[mode] = {
                "all": _summary(measured),
                **{family: _summary([r for r in measured if r["family"] == family]) for family in families},
            }
            console.print(_summary_table(summaries[mode], f"{level}, {mode}", len(left_out), TARGETS.get(level, {})))
        if len(modes) == 2:
            console.print(_modes_table(mine))
        console.print(f"{level}: not recognized (left out): {len(left_out)}: " + ", ".join(sorted(left_out)))
        first = [row for row in mine if row.get("mode", MODES[False]) == modes[0]] if modes else []
        plots += [out / f"kernelbench_cpu_{level}.png", out / f"kernelbench_cpu_{level}_families.png"]
        _plot(first, plots[-2], level)
        _plot_families(summaries, plots[-1])
        everything[level] = summaries
    (out / "results.json").write_text(
        json.dumps({"rows": rows, "skipped": skipped, "summary": everything}, indent=2) + "\n"
    )
    console.print(f"results: {out / 'results.json'}, plots: " + ", ".join(str(plot) for plot in plots))


def _geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(map(math.log, values))) if values else 0.0


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    good = [row for row in rows if row.get("success")]
    compiled = [row for row in good if row.get("vs_compile") is not None]
    memory = [
        row["attainment"]
        for row in good
        if row.get("bound") == BoundClass.MEMORY.value and row.get("attainment") is not None
    ]
    return {
        "tasks": len(rows),
        "success": len(good) / len(rows) if rows else 0.0,
        "geomean vs eager": _geomean([row["speedup"] for row in good]),
        "geomean vs eager, interval": [
            _geomean([row["speedup_low"] for row in good]),
            _geomean([row["speedup_high"] for row in good]),
        ],
        "faster than eager": sum(row["speedup_low"] > 1 for row in good) / len(rows) if rows else 0.0,
        "geomean vs torch.compile": _geomean([row["vs_compile"] for row in compiled]),
        "share faster than torch.compile": sum(row["vs_compile"] > 1 for row in compiled) / len(rows) if rows else 0.0,
        "median attainment, memory-bound": statistics.median(memory) if memory else None,
    }


def _task_table(rows: list[dict[str, Any]], mode: str) -> Table:
    table = Table(
        title=f"KernelBench at fitted sizes, {mode} (final verification, 95% intervals)", title_justify="left"
    )
    for column in ("task", "family", "sizes", "eager ms", "vs eager", "vs torch.compile", "roofline", "best at", "min"):
        table.add_column(column, justify="left" if column in ("task", "family", "sizes") else "right")
    for row in rows:
        ok = row.get("success")
        table.add_row(
            row["task"].split("/")[-1],
            row["family"],
            ", ".join(f"{name}={value}" for name, value in row["sizes"].items()),
            f"{row['reference_ms']:.1f}",
            f"{row['speedup']:.2f}x [{row['speedup_low']:.2f}-{row['speedup_high']:.2f}]" if ok else "FAILED",
            f"{row['vs_compile']:.2f}x [{row['vs_compile_low']:.2f}-{row['vs_compile_high']:.2f}]"
            if ok and row.get("vs_compile") is not None
            else "",
            f"{row['attainment']:.0%}" if ok and row.get("attainment") is not None else "",
            str(row.get("best_attempt") or ""),
            f"{row['minutes']:.1f}",
        )
    return table


def _summary_table(
    summary: dict[str, dict[str, Any]], mode: str, unrecognized: int, targets: dict[str, float]
) -> Table:
    """The summary rows; success against the target counts the files no recipe knew as failed."""
    table = Table(title=f"per recipe family, {mode}, and all against the targets", title_justify="left")
    for column in (
        "family",
        "tasks",
        "success",
        "geomean vs eager [interval]",
        "faster than eager",
        "vs torch.compile",
        "faster than compile",
        "attainment (memory-bound, median)",
    ):
        table.add_column(column, justify="left" if column == "family" else "right")
    for family, values in summary.items():
        low, high = values["geomean vs eager, interval"]
        attainment = values["median attainment, memory-bound"]
        table.add_row(
            family,
            str(values["tasks"]),
            f"{values['success']:.0%}",
            f"{values['geomean vs eager']:.2f}x [{low:.2f}-{high:.2f}]",
            f"{values['faster than eager']:.0%}",
            f"{values['geomean vs torch.compile']:.2f}x",
            f"{values['share faster than torch.compile']:.0%}",
            f"{attainment:.0%}" if attainment is not None else "-",
        )
    overall = summary["all"]
    files = overall["tasks"] + unrecognized
    correct = round(overall["success"] * overall["tasks"])
    verdicts = [f"{correct} of {files} files correct"]
    for measure, target in targets.items():
        value = correct / files if measure == "success" and files else overall.get(measure)
        verdicts.append(f"{measure} >= {target:g}: {'met' if value is not None and value >= target else 'MISSED'}")
    for family, target in FAMILY_TARGETS.items():
        if family in summary:
            value = summary[family]["geomean vs eager"]
            verdicts.append(f"{family} geomean >= {target:g}x: {'met' if value >= target else 'MISSED'}")
    table.caption = "; ".join(verdicts)
    return table


def _modes_table(rows: list[dict[str, Any]]) -> Table:
    """Per family, the profiled loop against the timing-only one on the tasks both finished correct:
    the geometric mean of the per-task ratios of their final speedups, how many ended with the same
    best kernel (their ratio is the noise between two timings of one kernel), and of the others the
    wins and losses beyond the noise."""
    table = Table(title="profiled loop against --no-profile, same budget (tasks correct in both)", title_justify="left")
    columns = (
        "family",
        "tasks",
        "profiled vs eager",
        "no profile vs eager",
        "ratio",
        "same kernel",
        "profiled ahead",
        "behind",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "family" else "right")
    pairs: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    by_key = {_key(row): row for row in rows}
    for (task, mode), row in by_key.items():
        other = by_key.get((task, MODES[True]))
        if mode == MODES[False] and other is not None and row.get("success") and other.get("success"):
            pairs.setdefault(row["family"], []).append((row, other))
    everything = [pair for family in pairs.values() for pair in family]
    for family, mine in [*sorted(pairs.items()), ("all", everything)]:
        table.add_row(
            family,
            str(len(mine)),
            f"{_geomean([p['speedup'] for p, _ in mine]):.2f}x",
            f"{_geomean([n['speedup'] for _, n in mine]):.2f}x",
            f"{_geomean([p['speedup'] / n['speedup'] for p, n in mine]):.2f}x",
            str(sum(same_kernel(p, n) for p, n in mine)),
            str(sum(p["speedup_low"] > n["speedup_high"] and not same_kernel(p, n) for p, n in mine)),
            str(sum(n["speedup_low"] > p["speedup_high"] and not same_kernel(p, n) for p, n in mine)),
        )
    return table


def _plot(rows: list[dict[str, Any]], path: Path, level: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted(rows, key=lambda row: (row["family"], row["task"]))
    families = sorted({row["family"] for row in rows})
    colours = {family: plt.get_cmap("tab10")(index) for index, family in enumerate(families)}
    figure, axis = plt.subplots(figsize=(max(6, len(rows) * 0.35), 4.8))
    for index, row in enumerate(rows):
        if not row.get("success"):
            axis.bar(index, 0.0, color="grey")
            continue
        value = row["speedup"]
        axis.bar(
            index,
            value,
            color=colours[row["family"]],
            yerr=[[value - row["speedup_low"]], [row["speedup_high"] - value]],
            capsize=2,
        )
        if row.get("vs_compile") is not None:
            axis.plot(index, value / row["vs_compile"], "k_", markersize=9)  # torch.compile's speedup over eager
    axis.axhline(1.0, color="black", linewidth=0.8)
    correct = [row for row in rows if row.get("success")]
    drawn = [row[end] for row in correct for end in ("speedup_low", "speedup_high")]
    drawn += [row["speedup"] / row["vs_compile"] for row in correct if row.get("vs_compile")]
    speedup_scale(axis, "y", drawn)
    axis.set_xticks(
        range(len(rows)), [row["task"].split("/")[-1][:22] for row in rows], rotation=60, ha="right", fontsize=7
    )
    axis.set_ylabel("speedup over eager PyTorch (95% CI)")
    axis.set_title(
        f"KernelBench {level} on this CPU at fitted sizes\nbars: the offline loop's best; dashes: torch.compile",
        fontsize=10,
    )
    axis.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=colours[f]) for f in families], labels=families, fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def _plot_families(summaries: dict[str, dict[str, dict[str, Any]]], path: Path) -> None:
    """Per family, each mode's geometric mean over eager with its interval, and torch.compile's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    families = sorted({family for summary in summaries.values() for family in summary}, key=lambda f: (f == "all", f))
    figure, axis = plt.subplots(figsize=(max(6, len(families) * 0.9), 4.5))
    width = 0.8 / max(1, len(summaries))
    drawn: list[float] = []  # the interval ends, for the axis
    for offset, (mode, summary) in enumerate(summaries.items()):
        for index, family in enumerate(families):
            values = summary.get(family)
            if not values or not values["geomean vs eager"]:
                continue
            value = values["geomean vs eager"]
            low, high = values["geomean vs eager, interval"]
            x = index + (offset - (len(summaries) - 1) / 2) * width
            drawn += [low, high]
            axis.bar(
                x,
                value,
                width,
                color=f"C{offset}",
                label=mode if index == 0 else None,
                yerr=[[value - low], [high - value]],
                capsize=2,
            )
            if values["geomean vs torch.compile"]:
                axis.plot(x, value / values["geomean vs torch.compile"], "k_", markersize=10)
    axis.axhline(1.0, color="black", linewidth=0.8)
    speedup_scale(axis, "y", [float(value) for line in axis.get_lines() for value in line.get_ydata()] + drawn)
    counts = {
        family: max(summary.get(family, {}).get("tasks", 0) for summary in summaries.values()) for family in families
    }
    axis.set_xticks(range(len(families)), [f"{f} ({counts[f]})" for f in families], rotation=30, ha="right", fontsize=8)
    axis.set_ylabel("geometric mean speedup over eager (95% CI)")
    axis.set_title(
        "KernelBench on this CPU, per recipe family\nbars: the offline loop's best; dashes: torch.compile; (tasks)",
        fontsize=10,
    )
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
