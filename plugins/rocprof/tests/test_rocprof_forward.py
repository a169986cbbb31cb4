"""Cutting rocprofv3 output to the pragma_forward ROCTx range, on the recorded files in data/.

The recorded marker trace and kernel traces come from different runs, so where a window must
contain dispatches it is placed by hand (a window is an input of these functions, not tool output).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pragma_core.errors import ProfileParseError
from pragma_rocprof.forward import RANGE, cut, dispatches, forward_windows, inside
from pragma_rocprof.parse import parse

DATA = Path(__file__).parent / "data"
MARKERS = (DATA / "rocprofv3-docs2025-marker_api_trace.csv").read_text()
TRACE = (DATA / "rocprofv3-docs2025-kernel_trace.csv").read_text()
COUNTERS_2025 = (DATA / "rocprofv3-docs2025-counter_collection.csv").read_text()
COUNTERS_2024 = (DATA / "rocprofv3-docs-counter_collection.csv").read_text()


def test_the_range_is_read_from_the_marker_trace():
    # roctxRangePush("hipLaunchKernel") ... roctxRangePop() in the guide's example program
    assert forward_windows(MARKERS, "hipLaunchKernel") == [(1520113899684965, 1520113901491622)]
    assert forward_windows(MARKERS, "hipMemcpy") == [(1520113900141100, 1520113901483408)]
    assert forward_windows(MARKERS, "before hipLaunchKernel") == []  # a mark, not a range
    assert forward_windows(MARKERS) == []  # that program opened no pragma_forward range
    assert RANGE == "pragma_forward"


def test_the_range_is_the_one_the_worker_opens():
    worker = pytest.importorskip("pragma_core.profiling.worker")
    assert worker.NVTX_RANGE == RANGE


def test_dispatches_of_a_kernel_trace_and_of_a_counter_file():
    found = dispatches(TRACE)
    assert len(found) == 9
    assert found[0].kernel == "void addition_kernel<float>(float*, float const*, float const*, int, int)"
    assert found[0].duration == 1550151853042437 - 1550151853029637
    # a row per counter, one dispatch each
    assert len(dispatches(COUNTERS_2025)) == 4


def test_what_is_not_a_trace_is_refused():
    with pytest.raises(ProfileParseError, match="not a rocprofv3 marker trace"):
        forward_windows(TRACE)
    with pytest.raises(ProfileParseError, match="not a rocprofv3 kernel trace"):
        dispatches(MARKERS)
    with pytest.raises(ProfileParseError, match="not a rocprofv3 kernel trace"):
        dispatches(COUNTERS_2024)  # no timestamps
    with pytest.raises(ProfileParseError, match="empty"):
        forward_windows("")


def test_only_the_dispatches_inside_a_window_are_kept():
    in_time = sorted(dispatches(TRACE), key=lambda dispatch: dispatch.start)
    window = (in_time[1].start, in_time[3].end)
    assert inside(in_time, [window]) == in_time[1:4]
    assert inside(in_time, [(window[0], window[1] - 1)]) == in_time[1:3]  # the last one ends after it
    assert inside(in_time, []) == []

    kept = cut(TRACE, [window])
    assert kept is not None
    lines = kept.splitlines()
    assert lines[0] == TRACE.splitlines()[0] and len(lines) == 4
    assert all(line in TRACE.splitlines() for line in lines)  # rows unchanged
    assert {metric.kernel for metric in parse(kept)} == {dispatch.kernel for dispatch in in_time[1:4]}


def test_a_file_without_timestamps_cannot_be_cut():
    assert cut(COUNTERS_2024, [(0, 2**62)]) is None
    whole = cut(COUNTERS_2025, [(0, 2**62)])
    assert whole is not None and whole.splitlines() == COUNTERS_2025.splitlines()
