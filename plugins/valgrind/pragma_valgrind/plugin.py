"""Registers the ``valgrind`` profiler (cachegrind) with pragma, through the ``pragma`` entry point."""

from __future__ import annotations

from collections.abc import Callable

from pragma_core.plugin_api.components import Profiler
from pragma_core.plugin_api.hookspecs import hookimpl

from .collect import collect
from .metrics import DEFAULT_METRICS, FORMULAS, PROFILER_NAME
from .parse import parse
from .probe import probe

DOC_SOURCES = (
    "https://valgrind.org/docs/manual/cg-manual.html",
    "https://valgrind.org/docs/manual/cg-manual.html#cg-manual.annopts",
    "https://valgrind.org/docs/manual/cg-manual.html#cg-manual.mergeopts",
    "https://valgrind.org/docs/manual/cg-manual.html#cg-manual.diffopts",
)
"""The Cachegrind manual, and its option sections for cg_annotate, cg_merge and cg_diff (valgrind.org
publishes those tools' manual pages as these sections; the man pages include them verbatim)."""


@hookimpl
def pragma_register_profilers(register: Callable[[Profiler], None]) -> None:
    register(
        Profiler(
            name=PROFILER_NAME,
            devices=("cpu",),
            description="valgrind cachegrind: simulated I1/D1/LL cache and branch-predictor counts of the "
            "kernels, deterministic, no hardware counters needed (VMs, containers, CI)",
            probe=probe,
            default_metrics=DEFAULT_METRICS,
            collect=collect,
            parse=parse,
            doc_sources=DOC_SOURCES,
            formulas=FORMULAS,
            deterministic=True,
        )
    )
