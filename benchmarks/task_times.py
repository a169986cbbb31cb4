"""Measure the reference forward time of every KernelBench-style task in a directory.

For each task file (sorted), build Model(*get_init_inputs()) and its inputs with
torch.manual_seed(42) and 2 CPU threads, run 3 warm-up forwards, then time 20
forwards under torch.no_grad() and report median / min / max in milliseconds and
whether the median lies within the 1-100 ms range expected of a task.

Run:  python benchmarks/task_times.py [DIR]      (default: examples/tasks)
"""
import importlib.util
import re
import statistics
import sys
import time
from pathlib import Path

import torch

WARMUP, REPEATS, LOW_MS, HIGH_MS = 3, 20, 1.0, 100.0


def natural_key(path: Path) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(path))]


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"task_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def time_task(path: Path) -> list[float]:
    task = load(path)
    torch.manual_seed(42)
    torch.set_num_threads(2)
    model = task.Model(*task.get_init_inputs())
    inputs = task.get_inputs()
    times = []
    with torch.no_grad():
        for _ in range(WARMUP):
            model(*inputs)
        for _ in range(REPEATS):
            start = time.perf_counter()
            model(*inputs)
            times.append((time.perf_counter() - start) * 1e3)
    return times


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "examples/tasks")
    header = ["task", "median ms", "min ms", "max ms", "within 1-100 ms"]
    rows, ok = [], 0
    for path in sorted(root.rglob("*.py"), key=natural_key):
        times = time_task(path)
        median = statistics.median(times)
        inside = LOW_MS <= median <= HIGH_MS
        ok += inside
        rows.append([str(path.relative_to(root)), f"{median:.2f}", f"{min(times):.2f}",
                     f"{max(times):.2f}", "yes" if inside else "no"])
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
        for row in [header] + rows:
            print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                            for i, (c, w) in enumerate(zip(row, widths))))
    else:
        table = Table(title=f"Reference forward times ({root})")
        for i, name in enumerate(header):
            table.add_column(name, justify="left" if i == 0 else "right", no_wrap=i == 0)
        for row in rows:
            table.add_row(*row)
        Console().print(table)
    print(f"{ok}/{len(rows)} tasks have a median within {LOW_MS:g}-{HIGH_MS:g} ms")


if __name__ == "__main__":
    main()
