"""pragma's conformance suite for profiler plugins, run on every recorded ncu output."""

from __future__ import annotations

from ncu_data import FIXTURES

from pragma_core.testing import ProfilerPluginTests


class TestNcuPlugin(ProfilerPluginTests):
    profiler_name = "ncu"
    fixtures = FIXTURES


def test_every_recorded_output_is_used():
    assert len(FIXTURES) == 10
