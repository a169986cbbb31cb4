"""Reads rocprof's CSV output into per-kernel metrics; pure, so it is tested on recorded files.

:func:`parse` takes the text of one file and recognises the layout from its header row
(:func:`detect_format`):

``counter_collection``
    rocprofv3 ``*_counter_collection.csv``, one row per (dispatch, counter): the 2024 layout, with
    or without ``Kernel_Id`` (kernel-filtered runs), and the ROCm 7 layout that adds
    ``Accum_VGPR_Count`` and ``Start_Timestamp``/``End_Timestamp`` and quotes ``Agent_Id``.
``kernel_trace``
    rocprofv3 ``*_kernel_trace.csv``: kernel time from the timestamps; newer versions also carry
    the registers and LDS of each dispatch.
``memory_copy_trace``
    rocprofv3 ``*_memory_copy_trace.csv``: copies per direction, as ``<DIRECTION>.TotalDurationNs``.
``stats``
    rocprofv3 ``*_kernel_stats.csv``, ``*_hip_api_stats.csv``, ``*_domain_stats.csv`` and rocprof
    v1 ``results.stats.csv``. Kernel rows give ``AverageNs`` etc. of that kernel; API and domain
    rows (``hipMemcpy``, ``HIP_API``) give ``hipMemcpy.AverageNs`` with no kernel.
``dispatch_table``
    one row per dispatch with a column per counter: rocprof v1 (``-i input.txt`` counters, or
    ``--stats``'s ``results.csv`` with ``DurationNs``), and rocprofv2's ``Dispatch_ID,...`` layout
    (also as rocprofiler-compute/Omniperf re-writes v1 and v2 output).

Each kernel's dispatches are aggregated as :mod:`pragma_rocprof.metrics` says: counters summed,
derived percentages and rates averaged over dispatches, registers and LDS the largest seen.
Durations give ``Calls``, ``TotalDurationNs``, ``AverageNs``, ``MinNs``, ``MaxNs`` and
``Percentage`` (share of all kernel time in the file). rocprof v1 column names are reported under
the rocprofv3 name (``arch_vgpr`` -> ``VGPR_Count``) and its ``.kd`` / `` [clone .kd]`` suffixes
are dropped from kernel names, so every layout names the same kernel the same way. Values that are
not finite (``nan`` from a derived metric divided by zero) are left out. :func:`derive` adds the
metrics pragma computes (``L2CacheHit``, ``L1CacheHit``, ``HBMBandwidth``) where the counters
allow; :func:`parse` applies it to each file, and ``collect`` again after merging passes.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterator, Sequence
from typing import Any

import attrs

from pragma_core.errors import ProfileParseError
from pragma_core.records import Metric

from .metrics import V1_COLUMN_NAMES, aggregation_of, meaning_of, unit_of

__all__ = ["PROFILER", "FORMATS", "parse", "detect_format", "derive", "kernel_name"]

PROFILER = "rocprof"

FORMATS = ("counter_collection", "kernel_trace", "memory_copy_trace", "stats", "dispatch_table")
"""The layouts :func:`detect_format` recognises."""

PROPERTY_COLUMNS: dict[str, str] = {
    # rocprofv3
    "VGPR_Count": "VGPR_Count",
    "Accum_VGPR_Count": "Accum_VGPR_Count",
    "SGPR_Count": "SGPR_Count",
    "LDS_Block_Size": "LDS_Block_Size",
    "Scratch_Size": "Scratch_Size",
    "Group_Segment_Size": "Group_Segment_Size",
    "Private_Segment_Size": "Private_Segment_Size",
    "Workgroup_Size": "Workgroup_Size",
    "Grid_Size": "Grid_Size",
    # rocprof v1
    **{column: name for column, name in V1_COLUMN_NAMES.items() if column != "DurationNs"},
    # rocprofv2 (and Omniperf's renaming of v1)
    "Arch_VGPR": "VGPR_Count",
    "Accum_VGPR": "Accum_VGPR_Count",
    "SGPR": "SGPR_Count",
    "LDS_Per_Workgroup": "LDS_Block_Size",
    "Scratch_Per_Workitem": "Scratch_Size",
}
"""Per-dispatch columns -> the property metric they give."""

_PROPERTY_ORDER = tuple(dict.fromkeys(PROPERTY_COLUMNS.values()))
_DIMENSIONS = {
    "Workgroup_Size": ("Workgroup_Size_X", "Workgroup_Size_Y", "Workgroup_Size_Z"),
    "Grid_Size": ("Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z"),
}

_KERNEL_NAME_COLUMNS = ("Kernel_Name", "KernelName")
_DISPATCH_ID_COLUMNS = ("Dispatch_Id", "Dispatch_ID", "Index", "Correlation_Id")
_INTERVALS = (("Start_Timestamp", "End_Timestamp"), ("BeginNs", "EndNs"))
_NOT_COUNTERS = frozenset(
    {
        "Index",
        "Dispatch_ID",
        "Correlation_ID",
        "gpu-id",
        "GPU_ID",
        "queue-id",
        "Queue_ID",
        "queue-index",
        "pid",
        "PID",
        "tid",
        "TID",
        "wave_size",
        "Wave_Size",
        "fbar",
        "sig",
        "obj",
        "DispatchNs",
        "BeginNs",
        "EndNs",
        "CompleteNs",
        "DurationNs",
        "Start_Timestamp",
        "End_Timestamp",
        *_KERNEL_NAME_COLUMNS,
    }
)
_STATS_HEADER = ["Name", "Calls", "TotalDurationNs", "AverageNs", "Percentage"]
_STATS_COLUMNS = ("Calls", "TotalDurationNs", "AverageNs", "MinNs", "MaxNs", "Percentage", "StdDev")
_INPUT_FILE_LINE = re.compile(r"(pmc|gpu|range|kernel)\s*:", re.IGNORECASE)
_ACTIVITY_NAME = re.compile(r"_*(hip|hsa|roctx|rccl|rocdecode|rocjpeg)\w*|[A-Z][A-Z0-9_]*")
_KD_SUFFIX = re.compile(r"(\s*\[clone \.kd\]|\s*\(\.kd\)|\.kd)$")
_GROUPED_NUMBER = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?")


def parse(raw: str) -> list[Metric]:
    """Metrics of one rocprof CSV file; :class:`ProfileParseError` when it is not one pragma knows."""
    table = _Table.read(raw)
    layout = _layout(table)
    if layout == "stats":
        return _parse_stats(table)
    if layout == "memory_copy_trace":
        return _parse_memory_copies(table)
    kernels = _Kernels()
    if layout == "counter_collection":
        _read_counter_collection(table, kernels)
    elif layout == "kernel_trace":
        _read_kernel_trace(table, kernels)
    else:
        _read_dispatch_table(table, kernels)
    metrics = kernels.metrics()
    return metrics + derive(metrics)


def detect_format(raw: str) -> str:
    """Which of :data:`FORMATS` the text is, from its header row; ProfileParseError if none."""
    return _layout(_Table.read(raw))


def kernel_name(raw_name: str) -> str:
    """A kernel name as pragma reports it: rocprof v1's ``.kd`` and `` [clone .kd]`` dropped."""
    return _KD_SUFFIX.sub("", raw_name.strip())


