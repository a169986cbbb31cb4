"""Linear against tree against beam search at the same attempt budget: success, geometric-mean
speedup (the bench's confirmation timing against eager PyTorch) and attempts to reach 90% of the
best: of each run's own final best, and of the best any strategy reached on the task at that budget
(the shared mark; a run that never reaches it counts as budget + 1); and each strategy against the
first, task by task (the geometric mean of the per-task ratios of their speedups).

    python benchmarks/search.py [TREE] [--levels 1] [--only NAME ...] [--fit-ms T]
                                [--budgets 6,15] [--strategies linear,tree,beam] [--branching 2]
                                [--profilers valgrind] [--workers 1] [--retime R] [--out DIR]

TREE defaults to the bundled examples; give ``../shared/kernelbench --levels 1 --fit-ms 5`` for a
KernelBench level at fitted sizes. Each strategy and budget is one ``pragma bench`` in
``OUT/<strategy>-<budget>`` (patience set to the budget and no stop at the roofline, so every task
may use all of it), with the agents the bench would use (the offline ones when no model is
configured). Running the script again continues where it stopped: finished tasks are not run
again. ``--retime R`` then times each task's best kernels of all strategies again side by side
(R rounds, ``pragma verify``), since confirmations minutes apart differ by more than the
strategies do. It times every kernel that was a run's best at some point (the loop's best after
each attempt, from the run's events), so the attempts to 90% of the task's best are counted again
on the side-by-side figures ("side by side" column): the per-attempt medians of the runs are single
timings minutes apart, and their running maximum climbs with the number of attempts timed, noise or
not. Prints tables, writes ``OUT/search.json`` and ``OUT/search.png``. Run it on a quiet machine:
nothing else running.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from pragma_core.loop.run_directory import RunDirectory

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "tasks"


def _bench(strategy: str, budget: int, args: argparse.Namespace) -> Path:
    out = args.out / f"{strategy}-{budget}"
    command = [sys.executable, "-m", "pragma_core", "bench", str(args.tree), "--out", str(out)]
    command += ["--search", strategy, "--branching", str(args.branching)]
    command += ["--max-attempts", str(budget), "--patience", str(budget), "--target-attainment", "3"]
    command += ["--reps", str(args.reps)]
    command += ["--profilers", args.profilers, "--workers", str(args.workers)]
    if args.levels:
        command += ["--levels", args.levels]
    if args.fit_ms:
        command += ["--fit-ms", str(args.fit_ms)]
    for name in args.only:
        command += ["--only", name]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return out


def final_best(curve: list[float | None]) -> float | None:
    """The last best so far of a run's curve (None: never correct)."""
    return next((value for value in reversed(curve) if value is not None), None)


def attempts_to_90(curve: list[float | None], mark: float | None = None) -> int | None:
    """The first attempt whose best so far is at least 90% of ``mark`` (the run's own final best
    when None); None when the run never gets there."""
    mark = final_best(curve) if mark is None else mark
    if mark is None:
        return None
    return next((i + 1 for i, value in enumerate(curve) if value is not None and value >= 0.9 * mark), None)


def add_shared_marks(results: dict[str, dict[str, Any]], budget: int, strategies: list[str]) -> None:
    """Attempts to 90% of the best any strategy reached on each task at ``budget`` (budget + 1 for
    a run that never reaches it), the median over tasks in ``attempts_to_90_shared``."""
    runs = [results[f"{strategy}-{budget}"] for strategy in strategies]
    tasks = sorted({task for run in runs for task in run["curves"]})
    for run in runs:
        reach = []
        for task in tasks:
            bests = (final_best(other["curves"].get(task) or []) for other in runs)
            finals = [value for value in bests if value is not None]
            if finals:
                found = attempts_to_90(run["curves"].get(task) or [], max(finals))
                reach.append(budget + 1 if found is None else found)
        run["attempts_to_90_shared"] = statistics.median(reach) if reach else None


def add_paired_ratios(results: dict[str, dict[str, Any]], budget: int, strategies: list[str]) -> None:
    """Each strategy against the first, task by task: the geometric mean over tasks of the ratio of
    their speedups (``vs_first``), which leaves out how fast or slow the tasks are themselves."""
    first = results[f"{strategies[0]}-{budget}"]["per_task"]
    for strategy in strategies:
        run = results[f"{strategy}-{budget}"]
        run["vs_first"] = paired_ratio(run["per_task"], first)


def paired_ratio(speedups: dict[str, float | None], first: dict[str, float | None]) -> float | None:
    """The geometric mean over the tasks both have of ``speedups`` over ``first``."""
    ratios = [value / base for t, value in speedups.items() if value and (base := first.get(t))]
    return statistics.geometric_mean(ratios) if ratios else None


