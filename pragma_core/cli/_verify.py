"""``pragma verify``: one candidate checked against its task in a sandbox, and timed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from ..serialization import to_dict
from ._inputs import load_one_task, read_candidate
from ._options import candidate_backend_option, json_option, size_options, verification_options, verify_settings
from ._output import stdout

__all__ = ["verify_command"]


@click.command("verify")
@click.argument("task_path", metavar="TASK", type=click.Path(path_type=Path))
@click.argument("candidate_path", metavar="CANDIDATE", type=click.Path(path_type=Path))
@size_options
@verification_options
@candidate_backend_option
@click.option(
    "--keep", type=click.Path(path_type=Path), default=None, help="Keep the job folder (task, candidate, logs) here."
)
@json_option("Print the verdict as JSON.")
def verify_command(
    task_path: Path,
    candidate_path: Path,
    assignments: tuple[str, ...],
    fit_ms: float | None,
    backend_name: str | None,
    keep: Path | None,
    as_json: bool,
    **options: Any,
) -> None:
    """Check CANDIDATE (a module defining ModelNew) against TASK in a sandbox, and time it.

    A backend that runs interpreted here (Triton with no GPU) is checked for correctness only; the
    verdict says it was not timed.

    Exit code 0 when the candidate is correct, 1 when it is not, 2 for bad input.
    """
    from ..verifier import VerifySettings, verify

    settings = VerifySettings(**verify_settings(options))
    task = load_one_task(task_path, assignments, fit_ms, settings.threads)
    candidate = read_candidate(candidate_path, backend_name)
    with Console(stderr=True).status(f"verifying {candidate_path.name} against {task.key}", spinner="dots"):
        verdict = verify(task, candidate, settings, job_dir=keep)
    if as_json:
        click.echo(json.dumps(to_dict(verdict), indent=2))
    else:
        from ..present.tables import verdict_table

        stdout().print(verdict_table(task, candidate_path.name, verdict))
    if verdict.noisy:
        assert verdict.conditions is not None
        Console(stderr=True).print(
            "[yellow]warning:[/] the machine was busy while timing ("
            + "; ".join(verdict.conditions.noise)
            + "): the speedup is a rough figure; verify again on a quiet machine"
        )
    if not verdict.ok:
        raise SystemExit(1)