def derive(metrics: Sequence[Metric]) -> list[Metric]:
    """Metrics pragma computes from others of the same kernel, where they are not there yet.

    ``L2CacheHit`` = 100·hits/(hits+misses) of ``TCC_HIT_sum``/``TCC_MISS_sum``; ``L1CacheHit`` =
    100·(1 − requests sent on to L2 / ``TCP_TOTAL_CACHE_ACCESSES_sum``), the vL1D hit rate of
    rocprofiler-compute (atomics counted when collected); ``HBMBandwidth`` = (``FETCH_SIZE`` +
    ``WRITE_SIZE``)·1024 bytes / ``TotalDurationNs``, in GB/s.
    """
    values: dict[str, dict[str, float]] = {}
    for metric in metrics:
        values.setdefault(metric.kernel, {}).setdefault(metric.name, metric.value)
    derived = []
    for kernel, have in values.items():
        for name, value in _derived_values(have).items():
            if name not in have:
                derived.append(_metric(name, value, kernel))
    return derived


def _derived_values(have: dict[str, float]) -> dict[str, float]:
    out = {}
    hit = have.get("TCC_HIT_sum", have.get("TCC_HIT"))
    miss = have.get("TCC_MISS_sum", have.get("TCC_MISS"))
    if hit is not None and miss is not None and hit + miss > 0:
        out["L2CacheHit"] = 100.0 * hit / (hit + miss)
    lookups = have.get("TCP_TOTAL_CACHE_ACCESSES_sum")
    reads, writes = have.get("TCP_TCC_READ_REQ_sum"), have.get("TCP_TCC_WRITE_REQ_sum")
    if lookups and reads is not None and writes is not None:
        atomics = have.get("TCP_TCC_ATOMIC_WITH_RET_REQ_sum", 0.0) + have.get("TCP_TCC_ATOMIC_WITHOUT_RET_REQ_sum", 0.0)
        rate = 100.0 * (1.0 - (reads + writes + atomics) / lookups)
        if 0.0 <= rate <= 100.0:
            out["L1CacheHit"] = rate
    fetched, written, time_ns = have.get("FETCH_SIZE"), have.get("WRITE_SIZE"), have.get("TotalDurationNs")
    if fetched is not None and written is not None and time_ns:
        out["HBMBandwidth"] = (fetched + written) * 1024.0 / time_ns
    return out