def retime(results: dict[str, dict[str, Any]], budget: int, strategies: list[str], args: argparse.Namespace) -> None:
    """Time each task's kernels again side by side: every kernel that was some strategy's best after
    some attempt, ``args.retime`` rounds, one verification of each distinct kernel per round (the
    same code is timed once for every run that kept it). Each kernel's median over the rounds gives
    ``retimed`` (the final bests), ``retimed_curves`` (the best after each attempt) and, against the
    fastest final best of any strategy, ``attempts_to_90_side_by_side``. Confirmations run minutes
    apart, and the same kernel's speedup moved by up to 20% between them."""
    runs = {strategy: results[f"{strategy}-{budget}"] for strategy in strategies}
    for run in runs.values():
        run["retimed"], run["retimed_curves"] = {}, {}
    for task in sorted({t for run in runs.values() for t in run["chains"]}):
        kernels: dict[str, tuple[Path, Path, dict[str, Any]]] = {}
        for run in runs.values():
            for kernel in run["chains"].get(task, []):
                if kernel is not None and kernel[0].exists():
                    kernels.setdefault(kernel[0].read_text(), kernel)
        timed: dict[str, list[float]] = {code: [] for code in kernels}
        for _ in range(args.retime):
            for code, kernel in kernels.items():
                value = _verify_speedup(task, *kernel, args.reps)
                if value is not None:
                    timed[code].append(value)
        medians = {code: statistics.median(values) if values else None for code, values in timed.items()}
        for run in runs.values():
            chain = run["chains"].get(task)
            if not chain:
                continue
            curve = [None if k is None or not k[0].exists() else medians.get(k[0].read_text()) for k in chain]
            run["retimed_curves"][task] = curve
            run["retimed"][task] = curve[-1]
    first = runs[strategies[0]]["retimed"]
    for run in runs.values():
        values = [v for v in run["retimed"].values() if v]
        run["retimed_geomean"] = statistics.geometric_mean(values) if values else None
        run["retimed_vs_first"] = paired_ratio(run["retimed"], first)
        reach = []
        for task, curve in run["retimed_curves"].items():
            finals = [other["retimed"].get(task) for other in runs.values()]
            mark = max((value for value in finals if value), default=None)
            if mark is not None:
                found = attempts_to_90(curve, mark)
                reach.append(budget + 1 if found is None else found)
        run["attempts_to_90_side_by_side"] = statistics.median(reach) if reach else None


def _verify_speedup(task: str, source: Path, task_file: Path, sizes: dict[str, Any], reps: int) -> float | None:
    """One ``pragma verify`` of a kernel: its median speedup, None (and why, on stderr) if untimed."""
    command = [sys.executable, "-m", "pragma_core", "verify", str(task_file), str(source), "--json"]
    command += ["--reps", str(reps)]
    for name, value in sizes.items():
        command += ["--set", f"{name}={value!r}"]
    done = subprocess.run(command, capture_output=True, text=True)
    verdict = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    speedup = verdict.get("speedup") or {}
    if speedup.get("value"):
        return speedup["value"]
    reason = verdict.get("message") or done.stderr.strip()[-300:]
    print(f"{task}: {source} was not timed again: {reason}", file=sys.stderr)
    return None


def _summary(out: Path) -> dict[str, Any]:
    document = json.loads((out / "bench.json").read_text())
    (variant,) = document["variants"]
    rows = document["variants"][variant]["tasks"]
    overall = document["metrics"][variant]["eager"]["all"]
    found = (attempts_to_90(row.get("best_by_attempt") or []) for row in rows.values() if row.get("correct"))
    reach = [value for value in found if value is not None]
    return {
        "tasks": overall["tasks"],
        "success_rate": overall["success_rate"],
        "geomean": overall["geomean_speedup"],
        "fast_1": overall["fast_p"]["1"],
        "attempts_to_90": statistics.median(reach) if reach else None,
        "per_task": {key: row.get("speedup", {}).get("eager", {}).get("value") for key, row in rows.items()},
        "curves": {key: row.get("best_by_attempt") or [] for key, row in rows.items()},
        "chains": {
            key: best_kernels(Path(row["run_dir"]), row.get("sizes") or {})
            for key, row in rows.items()
            if row.get("correct") and row.get("run_dir") and Path(row["run_dir"], "events.jsonl").exists()
        },
    }


def best_kernels(run_dir: Path, sizes: dict[str, Any]) -> list[tuple[Path, Path, dict[str, Any]] | None]:
    """After each attempt of a run, the loop's best kernel (its code, the task file and the sizes it
    ran at; None before any best), from the ``attempt_done`` events (the last one per attempt, so a
    resumed run counts once)."""
    run = RunDirectory.open(run_dir)
    best_after = {e["attempt"]: e.get("best") for e in run.events() if e.get("event") == "attempt_done"}
    task_file = run_dir / "task.py"
    return [
        None if best is None else (run.attempt_folder(best) / "candidate.py", task_file, sizes)
        for _, best in sorted(best_after.items())
    ]


