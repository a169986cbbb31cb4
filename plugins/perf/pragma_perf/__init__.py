"""pragma-perf: the Linux ``perf stat`` profiler for pragma.

Installing the distribution registers the profiler ``perf`` (entry point ``perf`` in the group
``pragma``)::

    from pragma_core import get_registry
    perf = get_registry().profiler("perf")
    perf.probe()                       # can perf count here, and what is missing
    profile = perf.collect(target, perf.default_metrics)
    metrics = perf.parse(open("perf-stat.csv").read())

The functions live in their modules, named as the Profiler fields they fill:
``pragma_perf.probe.probe``, ``pragma_perf.collect.collect``, ``pragma_perf.parse.parse`` and
``pragma_perf.parse.unsupported``.

Modules: :mod:`.metrics` (default set and meanings), :mod:`.parse` (pure readers of perf's CSV,
JSON and default output), :mod:`.probe` (perf, perf_event_paranoid, hardware counters, top-down
options), :mod:`.collect` (running perf on a target), :mod:`.plugin` (the hook).
"""

__all__ = ["__version__"]
__version__ = "0.1.0"
