"""Do two verifications of the same candidate agree? Speedup intervals of repeated runs.

Verifies one candidate against one task several times (each a fresh sandbox child) and prints each
run's median times, speedup and 95% interval, then whether every pair of intervals overlaps.

    python benchmarks/verify_repeatability.py [TASK CANDIDATE] [--runs 3] [--reps 100] [--set NAME=VALUE ...]

Defaults: the GELU example and examples/candidates/1_GELUTanh_fast.py.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

from rich.console import Console
from rich.table import Table

from pragma_core import Candidate, VerifySettings, load_task, parse_size_assignments, verify

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", nargs="?", default=ROOT / "examples/tasks/level1/1_GELUTanh.py", type=Path)
    parser.add_argument("candidate", nargs="?", default=ROOT / "examples/candidates/1_GELUTanh_fast.py", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--set", dest="assignments", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()

    task = load_task(args.task, parse_size_assignments(args.assignments))
    candidate = Candidate(source=args.candidate.read_text(), backend="cpu-cpp")
    settings = VerifySettings(reps=args.reps)
    table = Table(title=f"{args.candidate.name} on {task.key}: {args.runs} runs, {args.reps} reps each")
    for column in ("run", "status", "reference ms", "candidate ms", "speedup", "95% CI"):
        table.add_column(column, justify="right")
    intervals = []
    console = Console()
    for run in range(1, args.runs + 1):
        with console.status(f"run {run}"):
            verdict = verify(task, candidate, settings)
        if not verdict.speedup:
            table.add_row(str(run), verdict.status.value, "", "", "", verdict.message[:60])
            continue
        s = verdict.speedup
        intervals.append((s.low, s.high))
        table.add_row(
            str(run),
            verdict.status.value,
            f"{verdict.reference.median_ms:.3f}",
            f"{verdict.candidate.median_ms:.3f}",
            f"{s.value:.2f}x",
            f"{s.low:.2f}-{s.high:.2f}",
        )
    console.print(table)
    overlapping = all(
        a_low <= b_high and b_low <= a_high for (a_low, a_high), (b_low, b_high) in itertools.combinations(intervals, 2)
    )
    console.print(f"all {len(intervals)} intervals overlap pairwise: {'yes' if overlapping else 'NO'}")


if __name__ == "__main__":
    main()
