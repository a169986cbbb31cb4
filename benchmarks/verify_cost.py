"""What a verification costs: wall time of whole verifications and the speedups they report.

Verifies each candidate against its task ``--runs`` times (each a fresh sandbox child, building
from the candidate's own cache after the first) and prints, per pair, medians of: the wall time of
a verification; where it went (until the child was ready, the correctness trials, timing with the
checks after it); the timed calls themselves (the sum of every timed sample, reference and
candidate); the overhead (wall time minus the timed calls: what issue 14 asks to keep small); and
the median speedup with the widest 95% interval. Run it on a quiet machine; it imports whichever
``pragma_core`` is first on ``PYTHONPATH``, so two checkouts can be compared:

    python benchmarks/verify_cost.py [--runs 3] [--reps 100] [--only GELU]
    PYTHONPATH=../old-checkout python benchmarks/verify_cost.py
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

import pragma_core
from pragma_core import Candidate, VerifySettings, load_task, verify

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "examples" / "tasks" / "level1"
CANDIDATES = ROOT / "tests" / "candidates"

PAIRS = [
    ("GELU 1024x8192 (32 MB)", TASKS / "1_GELUTanh.py", ROOT / "examples/candidates/1_GELUTanh_fast.py", None),
    ("Softmax 1024x8192 (32 MB)", TASKS / "3_Softmax.py", CANDIDATES / "honest_softmax_pybind11.py", None),
    (
        "GELU 32x1024",
        TASKS / "1_GELUTanh.py",
        ROOT / "examples/candidates/1_GELUTanh_fast.py",
        {"batch_size": 32, "dim": 1024},
    ),
    (
        "LayerNorm 16x512",
        TASKS / "4_LayerNorm.py",
        CANDIDATES / "honest_layernorm_two_kernels.py",
        {"batch_size": 16, "dim": 512},
    ),
    ("Matmul 256", TASKS / "10_Matmul.py", CANDIDATES / "matmul_correct_tiled.py", {"M": 256, "K": 256, "N": 256}),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--only", default="", help="run only the pairs whose label contains this")
    args = parser.parse_args()
    settings = VerifySettings(reps=args.reps)
    table = Table(title=f"verifications with {pragma_core.__file__}: {args.runs} runs, {args.reps} reps")
    columns = ("task", "status", "wall s", "to ready s", "trials s", "timing s", "timed calls s", "overhead s")
    for column in (*columns, "speedup", "widest 95% CI"):
        table.add_column(column, justify="right")
    for label, task_path, candidate_path, sizes in PAIRS:
        if args.only not in label:
            continue
        task = load_task(task_path, sizes)
        candidate = Candidate(source=candidate_path.read_text(), backend="cpu-cpp")
        verify(task, candidate, VerifySettings(time=False, trials=1))  # builds the kernel once
        rows: list[tuple[float, ...]] = []
        speedups, widest, statuses = [], 0.0, set()
        for _ in range(args.runs):
            marks: dict[str, float] = {}
            started = time.perf_counter()
            verdict = verify(
                task,
                candidate,
                settings,
                on_phase=lambda phase, marks=marks: marks.update({phase: time.perf_counter()}),
            )
            ended = time.perf_counter()
            statuses.add(verdict.status.value if not verdict.failed_check else verdict.failed_check)
            timed = sum(sum(t.samples_ms) for t in (verdict.reference, verdict.candidate) if t is not None) / 1e3
            ready = marks.get("verifying", ended)
            timing = marks.get("timing", ended)  # timing and what follows it (the "finishing" phase)
            rows.append(
                (ended - started, ready - started, timing - ready, ended - timing, timed, ended - started - timed)
            )
            if verdict.speedup is not None:
                speedups.append(verdict.speedup.value)
                widest = max(widest, verdict.speedup.high - verdict.speedup.low)
        table.add_row(
            label,
            ",".join(sorted(statuses)),
            *(f"{statistics.median(row[i] for row in rows):.2f}" for i in range(6)),
            f"{statistics.median(speedups):.2f}x" if speedups else "-",
            f"{widest:.2f}" if speedups else "-",
        )
    Console().print(table)


if __name__ == "__main__":
    main()
