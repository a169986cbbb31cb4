"""``pragma roofline``: a task's roofline floor on this machine, from its measured peaks."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..serialization import to_dict
from ._inputs import load_one_task
from ._options import ALL_CPUS, json_option, size_options, threads_option
from ._output import stdout

__all__ = ["roofline_command"]


@click.command("roofline")
@click.argument("task_path", metavar="TASK", type=click.Path(path_type=Path))
@size_options
@threads_option(ALL_CPUS)
@click.option("--refresh", is_flag=True, help="Measure the machine's peaks again.")
@click.option(
    "--reference",
    "time_reference",
    is_flag=True,
    help="Also time the task's reference here and show its attainment against both floors.",
)
@json_option("Print the task's floors and the machine's peaks as JSON.")
def roofline_command(
    task_path: Path,
    assignments: tuple[str, ...],
    fit_ms: float | None,
    threads: int | None,
    refresh: bool,
    time_reference: bool,
    as_json: bool,
) -> None:
    """The roofline floor of TASK on this machine: minimal bytes over the memory bandwidth (the
    last-level cache's when they fit in it), FLOPs over the FMA peak. The peaks are measured with
    small C kernels (FMA throughput, STREAM copy and triad), cached, and measured again when stale;
    torch's sgemm and copy rates are shown beside them with the floor at those rates, never used
    as the floor."""
    from ..machine.roofline import attainment, floor_ms, library_floor_ms, machine_peaks, roofline_table
    from ..verifier.settings import VerifySettings

    task = load_one_task(task_path, assignments, fit_ms, threads)
    settings = VerifySettings() if threads is None else VerifySettings(threads=threads)
    peaks = machine_peaks(settings.thread_count, refresh=refresh)
    reference_ms = None
    if time_reference:
        from ..verifier.reference import reference_timing

        reference_ms = reference_timing(task, settings).median_ms
    if as_json:
        assert task.analysis is not None  # load_task always analyzes
        floor, library = floor_ms(task.analysis, peaks), library_floor_ms(task.analysis, peaks)
        document = {
            "task": task.key,
            "flops": task.analysis.flops,
            "min_bytes": task.analysis.min_bytes,
            "floor": to_dict(floor),
            "library_floor": to_dict(library),
            "peaks": to_dict(peaks),
        }
        if reference_ms is not None:
            document["reference_ms"] = reference_ms
            document["attainment"] = attainment(reference_ms, floor)
            document["library_attainment"] = attainment(reference_ms, library)
        click.echo(json.dumps(document, indent=2))
        return
    stdout().print(roofline_table(task, peaks, reference_ms=reference_ms))
