"""The size a task is profiled at: smaller than the task's when its data is far above the caches.

A profile shows how a kernel uses the memory hierarchy; data twice the last-level cache
streams from memory as the full size does, and anything more only makes the profile slower
(cachegrind runs the replay 20 to 100 times slower than native). :func:`profiling_size` shrinks a
CPU task whose inputs, outputs and parameters exceed :data:`LLC_MULTIPLE` times this machine's
last-level cache to about that much, with :func:`pragma_core.size_scaling.shrink_task` (outer
dimensions first, the innermost kept). GPU tasks are profiled at their own size.
"""

from __future__ import annotations

from ..hardware import describe_cpu
from ..records import Task
from ..size_scaling import ShrunkTask, format_bytes, shrink_task

__all__ = ["LLC_MULTIPLE", "FALLBACK_LLC_BYTES", "default_working_set_bytes", "profiling_size", "size_note"]

LLC_MULTIPLE = 2
"""Data of one forward this many times the last-level cache streams from memory on every
repetition: from 1.5x a simulated LRU cache (cachegrind) misses every line again (measured); twice
is the rule the verifier's roofline floor uses too, for real caches' adaptive replacement."""

FALLBACK_LLC_BYTES = 32 * 2**20
"""The last-level cache assumed when this machine does not say (a large desktop or server L3)."""


def default_working_set_bytes() -> int:
    """:data:`LLC_MULTIPLE` times this machine's last-level cache (all its L3 instances)."""
    cpu = describe_cpu()
    llc = cpu.l3_total_bytes or cpu.l3_bytes or cpu.l2_bytes or FALLBACK_LLC_BYTES
    return LLC_MULTIPLE * llc


def profiling_size(task: Task, *, device: str = "cpu", working_set_bytes: int | None = None) -> ShrunkTask:
    """The task to profile: ``task`` shrunk to about ``working_set_bytes`` of data (default
    :func:`default_working_set_bytes`) when it holds more, else ``task`` itself."""
    if device != "cpu":
        return ShrunkTask(task=task)
    target = working_set_bytes if working_set_bytes is not None else default_working_set_bytes()
    return shrink_task(task, target)


def size_note(shrunk: ShrunkTask, working_set_bytes: int | None = None) -> str:
    """The profile's note on its size: what was profiled, and that counts are at that size."""
    if shrunk.reduced:
        floor = (
            f", kept at least {format_bytes(working_set_bytes)} so it still streams from memory"
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
