"""Progress bars for long work: on standard error, gone when done, silent when not a terminal."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

__all__ = ["progress_bar"]


def progress_bar(console: Console | None = None) -> Progress:
    """A rich Progress with a description, a bar, done/total and elapsed time (on ``console``,
    by default standard error)."""
    console = console or Console(stderr=True)
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )
