"""Test helpers: the recorded perf output in ``data/`` (see ``data/SOURCES.md``)."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).parent / "data"


def read(name: str) -> str:
    """A recorded file, as the parser receives it."""
    return (DATA / name).read_text(encoding="utf-8")
