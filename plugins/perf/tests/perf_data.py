"""Test helpers: the recorded perf output in ``data/`` (see ``data/SOURCES.md``)."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


def read(name: str) -> str:
    """A recorded file, as the parser receives it."""
    return (DATA / name).read_text(encoding="utf-8")


@pytest.fixture
def fresh_probe():
    """Forget cached probe answers before and after the test."""
    from pragma_perf.probe import classify_name, perf_setup

    perf_setup.cache_clear()
    classify_name.cache_clear()
    yield
    perf_setup.cache_clear()
    classify_name.cache_clear()
