"""Do a bench's figures hold? Each task's best re-verified in fresh processes, against what the bench reported.

For every task of a finished bench (the ``--out`` folder of ``pragma bench``) whose best was
confirmed correct and timed, the best candidate (``best/`` in the task's run folder) is verified
``--runs`` more times against the task as its run stored it (``task.json``): each a fresh
``verify()``, so each in a sandbox child of its own, with the bench's repetitions, threads and
baselines. Per task it prints the reported figure (the confirmation, or the median of the
confirmations when the bench timed the best again, with its flag), the loop's own best, every
re-verified speedup over eager and whether it lands inside the reported interval or within 10%
(:func:`pragma_core.bench.confirmations.lands`), and their spread; then the share of tasks whose
re-verifications all landed (the target: at least 90%). Writes ``reproducibility.json`` (every
figure) and ``reproducibility.png`` (each re-verification over the reported figure, the reported
interval and the 10% band around it) into ``--out``, by default ``DIR/reproducibility``.

    python benchmarks/reproducibility.py DIR [--tasks TEXT ...] [--runs 3] [--variant profiled] [--out DIR]

Run it on a quiet machine, as the bench was: nothing else running, no tests, no builds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from pragma_core import PragmaError, VerifySettings, verify
from pragma_core.bench.confirmations import AGREEMENT, lands
from pragma_core.bench.summary import VARIANTS, rows_of
from pragma_core.loop.run_directory import RunDirectory
from pragma_core.progress import progress_bar
from pragma_core.records import Speedup, Verdict
from pragma_core.verifier.settings import all_cpus

TARGET = 0.90
"""The issue's target: on at least this share of tasks, a best re-verified in a fresh process lands
inside its reported interval or within 10%."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bench", type=Path, help="a finished bench: the --out folder of pragma bench")
    parser.add_argument("--tasks", action="append", default=[], metavar="TEXT", help="only tasks whose key has TEXT")
    parser.add_argument("--runs", type=int, default=3, help="fresh verifications of each best (default 3)")
    parser.add_argument("--variant", choices=VARIANTS, default=None, help="default: profiled where the bench has it")
    parser.add_argument("--out", type=Path, default=None, help="default: BENCH/reproducibility")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error(f"--runs {args.runs}: give at least 1")
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)  # a file or a pipe: the table whole, one line per task
    try:
        document = json.loads((args.bench / "bench.json").read_text())
        variant = args.variant or next(v for v in VARIANTS if rows_of(document, v))
    except (OSError, ValueError, StopIteration):
        sys.exit(f"{args.bench}: no finished bench here (bench.json with task rows); give the --out of pragma bench")
    chosen = {
        key: row
        for key, row in sorted(rows_of(document, variant).items())
        if row.get("timed") and (not args.tasks or any(text in key for text in args.tasks))
    }
    if not chosen:
        sys.exit(
            f"{args.bench}: no correct, timed task in {variant}" + (f" matching {args.tasks}" if args.tasks else "")
        )
    settings = document["variants"][variant]["settings"]
    out = args.out or args.bench / "reproducibility"
    out.mkdir(parents=True, exist_ok=True)

    figures = []
    with progress_bar(Console(stderr=True)) as progress:
        bar = progress.add_task("re-verifying", total=len(chosen) * args.runs)
        for key, row in chosen.items():
            try:
                verdicts = _reverified(key, row, settings, args.runs, progress, bar)
                loop_best = _loop_best(Path(row["run_dir"]))
            except PragmaError as error:
                progress.console.print(f"{key}: cannot re-verify its best: {error}", markup=False, highlight=False)
                progress.advance(bar, args.runs)
                continue
            figures.append(task_figures(key, row, loop_best, verdicts))
    result = {"bench": str(args.bench.resolve()), "variant": variant, "runs": args.runs, "tasks": figures}
    result["summary"] = summary(figures)
    console.print(figures_table(figures, args.runs))
    console.print(summary_line(result["summary"]))
    _plot(figures, out / "reproducibility.png")
    (out / "reproducibility.json").write_text(json.dumps(result, indent=2) + "\n")
    console.print(f"figures: {out / 'reproducibility.json'}, plot: {out / 'reproducibility.png'}")


def _reverified(
    key: str, row: dict[str, Any], settings: dict[str, Any], runs: int, progress: Any, bar: Any
) -> list[Verdict]:
    """The best verified ``runs`` times, each a fresh verify() (a sandbox child of its own), with
    the settings the bench confirmed it with."""
    run = RunDirectory.open(Path(row["run_dir"]))
    best = run.best()
    if best is None or best.candidate is None:
        raise PragmaError(f"{run.root}: no best candidate in the run folder")
    task = run.task()
    verify_settings = VerifySettings(
        reps=settings["reps"],
        threads=settings.get("threads") or len(all_cpus()),
        baseline="compile" if "compile" in settings["baselines"] else "eager",
    )
    verdicts = []
    for number in range(1, runs + 1):
        progress.update(bar, description=f"{key}: run {number} of {runs}")
        verdicts.append(verify(task, best.candidate, verify_settings))
        progress.advance(bar)
    return verdicts


def _loop_best(run_dir: Path) -> Speedup | None:
    best = RunDirectory.open(run_dir).best()
    return best.verdict.speedup if best is not None and best.verdict is not None else None


def _figure(speedup: Speedup | None) -> dict[str, float] | None:
    return None if speedup is None else {"value": speedup.value, "low": speedup.low, "high": speedup.high}


