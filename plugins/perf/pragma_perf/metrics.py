"""What perf measures by default, what each name means, and which names need hardware counters.

Names are perf's own: event names as ``perf list`` prints them (``instructions``, ``task-clock``),
top-down metrics as perf's metric files name them (``tma_backend_bound``). The ratios perf prints
only as comments (``# 0.80 insn per cycle``) are computed by :mod:`pragma_perf.parse` from the
counts and named here (``ipc``, ``branch-miss-rate``, ...). On hybrid CPUs perf prefixes names with
the core type, ``cpu_core/cycles/``; :func:`base_name` strips that to look a name up.
"""

from __future__ import annotations

import re

__all__ = [
    "TOPDOWN_L1",
    "HARDWARE_EVENTS",
    "SOFTWARE_EVENTS",
    "DERIVED",
    "FORMULAS",
    "DEFAULT_METRICS",
    "MEANINGS",
    "base_name",
    "pmu_of",
    "meaning_of",
    "needs_hardware",
]

TOPDOWN_L1 = ("tma_frontend_bound", "tma_backend_bound", "tma_bad_speculation", "tma_retiring")
"""Top-down level 1: the four shares of pipeline slots, in percent, that add up to 100."""

HARDWARE_EVENTS = (
    "instructions",
    "cycles",
    "branches",
    "branch-misses",
    "cache-references",
    "cache-misses",
    "L1-dcache-loads",
    "L1-dcache-load-misses",
)
"""The hardware events collected by default (they need a CPU PMU)."""

SOFTWARE_EVENTS = ("task-clock", "page-faults", "context-switches", "cpu-migrations")
"""The software events collected by default (the kernel counts them; they work in any VM)."""

DERIVED: dict[str, tuple[str, str, float, str]] = {
    "ipc": ("instructions", "cycles", 1.0, ""),
    "branch-miss-rate": ("branch-misses", "branches", 100.0, "%"),
    "cache-miss-rate": ("cache-misses", "cache-references", 100.0, "%"),
    "L1-dcache-load-miss-rate": ("L1-dcache-load-misses", "L1-dcache-loads", 100.0, "%"),
    "LLC-load-miss-rate": ("LLC-load-misses", "LLC-loads", 100.0, "%"),
}
"""Ratios computed from counts: name -> (numerator, denominator, scale, unit)."""

FORMULAS: dict[str, str] = {
    name: f"{numerator} / {denominator}" if scale == 1.0 else f"{scale:g} * {numerator} / {denominator}"
    for name, (numerator, denominator, scale, _unit) in DERIVED.items()
}
"""Each ratio as the formula over perf's events that computes it."""

DEFAULT_METRICS = (
    *TOPDOWN_L1,
    "instructions",
    "cycles",
    "ipc",
    "cache-references",
    "cache-misses",
    "cache-miss-rate",
    "branches",
    "branch-misses",
    "branch-miss-rate",
    "L1-dcache-loads",
    "L1-dcache-load-misses",
    "L1-dcache-load-miss-rate",
    *SOFTWARE_EVENTS,
)
"""The PRAGMA paper's CPU selection: top-down level 1, instructions, cycles, IPC, cache and branch
misses; plus the software events, which are all a machine without a PMU can count."""

