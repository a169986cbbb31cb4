"""The hook that registers ncu with pragma (entry point ``ncu`` of the group ``pragma``)."""

from __future__ import annotations

from collections.abc import Callable

from pragma_core import Profiler, hookimpl

from .collect import collect
from .metrics import DEFAULT_METRICS
from .parse import PROFILER_NAME, parse
from .probe import probe

DOC_SOURCES = (
    "https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html",
    "https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html#metrics-reference",
    "https://docs.nvidia.com/nsight-compute/NsightComputeCli/index.html",
    "https://docs.nvidia.com/nsight-compute/CustomizationGuide/index.html",
)
"""Nsight Compute's Kernel Profiling Guide (metrics, their structure and reference), CLI guide,
and the Customization Guide (sections and rules)."""


@hookimpl
def pragma_register_profilers(register: Callable[[Profiler], None]) -> None:
    register(
        Profiler(
            name=PROFILER_NAME,
            devices=("cuda",),
            description="NVIDIA Nsight Compute: per-kernel duration, occupancy and its limits, "
            "registers, shared memory, tensor-core activity, DRAM/L2/L1 throughput and hit rates, "
            "and ncu's optimization advice",
            probe=probe,
            default_metrics=DEFAULT_METRICS,
            collect=collect,
            parse=parse,
            doc_sources=DOC_SOURCES,
        )
    )