def task_figures(key: str, row: dict[str, Any], loop_best: Speedup | None, verdicts: list[Verdict]) -> dict[str, Any]:
    """One task's figures: what the bench reported, the loop's best, and each re-verification
    (its speedup over eager, its noise, whether it lands on the reported figure; or why it has no
    speedup). ``landed`` is True when every re-verification landed."""
    reported_row = row["speedup"]["eager"]
    reported = Speedup(value=reported_row["value"], low=reported_row["low"], high=reported_row["high"])
    runs: list[dict[str, Any]] = []
    for verdict in verdicts:
        if verdict.speedup is None:
            runs.append({"status": verdict.status.value, "message": verdict.message, "lands": False})
            continue
        speedup = verdict.speedup
        runs.append(
            {
                "value": speedup.value,
                "low": speedup.low,
                "high": speedup.high,
                "compile": _figure(verdict.speedup_vs_compiled),
                "noise": list(verdict.conditions.noise) if verdict.conditions is not None else [],
                "lands": lands(speedup.value, reported),
            }
        )
    values = [run["value"] for run in runs if "value" in run]
    return {
        "task": key,
        "reported": reported_row,
        "flags": list(row.get("flags") or []),
        "loop_best": _figure(loop_best),
        "runs": runs,
        "spread": [min(values), max(values)] if values else None,
        "median": statistics.median(values) if values else None,
        "landed": bool(runs) and all(run["lands"] for run in runs),
    }


def summary(figures: list[dict[str, Any]]) -> dict[str, Any]:
    """Tasks whose every re-verification landed, over the tasks re-verified; and the same over
    single re-verifications."""
    runs = [run for figure in figures for run in figure["runs"]]
    landed = sum(figure["landed"] for figure in figures)
    share = landed / len(figures) if figures else 0.0
    return {
        "tasks": len(figures),
        "tasks_landed": landed,
        "share_landed": share,
        "runs": len(runs),
        "runs_landed": sum(run["lands"] for run in runs),
        "target": TARGET,
        "met": bool(figures) and share >= TARGET,
        "flagged": sum(bool(figure["flags"]) for figure in figures),
    }


def _interval(figure: dict[str, float] | None) -> str:
    return "-" if figure is None else f"{figure['value']:.2f}x [{figure['low']:.2f}-{figure['high']:.2f}]"


def figures_table(figures: list[dict[str, Any]], runs: int) -> Table:
    """A row per task: reported, flag, loop's best, each re-verification (yes/NO: lands), spread."""
    table = Table(
        title=f"each best re-verified {runs} times in fresh processes, against the reported interval or within "
        f"{AGREEMENT:.0%}",
        title_justify="left",
    )
    for column in ("task", "reported", "flag", "loop's best", *(f"run {n}" for n in range(1, runs + 1)), "spread"):
        table.add_column(column, justify="left" if column in ("task", "flag") else "right")
    for figure in figures:
        cells = []
        for run in figure["runs"]:
            if "value" not in run:
                cells.append(f"{run['status']} NO")
                continue
            noisy = " (noisy)" if run["noise"] else ""
            cells.append(f"{run['value']:.2f}x {'yes' if run['lands'] else 'NO'}{noisy}")
        cells += [""] * (runs - len(cells))
        spread = figure["spread"]
        table.add_row(
            figure["task"],
            _interval(figure["reported"]),
            ", ".join(figure["flags"]) or "-",
            _interval(figure["loop_best"]),
            *cells,
            f"{spread[0]:.2f}-{spread[1]:.2f}" if spread else "-",
        )
    return table


def summary_line(values: dict[str, Any]) -> str:
    return (
        f"{values['tasks_landed']} of {values['tasks']} tasks ({values['share_landed']:.0%}): every re-verification "
        f"landed inside the reported interval or within {AGREEMENT:.0%} (target >= {values['target']:.0%}: "
        f"{'met' if values['met'] else 'MISSED'}); {values['runs_landed']} of {values['runs']} re-verifications "
        f"landed; {values['flagged']} task(s) flagged by the bench"
    )


def _plot(figures: list[dict[str, Any]], path: Path) -> None:
    """Per task, each re-verification over the reported figure (log scale): the reported interval
    as a grey bar, the 10% band as dashed lines, the loop's best as a cross."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    figure, axis = plt.subplots(figsize=(max(6.0, 0.45 * len(figures) + 2), 4.8))
    for index, task in enumerate(figures):
        reported = task["reported"]
        value = reported["value"]
        axis.bar(
            index,
            (reported["high"] - reported["low"]) / value,
            bottom=reported["low"] / value,
            width=0.6,
            color="lightgrey",
        )
        ratios = [run["value"] / value for run in task["runs"] if "value" in run]
        colours = ["tab:blue" if run["lands"] else "tab:red" for run in task["runs"] if "value" in run]
        axis.scatter([index] * len(ratios), ratios, c=colours, s=18, zorder=3)
        if task["loop_best"] is not None:
            axis.plot(index, task["loop_best"]["value"] / value, "kx", markersize=6, zorder=3)
    for bound in (1 / (1 + AGREEMENT), 1 + AGREEMENT):
        axis.axhline(bound, color="black", linestyle="--", linewidth=0.8)
    axis.axhline(1.0, color="black", linewidth=0.5)
    axis.set_yscale("log")
    axis.yaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    axis.yaxis.set_minor_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_xlim(-0.75, len(figures) - 0.25)
    axis.set_xticks(
        range(len(figures)), [task["task"].split("/")[-1][:22] for task in figures], rotation=60, ha="right", fontsize=7
    )
    axis.set_ylabel("re-verified speedup / reported speedup")
    axis.set_title(
        "a bench's best kernels re-verified in fresh processes\n"
        f"grey: the reported 95% interval; dashes: within {AGREEMENT:.0%} of the reported figure\n"
        "dots: re-verifications (red: outside both); x: the loop's own best",
        fontsize=9,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


if __name__ == "__main__":
    main()