# -- reading the table --------------------------------------------------------------------------


@attrs.frozen
class _Table:
    """A CSV file: header fields and its data rows with their line numbers."""

    header: list[str]
    first_line: str
    rows: list[tuple[int, list[str]]]

    @classmethod
    def read(cls, raw: str) -> _Table:
        text = raw.lstrip("\ufeff")
        first_line = next((line for line in text.splitlines() if line.strip()), "")
        if not first_line:
            raise ProfileParseError("not rocprof output: the input is empty")
        if _INPUT_FILE_LINE.match(first_line.strip()):
            raise ProfileParseError(
                f"this is a rocprof input file (it lists counters to collect: {_shown(first_line)}), "
                "not rocprof output; parse the CSV the run wrote"
            )
        try:
            parsed = [
                (number, row)
                for number, row in enumerate(csv.reader(io.StringIO(text)), start=1)
                if any(field.strip() for field in row)
            ]
        except csv.Error as error:
            raise ProfileParseError(f"not rocprof CSV output ({error}): first line {_shown(first_line)}") from None
        (_, header), *rows = parsed
        for number, row in rows:
            if len(row) != len(header):
                raise ProfileParseError(
                    f"line {number} has {len(row)} fields where the header has {len(header)}: the file is cut "
                    "in the middle of a line or is not rocprof CSV"
                )
        return cls([field.strip() for field in header], first_line, rows)

    def records(self) -> Iterator[tuple[int, dict[str, str]]]:
        for number, row in self.rows:
            yield number, dict(zip(self.header, row))


def _layout(table: _Table) -> str:
    fields = set(table.header)
    if {"Counter_Name", "Counter_Value", "Kernel_Name"} <= fields:
        return "counter_collection"
    if table.header[0] == "Kind" and {"Kernel_Name", "Start_Timestamp", "End_Timestamp"} <= fields:
        return "kernel_trace"
    if table.header[0] == "Kind" and {"Direction", "Start_Timestamp", "End_Timestamp"} <= fields:
        return "memory_copy_trace"
    if table.header[:5] == _STATS_HEADER:
        return "stats"
    if fields & set(_KERNEL_NAME_COLUMNS) and fields & {"Index", "Dispatch_ID"}:
        return "dispatch_table"
    raise ProfileParseError(f"not a rocprof CSV layout pragma knows; first line {_shown(table.first_line)}")


