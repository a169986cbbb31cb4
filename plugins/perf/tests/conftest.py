"""Fixtures of the perf plugin's tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def fresh_probe():
    """Forget cached probe answers before and after the test."""
    from pragma_perf.probe import classify_name, perf_setup

    perf_setup.cache_clear()
    classify_name.cache_clear()
    yield
    perf_setup.cache_clear()
    classify_name.cache_clear()