MEANINGS: dict[str, str] = {
    # top-down level 1 and 2 (Intel's TMA tree, as perf names it)
    "tma_frontend_bound": "share of pipeline slots the front end left empty: instruction fetch or decode "
    "could not keep up",
    "tma_backend_bound": "share of pipeline slots stalled for lack of back-end resources: waiting on "
    "memory or busy execution units",
    "tma_bad_speculation": "share of pipeline slots wasted on wrongly speculated work: branch "
    "mispredictions and machine clears",
    "tma_retiring": "share of pipeline slots that retired useful micro-ops; high means the work itself takes the time",
    "tma_backend_bound_aux": "backend bound as the E-core (Atom) model accounts it, kept next to tma_backend_bound",
    "tma_memory_bound": "share of slots stalled on the memory hierarchy (cache misses, DRAM latency or bandwidth)",
    "tma_core_bound": "share of slots stalled on the core itself: busy execution ports, dividers, dependency chains",
    "tma_fetch_latency": "share of slots lost to front-end latency: instruction cache and TLB misses, branch resteers",
    "tma_fetch_bandwidth": "share of slots lost to front-end bandwidth: decoders delivering too few micro-ops",
    "tma_branch_mispredicts": "share of slots wasted by branch mispredictions",
    "tma_machine_clears": "share of slots wasted by machine clears (memory ordering conflicts, self-modifying code)",
    "tma_light_operations": "share of slots retiring single-micro-op instructions",
    "tma_heavy_operations": "share of slots retiring instructions of two or more micro-ops or microcode",
    # hardware events
    "instructions": "instructions retired",
    "cycles": "CPU core cycles while the program ran",
    "branches": "branch instructions retired",
    "branch-misses": "mispredicted branch instructions",
    "cache-references": "accesses counted by the CPU's generic cache event (usually last-level cache references)",
    "cache-misses": "accesses that missed the cache of cache-references (usually last-level misses going to memory)",
    "L1-dcache-loads": "loads from the level-1 data cache",
    "L1-dcache-load-misses": "loads that missed the level-1 data cache",
    "LLC-loads": "loads that reached the last-level cache",
    "LLC-load-misses": "loads that missed the last-level cache and went to memory",
    "stalled-cycles-frontend": "cycles in which the front end issued no micro-ops",
    "stalled-cycles-backend": "cycles in which the back end accepted no micro-ops",
    "slots": "pipeline slots (issue width times cycles), the denominator of the top-down shares",
    # derived here from the counts
    "ipc": "instructions retired per cycle (instructions / cycles); low values mean the core stalls",
    "branch-miss-rate": "mispredicted branches as a percentage of all branches",
    "cache-miss-rate": "cache-misses as a percentage of cache-references",
    "L1-dcache-load-miss-rate": "L1 data cache load misses as a percentage of L1 data cache loads",
    "LLC-load-miss-rate": "last-level cache load misses as a percentage of last-level cache loads",
    # software events
    "task-clock": "CPU time the program's threads ran, in milliseconds",
    "cpu-clock": "CPU time measured by the CPU clock timer, in milliseconds",
    "page-faults": "page faults (first touches of memory, copy-on-write, pages read from disk)",
    "context-switches": "times the program's threads were switched off a CPU",
    "cpu-migrations": "times the program's threads moved to another CPU",
}
"""One line per name: what it measures, for the Conductor's prompt."""

_HYBRID = re.compile(r"(?P<pmu>cpu_\w+)/(?P<name>.+)/(?P<mods>\w*)")
_MODIFIERS = re.compile(r":[ukhHGIpPSDWeb]+$")


def base_name(name: str) -> str:
    """``instructions`` for ``cpu_core/instructions/`` or ``instructions:u``; others unchanged."""
    match = _HYBRID.fullmatch(name)
    if match:
        name = match["name"]
    return _MODIFIERS.sub("", name)


def pmu_of(name: str) -> str:
    """``cpu_core`` for ``cpu_core/instructions/``; empty for a name without a hybrid PMU."""
    match = _HYBRID.fullmatch(name)
    return match["pmu"] if match else ""


def meaning_of(name: str) -> str:
    """The one-line meaning of a name, through its PMU prefix and modifiers; empty if unknown."""
    return MEANINGS.get(name) or MEANINGS.get(base_name(name), "")


def needs_hardware(name: str) -> bool:
    """True unless the name is a software event, which any kernel counts without a PMU."""
    return base_name(name) not in (
        *SOFTWARE_EVENTS,
        "cpu-clock",
        "minor-faults",
        "major-faults",
        "alignment-faults",
        "emulation-faults",
        "duration_time",
    )
