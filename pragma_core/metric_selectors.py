"""Built-in metric selector ``default``: the profiler's own defaults, and a bounded prompt.

Which metrics to collect is the profiler's call (it knows its device; the paper's selection lives
in each profiler's ``default_metrics``). Which reach the Conductor: every collected metric once per
(name, kernel), in the profiler's order, at most :data:`MAX_METRICS_IN_PROMPT`, so a profile with
hundreds of raw counters does not crowd out the code in the prompt.
"""

from __future__ import annotations

from .components import MetricSelector, Profiler
from .hookspecs import hookimpl
from .records import Metric, Profile

MAX_METRICS_IN_PROMPT = 40


def select(profile: Profile) -> tuple[Metric, ...]:
    """Each (name, kernel) once, first occurrence kept, at most MAX_METRICS_IN_PROMPT."""
    chosen: dict[tuple[str, str], Metric] = {}
    for metric in profile.metrics:
        chosen.setdefault((metric.name, metric.kernel), metric)
        if len(chosen) == MAX_METRICS_IN_PROMPT:
            break
    return tuple(chosen.values())


def defaults(profiler: Profiler, device: str) -> tuple[str, ...]:
    """The profiler's default metrics where it serves the device, else nothing."""
    return profiler.default_metrics if device in profiler.devices else ()


@hookimpl
def pragma_register_metric_selectors(register):
    register(
        MetricSelector(
            name="default",
            description="the profiler's default metrics; each collected metric once, at most "
            f"{MAX_METRICS_IN_PROMPT} in the prompt",
            select=select,
            defaults=defaults,
        )
    )
