"""What the loop costs beyond the timed runs: seconds per phase of an attempt, with the offline agents.

Runs ``optimize`` with the offline provider on each task and reads back every attempt's
``phase_seconds`` (writing, building, verifying, timing, ``profiling:<name>``, diagnosing, advising)
and ``timed_s`` (the timed calls themselves). Prints per task the median over attempts of each phase,
of the timed calls, of the overhead beyond them (attempt minus timed calls) and of the whole attempt,
then the baseline's and the whole run's wall time, against the issue's targets (overhead at most 2 s
per attempt; a 6-attempt run of a 64 MB activation task under 2 minutes on an idle 2-core machine).
Writes ``results.json`` and ``phases.png`` (stacked median phase times per task). It imports whichever
``pragma_core`` is first on ``PYTHONPATH``, so two checkouts can be compared; run it on a quiet machine.

    python benchmarks/loop_overhead.py [--tasks NAME_OR_PATH ...] [--attempts 6] [--set NAME=VALUE ...]
        [--profilers valgrind,perf | --no-profile] [--reps N] [--threads N] [--out DIR]
    python benchmarks/loop_overhead.py --tasks ../shared/kernelbench/level1/19_ReLU.py \\
        --set batch_size=4096 --set dim=4096        # 64 MB of float32 input

Defaults: GELUTanh, LayerNorm and Softmax of ``examples/tasks/level1`` at their own sizes, 6 attempts,
the loop's default profilers; results under ``benchmarks/results/overhead-<time>``. A task is a path or
a name of a file in ``examples/tasks/level1`` (``Softmax`` or ``3_Softmax``); ``--set`` applies to each
task that has that constant.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import attrs
from rich.console import Console
from rich.table import Table

import pragma_core
from pragma_core import VerifySettings, load_task, parse_size_assignments
from pragma_core.loop.optimizer import optimize
from pragma_core.loop.run_directory import RunDirectory
from pragma_core.loop.settings import OptimizeSettings
from pragma_core.records import Attempt
from pragma_core.tasks.loading import sizes_per_file

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "tasks" / "level1"
DEFAULT_TASKS = ["1_GELUTanh", "4_LayerNorm", "3_Softmax"]
LOOP_ORDER = ("writing", "building", "verifying", "timing", "finishing")
LAST = ("diagnosing", "advising")
OVERHEAD_TARGET_S = 2.0
RUN_TARGET_S = 120.0
RUN_TARGET_ATTEMPTS = 6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", action="append", default=[], metavar="NAME_OR_PATH", help="repeat or join with ,")
    parser.add_argument("--attempts", type=int, default=RUN_TARGET_ATTEMPTS)
    parser.add_argument("--set", dest="assignments", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--profilers", default=",".join(OptimizeSettings().profilers))
    parser.add_argument("--no-profile", action="store_true", help="timing only (the N-PRAGMA ablation)")
    parser.add_argument("--reps", type=int, default=VerifySettings().reps)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or ROOT / "benchmarks" / "results" / time.strftime("overhead-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    console = Console()

    names = [name.strip() for given in args.tasks or DEFAULT_TASKS for name in given.split(",") if name.strip()]
    paths = [_task_path(name) for name in names]
    plan = sizes_per_file(paths, parse_size_assignments(args.assignments), where=Path("the tasks given"))
    verify = VerifySettings(reps=args.reps, **({"threads": args.threads} if args.threads else {}))
    settings = OptimizeSettings(
        provider="offline",
        max_attempts=args.attempts,
        patience=args.attempts,  # every attempt is a sample: a run stops early only when the Conductor is done
        profile=not args.no_profile,
        profilers=tuple(p.strip() for p in args.profilers.split(",") if p.strip()),
        runs_dir=out / "runs",
        verify=verify,
    )
    load_at_start = os.getloadavg()
    machine: dict[str, Any] = {"cpus": os.cpu_count(), "load_average_at_start": load_at_start}
    machine["pragma_core"] = pragma_core.__file__
    rows: list[dict[str, Any]] = []
    for path in paths:
        task = load_task(path, plan[path])
        console.print(f"{task.key} {task.sizes or '(its own sizes)'}: {args.attempts} attempts ...")
        rows.append(_run(task, settings))
        _write(out, settings, machine, rows)
    load_at_end = machine["load_average_at_end"] = os.getloadavg()
    _write(out, settings, machine, rows)
    console.print(_table(rows, args.attempts))
    _plot(rows, out / "phases.png")
    console.print(
        f"load average {load_at_start[0]:.1f} at start, {load_at_end[0]:.1f} "
        f"at end on {machine['cpus']} cores; results: {out / 'results.json'}, plot: {out / 'phases.png'}"
    )


def _task_path(name: str) -> Path:
    """A task file: the path given, else the one file of ``examples/tasks/level1`` of that name."""
    path = Path(name)
    if path.suffix == ".py" or path.exists():
        if not path.is_file():
            raise SystemExit(f"{path}: no such task file")
        return path
    matches = [p for p in sorted(EXAMPLES.glob("*.py")) if p.stem == name or p.stem.split("_", 1)[-1] == name]
    if len(matches) != 1:
        known = ", ".join(p.stem for p in sorted(EXAMPLES.glob("*.py")))
        raise SystemExit(f"{name}: not a task file nor one task of {EXAMPLES} (there: {known})")
    return matches[0]


def _run(task: Any, settings: OptimizeSettings) -> dict[str, Any]:
    """One run of the loop on ``task``: per attempt its phases, and the run's wall time."""
    started = time.monotonic()
    result = optimize(task, settings)
    wall_s = time.monotonic() - started
    run = RunDirectory(settings.runs_dir / result.run_id)
    baseline = next((event for event in run.events() if event["event"] == "baseline"), {})
    attempts = [_attempt_row(attempt) for attempt in result.attempts]
    return {
        "task": task.key,
        "sizes": dict(task.sizes),
        "run": result.run_id,
        "stop": result.stop_reason,
        "statuses": [attempt.verdict.status.value if attempt.verdict else None for attempt in result.attempts],
        "attempts": attempts,
        "median": _medians(attempts),
        "draw_s": _draw_seconds(task, settings.verify.thread_count),
        "baseline_s": baseline.get("seconds"),
        "baseline_phase_seconds": baseline.get("phase_seconds", {}),
        "run_s": wall_s,
        "settings": {
            "max_attempts": settings.max_attempts,
            "profilers": list(settings.profilers) if settings.profile else [],
            "verify": attrs.asdict(settings.verify),
        },
    }


