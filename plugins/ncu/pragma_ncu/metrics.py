"""The metrics ncu collects for pragma by default, what each means, and which names ncu accepts.

The default set is the PRAGMA paper's GPU selection: kernel duration, achieved occupancy and what
limits it, registers and shared memory per block, tensor-core activity, and the throughput and hit
rates of DRAM, L2 and L1. Names are ncu's own (``--metrics`` syntax). The details page prints
labels instead of names (``Duration`` for ``gpu__time_duration.sum``); :data:`LABELS` maps the
labels of the stock sections back to the metric, so both carry the same meaning.
"""

from __future__ import annotations

import re

__all__ = [
    "DEFAULT_METRICS",
    "MEANINGS",
    "ALTERNATIVES",
    "LABELS",
    "meaning_of",
    "rejection_reason",
]

_DEFAULTS: dict[str, str] = {
    "gpu__time_duration.sum": "kernel duration: time the kernel ran on the GPU",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occupancy: active warps per SM as % "
    "of the most the SM can hold",
    "launch__occupancy_limit_registers": "occupancy limit from registers: blocks per SM the register use allows",
    "launch__occupancy_limit_shared_mem": "occupancy limit from shared memory: blocks per SM the shared "
    "memory use allows",
    "launch__occupancy_limit_warps": "occupancy limit from block size: blocks per SM the warps per block allow",
    "launch__occupancy_limit_blocks": "occupancy limit from the hardware: most blocks an SM can hold",
    "launch__registers_per_thread": "registers each thread uses",
    "launch__shared_mem_per_block_static": "shared memory per block declared statically (__shared__)",
    "launch__shared_mem_per_block_dynamic": "shared memory per block requested at launch (dynamic)",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": "tensor-core activity: % "
    "of active cycles the HMMA tensor pipe was busy",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM throughput as % of its peak",
    "lts__t_sector_hit_rate.pct": "L2 hit rate: % of L2 sector lookups that hit",
    "l1tex__t_sector_hit_rate.pct": "L1 hit rate: % of L1/TEX sector lookups that hit",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed": "L2 throughput as % of its peak",
    "l1tex__throughput.avg.pct_of_peak_sustained_elapsed": "L1/TEX throughput as % of its peak",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "compute (SM) throughput: busiest SM pipe or "
    "unit as % of its peak",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "memory throughput: busiest of "
    "DRAM, L2 and L1 as % of its peak",
}

_OTHERS: dict[str, str] = {
    # names behind the labels of the stock sections, and the tensor pipe on other architectures
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": "DRAM throughput as % of its peak",
    "l1tex__throughput.avg.pct_of_peak_sustained_active": "L1/TEX throughput as % of its peak during active cycles",
    "gpu__time_duration": "kernel duration (the name before the .sum roll-up existed)",
    "gpc__cycles_elapsed.max": "elapsed GPU cycles of the kernel",
    "gpc__cycles_elapsed.avg.per_second": "SM clock frequency",
    "dram__cycles_elapsed.avg.per_second": "DRAM clock frequency",
    "sm__cycles_active.avg": "cycles an SM had at least one warp active, averaged over SMs",
    "sm__maximum_warps_per_active_cycle_pct": "theoretical occupancy: % of the warps an SM can hold "
    "that this launch allows",
    "sm__maximum_warps_avg_per_active_cycle": "theoretical active warps per SM",
    "sm__warps_active.avg.per_cycle_active": "achieved active warps per SM",
    "launch__occupancy_limit_barriers": "occupancy limit from barriers: blocks per SM the barrier use allows",
    "launch__shared_mem_per_block_driver": "shared memory per block reserved by the driver",
    "launch__shared_mem_config_size": "shared memory carve-out configured per SM",
    "launch__block_size": "threads per block",
    "launch__grid_size": "blocks in the grid",
    "launch__thread_count": "threads in the launch",
    "launch__waves_per_multiprocessor": "waves: blocks of the grid over the blocks all SMs hold at once",
    "sm__pipe_tensor_op_hmma_cycles_active_v2.avg.pct_of_peak_sustained_active": "tensor-core activity "
    "(newer architectures): % of active cycles the HMMA tensor pipe was busy",
    "sm__pipe_tensor_subpipe_hmma_cycles_active.avg.pct_of_peak_sustained_active": "tensor-core activity "
    "(newest architectures): % of active cycles the HMMA tensor subpipe was busy",
}

DEFAULT_METRICS: tuple[str, ...] = tuple(_DEFAULTS)
"""What ncu collects when nothing else is asked: the paper's GPU set, in this order."""

MEANINGS: dict[str, str] = {**_DEFAULTS, **_OTHERS}
"""One-line meaning of each metric pragma knows by name."""

ALTERNATIVES: dict[str, tuple[str, ...]] = {
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": (
        "sm__pipe_tensor_op_hmma_cycles_active_v2.avg.pct_of_peak_sustained_active",
        "sm__pipe_tensor_subpipe_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    ),
}
"""Names the same quantity has on other architectures (the ComputeWorkloadAnalysis section)."""

LABELS: dict[str, str] = {
    # SpeedOfLight, LaunchStatistics and Occupancy .section files of Nsight Compute
    "Duration": "gpu__time_duration.sum",
    "Compute (SM) Throughput": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "Memory Throughput": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "Elapsed Cycles": "gpc__cycles_elapsed.max",
    "L1/TEX Cache Throughput": "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "SM Active Cycles": "sm__cycles_active.avg",
    "L2 Cache Throughput": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "SM Frequency": "gpc__cycles_elapsed.avg.per_second",
    "DRAM Throughput": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "DRAM Frequency": "dram__cycles_elapsed.avg.per_second",
    "Grid Size": "launch__grid_size",
    "Registers Per Thread": "launch__registers_per_thread",
    "Static Shared Memory Per Block": "launch__shared_mem_per_block_static",
    "Block Size": "launch__block_size",
    "Dynamic Shared Memory Per Block": "launch__shared_mem_per_block_dynamic",
    "Threads": "launch__thread_count",
    "Driver Shared Memory Per Block": "launch__shared_mem_per_block_driver",
    "Waves Per SM": "launch__waves_per_multiprocessor",
    "Shared Memory Configuration Size": "launch__shared_mem_config_size",
    "Theoretical Occupancy": "sm__maximum_warps_per_active_cycle_pct",
    "Block Limit Registers": "launch__occupancy_limit_registers",
    "Theoretical Active Warps per SM": "sm__maximum_warps_avg_per_active_cycle",
    "Block Limit Shared Mem": "launch__occupancy_limit_shared_mem",
    "Achieved Occupancy": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "Block Limit Warps": "launch__occupancy_limit_warps",
    "Achieved Active Warps Per SM": "sm__warps_active.avg.per_cycle_active",
    "Block Limit SM": "launch__occupancy_limit_blocks",
    "Block Limit Barriers": "launch__occupancy_limit_barriers",
    # the 2021-2022 labels of the same two metrics
    "Memory [%]": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "Compute (SM) [%]": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
}
"""Details-page label -> the ncu metric it shows."""

# <unit>__<counter>.<rollup>[.<submetric>...], or a ratio's .pct/.ratio/.max_rate (Profiling Guide,
# "Metrics Structure" and "Metrics Naming Conventions").
_COUNTER = re.compile(r"[a-z][a-z0-9]*__[a-z0-9_]+\.(sum|avg|min|max)(\.[a-z_]+)*")
_RATIO = re.compile(r"[a-z][a-z0-9]*__[a-z0-9_]+\.(pct|ratio|max_rate)")
# launch attributes and device attributes have no roll-ups
_ATTRIBUTE = re.compile(r"(launch__|device__attribute_)[a-z0-9_]+")


def meaning_of(name: str, unit: str = "") -> str:
    """The one-line meaning of a metric name or details-page label; empty when unknown.

    A label means its metric only where the unit agrees: before 2021 the label ``Memory
    Throughput`` was a rate in bytes per second, not the percentage it is now.
    """
    if name in MEANINGS:
        return MEANINGS[name]
    metric = LABELS.get(name)
    if metric is None or metric not in MEANINGS or ("pct" in metric) != (unit == "%"):
        return ""
    return f"{MEANINGS[metric]} ({metric})"


def rejection_reason(name: str) -> str | None:
    """Why ncu would not know ``name``; None when it is a metric name ncu accepts."""
    if name in MEANINGS or any(p.fullmatch(name) for p in (_COUNTER, _RATIO, _ATTRIBUTE)):
        return None
    if ":" in name:
        return (
            f"{name!r} is an ncu filter expression (regex:, group:, breakdown:), not a metric "
            "name; ask for the metrics it stands for"
        )
    return (
        f"{name!r} is not an ncu metric name: expected <unit>__<counter>.<rollup>[.<submetric>] "
        "such as sm__throughput.avg.pct_of_peak_sustained_elapsed (see `ncu --query-metrics`)"
    )
