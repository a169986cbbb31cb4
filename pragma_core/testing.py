"""A conformance suite for profiler plugins: subclass it in your plugin's tests.

    # plugins/myprof/tests/test_conformance.py
    from pathlib import Path
    from pragma_core.testing import ProfilerPluginTests

    class TestMyProf(ProfilerPluginTests):
        profiler_name = "myprof"
        fixtures = sorted((Path(__file__).parent / "data").glob("*.txt"))   # real tool output

pytest collects the inherited tests: the plugin is installed and registers the profiler through its
entry point; the record is complete; the probe answers fast and says why when it cannot run; every
real output parses into finite metrics of that profiler; output it cannot read raises
:class:`~pragma_core.errors.ProfileParseError`; and, where the tool runs here, an unknown metric
requested from ``collect`` is reported as not collected rather than dropped.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import ClassVar

import pytest

from .components import DEVICE_KINDS, Availability, Profiler
from .errors import ProfileParseError
from .plugins import PluginRegistry
from .records import Metric

__all__ = ["ProfilerPluginTests", "UNREADABLE_OUTPUTS"]

UNREADABLE_OUTPUTS = ("", "this is not the output of any profiler\n", "\x00\x01\x02 binary junk")
"""Inputs no parser should mistake for its tool's output."""


class ProfilerPluginTests:
    """Inherit, set ``profiler_name`` and ``fixtures``; optionally ``metrics_for_collect``."""

    profiler_name: ClassVar[str]
    fixtures: ClassVar[list[Path]] = []
    probe_seconds: ClassVar[float] = 10.0

    @pytest.fixture
    def profiler(self) -> Profiler:
        return PluginRegistry().profiler(self.profiler_name)

    def test_registered_through_an_entry_point(self):
        registry = PluginRegistry()
        owners = [p for p in registry.plugins() if self.profiler_name in p.registers.get("profilers", ())]
        assert owners, f"no installed plugin registers a profiler named {self.profiler_name!r}"
        assert not owners[0].builtin and owners[0].distribution, "register it from an installed distribution"
        failures = [f for f in registry.failures() if f.name == owners[0].name]
        assert not failures, failures

    def test_record_is_complete(self, profiler: Profiler):
        assert profiler.name == self.profiler_name
        assert profiler.devices and set(profiler.devices) <= set(DEVICE_KINDS)
        assert profiler.default_metrics, "say which metrics to collect by default"
        assert profiler.description
        assert profiler.doc_sources and all(url.startswith("https://") for url in profiler.doc_sources)
        for name, formula in profiler.formulas.items():  # the compendium documents these by formula
            assert name.strip() and isinstance(formula, str) and formula.strip(), (name, formula)

    def test_probe_is_fast_and_explains_itself(self, profiler: Profiler):
        started = time.monotonic()
        availability = profiler.probe()
        assert time.monotonic() - started < self.probe_seconds
        assert isinstance(availability, Availability)
        if not availability.available:
            assert len(availability.reason) > 10 and "\n" not in availability.reason

    def test_fixtures_exist(self):
        assert self.fixtures, "give at least one real output of the tool"
        assert all(Path(path).is_file() for path in self.fixtures)

    def test_every_fixture_parses(self, profiler: Profiler):
        for path in self.fixtures:
            metrics = profiler.parse(Path(path).read_text(encoding="utf-8", errors="replace"))
            assert metrics, f"{path.name}: no metrics"
            for metric in metrics:
                assert isinstance(metric, Metric) and metric.profiler == self.profiler_name
                assert math.isfinite(metric.value), f"{path.name}: {metric}"

    def test_unreadable_output_is_a_clear_error(self, profiler: Profiler):
        for junk in UNREADABLE_OUTPUTS:
            with pytest.raises(ProfileParseError):
                profiler.parse(junk)