def _shown(line: str) -> str:
    return repr(line if len(line) <= 100 else line[:100] + "...")


def _number(text: str, line: int, column: str) -> float | None:
    """A value as rocprof prints it (``16384``, ``13.271172``, ``4.34e-02``); None if empty or not finite."""
    text = text.strip()
    if not text or text.lower() in ("n/a", "na"):
        return None
    try:
        value = float(text)
    except ValueError:
        if not _GROUPED_NUMBER.fullmatch(text):
            raise ProfileParseError(f"line {line}: {column} is {text!r}, not a number") from None
        value = float(text.replace(",", ""))
    return value if math.isfinite(value) else None


def _interval(record: dict[str, str], line: int) -> float | None:
    """A dispatch's duration in ns: ``DurationNs``, or End - Start timestamps; None if unknown."""
    if record.get("DurationNs", "").strip():
        return _number(record["DurationNs"], line, "DurationNs")
    for start_column, end_column in _INTERVALS:
        if record.get(start_column, "").strip() and record.get(end_column, "").strip():
            start = _timestamp(record[start_column], line, start_column)
            end = _timestamp(record[end_column], line, end_column)
            return float(end - start) if end >= start else None
    return None


def _timestamp(text: str, line: int, column: str) -> int | float:
    text = text.strip()
    if text.isdigit():
        return int(text)  # exact: nanosecond timestamps exceed what a float holds to the unit
    value = _number(text, line, column)
    if value is None:
        raise ProfileParseError(f"line {line}: {column} is {text!r}, not a timestamp")
    return value


# -- per-kernel aggregation ---------------------------------------------------------------------


@attrs.define
class _Kernel:
    """Everything seen of one kernel, dispatch by dispatch."""

    name: str
    dispatches: dict[Any, None] = attrs.field(factory=dict)
    durations: dict[Any, float] = attrs.field(factory=dict)
    properties: dict[str, float] = attrs.field(factory=dict)
    counters: dict[str, list[float]] = attrs.field(factory=dict)

    def dispatch(self, key: Any, duration: float | None) -> None:
        self.dispatches[key] = None
        if duration is not None:
            self.durations[key] = duration

    def property(self, name: str, value: float | None) -> None:
        if value is not None:
            self.properties[name] = max(value, self.properties.get(name, value))

    def count(self, name: str, value: float | None) -> None:
        if value is not None:
            self.counters.setdefault(name, []).append(value)


class _Kernels:
    def __init__(self) -> None:
        self._kernels: dict[str, _Kernel] = {}

    def __getitem__(self, raw_name: str) -> _Kernel:
        name = kernel_name(raw_name)
        if name not in self._kernels:
            self._kernels[name] = _Kernel(name)
        return self._kernels[name]

    def metrics(self) -> list[Metric]:
        """Per kernel, longest total time first: calls, durations, properties, counters."""
        kernels = list(self._kernels.values())
        all_time = sum(sum(kernel.durations.values()) for kernel in kernels)
        kernels.sort(key=lambda kernel: -sum(kernel.durations.values()))
        metrics: list[Metric] = []
        for kernel in kernels:
            metrics += _duration_metrics(kernel, all_time, prefix="", kernel=kernel.name)
            metrics += [
                _metric(name, kernel.properties[name], kernel.name)
                for name in _PROPERTY_ORDER
                if name in kernel.properties
            ]
            for name, values in kernel.counters.items():
                value = sum(values) if aggregation_of(name) == "sum" else sum(values) / len(values)
                metrics.append(_metric(name, value, kernel.name))
        return metrics


