"""Registers the ``rocprof`` profiler (AMD rocprofv3) with pragma."""

from __future__ import annotations

from collections.abc import Callable

from pragma_core import Profiler, hookimpl

from .collect import collect
from .metrics import DEFAULT_METRICS, FORMULAS
from .parse import PROFILER, parse
from .probe import probe

DOC_SOURCES = (
    "https://rocm.docs.amd.com/projects/rocprofiler-sdk/en/latest/how-to/using-rocprofv3.html",
    "https://rocm.docs.amd.com/projects/rocprofiler-sdk/en/latest/how-to/using-rocprofv3-avail.html",
    "https://rocm.docs.amd.com/projects/rocprofiler-sdk/en/latest/api-reference/counter_collection_services.html",
    "https://rocm.docs.amd.com/projects/rocprofiler-sdk/en/latest/conceptual/comparing-with-legacy-tools.html",
    "https://rocm.docs.amd.com/en/latest/reference/gpu-arch/mi300-mi200-performance-counters.html",
    "https://rocm.docs.amd.com/projects/rocprofiler-compute/en/latest/conceptual/performance-model.html",
    "https://rocm.docs.amd.com/projects/rocprofiler-compute/en/latest/conceptual/system-speed-of-light.html",
    "https://rocm.docs.amd.com/projects/rocprofiler-compute/en/latest/conceptual/pipeline-metrics.html",
    "https://rocm.docs.amd.com/projects/rocprofiler-compute/en/latest/conceptual/vector-l1-cache.html",
    "https://rocm.docs.amd.com/projects/rocprofiler-compute/en/latest/conceptual/l2-cache.html",
    "https://rocm.docs.amd.com/projects/rocprofiler-compute/en/latest/conceptual/local-data-share.html",
)
"""The rocprofv3 guide and counter pages (rocprofiler-sdk), the MI200/MI300 counter and derived
metric reference, and rocprofiler-compute's (Omniperf's) performance model pages."""


@hookimpl
def pragma_register_profilers(register: Callable[[Profiler], None]) -> None:
    register(
        Profiler(
            name=PROFILER,
            devices=("rocm",),
            description="AMD rocprofv3: kernel durations, occupancy, registers/LDS, MFMA, HBM, L2/L1 hit rates",
            probe=probe,
            default_metrics=DEFAULT_METRICS,
            collect=collect,
            parse=parse,
            doc_sources=DOC_SOURCES,
            formulas=FORMULAS,
        )
    )
