"""The pragma hook that registers the ``perf`` profiler (entry point ``perf`` in group ``pragma``)."""

from __future__ import annotations

from collections.abc import Callable

from pragma_core import Profiler, hookimpl

from .collect import collect
from .metrics import DEFAULT_METRICS, FORMULAS
from .parse import PROFILER, parse
from .probe import probe

_KERNEL_DOCS = "https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git/plain/tools/perf/Documentation"

DOC_SOURCES = (
    "https://man7.org/linux/man-pages/man1/perf-stat.1.html",
    "https://man7.org/linux/man-pages/man1/perf-list.1.html",
    "https://man7.org/linux/man-pages/man2/perf_event_open.2.html",
    f"{_KERNEL_DOCS}/perf-stat.txt",
    f"{_KERNEL_DOCS}/perf-list.txt",
    f"{_KERNEL_DOCS}/topdown.txt",
    "https://docs.kernel.org/admin-guide/perf-security.html",
    "https://perfwiki.github.io/main/top-down-analysis/",
    "https://www.intel.com/content/www/us/en/docs/vtune-profiler/cookbook/2024-0/top-down-microarchitecture-analysis-method.html",
)
"""perf stat and perf list manuals (man7.org, kernel.org), perf_event_open(2) (what the generic
hardware, software and cache events count), the top-down notes of perf and its wiki,
perf_event_paranoid (kernel.org), and Intel's description of the top-down method."""


@hookimpl
def pragma_register_profilers(register: Callable[[Profiler], None]) -> None:
    register(
        Profiler(
            name=PROFILER,
            devices=("cpu",),
            description="Linux perf stat: top-down level 1, instructions, cycles, IPC, cache and branch "
            "misses (software events only where the machine has no PMU)",
            probe=probe,
            default_metrics=DEFAULT_METRICS,
            collect=collect,
            parse=parse,
            doc_sources=DOC_SOURCES,
            formulas=FORMULAS,
        )
    )
