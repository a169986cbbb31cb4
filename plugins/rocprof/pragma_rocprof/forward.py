"""The dispatches of the timed forwards: rocprofv3's CSV output cut to the ``pragma_forward`` ROCTx range.

pragma's profiling worker wraps the timed forwards in the range ``pragma_forward``
(``torch.cuda.nvtx.range``, which a ROCm build of PyTorch emits through ROCTx). ncu profiles only
the kernels inside such a range (``--nvtx-include``). rocprofv3 has no option for that: its
filters select kernels by name (``--kernel-include-regex``, ``--kernel-exclude-regex``), by
iteration (``--kernel-iteration-range``) and by wall-clock period (``--collection-period``), see
rocprofiler-sdk's ``source/docs/how-to/using-rocprofv3.rst`` (options table, "Filtering"). It does
record the ranges: ``--marker-trace`` writes ``<name>_marker_api_trace.csv``, one row per range
with its ``Start_Timestamp`` and ``End_Timestamp`` (same file, "Marker trace" and "Kernel rename").
So pragma asks for the marker trace and keeps, afterwards, the dispatches that started and ended
inside the range::

    windows = forward_windows(open("rocprof_marker_api_trace.csv").read())   # [(start_ns, end_ns)]
    timed = inside(dispatches(open("rocprof_kernel_trace.csv").read()), windows)

Dispatch and marker times are compared as nanoseconds of one clock, which the guide shows (both
files have ns timestamps of the same magnitude) but does not state in words. Where no dispatch
falls inside the range by these times, or no range was recorded, the caller keeps the whole run
and says so (``collect`` does, in a note). The worker synchronizes the device before it closes the
range, so every dispatch of the timed forwards ends inside it.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence

import attrs

from pragma_core.errors import ProfileParseError

from .parse import kernel_name

__all__ = ["RANGE", "Dispatch", "forward_windows", "dispatches", "inside", "cut"]

RANGE = "pragma_forward"
"""The range pragma's profiling worker opens around the timed forwards (its ``NVTX_RANGE``)."""

_TIMES = ("Start_Timestamp", "End_Timestamp")


@attrs.frozen(kw_only=True)
class Dispatch:
    """One kernel dispatch: the kernel's name (as :func:`~pragma_rocprof.parse.kernel_name` gives
    it) and when it ran, in ns."""

    kernel: str
    start: int
    end: int

    @property
    def duration(self) -> int:
        return self.end - self.start


def forward_windows(marker_trace: str, name: str = RANGE) -> list[tuple[int, int]]:
    """(start, end) in ns of each ROCTx range called ``name`` in a ``marker_api_trace.csv``, in time
    order; a mark (a range of no length) is not a window."""
    header, rows = _rows(marker_trace)
    if "Function" not in header or not set(_TIMES) <= set(header):
        raise ProfileParseError(
            f"not a rocprofv3 marker trace: the header has no Function, Start_Timestamp and End_Timestamp: {header}"
        )
    windows = []
    for line, record in rows:
        if record["Function"].strip() == name:
            start, end = _times(record, line)
            if end > start:
                windows.append((start, end))
    return sorted(windows)


def dispatches(trace: str) -> list[Dispatch]:
    """Every dispatch of a rocprofv3 kernel trace, or of a counter file with timestamps, once each
    (a counter file has a row per counter), in the order of the file."""
    header, rows = _rows(trace)
    if "Kernel_Name" not in header or not set(_TIMES) <= set(header):
        raise ProfileParseError(
            "not a rocprofv3 kernel trace: the header has no Kernel_Name, Start_Timestamp and End_Timestamp"
        )
    seen: dict[tuple[str, str], Dispatch] = {}
    for line, record in rows:
        key = (record.get("Agent_Id", ""), record.get("Dispatch_Id", str(line)))
        if key not in seen:
            start, end = _times(record, line)
            seen[key] = Dispatch(kernel=kernel_name(record["Kernel_Name"]), start=start, end=end)
    return list(seen.values())


def inside(found: Iterable[Dispatch], windows: Sequence[tuple[int, int]]) -> list[Dispatch]:
    """The dispatches that started and ended inside one of the windows."""
    return [dispatch for dispatch in found if _within(dispatch.start, dispatch.end, windows)]


def cut(text: str, windows: Sequence[tuple[int, int]]) -> str | None:
    """The CSV with only the rows of dispatches inside the windows, its header and rows unchanged;
    None when its rows have no timestamps to tell (the 2024 counter-collection layout)."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    start = next((number for number, line in enumerate(lines) if line.strip()), None)
    if start is None:
        return None
    header = [field.strip() for field in next(csv.reader([lines[start]]))]
    if not set(_TIMES) <= set(header):
        return None
    kept = [lines[start]]
    for number, line in enumerate(lines[start + 1 :], start=start + 2):
        if not line.strip():
            continue
        record = dict(zip(header, next(csv.reader([line]))))
        if _within(*_times(record, number), windows):
            kept.append(line)
    return "".join(kept)


def _rows(text: str) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    reader = csv.reader(text.lstrip("\ufeff").splitlines())
    numbered = [(number, row) for number, row in enumerate(reader, start=1) if any(field.strip() for field in row)]
    if not numbered:
        raise ProfileParseError("not rocprofv3 output: the file is empty")
    (_, header), *rows = numbered
    header = [field.strip() for field in header]
    return header, [(number, dict(zip(header, row))) for number, row in rows]


def _times(record: dict[str, str], line: int) -> tuple[int, int]:
    try:
        return int(record["Start_Timestamp"]), int(record["End_Timestamp"])
    except (KeyError, ValueError):
        raise ProfileParseError(f"line {line}: Start_Timestamp and End_Timestamp are not whole nanoseconds") from None


def _within(start: int, end: int, windows: Sequence[tuple[int, int]]) -> bool:
    return any(low <= start and end <= high for low, high in windows)
