"""Built-in metric selector ``default``: the paper's metric sets, and a short summary for prompts.

What to collect: the profiler's own default set for the device (each profiler carries the PRAGMA
paper's selection for its vendor: top-down level 1, IPC, cache and branch misses on CPUs; duration,
occupancy and its limiters, registers, shared memory, tensor-core activity, memory throughput and
hit rates on GPUs). The Conductor's extra requests are added by the caller.

What reaches the Conductor: the candidate's kernel metrics before whole-program ones, each (name,
kernel) once, at most :data:`MAX_METRICS_IN_PROMPT`, so a profile with hundreds of raw counters
does not crowd out the code in the prompt. :func:`summary_lines` renders them one per line with
value, unit and meaning.
"""

from __future__ import annotations

from ..plugin_api.components import MetricSelector, Profiler
from ..plugin_api.hookspecs import hookimpl
from ..records import Metric, Profile

__all__ = ["MAX_METRICS_IN_PROMPT", "select", "defaults", "summary_lines"]

MAX_METRICS_IN_PROMPT = 24


def select(profile: Profile) -> tuple[Metric, ...]:
    """Kernel-attributed metrics first, then the rest; each (name, kernel) once; bounded."""
    chosen: dict[tuple[str, str], Metric] = {}
    ordered = [m for m in profile.metrics if m.kernel] + [m for m in profile.metrics if not m.kernel]
    for metric in ordered:
        chosen.setdefault((metric.name, metric.kernel), metric)
        if len(chosen) == MAX_METRICS_IN_PROMPT:
            break
    return tuple(chosen.values())


def defaults(profiler: Profiler, device: str) -> tuple[str, ...]:
    """The profiler's default metrics where it serves the device, else nothing."""
    return profiler.default_metrics if device in profiler.devices else ()


def summary_lines(metrics: tuple[Metric, ...]) -> list[str]:
    """``D1 miss rate [relu] = 3.1 %: share of L1 data accesses that miss``, one per metric."""
    lines = []
    for metric in metrics:
        where = f" [{metric.kernel}]" if metric.kernel else ""
        unit = f" {metric.unit}" if metric.unit else ""
        meaning = f": {metric.meaning}" if metric.meaning else ""
        lines.append(f"{metric.name}{where} = {metric.value:.4g}{unit}{meaning}")
    return lines


@hookimpl
def pragma_register_metric_selectors(register):
    register(
        MetricSelector(
            name="default",
            description="the profiler's default (paper) metric set; kernel metrics first in the prompt, "
            f"at most {MAX_METRICS_IN_PROMPT}",
            select=select,
            defaults=defaults,
        )
    )
