"""``pragma profile``: a candidate, or a task's reference, under one profiler, and its metrics."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import attrs
import click
from rich.console import Console

from ..serialization import to_dict
from ._inputs import load_one_task, read_candidate
from ._options import ALL_CPUS, candidate_backend_option, json_option, size_options, threads_option
from ._output import stdout

__all__ = ["profile_command"]


@click.command("profile")
@click.argument("task_path", metavar="TASK", type=click.Path(path_type=Path))
@click.argument("candidate_path", metavar="[CANDIDATE]", required=False, type=click.Path(path_type=Path))
@click.option(
    "--profiler", "profiler_name", required=True, help="A profiler from `pragma plugins`, e.g. valgrind or perf."
)
@click.option("--metrics", default="", help="Extra metrics to collect, comma-separated.")
@size_options
@click.option(
    "--repetitions",
    type=click.IntRange(min=1),
    default=None,
    help="Forwards (or replays) the profiler watches [default: 1 for a deterministic profiler such as "
    "cachegrind, else 3].",
)
@click.option(
    "--timeout",
    "timeout_s",
    default=600.0,
    show_default=True,
    help="Seconds one run of the profiler's tool may take before it is stopped.",
)
@threads_option(ALL_CPUS)
@click.option(
    "--full-size",
    is_flag=True,
    help="Profile at the task's own sizes [default: a task whose data is above twice the last-level cache "
    "the profiler sees (cachegrind: the simulated one, this machine's L2) is profiled smaller, its outer "
    "dimensions shrunk as far as its FLOPs per byte allow; the profile's first note says the sizes].",
)
@click.option(
    "--keep",
    type=click.Path(path_type=Path),
    default=None,
    help="Keep the job and the raw tool output in this folder [default: a temporary folder, removed].",
)
@json_option("Print the profile as JSON.")
@candidate_backend_option
def profile_command(
    task_path: Path,
    candidate_path: Path | None,
    profiler_name: str,
    metrics: str,
    assignments: tuple[str, ...],
    fit_ms: float | None,
    repetitions: int | None,
    timeout_s: float,
    threads: int | None,
    full_size: bool,
    keep: Path | None,
    as_json: bool,
    backend_name: str | None,
) -> None:
    """Profile CANDIDATE (or, without one, the reference of TASK) and list its metrics.

    Fast-path CPU candidates are recorded once in the sandbox and replayed natively under the
    profiler, so the numbers are the kernels' own. A task whose data is above twice the last-level
    cache the profiler sees is profiled at smaller sizes (see docs/profiling.md); --full-size keeps
    its own. The raw tool output is kept only with --keep.
    """
    from ..present.tables import profile_table
    from ..profiling import profile

    task = load_one_task(task_path, assignments, fit_ms, threads)
    candidate = read_candidate(candidate_path, backend_name) if candidate_path is not None else None
    extra = [name.strip() for name in metrics.split(",") if name.strip()]
    subject = candidate_path.name if candidate_path else "the reference"
    with tempfile.TemporaryDirectory(prefix="pragma-profile-") as scratch:
        folder = keep if keep is not None else Path(scratch)
        with Console(stderr=True).status(f"profiling {subject} of {task.key} with {profiler_name}", spinner="dots"):
            result = profile(
                task,
                candidate,
                profiler=profiler_name,
                metrics=extra,
                out_dir=folder,
                repetitions=repetitions,
                threads=threads,
                timeout_s=timeout_s,
                full_size=full_size,
            )
    if keep is None:  # the folder is gone: point to nothing in it
        result = attrs.evolve(result, raw_paths=(), notes=(*result.notes, "raw tool output not kept (use --keep DIR)"))
    if as_json:
        click.echo(json.dumps(to_dict(result), indent=2))
    else:
        stdout().print(profile_table(f"{subject} on {task.key}", result))
