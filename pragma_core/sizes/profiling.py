"""The size a task is profiled at, and the caches a simulating profiler describes.

A profile shows how a kernel uses the memory hierarchy; data twice the last-level cache streams
through it as the full size does, and anything more only makes the profile slower (cachegrind
runs the replay 20 to 100 times slower than native). :func:`profiling_task` shrinks a CPU task
whose inputs, outputs and parameters exceed :data:`LLC_MULTIPLE` times the last level the
profiler sees to about that much, with :func:`pragma_core.sizes.shrinking.shrink_task` (outer
dimensions first, the innermost kept). That last level is the profiler's own choice of kind:

- a profiler that counts this machine's events (perf) sees this machine's caches, so its
  target is twice all of this machine's L3 (:func:`machine_working_set_bytes`);
- a cache simulator (a deterministic profiler: cachegrind) simulates the caches of
  :func:`~pragma_core.sizes.caches.simulated_caches`, this machine's L1 and, as its last level, this machine's L2, one
  core's own; its target is twice that (:func:`simulated_working_set_bytes`). It never sees the
  shared L3, so the replay it runs 20 to 100 times slower than native stays small.

A shrunk task keeps most of its FLOPs per byte (a matrix product's tiles show other miss rates at
a lower ratio, :func:`~pragma_core.sizes.shrinking.shrink_task`), which can hold a product or a
convolution near its full size; for a simulator that would cost minutes per profile, so past
:data:`SIMULATED_FLOPS_BUDGET` the ratio gives way and the task shrinks to the bytes target alone.

GPU tasks are profiled at their own size.
"""

from __future__ import annotations

import attrs

from ..machine.hardware import describe_cpu
from ..plugin_api.components import Profiler
from ..records import Task
from .caches import simulated_caches
from .shrinking import ShrunkTask, format_bytes, shrink_task

__all__ = [
    "LLC_MULTIPLE",
    "SIMULATED_FLOPS_BUDGET",
    "FALLBACK_LLC_BYTES",
    "machine_working_set_bytes",
    "simulated_working_set_bytes",
    "profiler_working_set_bytes",
    "profiling_size",
    "profiling_task",
    "size_note",
]

LLC_MULTIPLE = 2
"""Data of one forward this many times the last-level cache streams through it on every
repetition: from 1.5x a simulated LRU cache (cachegrind) misses every line again (measured); twice
is the rule the verifier's roofline floor uses too, for real caches' adaptive replacement."""

SIMULATED_FLOPS_BUDGET = 500_000_000
"""The most FLOPs a simulated profile replays to keep a task's FLOPs per byte: cachegrind replayed the
level-1 square product at N = 1336 (4.8 GFLOP, the least size keeping 90% of its ratio) in 82 s per
attempt, 95% of the loop's time, on a 2-core Xeon (2026-12-02); at that rate half a GFLOP takes
about 9 s."""

FALLBACK_LLC_BYTES = 32 * 2**20
"""The last-level cache assumed when this machine does not say (a large desktop or server L3)."""


def machine_working_set_bytes() -> int:
    """:data:`LLC_MULTIPLE` times this machine's last-level cache (all its L3 instances)."""
    cpu = describe_cpu()
    llc = cpu.l3_total_bytes or cpu.l3_bytes or cpu.l2_bytes or FALLBACK_LLC_BYTES
    return LLC_MULTIPLE * llc


def simulated_working_set_bytes() -> int:
    """:data:`LLC_MULTIPLE` times the simulated last level (:func:`simulated_caches`)."""
    return LLC_MULTIPLE * simulated_caches().ll.size_bytes


def profiler_working_set_bytes(profiler: Profiler) -> int:
    """The data a CPU task is shrunk to for ``profiler``: twice the last level it sees, simulated
    for a deterministic profiler (a simulator such as cachegrind), this machine's for the others."""
    return simulated_working_set_bytes() if profiler.deterministic else machine_working_set_bytes()


def profiling_size(task: Task, *, device: str = "cpu", working_set_bytes: int | None = None) -> ShrunkTask:
    """The task to profile: ``task`` shrunk to about ``working_set_bytes`` of data (default
    :func:`machine_working_set_bytes`) when it holds more, else ``task`` itself."""
    if device != "cpu":
        return ShrunkTask(task=task)
    target = working_set_bytes if working_set_bytes is not None else machine_working_set_bytes()
    return shrink_task(task, target)


def profiling_task(
    task: Task,
    profiler: Profiler,
    *,
    full_size: bool = False,
    working_set_bytes: int | None = None,
    flops_budget: int = SIMULATED_FLOPS_BUDGET,
) -> ShrunkTask:
    """The task ``profiler`` profiles: ``task`` shrunk to ``working_set_bytes`` of data (default
    :func:`profiler_working_set_bytes`) when it holds more, for a simulator below ``flops_budget``
    where keeping the FLOPs per byte would not; ``task`` itself for a GPU profiler or with
    ``full_size``. The same task and profiler always give the same sizes; a run derives them once (:class:`~pragma_core.profiling.session.ProfilingSession`), and its
    verifier records the candidate's kernel calls ahead at the sizes its profiles will use."""
    device = profiler.devices[0]
    if full_size or device != "cpu":
        return ShrunkTask(task=task)
    target = working_set_bytes if working_set_bytes is not None else profiler_working_set_bytes(profiler)
    shrunk = profiling_size(task, device=device, working_set_bytes=target)
    if not profiler.deterministic or _flops(shrunk.task) <= flops_budget:
        return shrunk
    lighter = shrink_task(task, target, intensity_kept=0.0)  # the bytes target alone
    if _flops(lighter.task) >= _flops(shrunk.task):
        return shrunk
    kept = f"{_flops(shrunk.task) / 1e9:.2g} GFLOP"
    why = f"; FLOPs per byte not kept: the size keeping them would replay {kept} in the simulator (minutes)"
    return attrs.evolve(lighter, note=lighter.note + why)


def _flops(task: Task) -> int:
    return task.analysis.flops if task.analysis is not None else 0


def size_note(shrunk: ShrunkTask, working_set_bytes: int | None = None, *, simulated: bool | None = None) -> str:
    """The profile's note on its size: what was profiled, and that counts are at that size.
    ``simulated`` says whose last level the target is twice of: the simulated one (True), this
    machine's (False), or neither (None: a target the caller chose)."""
    if shrunk.reduced:
        level = {True: " (2x the simulated last-level cache)", False: " (2x this machine's last-level cache)", None: ""}
        floor = (
            f", kept at least {format_bytes(working_set_bytes)}{level[simulated]} so it still streams "
            "through the last level"
            if working_set_bytes
            else ""
        )
        return (
            f"profiled at a reduced size, {shrunk.note}{floor}; counts are per forward at this size, "
            "rates (miss rates, IPC) compare with the full size"
        )
    if shrunk.note:
        return f"profiled at the task's full size: {shrunk.note}"
    return ""
