"""How long `pragma knowledge search` makes a user wait: with no index yet, in a new process once the
index exists, and for the loop's later searches in the same process.

    python benchmarks/knowledge_speed.py [--cold-runs 1] [--runs 5] [--out benchmarks/results/knowledge-speed]

Three measurements, each the median of its runs, as wall time and as the CPU time of the process.
On a machine others share, CPU time moves less than wall time.

* cold first build: ``pragma knowledge search`` in a new process with an empty
  ``PRAGMA_KNOWLEDGE_DIR``, so it embeds the whole shipped compendium first;
* first search, new process: the same command once that index exists (imports, opening the
  index, loading the query model, one search);
* warm search, same process: the searches after the first in one process, as the loop's Conductor
  turns make them (the queries of tests/data/knowledge_queries.json).

Prints a table and writes results.json to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ROOT / "tests" / "data" / "knowledge_queries.json"
QUERY = "kernel waits on DRAM bandwidth"

# Runs in a child process: one search, then each query timed (wall and CPU seconds), as JSON.
_WARM = """
import json, sys, time
from pragma_core import knowledge
queries = json.loads(sys.argv[1])
knowledge.search(queries[0][0], profiler=queries[0][1])
timings = []
for query, profiler in queries[1:]:
    wall, cpu = time.perf_counter(), time.process_time()
    knowledge.search(query, profiler=profiler)
    timings.append((time.perf_counter() - wall, time.process_time() - cpu))
print(json.dumps(timings))
"""


def _timed(command: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, standard output) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=3600)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])} ... failed:\n{run.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, run.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold-runs", type=int, default=1, help="builds from nothing (each embeds everything)")
    parser.add_argument("--runs", type=int, default=5, help="new processes searching an existing index")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "knowledge-speed")
    args = parser.parse_args()
    search = [sys.executable, "-m", "pragma_core", "knowledge", "search", QUERY, "--json"]
    queries = [[q["query"], q["profiler"]] for q in json.loads(QUERIES.read_text())["queries"]]
    rows: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for run in range(args.cold_runs):
            env = {**os.environ, "PRAGMA_KNOWLEDGE_DIR": str(Path(scratch) / f"cold-{run}")}
            wall, cpu, _ = _timed(search, env)
            rows.setdefault("cold first build", []).append((wall, cpu))
        env = {**os.environ, "PRAGMA_KNOWLEDGE_DIR": str(Path(scratch) / "cold-0")}
        for _ in range(args.runs):
            wall, cpu, _ = _timed(search, env)
            rows.setdefault("first search, new process", []).append((wall, cpu))
        _wall, _cpu, output = _timed([sys.executable, "-c", _WARM, json.dumps(queries)], env)
        rows["warm search, same process"] = [tuple(pair) for pair in json.loads(output)]

    table = Table(title="pragma knowledge search: waiting time (medians)")
    for column in ("", "runs", "wall s", "CPU s"):
        table.add_column(column, justify="right")
    summary = {}
    for name, timings in rows.items():
        wall = statistics.median(t[0] for t in timings)
        cpu = statistics.median(t[1] for t in timings)
        summary[name] = {"runs": len(timings), "wall_s": wall, "cpu_s": cpu}
        table.add_row(name, str(len(timings)), f"{wall:.2f}", f"{cpu:.2f}")
    console = Console()
    console.print(table)
    console.print(f"machine: {os.cpu_count()} CPUs, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(
        json.dumps({"timings": summary, "load_average": os.getloadavg()}, indent=1) + "\n"
    )
    console.print(f"wrote {args.out / 'results.json'}")


if __name__ == "__main__":
    main()
