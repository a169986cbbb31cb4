"""How the commands print: tables on standard output, and the exit code of bad input."""

from __future__ import annotations

from rich.console import Console

__all__ = ["EXIT_BAD_INPUT", "stdout", "si"]

EXIT_BAD_INPUT = 2


_UNBOUNDED_WIDTH = 100_000
"""Off a terminal nothing sets a width: a table is printed as wide as its widest row needs, so a
file or a pipe gets every cell whole (rich does not pad a table to the console's width)."""


def stdout() -> Console:
    """Tables keep every cell whole when piped or written to a file; a terminal sets its own width."""
    probe = Console()
    return probe if probe.is_terminal else Console(width=_UNBOUNDED_WIDTH)


def si(value: float, unit: str) -> str:
    """``1.50 GFLOP``: the value with an SI prefix."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= factor:
            return f"{value / factor:.2f} {prefix}{unit}"
    return f"{value:.0f} {unit}"