def _draw_seconds(task: Any, threads: int) -> float:
    """Seconds of one draw of the task's inputs (``get_inputs()`` on a fresh seed, median of 5 after
    one unmeasured), in this process with the run's threads: what every timed repetition, trial
    and checked call pays for fresh values."""
    import torch

    from pragma_core.tasks.loading import task_namespace
    from pragma_core.verifier.inputs import make_inputs

    namespace = task_namespace(task)
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        times = []
        for seed in range(6):
            started = time.perf_counter()
            make_inputs(namespace, seed)
            times.append(time.perf_counter() - started)
    finally:
        torch.set_num_threads(previous)
    return statistics.median(times[1:])


def _attempt_row(attempt: Attempt) -> dict[str, Any]:
    verdict = attempt.verdict
    return {
        "attempt": attempt.number,
        "reps": len(verdict.candidate.samples_ms) if verdict is not None and verdict.candidate is not None else 0,
        "phase_seconds": dict(attempt.phase_seconds),
        "timed_s": attempt.timed_s,
        "overhead_s": attempt.elapsed_s - attempt.timed_s,
        "elapsed_s": attempt.elapsed_s,
    }


def _medians(attempts: list[dict[str, Any]]) -> dict[str, float]:
    """The median over attempts of each phase (0 for an attempt that did not reach it), of the
    timed calls, of the overhead and of the whole attempt."""
    if not attempts:
        return {}
    phases = _phase_order([attempts])
    medians = {
        name: statistics.median(attempt["phase_seconds"].get(name, 0.0) for attempt in attempts) for name in phases
    }
    for key in ("timed_s", "overhead_s", "elapsed_s", "reps"):
        medians[key] = statistics.median(attempt.get(key, 0) for attempt in attempts)
    return medians


def _phase_order(groups: list[list[dict[str, Any]]]) -> list[str]:
    """The phases seen, in the loop's order: the verifier's, the profilers by name, then the rest."""
    seen = {name for attempts in groups for attempt in attempts for name in attempt["phase_seconds"]}
    profilers = sorted(name for name in seen if name not in LOOP_ORDER and name not in LAST)
    return [name for name in LOOP_ORDER if name in seen] + profilers + [name for name in LAST if name in seen]


def _table(rows: list[dict[str, Any]], attempts: int) -> Table:
    """Phases down, tasks across: stays readable however many profilers a run has."""
    phases = _phase_order([row["attempts"] for row in rows])
    table = Table(
        title=f"seconds per attempt, median over attempts (offline agents, up to {attempts} attempts)",
        title_justify="left",
    )
    table.add_column("phase")
    for row in rows:
        table.add_column(row["task"].split("/")[-1], justify="right")
    for name in phases:
        table.add_row(name, *(_seconds(row["median"].get(name)) for row in rows))
    table.add_section()
    table.add_row("timed calls", *(_seconds(row["median"].get("timed_s")) for row in rows))
    table.add_row(
        f"overhead (<= {OVERHEAD_TARGET_S:g} s)",
        *(_against(row["median"].get("overhead_s"), OVERHEAD_TARGET_S, inclusive=True) for row in rows),
    )
    table.add_row("attempt", *(_seconds(row["median"].get("elapsed_s")) for row in rows))
    table.add_row("timed repetitions", *(f"{row['median'].get('reps', 0):g}" for row in rows))
    table.add_row("one input draw", *(_seconds(row.get("draw_s")) for row in rows))
    table.add_section()
    table.add_row("attempts", *(str(len(row["attempts"])) for row in rows))
    table.add_row("baseline", *(_seconds(row["baseline_s"]) for row in rows))
    table.add_row(
        f"run (< {RUN_TARGET_S:g} s at {RUN_TARGET_ATTEMPTS})",
        *(
            _against(row["run_s"], RUN_TARGET_S, inclusive=False)
            if row["settings"]["max_attempts"] == RUN_TARGET_ATTEMPTS
            else _seconds(row["run_s"])
            for row in rows
        ),
    )
    table.caption = (
        "timed calls: the verdict's timed calls (inside timing); overhead: attempt - timed calls; "
        "timed repetitions: per verdict, each with a fresh input draw; "
        "run: the whole optimize() wall time, baseline included (a run may end before its last attempt: "
        "the roofline reached, or the Conductor done). Targets: overhead <= 2 s per attempt; "
        f"{RUN_TARGET_ATTEMPTS} attempts of a 64 MB activation task in < {RUN_TARGET_S:g} s on an idle 2-core machine"
    )
    table.caption_justify = "left"
    return table


def _against(value: float | None, target: float, *, inclusive: bool) -> str:
    if value is None:
        return "-"
    met = value <= target if inclusive else value < target
    return f"{value:.2f} {'ok' if met else 'MISSED'}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _write(out: Path, settings: OptimizeSettings, machine: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    document = {"machine": machine, "provider": settings.provider, "rows": rows}
    (out / "results.json").write_text(json.dumps(document, indent=2) + "\n")


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    """A stacked bar per task: the median of each phase, timing split into the timed calls and the rest."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    phases = _phase_order([row["attempts"] for row in rows])
    segments: dict[str, list[float]] = {}
    for name in phases:
        if name == "timing":
            segments["timing: timed calls"] = [row["median"].get("timed_s", 0.0) for row in rows]
            segments["timing: the rest"] = [
                statistics.median(
                    max(a["phase_seconds"].get("timing", 0.0) - a["timed_s"], 0.0) for a in row["attempts"]
                )
                if row["attempts"]
                else 0.0
                for row in rows
            ]
        else:
            segments[name] = [row["median"].get(name, 0.0) for row in rows]
    labels = [row["task"].split("/")[-1] for row in rows]
    figure, axis = plt.subplots(figsize=(max(6, len(rows) * 1.4), 4.8))
    bottoms = [0.0] * len(rows)
    for name, values in segments.items():
        axis.bar(labels, values, bottom=bottoms, label=name)
        bottoms = [b + value for b, value in zip(bottoms, values)]
    axis.set_ylabel("seconds per attempt (median over attempts)")
    axis.set_title("the loop's time per attempt, by phase (offline agents)")
    axis.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


if __name__ == "__main__":
    main()
