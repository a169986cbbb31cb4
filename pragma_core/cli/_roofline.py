"""``pragma roofline``: a task's roofline floor on this machine, from its peaks measured once."""

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
@json_option("Print the task's floor and the machine's peaks as JSON.")
def roofline_command(
    task_path: Path,
    assignments: tuple[str, ...],
    fit_ms: float | None,
    threads: int | None,
    refresh: bool,
    as_json: bool,
) -> None:
    """The roofline floor of TASK on this machine: minimal bytes over peak bandwidth, FLOPs over
    peak FLOP rate (both measured once and cached)."""
    from ..machine.roofline import floor_ms, machine_peaks, roofline_table
    from ..verifier.settings import VerifySettings

    task = load_one_task(task_path, assignments, fit_ms, threads)
    peaks = machine_peaks(threads or VerifySettings().thread_count, refresh=refresh)
    if as_json:
        assert task.analysis is not None  # load_task always analyzes
        document = {
            "task": task.key,
            "flops": task.analysis.flops,
            "min_bytes": task.analysis.min_bytes,
            "floor": to_dict(floor_ms(task.analysis, peaks)),
            "peaks": to_dict(peaks),
        }
        click.echo(json.dumps(document, indent=2))
        return
    stdout().print(roofline_table(task, peaks))
