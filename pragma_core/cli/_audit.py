"""``pragma audit``: the verifier checked against candidates that cheat and candidates that do not."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.table import Table

from ..progress import progress_bar
from ..serialization import to_dict
from ._options import json_option
from ._output import stdout

__all__ = ["audit_command"]


@click.command("audit")
@click.option(
    "--only",
    default=None,
    metavar="TEXT",
    help="Only candidates or tasks whose name contains TEXT, or catalogue entry TEXT.",
)
@click.option("--workers", default=1, show_default=True, help="Candidates verified at once, each in its own process.")
@json_option("Print the rows as JSON.")
def audit_command(only: str | None, workers: int, as_json: bool) -> None:
    """Check the verifier itself: verify every cheating and honest candidate of pragma's audit
    against its task and compare each verdict with the one it must get (see docs/audit.md).

    Exit code 0 when every verdict is as expected, 1 otherwise.
    """
    from ..audit import audit_cases, run_audit

    cases = audit_cases(only)  # a filter that matches nothing fails here, before anything runs
    with progress_bar() as bar:
        job = bar.add_task("auditing the verifier", total=len(cases))
        rows = run_audit(only, on_result=lambda row: bar.advance(job), workers=workers)
    if as_json:
        click.echo(json.dumps([to_dict(row) for row in rows], indent=2))
    else:
        table = Table(title=f"pragma audit: {len(rows)} candidates", title_justify="left")
        for column in ("candidate", "entry", "expected", "got", "ok", "seconds"):
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(
                row.candidate,
                "honest" if row.entry is None else str(row.entry),
                _verdict_text(row.expected, row.expected_check),
                _verdict_text(row.status, row.check) if row.status is not None else "verify() raised",
                "[green]yes[/]" if row.ok else "[red]no[/]",
                f"{row.seconds:.1f}",
            )
        wrong = sum(not row.ok for row in rows)
        table.caption = f"{len(rows) - wrong} as expected, {wrong} not"
        stdout().print(table)
    if not all(row.ok for row in rows):
        raise SystemExit(1)


def _verdict_text(status: Any, check: str | None) -> str:
    return f"{status.value}: {check}" if check else status.value
