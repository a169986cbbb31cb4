"""``pragma tasks``: the tasks of a KernelBench tree or file, with their tensors, FLOPs and bytes."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from ..errors import TaskError
from ..progress import progress_bar
from ..records import Task
from ..serialization import to_dict
from ..tasks.loading import find_task_files, load_task, parse_size_assignments, sizes_per_file
from ._options import json_option, size_options
from ._output import EXIT_BAD_INPUT, si, stdout

__all__ = ["tasks_command"]


@click.command("tasks")
@click.argument("path", type=click.Path(path_type=Path))
@size_options
@json_option()
def tasks_command(path: Path, assignments: tuple[str, ...], fit_ms: float | None, as_json: bool) -> None:
    """List the tasks in PATH (a KernelBench tree or one file).

    For each: category, input and output tensors, reference FLOPs (torch.utils.flop_counter: matrix
    products, convolutions, attention) and the minimal bytes moved (inputs, parameters and outputs
    once); with --fit-ms, the sizes fitted. Files that fail are reported one line each on stderr,
    and under "errors" in the JSON ({"tasks": [...], "errors": [{"path": ..., "error": ...}]}); the
    exit code is then 2.
    """
    sizes = parse_size_assignments(assignments)
    if not path.exists():
        raise TaskError(f"{path}: no such task file or directory")
    files = [path] if path.is_file() else find_task_files(path)
    plan = sizes_per_file(files, sizes, where=path) if path.is_dir() else {path: sizes}
    tasks: list[Task] = []
    errors: list[tuple[Path, TaskError]] = []
    with progress_bar() as progress:
        bar = progress.add_task("tracing tasks", total=len(files))
        for number, file in enumerate(files, 1):
            progress.update(bar, description=f"{'fitting' if fit_ms else 'tracing'} {file.name}")
            started = time.monotonic()
            try:
                task = load_task(file, plan[file])
                if fit_ms is not None:
                    from ..sizes.fitting import fit_task

                    task = fit_task(task, fit_ms).task
                tasks.append(task)
            except TaskError as failure:
                errors.append((file, failure))
            progress.advance(bar)
            if fit_ms is not None and progress.disable:  # no bar off a terminal: a line per fitted file
                took = time.monotonic() - started
                click.echo(f"pragma: fitted {file.name} ({number}/{len(files)}, {took:.0f} s)", err=True)
    if as_json:
        listing = {
            "tasks": [_task_summary(task) for task in tasks],
            "errors": [{"path": str(file), "error": str(error)} for file, error in errors],
        }
        click.echo(json.dumps(listing, indent=2))
    elif tasks:
        stdout().print(_tasks_table(tasks))
    for _file, error in errors:
        click.echo(f"pragma: error: {error}", err=True)
    if errors:
        raise SystemExit(EXIT_BAD_INPUT)


def _task_summary(task: Task) -> dict[str, Any]:
    summary = {key: value for key, value in to_dict(task).items() if key not in ("source", "analysis")}
    analysis = task.analysis
    assert analysis is not None  # load_task always analyzes
    summary.update(key=task.key, **to_dict(analysis), min_bytes=analysis.min_bytes)
    return summary


def _tasks_table(tasks: list[Task]) -> Table:
    table = Table(title=f"{len(tasks)} tasks", title_justify="left")
    table.add_column("task", no_wrap=True)
    table.add_column("category", no_wrap=True)
    table.add_column("inputs")
    table.add_column("output")
    table.add_column("FLOPs", justify="right")
    table.add_column("min bytes", justify="right")
    show_sizes = any(task.sizes for task in tasks)
    if show_sizes:
        table.add_column("sizes set")
    for task in tasks:
        analysis = task.analysis
        assert analysis is not None
        table.add_row(
            task.key,
            task.category.value,
            ", ".join(_tensor_text(spec) for spec in analysis.inputs),
            ", ".join(_tensor_text(spec) for spec in analysis.outputs),
            si(analysis.flops, "FLOP") if analysis.flops else "-",
            si(analysis.min_bytes, "B"),
            *([", ".join(f"{name}={value!r}" for name, value in task.sizes.items())] if show_sizes else []),
        )
    counts: dict[str, int] = {}
    for task in tasks:
        counts[task.category.value] = counts.get(task.category.value, 0) + 1
    table.caption = "categories: " + ", ".join(f"{name} {count}" for name, count in sorted(counts.items()))
    return table


def _tensor_text(spec: Any) -> str:
    """``1024x8192 float32``; a scalar is ``scalar float32``; a plain value is ``float 3.14``."""
    if spec.value is not None:
        return f"{spec.dtype} {spec.value}"
    shape = "x".join(str(d) for d in spec.shape) or "scalar"
    return f"{shape} {spec.dtype}"