def _duration_metrics(seen: _Kernel, all_time: float, *, prefix: str, kernel: str) -> list[Metric]:
    values = list(seen.durations.values())
    stats = {"Calls": float(len(seen.dispatches))}
    if values:
        stats |= {
            "TotalDurationNs": sum(values),
            "AverageNs": sum(values) / len(values),
            "MinNs": min(values),
            "MaxNs": max(values),
        }
        if all_time > 0:
            stats["Percentage"] = 100.0 * sum(values) / all_time
    return [_metric(prefix + name, value, kernel) for name, value in stats.items()]


def _metric(name: str, value: float, kernel: str) -> Metric:
    return Metric(
        name=name, value=float(value), unit=unit_of(name), kernel=kernel, profiler=PROFILER, meaning=meaning_of(name)
    )


def _dispatch_key(record: dict[str, str], number: int) -> tuple[str, str]:
    dispatch = next((record[column] for column in _DISPATCH_ID_COLUMNS if column in record), str(number))
    return record.get("Agent_Id", ""), dispatch.strip()


def _read_properties(kernel: _Kernel, record: dict[str, str], number: int) -> None:
    for column, name in PROPERTY_COLUMNS.items():
        if column in record:
            kernel.property(name, _number(record[column], number, column))
    for name, columns in _DIMENSIONS.items():
        if all(column in record for column in columns):
            sizes = [_number(record[column], number, column) for column in columns]
            known = [size for size in sizes if size is not None]
            if len(known) == len(sizes):
                kernel.property(name, math.prod(known))


def _read_counter_collection(table: _Table, kernels: _Kernels) -> None:
    for number, record in table.records():
        kernel = kernels[record["Kernel_Name"]]
        kernel.dispatch(_dispatch_key(record, number), _interval(record, number))
        _read_properties(kernel, record, number)
        counter = record["Counter_Name"].strip()
        if not counter:
            raise ProfileParseError(f"line {number}: Counter_Name is empty")
        kernel.count(counter, _number(record["Counter_Value"], number, "Counter_Value"))


def _read_kernel_trace(table: _Table, kernels: _Kernels) -> None:
    for number, record in table.records():
        kernel = kernels[record["Kernel_Name"]]
        kernel.dispatch(_dispatch_key(record, number), _interval(record, number))
        _read_properties(kernel, record, number)


def _read_dispatch_table(table: _Table, kernels: _Kernels) -> None:
    name_column = next(column for column in _KERNEL_NAME_COLUMNS if column in table.header)
    counters = [column for column in table.header if column not in _NOT_COUNTERS and column not in PROPERTY_COLUMNS]
    for number, record in table.records():
        kernel = kernels[record[name_column]]
        kernel.dispatch(_dispatch_key(record, number), _interval(record, number))
        _read_properties(kernel, record, number)
        for column in counters:
            kernel.count(column, _number(record[column], number, column))


def _parse_stats(table: _Table) -> list[Metric]:
    names = [record["Name"].strip() for _, record in table.records()]
    activity = bool(names) and all(_ACTIVITY_NAME.fullmatch(name) for name in names)
    columns = [column for column in _STATS_COLUMNS if column in table.header]
    metrics = []
    for number, record in table.records():
        name = record["Name"].strip()
        for column in columns:
            value = _number(record[column], number, column)
            if value is None:
                continue
            if activity:
                metrics.append(_metric(f"{name}.{column}", value, ""))
            else:
                metrics.append(_metric(column, value, kernel_name(name)))
    return metrics


def _parse_memory_copies(table: _Table) -> list[Metric]:
    directions: dict[str, _Kernel] = {}
    for number, record in table.records():
        direction = record["Direction"].strip() or "MEMORY_COPY"
        copies = directions.setdefault(direction, _Kernel(direction))
        copies.dispatch(number, _interval(record, number))
    all_time = sum(sum(copies.durations.values()) for copies in directions.values())
    metrics = []
    for direction, copies in directions.items():
        metrics += _duration_metrics(copies, all_time, prefix=f"{direction}.", kernel="")
    return metrics