def _plot(results: dict[str, dict[str, Any]], budgets: list[int], strategies: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    width = 0.8 / len(strategies)
    for index, strategy in enumerate(strategies):
        xs = [b + (index - (len(strategies) - 1) / 2) * width for b in range(len(budgets))]
        geo = [results[f"{strategy}-{budget}"]["geomean"] for budget in budgets]
        values = [g["value"] if g else 0.0 for g in geo]
        errors = [
            [g["value"] - g["low"] if g else 0.0 for g in geo],
            [g["high"] - g["value"] if g else 0.0 for g in geo],
        ]
        left.bar(xs, values, width, yerr=errors, capsize=3, label=strategy)
        runs = [results[f"{strategy}-{budget}"] for budget in budgets]
        reach = [run.get("attempts_to_90_side_by_side", run["attempts_to_90_shared"]) or 0 for run in runs]
        right.bar(xs, reach, width, label=strategy)
    timed_again = all("attempts_to_90_side_by_side" in run for run in results.values())
    labels = (
        "geomean speedup vs eager (95% CI)",
        "median attempts to 90% of the best" + (", side by side" if timed_again else ""),
    )
    for axes, label in zip((left, right), labels, strict=True):
        axes.set_xticks(range(len(budgets)), [f"{budget} attempts" for budget in budgets])
        axes.set_ylabel(label)
        axes.legend(loc="lower right", framealpha=0.9)
    left.axhline(1.0, color="0.3", ls="--", lw=0.8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", nargs="?", type=Path, default=EXAMPLES)
    parser.add_argument("--levels", default=None)
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--fit-ms", type=float, default=None)
    parser.add_argument("--budgets", default="6,15")
    parser.add_argument("--strategies", default="linear,tree,beam")
    parser.add_argument("--branching", type=int, default=2)
    parser.add_argument("--profilers", default="valgrind")
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "search")
    parser.add_argument("--retime", type=int, default=0, help="rounds of timing the bests again side by side")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    strategies = args.strategies.split(",")
    console = Console()
    results = {}
    for budget in budgets:
        for strategy in strategies:
            console.print(f"[bold]{strategy}[/], {budget} attempts per task ...")
            results[f"{strategy}-{budget}"] = _summary(_bench(strategy, budget, args))
        add_shared_marks(results, budget, strategies)
        add_paired_ratios(results, budget, strategies)
        if args.retime:
            console.print(f"timing the best kernels again side by side, {args.retime} rounds ...")
            retime(results, budget, strategies, args)
    table = Table(title=f"search strategies on {args.tree} (branching {args.branching})")
    columns = ["budget", "strategy", "tasks", "success", "geomean vs eager", f"vs {strategies[0]}", "fast_1"]
    columns += ["to 90% own", "to 90% shared"] + (["to 90% side by side"] if args.retime else [])
    for column in columns:
        table.add_column(column, justify="right" if column not in ("strategy",) else "left")
    for budget in budgets:
        for strategy in strategies:
            r = results[f"{strategy}-{budget}"]
            geo = r["geomean"]
            table.add_row(
                str(budget),
                strategy,
                str(r["tasks"]),
                f"{r['success_rate']:.0%}",
                f"{geo['value']:.2f}x [{geo['low']:.2f}-{geo['high']:.2f}]" if geo else "-",
                "-" if r["vs_first"] is None else f"{r['vs_first']:.3f}",
                f"{r['fast_1']:.0%}",
                _count(r["attempts_to_90"]),
                _count(r["attempts_to_90_shared"]),
                *([_count(r.get("attempts_to_90_side_by_side"))] if args.retime else []),
            )
    console.print(table)
    runs = [f"{strategy}-{budget}" for budget in budgets for strategy in strategies]
    console.print(_per_task_table("speedup vs eager per task", [results[run]["per_task"] for run in runs], runs))
    if args.retime:
        title = f"the best kernels timed again side by side ({args.retime} rounds, median)"
        again = _per_task_table(title, [results[run]["retimed"] for run in runs], runs)
        again.add_row("geomean", *(_times(results[run].get("retimed_geomean")) for run in runs))
        again.add_row(f"vs {strategies[0]}", *(_times(results[run].get("retimed_vs_first")) for run in runs))
        console.print(again)
    (args.out / "search.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    _plot(results, budgets, strategies, args.out / "search.png")
    console.print(f"written: {args.out / 'search.json'}, {args.out / 'search.png'}")


def _per_task_table(title: str, columns: list[dict[str, float | None]], names: list[str]) -> Table:
    """One row per task, one column per run: each run's speedup of the task."""
    table = Table(title=title)
    table.add_column("task")
    for name in names:
        table.add_column(name, justify="right")
    for task in sorted({t for column in columns for t in column}):
        table.add_row(task, *("-" if (v := column.get(task)) is None else f"{v:.2f}x" for column in columns))
    return table


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}x"


if __name__ == "__main__":
    main()
