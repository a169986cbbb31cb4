"""The metrics pragma knows from rocprof: names, units, one-line meanings, how they aggregate.

Names are rocprof's own: rocprofv3's CSV columns (``VGPR_Count``, ``LDS_Block_Size``), its stats
columns for kernel time (``AverageNs``, ``TotalDurationNs``), and its counter and derived-metric
names (``SQ_WAVES``, ``FETCH_SIZE``, ``OccupancyPercent``). rocprof v1 column names (``arch_vgpr``,
``lds``, ``scr``) are read under the rocprofv3 name. Three metrics are computed by pragma from
counters rocprof returns: ``L2CacheHit`` (rocprof's own formula), ``L1CacheHit`` and
``HBMBandwidth``.

Per kernel, a metric aggregates its dispatches by its :attr:`MetricInfo.aggregate`: counters are
summed, derived rates and percentages averaged (unweighted mean over dispatches), per-dispatch
properties such as registers take the largest value. A counter not in the table aggregates by the
shape of its name: ``UPPER_CASE`` hardware counters are summed, ``CamelCase`` derived metrics
averaged.

:func:`validate` splits a request into names rocprof can answer and names it cannot, with the
reason; :func:`counters_for` lists the counters to pass to ``rocprofv3 --pmc``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import attrs
from attrs import validators as v

__all__ = [
    "MetricInfo",
    "KNOWN_METRICS",
    "DEFAULT_METRICS",
    "FORMULAS",
    "COUNTER_NAME",
    "V1_COLUMN_NAMES",
    "info",
    "unit_of",
    "meaning_of",
    "aggregation_of",
    "validate",
    "counters_for",
]

KINDS = ("duration", "dispatch", "stats", "counter", "derived")


@attrs.frozen(kw_only=True)
class MetricInfo:
    """What pragma knows about one rocprof metric.

    ``kind`` says where it comes from: ``duration`` from the kernel trace's timestamps,
    ``dispatch`` from the columns every dispatch row carries, ``stats`` only from ``--stats`` files,
    ``counter`` from ``rocprofv3 --pmc``, ``derived`` computed by pragma from ``inputs``.
    ``aggregate`` is how a kernel's dispatches combine: ``sum``, ``mean``, ``max``, ``stat``
    (duration statistics over the dispatches) or ``ratio`` (computed from the summed counters).
    """

    name: str
    unit: str
    meaning: str
    kind: str = attrs.field(validator=v.in_(KINDS))
    aggregate: str = attrs.field(validator=v.in_(("sum", "mean", "max", "stat", "ratio")))
    inputs: tuple[str, ...] = attrs.field(default=(), converter=tuple)


def _table(*rows: tuple) -> dict[str, MetricInfo]:
    table = {}
    for name, unit, kind, aggregate, meaning, *inputs in rows:
        table[name] = MetricInfo(
            name=name,
            unit=unit,
            kind=kind,
            aggregate=aggregate,
            meaning=meaning,
            inputs=inputs[0] if inputs else (),
        )
    return table


KNOWN_METRICS: dict[str, MetricInfo] = _table(
    # -- kernel time, from Start/End timestamps (kernel trace) or the --stats files --------------
    ("Calls", "", "duration", "stat", "number of dispatches (launches) of the kernel"),
    ("TotalDurationNs", "ns", "duration", "stat", "GPU time of all dispatches of the kernel, summed"),
    ("AverageNs", "ns", "duration", "stat", "kernel duration: mean GPU time of one dispatch (End - Start timestamp)"),
    ("MinNs", "ns", "duration", "stat", "shortest dispatch of the kernel"),
    ("MaxNs", "ns", "duration", "stat", "longest dispatch of the kernel"),
    ("Percentage", "%", "duration", "stat", "share of all GPU kernel time of the run spent in this kernel"),
    ("StdDev", "ns", "stats", "stat", "standard deviation of the dispatch durations (rocprofv3 --stats only)"),
    # -- per-dispatch properties (counter collection and newer kernel traces) ---------------------
    (
        "VGPR_Count",
        "registers",
        "dispatch",
        "max",
        "architected vector registers per work-item (v1: arch_vgpr); many VGPRs limit occupancy",
    ),
    (
        "Accum_VGPR_Count",
        "registers",
        "dispatch",
        "max",
        "accumulation registers (AGPRs, MFMA accumulators) per work-item (v1: accum_vgpr)",
    ),
    ("SGPR_Count", "registers", "dispatch", "max", "scalar registers per wavefront (v1: sgpr); can limit occupancy"),
    (
        "LDS_Block_Size",
        "bytes",
        "dispatch",
        "max",
        "LDS (shared memory) allocated per workgroup (v1: lds); large LDS limits workgroups per CU",
    ),
    (
        "Scratch_Size",
        "bytes",
        "dispatch",
        "max",
        "scratch (private) memory per work-item (v1: scr); non-zero usually means register spills",
    ),
    (
        "Group_Segment_Size",
        "bytes",
        "dispatch",
        "max",
        "static LDS a workgroup needs, as the kernel declares it (older kernel traces)",
    ),
    (
        "Private_Segment_Size",
        "bytes",
        "dispatch",
        "max",
        "private/spill memory a work-item needs, as the kernel declares it (older kernel traces)",
    ),
    ("Workgroup_Size", "work-items", "dispatch", "max", "work-items per workgroup (HIP block size)"),
    ("Grid_Size", "work-items", "dispatch", "max", "work-items launched per dispatch (largest dispatch)"),
    # -- occupancy ---------------------------------------------------------------------------------
    (
        "OccupancyPercent",
        "%",
        "counter",
        "mean",
        "achieved occupancy: resident wavefronts as a % of what the CUs can hold",
    ),
    ("MeanOccupancyPerCU", "wavefronts", "counter", "mean", "mean number of wavefronts resident on a compute unit"),
    (
        "MeanOccupancyPerActiveCU",
        "wavefronts",
        "counter",
        "mean",
        "mean number of wavefronts resident on a busy compute unit",
    ),
    ("Wavefronts", "wavefronts", "counter", "sum", "wavefronts launched"),
    ("SQ_WAVES", "wavefronts", "counter", "sum", "wavefronts sent to the sequencers (launched)"),
    ("SQ_WAVE_CYCLES", "quad-cycles", "counter", "sum", "cycles spent executing wavefronts, summed over waves"),
    ("SQ_BUSY_CYCLES", "quad-cycles", "counter", "sum", "cycles with any wavefront active on a shader engine"),
    ("GRBM_GUI_ACTIVE", "cycles", "counter", "sum", "GPU active cycles"),
    ("GRBM_COUNT", "cycles", "counter", "sum", "free-running GPU cycles"),
    ("GPUBusy", "%", "counter", "mean", "share of time the GPU was busy"),
    # -- compute pipes -----------------------------------------------------------------------------
    ("VALUBusy", "%", "counter", "mean", "share of GPU time the vector ALUs are processing instructions"),
    ("SALUBusy", "%", "counter", "mean", "share of GPU time the scalar ALU is processing instructions"),
    (
        "VALUUtilization",
        "%",
        "counter",
        "mean",
        "share of active threads in a wavefront's VALU instructions (divergence)",
    ),
    ("VALUInsts", "instructions", "counter", "mean", "vector ALU instructions per work-item"),
    ("SALUInsts", "instructions", "counter", "mean", "scalar ALU instructions per work-item"),
    ("SQ_INSTS_VALU", "instructions", "counter", "sum", "vector ALU instructions issued"),
    ("SQ_INSTS_SALU", "instructions", "counter", "sum", "scalar ALU instructions issued"),
    ("MfmaUtil", "%", "counter", "mean", "share of time the matrix cores (MFMA units, AMD's tensor cores) are busy"),
    ("SQ_VALU_MFMA_BUSY_CYCLES", "cycles", "counter", "sum", "cycles the MFMA (matrix) units are busy"),
    ("SQ_INSTS_MFMA", "instructions", "counter", "sum", "MFMA (matrix fused multiply-add) instructions issued"),
    ("SQ_INSTS_VALU_MFMA_MOPS_F16", "512 ops", "counter", "sum", "MFMA math operations on FP16 data, in units of 512"),
    ("SQ_INSTS_VALU_MFMA_MOPS_BF16", "512 ops", "counter", "sum", "MFMA math operations on BF16 data, in units of 512"),
    ("SQ_INSTS_VALU_MFMA_MOPS_F32", "512 ops", "counter", "sum", "MFMA math operations on FP32 data, in units of 512"),
    ("SQ_INSTS_VALU_MFMA_MOPS_F64", "512 ops", "counter", "sum", "MFMA math operations on FP64 data, in units of 512"),
    # -- memory ------------------------------------------------------------------------------------
    (
        "MemUnitBusy",
        "%",
        "counter",
        "mean",
        "share of GPU time the memory unit (texture addresser) is active, stalls included",
    ),
    ("MemUnitStalled", "%", "counter", "mean", "share of GPU time the memory unit is stalled"),
    ("WriteUnitStalled", "%", "counter", "mean", "share of GPU time the L2 write unit is stalled"),
    ("FETCH_SIZE", "KB", "counter", "sum", "kilobytes (1024 B) read from device memory (HBM) past the L2"),
    ("WRITE_SIZE", "KB", "counter", "sum", "kilobytes (1024 B) written to device memory (HBM) past the L2"),
    ("FetchSize", "KB", "counter", "sum", "kilobytes read from device memory (same as FETCH_SIZE)"),
    ("WriteSize", "KB", "counter", "sum", "kilobytes written to device memory (same as WRITE_SIZE)"),
    ("TCC_HIT_sum", "requests", "counter", "sum", "L2 cache (TCC) hits, summed over L2 channels"),
    ("TCC_MISS_sum", "requests", "counter", "sum", "L2 cache (TCC) misses, summed over L2 channels"),
    ("TCC_HIT", "requests", "counter", "sum", "L2 cache (TCC) hits"),
    ("TCC_MISS", "requests", "counter", "sum", "L2 cache (TCC) misses"),
    ("TCC_REQ_sum", "requests", "counter", "sum", "L2 cache requests of all kinds"),
    (
        "TCP_TOTAL_CACHE_ACCESSES_sum",
        "cache lines",
        "counter",
        "sum",
        "vector L1 cache (TCP) tag lookups, hits and misses, summed over CUs",
    ),
    ("TCP_TCC_READ_REQ_sum", "requests", "counter", "sum", "read requests from vector L1 to L2 (L1 read misses)"),
    ("TCP_TCC_WRITE_REQ_sum", "requests", "counter", "sum", "write requests from vector L1 to L2"),
    ("TCP_TCC_ATOMIC_WITH_RET_REQ_sum", "requests", "counter", "sum", "atomics with return from vector L1 to L2"),
    ("TCP_TCC_ATOMIC_WITHOUT_RET_REQ_sum", "requests", "counter", "sum", "atomics without return from vector L1 to L2"),
    ("LDSBankConflict", "%", "counter", "mean", "share of GPU time LDS is stalled by bank conflicts"),
    ("LDSInsts", "instructions", "counter", "mean", "LDS instructions per work-item"),
    ("ALUStalledByLDS", "%", "counter", "mean", "share of GPU time the ALUs wait on a full or busy LDS queue"),
    ("VFetchInsts", "instructions", "counter", "mean", "vector fetch instructions from device memory per work-item"),
    ("VWriteInsts", "instructions", "counter", "mean", "vector write instructions to device memory per work-item"),
    # -- computed by pragma --------------------------------------------------------------------------
    (
        "L2CacheHit",
        "%",
        "derived",
        "ratio",
        "L2 hit rate: 100 * TCC_HIT_sum / (TCC_HIT_sum + TCC_MISS_sum), rocprof's own formula",
        ("TCC_HIT_sum", "TCC_MISS_sum"),
    ),
    (
        "L1CacheHit",
        "%",
        "derived",
        "ratio",
        "vector L1 (vL1D) hit rate: lookups not sent on to L2, as a % of TCP_TOTAL_CACHE_ACCESSES_sum",
        ("TCP_TOTAL_CACHE_ACCESSES_sum", "TCP_TCC_READ_REQ_sum", "TCP_TCC_WRITE_REQ_sum"),
    ),
    (
        "HBMBandwidth",
        "GB/s",
        "derived",
        "ratio",
        "device-memory throughput: (FETCH_SIZE + WRITE_SIZE) bytes over the kernel's GPU time",
        ("FETCH_SIZE", "WRITE_SIZE"),
    ),
)
"""Every metric pragma has a meaning for, by name."""

DEFAULT_METRICS: tuple[str, ...] = (
    # kernel duration
    "AverageNs",
    "TotalDurationNs",
    "Calls",
    # occupancy and its limiters
    "OccupancyPercent",
    "MeanOccupancyPerCU",
    "VGPR_Count",
    "Accum_VGPR_Count",
    "SGPR_Count",
    "LDS_Block_Size",
    "Scratch_Size",
    # pass 1 of 2 (8 counters): pipes busy, matrix cores, L2 hits and misses together
    "VALUBusy",
    "MemUnitBusy",
    "MfmaUtil",
    "SQ_INSTS_VALU_MFMA_MOPS_F16",
    "TCC_HIT_sum",
    "TCC_MISS_sum",
    # pass 2: HBM traffic and vector L1 (the counter set rocprof's data_movement example collects
    # in one pass on MI250X), the other matrix precisions
    "FETCH_SIZE",
    "WRITE_SIZE",
    "TCP_TOTAL_CACHE_ACCESSES_sum",
    "TCP_TCC_READ_REQ_sum",
    "TCP_TCC_WRITE_REQ_sum",
    "SQ_INSTS_VALU_MFMA_MOPS_BF16",
    "SQ_INSTS_VALU_MFMA_MOPS_F32",
    # computed from the counters above
    "L2CacheHit",
    "L1CacheHit",
    "HBMBandwidth",
)
"""The PRAGMA paper's GPU set mapped to AMD: kernel duration, occupancy and its limiters (registers,
LDS, scratch), matrix-core activity, vector/memory pipe activity, HBM traffic, L2 and L1 hit rates.
The counter order makes the passes of :data:`~pragma_rocprof.commands.COUNTERS_PER_PASS`."""

FORMULAS: dict[str, str] = {
    "Calls": "count of the kernel's dispatches (rows of the kernel trace, one per Dispatch_Id)",
    "TotalDurationNs": "sum over the kernel's dispatches of End_Timestamp - Start_Timestamp",
    "AverageNs": "mean over the kernel's dispatches of End_Timestamp - Start_Timestamp",
    "MinNs": "min over the kernel's dispatches of End_Timestamp - Start_Timestamp",
    "MaxNs": "max over the kernel's dispatches of End_Timestamp - Start_Timestamp",
    "L2CacheHit": "100 * TCC_HIT_sum / (TCC_HIT_sum + TCC_MISS_sum)",
    "L1CacheHit": "100 * (1 - (TCP_TCC_READ_REQ_sum + TCP_TCC_WRITE_REQ_sum) / TCP_TOTAL_CACHE_ACCESSES_sum)",
    "HBMBandwidth": "(FETCH_SIZE + WRITE_SIZE) * 1024 / TotalDurationNs",
}
"""The metrics pragma computes from rocprof's own columns and counters, as formulas over them
(durations from the kernel trace's timestamps; the ratios of :func:`pragma_rocprof.parse.derive`)."""

COUNTER_NAME = re.compile(r"[A-Z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*(?:\[\d+\])?(?::device=\d+)?")
"""rocprof counter grammar: ``SQ_WAVES``, ``TCC_HIT_sum``, ``TCC_HIT[3]``, ``VALUBusy``,
``SQ_WAVES:device=0``. Names of other tools (``sm__throughput.avg``, ``instructions``) fail it."""

_HARDWARE_COUNTER = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Za-z0-9]+)+(?:\[\d+\])?")

V1_COLUMN_NAMES: dict[str, str] = {
    "arch_vgpr": "VGPR_Count",
    "vgpr": "VGPR_Count",
    "accum_vgpr": "Accum_VGPR_Count",
    "sgpr": "SGPR_Count",
    "lds": "LDS_Block_Size",
    "scr": "Scratch_Size",
    "wgr": "Workgroup_Size",
    "grd": "Grid_Size",
    "DurationNs": "AverageNs",
}
"""rocprof v1 column -> the rocprofv3 name pragma reports it under."""

_STATS_SUFFIX = re.compile(r"(.+)\.(Calls|TotalDurationNs|AverageNs|Percentage|MinNs|MaxNs|StdDev)")
_STATS_OF = {
    "Calls": "number of calls of",
    "TotalDurationNs": "total time of all calls of",
    "AverageNs": "mean time of one call of",
    "Percentage": "share of the domain's time spent in",
    "MinNs": "shortest call of",
    "MaxNs": "longest call of",
    "StdDev": "standard deviation of the call times of",
}


def info(name: str) -> MetricInfo | None:
    """What pragma knows about a metric, or None."""
    return KNOWN_METRICS.get(_base(name))


def unit_of(name: str) -> str:
    """The unit of a metric: from the table, ``ns``/``%`` for stats columns, else by name shape."""
    known = info(name)
    if known is not None:
        return known.unit
    stats = _STATS_SUFFIX.fullmatch(name)
    if stats:
        return KNOWN_METRICS[stats.group(2)].unit
    if _base(name).endswith("CYCLES"):
        return "cycles"
    return ""


def meaning_of(name: str) -> str:
    """A one-line meaning, or "" for a counter pragma has no description of."""
    known = info(name)
    if known is not None:
        instance = name[len(_base(name)) :]
        return f"{known.meaning} (instance {instance.strip('[]')})" if instance.startswith("[") else known.meaning
    stats = _STATS_SUFFIX.fullmatch(name)
    if stats:
        unit = " (ns)" if stats.group(2) not in ("Calls", "Percentage") else ""
        return f"{_STATS_OF[stats.group(2)]} {stats.group(1)}{unit}"
    return ""


def aggregation_of(name: str) -> str:
    """How dispatches of one kernel combine: ``sum``, ``mean``, ``max``, ``stat`` or ``ratio``."""
    known = info(name)
    if known is not None:
        return known.aggregate
    return "sum" if _HARDWARE_COUNTER.fullmatch(_base(name)) else "mean"


def validate(names: Iterable[str]) -> tuple[tuple[str, ...], dict[str, str]]:
    """Split requested names into those rocprof can answer (in order, once) and the rest with why."""
    accepted: list[str] = []
    rejected: dict[str, str] = {}
    for name in names:
        if name in accepted or name in rejected:
            continue
        reason = _rejection(name)
        if reason:
            rejected[name] = reason
        else:
            accepted.append(name)
    return tuple(accepted), rejected


def counters_for(names: Sequence[str]) -> tuple[str, ...]:
    """The counters to pass to ``rocprofv3 --pmc`` for these (validated) names, in order, once."""
    counters: list[str] = []
    for name in names:
        known = info(name)
        if known is None or known.kind == "counter":
            wanted: Sequence[str] = (name,)
        elif known.kind == "derived":
            wanted = known.inputs
        else:
            wanted = ()
        counters.extend(counter for counter in wanted if counter not in counters)
    return tuple(counters)


def _rejection(name: str) -> str:
    known = info(name)
    if known is not None and known.kind == "stats":
        return (
            f"{name} only appears in rocprofv3 --stats files; pragma computes Calls, AverageNs, "
            "MinNs and MaxNs from the kernel trace instead"
        )
    if known is not None:
        return ""
    if name in V1_COLUMN_NAMES:
        return f"{name} is a rocprof v1 column; rocprofv3 reports it as {V1_COLUMN_NAMES[name]}, request that"
    if not COUNTER_NAME.fullmatch(name):
        return (
            f"{name!r} is not a rocprof counter name: counters look like SQ_WAVES, TCC_HIT_sum, "
            "TCC_HIT[0] or derived metrics like VALUBusy (list them with `rocprofv3 --list-avail`)"
        )
    return ""


def _base(name: str) -> str:
    """``TCC_HIT[3]:device=0`` -> ``TCC_HIT``."""
    return name.split(":", 1)[0].split("[", 1)[0]
