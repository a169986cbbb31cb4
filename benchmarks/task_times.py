"""Time one forward of each task's reference, to check tasks are sized for 1 to 100 ms here.

For every task below DIR (default ``examples/tasks``), with KernelBench's seed and a fixed thread
count: build the model and inputs, run warm-up forwards, then time repeated forwards under
``torch.no_grad()``. Prints the median, min and max in milliseconds and whether the median lies in
the 1-100 ms window the examples are sized for.

    python benchmarks/task_times.py [DIR] [--set NAME=VALUE ...] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from rich.console import Console
from rich.table import Table

from pragma_core import load_tasks, parse_size_assignments, task_namespace
from pragma_core.tasks.analysis import SEED

WARMUP, REPEATS, LOW_MS, HIGH_MS = 3, 20, 1.0, 100.0


def time_forward(task) -> list[float]:
    namespace = task_namespace(task)
    torch.manual_seed(SEED)
    model = namespace["Model"](*namespace["get_init_inputs"]())
    torch.manual_seed(SEED)
    inputs = namespace["get_inputs"]()
    samples = []
    with torch.no_grad():
        for _ in range(WARMUP):
            model(*inputs)
        for _ in range(REPEATS):
            start = time.perf_counter()
            model(*inputs)
            samples.append((time.perf_counter() - start) * 1e3)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", default="examples/tasks")
    parser.add_argument("--set", dest="assignments", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    table = Table(title=f"reference forward time, {args.threads} threads, median of {REPEATS}")
    for column in ("task", "category", "median ms", "min ms", "max ms", "1-100 ms"):
        text = column in ("task", "category")
        table.add_column(column, justify="left" if text else "right", no_wrap=text)
    within = 0
    tasks = load_tasks(args.directory, parse_size_assignments(args.assignments))
    for task in tasks:
        samples = time_forward(task)
        median = statistics.median(samples)
        ok = LOW_MS <= median <= HIGH_MS
        within += ok
        table.add_row(
            task.key,
            task.category.value,
            f"{median:.2f}",
            f"{min(samples):.2f}",
            f"{max(samples):.2f}",
            "yes" if ok else "NO",
        )
    console = Console(width=max(Console().width, 110))
    console.print(table)
    console.print(f"{within}/{len(tasks)} tasks have a median within {LOW_MS:g}-{HIGH_MS:g} ms")


if __name__ == "__main__":
    main()
