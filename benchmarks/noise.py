"""Does a busy machine fool the timing? The same candidates verified idle and under synthetic load.

A busy machine slows the multithreaded reference (OpenMP waits for its slowest thread) far more
than a serial candidate, so a serial candidate's speedup inflates. Each candidate is verified on
the quiet machine with one thread and with every CPU, then while busy loops this script starts and
stops itself spin (one, then one per CPU), both with the thread default (the CPUs idle when the
verification starts, so fewer under load) and with every CPU forced. A loaded verdict is honest when
it is flagged noisy or lands within 10% of the idle speedup with the thread count it used. Prints
the table, writes ``results.json`` and ``noise.png``:

    python benchmarks/noise.py [--runs 3] [--out DIR]

Run it on an otherwise quiet machine: the idle rows are the yardstick.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from pragma_core import Candidate, VerifySettings, load_task, verify
from pragma_core.machine.load import synthetic_load

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "examples" / "tasks" / "level1" / "1_GELUTanh.py"
SIZES = {"batch_size": 256, "dim": 4096}  # 4 MB: a few milliseconds for the reference
CANDIDATES = {
    "serial GELU (double, -O0)": ROOT / "tests" / "candidates" / "gelu_correct_slow.py",
    "parallel GELU (OpenMP)": ROOT / "examples" / "candidates" / "1_GELUTanh_fast.py",
}
TOLERANCE = 0.10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="verifications per row (median speedup)")
    parser.add_argument("--reps", type=int, default=60)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or ROOT / "benchmarks" / "results" / time.strftime("noise-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    cpus = len(os.sched_getaffinity(0))
    task = load_task(TASK, SIZES)
    loads = {"idle": 0, "1 busy loop": 1, f"{cpus} busy loops": cpus}
    rows: list[dict[str, Any]] = []
    console = Console()
    for name, path in CANDIDATES.items():
        candidate = Candidate(source=path.read_text(), backend="cpu-cpp")
        verify(task, candidate, VerifySettings(time=False, trials=1, threads=1))  # build once
        idle: dict[int, float] = {}  # idle speedup by the thread count a verdict used
        for threads in (1, cpus, None):
            for load, processes in loads.items():
                if threads != cpus and threads is not None and processes:
                    continue  # one thread is the idle yardstick for the default under load
                settings = VerifySettings(reps=args.reps, threads=threads, timing_budget_s=10)
                verdicts = []
                for _ in range(args.runs):
                    if processes:
                        with synthetic_load(processes):
                            verdicts.append(verify(task, candidate, settings))
                    else:
                        verdicts.append(verify(task, candidate, settings))
                    console.print(f"{name}, threads {threads or 'default'}, {load}: {verdicts[-1].message}")
                row = _row(name, threads, load, verdicts, idle)
                if processes == 0 and threads is not None:
                    idle[threads] = row["speedup"]
                rows.append(row)
    _print(console, rows, cpus)
    (out / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    _plot(rows, out / "noise.png")
    console.print(f"results in {out}")


def _row(name: str, threads: int | None, load: str, verdicts: list, idle: dict[int, float]) -> dict[str, Any]:
    timed = [v for v in verdicts if v.speedup is not None and v.conditions is not None]
    speedup = statistics.median(v.speedup.value for v in timed) if timed else None
    noisy = sum(v.noisy for v in timed)
    used = sorted({v.conditions.threads for v in timed})
    idle_speedup = idle.get(used[0]) if len(used) == 1 else None
    off = speedup / idle_speedup - 1 if speedup and idle_speedup else None
    honest = all(v.noisy or (idle_speedup and abs(v.speedup.value / idle_speedup - 1) <= TOLERANCE) for v in timed)
    return {
        "candidate": name,
        "threads": "default" if threads is None else threads,
        "load": load,
        "threads_used": used,
        "speedup": speedup,
        "vs_idle": off,
        "noisy": f"{noisy}/{len(timed)}",
        "other_cpu": statistics.median(v.conditions.other_cpu or 0.0 for v in timed) if timed else None,
        "reasons": sorted({reason.split(":")[0] for v in timed for reason in v.conditions.noise}),
        "honest": bool(timed) and (load == "idle" or bool(honest)),
        "idle_speedup": idle_speedup,
        "statuses": [v.status.value for v in verdicts],
    }


def _print(console: Console, rows: list[dict[str, Any]], cpus: int) -> None:
    table = Table(title=f"the same candidates idle and under synthetic load ({cpus} CPUs), median of runs")
    for column in ("candidate", "threads", "load", "used", "speedup", "vs idle", "noisy", "others' CPU", "honest"):
        table.add_column(column, justify="left" if column in ("candidate", "load") else "right")
    for row in rows:
        table.add_row(
            row["candidate"],
            str(row["threads"]),
            row["load"],
            ",".join(map(str, row["threads_used"])),
            f"{row['speedup']:.2f}x" if row["speedup"] else "-",
            f"{row['vs_idle']:+.0%}" if row["vs_idle"] is not None and row["load"] != "idle" else "",
            row["noisy"],
            f"{row['other_cpu']:.2f}" if row["other_cpu"] is not None else "-",
            "[green]yes[/]" if row["honest"] else "[red]no[/]",
        )
    table.caption = f"honest: flagged noisy, or within {TOLERANCE:.0%} of the idle speedup with the threads it used"
    console.print(table)


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['candidate'].split(' (')[0]}\nthreads {r['threads']}\n{r['load']}" for r in rows]
    values = [r["speedup"] or 0.0 for r in rows]
    colors = ["tab:orange" if not r["noisy"].startswith("0/") else "tab:blue" for r in rows]
    figure, axis = plt.subplots(figsize=(max(8, len(rows) * 0.9), 4.5))
    axis.bar(range(len(rows)), values, color=colors)
    axis.set_xticks(range(len(rows)), labels, fontsize=7)
    axis.set_yscale("log")  # serial candidates sit at a few hundredths, parallel ones at a few
    axis.set_ylabel("speedup over eager (median, log scale)")
    axis.set_title("verdicts idle and under load: orange bars were flagged noisy")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
