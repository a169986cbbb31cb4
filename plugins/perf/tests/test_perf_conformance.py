"""pragma's conformance suite for profiler plugins, run on every recorded perf stat output."""

from __future__ import annotations

from pathlib import Path

import pytest
from perf_data import DATA

from pragma_core.testing import ProfilerPluginTests

OUTPUTS = sorted(
    path
    for path in DATA.iterdir()
    if path.suffix in (".txt", ".csv", ".json", ".jsonl")
    and not path.name.startswith("probe-")
    and path.name != "loop.c.txt"
)
NOTHING_COUNTED = "stat-csv-group-not-counted.csv"
"""Every row is <not counted>: parse rightly returns no metric, which the suite's
test_every_fixture_parses does not allow; test_perf_parse checks it through unsupported()."""
SHARED = Path(__file__).resolve().parents[4] / "shared" / "fixtures" / "perf"
"""Where the fixtures were copied from: the shared folder beside the clone, when there is one."""


class TestPerfProfiler(ProfilerPluginTests):
    profiler_name = "perf"
    fixtures = [path for path in OUTPUTS if path.name != NOTHING_COUNTED]


def test_the_outputs_are_the_19_shared_samples_and_3_captured_here():
    names = {path.name for path in OUTPUTS}
    assert len([name for name in names if name.startswith("perf6.1-kvm-amd-")]) == 3
    assert len(names) == 19 + 3


@pytest.mark.skipif(not SHARED.is_dir(), reason="the shared fixtures folder is not on this machine")
def test_copies_of_the_shared_fixtures_are_byte_for_byte():
    for path in SHARED.iterdir():
        assert (DATA / path.name).read_bytes() == path.read_bytes(), path.name
