"""Tasks per hour of ``pragma bench`` with 1 and 2 workers, local and Ray, with a model that makes
every task wait.

The model is the stand-in ``slow-offline`` (:mod:`pragma_core.testing.slow_model`): the offline
agents' answers, each after ``--latency`` seconds, through litellm as a hosted model's would be.
While one task waits for its model, another can build, verify or profile; only one verification
times at a time (the machine's timing slot). The issue's target: with 5 s per reply, 2 workers
finish at least 1.6x faster than 1.

    python benchmarks/bench_throughput.py [--latency 5] [--tasks 1_GELUTanh,2_LeakyReLU,...]
                                          [--max-attempts 3] [--executors local,ray] [--out DIR]

Each configuration is a fresh bench of the bundled examples (profiled, the default profilers), run
as ``pragma bench`` in its own process with a cache of its own where nothing is built yet (the
machine's measured peaks copied in), each task making all its attempts (no early stop), its bench
folder kept under ``--out`` (each attempt's seconds per phase are in its run's ``events.jsonl``);
the Ray rows include starting a Ray instance on this machine. Prints a table, writes ``throughput.json`` and ``throughput.png``. Run it on a quiet
machine: nothing else running, no tests, no builds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "tasks"
TASKS = "1_GELUTanh,2_LeakyReLU,3_Softmax,4_LayerNorm"


def _plugin_site(folder: Path) -> Path:
    """A folder that, on PYTHONPATH, installs the stand-in model as a pragma plugin."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pragma_slow_model_entry.py").write_text("from pragma_core.testing.slow_model import *\n")
    info = folder / "pragma_slow_model_entry-1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pragma-slow-model-entry\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pragma]\nslow-offline = pragma_slow_model_entry\n")
    return folder


def _cold_cache(folder: Path) -> Path:
    """A cache with nothing built yet (every configuration builds its kernels, as a bench of new
    tasks does), holding only the machine's measured peaks and calibration, which every
    configuration would otherwise measure alike."""
    from pragma_core.paths import cache_dir

    for kept in ("roofline", "calibration"):
        if cache_dir(kept).is_dir():
            shutil.copytree(cache_dir(kept), folder / kept, dirs_exist_ok=True)
    return folder


def _bench(executor: str, workers: int, args: argparse.Namespace, scratch: Path, results: Path) -> dict:
    out = results / f"{executor}-{workers}"
    command = [sys.executable, "-m", "pragma_core", "bench", str(EXAMPLES)]
    for name in args.tasks.split(","):
        command += ["--only", name]
    command += ["--provider", "slow-offline", "--model", "openai/gpt-4o-mini"]
    # Every task makes all its attempts (no stop at the roofline target or for patience), so each
    # configuration does the same work: otherwise timing noise decides how many attempts a task makes.
    command += ["--max-attempts", str(args.max_attempts), "--patience", str(args.max_attempts)]
    command += ["--target-attainment", "3"]
    command += ["--reps", str(args.reps), "--executor", executor, "--workers", str(workers), "--out", str(out)]
    env = os.environ | {
        "PYTHONPATH": str(_plugin_site(scratch / "site")),
        "PRAGMA_TEST_LATENCY_S": str(args.latency),
        "PRAGMA_CACHE_DIR": str(_cold_cache(scratch / f"cache-{executor}-{workers}")),
    }
    started = time.monotonic()
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    seconds = time.monotonic() - started
    every = json.loads((out / "bench.json").read_text())["variants"]["profiled"]["tasks"]
    rows = {key: row for key, row in every.items() if row.get("status") in ("finished", "failed")}
    if len(rows) < len(every):
        raise SystemExit(f"{executor}, {workers} worker(s): {len(every) - len(rows)} task(s) did not end; see {out}")
    attempts = sum(row.get("attempts", 0) for row in rows.values())
    return {
        "executor": executor,
        "workers": workers,
        "tasks": len(rows),
        "attempts": attempts,
        "correct": sum(bool(row.get("correct")) for row in rows.values()),
        "seconds": seconds,
        "tasks_per_hour": len(rows) / seconds * 3600,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=5.0, help="Seconds per model reply.")
    parser.add_argument("--tasks", default=TASKS, help="Example tasks, comma-separated.")
    parser.add_argument("--max-attempts", type=int, default=3)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--executors", default="local,ray")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or ROOT / "benchmarks" / "results" / time.strftime("throughput-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    console = Console(width=160)
    results = []
    with tempfile.TemporaryDirectory(prefix="pragma-throughput-") as scratch:
        for executor in args.executors.split(","):
            for workers in (1, 2):
                console.print(f"{executor}, {workers} worker(s)...")
                results.append(_bench(executor, workers, args, Path(scratch), out))
    table = Table(
        title=f"pragma bench throughput: {len(args.tasks.split(','))} example tasks, {args.max_attempts} attempts, "
        f"model replies after {args.latency:g} s",
        title_justify="left",
    )
    for column in ("executor", "workers", "tasks", "attempts", "correct", "wall s", "tasks/hour", "vs 1 worker"):
        table.add_column(column, justify="left" if column == "executor" else "right")
    for result in results:
        one = next(r for r in results if r["executor"] == result["executor"] and r["workers"] == 1)
        result["speedup_vs_one"] = one["seconds"] / result["seconds"]
        table.add_row(
            result["executor"],
            str(result["workers"]),
            str(result["tasks"]),
            str(result["attempts"]),
            str(result["correct"]),
            f"{result['seconds']:.0f}",
            f"{result['tasks_per_hour']:.0f}",
            f"{result['speedup_vs_one']:.2f}x",
        )
    console.print(table)
    (out / "throughput.json").write_text(
        json.dumps({"settings": vars(args) | {"out": str(out)}, "results": results}, indent=2) + "\n"
    )
    _plot(results, out / "throughput.png", args.latency)
    console.print(f"results: {out / 'throughput.json'}, plot: {out / 'throughput.png'}")


def _plot(results: list[dict], path: Path, latency: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 4))
    labels = [f"{r['executor']}\n{r['workers']} worker(s)" for r in results]
    axis.bar(
        range(len(results)), [r["tasks_per_hour"] for r in results], color=["tab:blue", "tab:orange"] * len(results)
    )
    axis.set_xticks(range(len(results)), labels)
    axis.set_ylabel("tasks per hour")
    axis.set_title(f"pragma bench throughput (model replies after {latency:g} s)", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
