"""pragma's conformance suite for profiler plugins, run on every real cachegrind output in data/."""

from __future__ import annotations

from pathlib import Path

from pragma_core.testing import ProfilerPluginTests

DATA = Path(__file__).parent / "data"
NOT_TOOL_OUTPUT = {"SOURCES.md", "small-c-relu-source.c.txt"}  # notes and the program behind a fixture
# another tool's format, which the parser must refuse (test_valgrind_parse)
REFUSED = {"callgrind.out.small-relu-valgrind3.19-captured-here"}


class TestValgrindProfiler(ProfilerPluginTests):
    profiler_name = "valgrind"
    fixtures = sorted(path for path in DATA.iterdir() if path.name not in NOT_TOOL_OUTPUT | REFUSED)


def test_every_cachegrind_fixture_is_used():
    assert len(TestValgrindProfiler.fixtures) == 9
