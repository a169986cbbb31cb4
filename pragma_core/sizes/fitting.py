"""Fitting a task to this machine: the sizes at which its eager reference runs in about T ms.

    from pragma_core.sizes.fitting import fit_task

    fitted = fit_task(task, target_ms=50)
    fitted.task      # the task at the fitted sizes: ``task.sizes`` holds them, runs record them
    fitted.sizes     # {"batch_size": 64, "dim": 4096}: the constants changed
    fitted.ms        # the eager reference's median time there, measured on this machine
    fitted.note      # "batch_size=64 (of 4096), dim=4096 (of 65536): reference 47.1 ms (target 50 ms)"

KernelBench sizes target a data-centre GPU (level-1 ReLU allocates 6.4 GB); a CPU user wants them
smaller, in proportion. The constants that scale are those that shape the task's inputs
(:func:`~pragma_core.sizes.shrinking.scaling_constants`: ints alone or inside a tuple, and those that
only change in step with them, as a loss whose targets must match its predictions' batch), and all
are multiplied by one factor, so the ratios between them stay (rounded to the multiple of 2, 4 or 8
each was). The factor is first chosen from the meta-device trace (bytes moved and FLOPs at nominal
CPU rates), then corrected by timing the reference for real, in this process as at load time, with
the verifier's threads: a few rounds, each scaling by the measured ratio to the target along the
measured growth of time with the factor, until the time is within :data:`TOLERANCE` of the target
or the sizes stop changing (a step that rounds onto sizes already timed is replaced by the middle
of the two factors that bracket the target). Sizes whose data would not fit in a quarter of the free memory are never run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ..errors import TaskError
from ..records import Task
from .shrinking import ShapeConstant, at_sizes, current_constants, describe_sizes, scaled_by, scaling_constants

__all__ = ["FittedTask", "fit_task", "TOLERANCE", "ROUNDS"]

TOLERANCE = 1.3
"""A fit is done when the reference's time is within this factor of the target (either way)."""

ROUNDS = 8
"""At most this many sizes are timed."""

_NOMINAL_BYTES_PER_S = 5e9
_NOMINAL_FLOPS_PER_S = 2e10
"""The first guess's rates: a few cores' memory bandwidth and vector throughput. Only the first
size is chosen with them; every later one follows measured times."""

_LARGEST_FACTOR = 64.0
"""A task is never scaled above this multiple of its own sizes."""

_STEEPEST_GROWTH = 6.0
"""The largest power of the factor the time is taken to grow with: a 3-D convolution scales five
constants (batch, channels, depth, height, width), so its time grows with the fifth power or more."""


@attrs.frozen(kw_only=True)
class FittedTask:
    """The outcome of :func:`fit_task`: the task at the fitted sizes and what was measured there."""

    task: Task
    sizes: dict[str, Any] = attrs.field(factory=dict)
    ms: float
    target_ms: float
    note: str = ""


def fit_task(task: Task, target_ms: float, *, threads: int | None = None) -> FittedTask:
    """The task with its input-shaping constants scaled by one factor so its eager reference takes
    about ``target_ms`` on this machine (see the module docstring).

    :param threads: the threads the reference runs with [default: as the verifier decides them, the
        CPUs idle now: all of them on a quiet machine].
    :raises TaskError: the target is not a positive number, the task has no such constants, or it
        fails at every size tried.
    """
    if not (isinstance(target_ms, (int, float)) and math.isfinite(target_ms) and target_ms > 0):
        raise TaskError(f"--fit-ms {target_ms}: give a positive number of milliseconds, such as --fit-ms 50")
    if task.analysis is None:
        raise TaskError(f"{task.path or task.name}: the task was not traced, so its sizes cannot be fitted")
    if threads is None:
        from ..verifier import VerifySettings

        threads = VerifySettings().with_threads()[0].thread_count  # the CPUs idle now, as a verification takes
    own = current_constants(task)
    scaled = scaling_constants(task)
    if not scaled:
        ms = _reference_ms(task, threads)
        note = f"the task has no constant that sizes its inputs; it runs at its own sizes ({ms:.3g} ms)"
        return FittedTask(task=task, ms=ms, target_ms=target_ms, note=note)
    largest = _largest_bytes()
    factor = _first_guess(task, scaled, own, target_ms, largest)
    tried: dict[str, tuple[float, Task, float]] = {}  # the sizes' text -> (factor, task, ms)
    for _round in range(ROUNDS):
        sizes = scaled_by(scaled, factor, own)
        key = repr(sorted(sizes.items()))
        if key in tried:  # rounded onto sizes already timed: try between the two that bracket the target
            middle = _between(list(tried.values()), target_ms)
            if middle is None:
                break
            factor = middle
            sizes = scaled_by(scaled, factor, own)
            key = repr(sorted(sizes.items()))
            if key in tried:
                break
        resized = at_sizes(task, sizes)
        if resized is None or resized.analysis is None:
            factor = math.sqrt(factor)  # a size the task rejects is too small (a kernel larger than its input)
            continue
        if resized.analysis.min_bytes > largest:
            factor /= 2
            continue
        try:
            ms = _reference_ms(resized, threads)
        except TaskError:
            factor = math.sqrt(factor)
            continue
        tried[key] = (factor, resized, ms)
        if 1 / TOLERANCE <= ms / target_ms <= TOLERANCE:
            break
        factor = _next_factor(list(tried.values()), target_ms, largest_factor=_LARGEST_FACTOR)
    if not tried:
        raise TaskError(
            f"{task.path or task.name}: no size tried for --fit-ms {target_ms:g} ran; give sizes with --set"
        )
    _factor, best, ms = min(tried.values(), key=lambda entry: abs(math.log(entry[2] / target_ms)))
    changed = {name: value for name, value in best.sizes.items() if task.sizes.get(name, own.get(name)) != value}
    of = describe_sizes(changed, own) or "its own sizes"
    note = f"{of}: reference {ms:.3g} ms (target {target_ms:g} ms, {len(tried)} sizes timed)"
    return FittedTask(task=best, sizes=changed, ms=ms, target_ms=target_ms, note=note)


def _first_guess(
    task: Task, constants: Sequence[ShapeConstant], own: Mapping[str, Any], target_ms: float, largest: int
) -> float:
    """The factor at which the meta trace's bytes and FLOPs at nominal rates take ``target_ms``
    (a bisection on the factor's logarithm; sizes the task rejects count as too large)."""

    def estimate_ms(factor: float) -> float:
        resized = at_sizes(task, scaled_by(constants, factor, own))
        if resized is None or resized.analysis is None:
            return 0.0 if factor < 1 else math.inf  # rejected: too small below the task's own sizes
        if resized.analysis.min_bytes > largest:
            return math.inf
        analysis = resized.analysis
        return 1e3 * (analysis.min_bytes / _NOMINAL_BYTES_PER_S + analysis.flops / _NOMINAL_FLOPS_PER_S)

    low, high = math.log(1e-4), math.log(_LARGEST_FACTOR)
    for _ in range(14):
        middle = (low + high) / 2
        if estimate_ms(math.exp(middle)) > target_ms:
            high = middle
        else:
            low = middle
    return math.exp(low)


def _next_factor(tried: list[tuple[float, Task, float]], target_ms: float, *, largest_factor: float) -> float:
    """The factor the measurements so far point to: the last one scaled by the ratio to the target,
    along the growth of time with the factor measured between the last two (a power from 1/2 to
    :data:`_STEEPEST_GROWTH`; 2 before there are two)."""
    factor, _task, ms = tried[-1]
    growth = 2.0
    if len(tried) >= 2:
        previous_factor, _previous, previous_ms = tried[-2]
        if previous_factor != factor and previous_ms > 0 and ms > 0:
            growth = min(_STEEPEST_GROWTH, max(0.5, math.log(ms / previous_ms) / math.log(factor / previous_factor)))
    step = (target_ms / max(ms, 1e-6)) ** (1 / growth)
    return min(largest_factor, factor * min(32.0, max(1 / 32, step)))


def _between(tried: list[tuple[float, Task, float]], target_ms: float) -> float | None:
    """The geometric middle of the largest factor timed under the target and the smallest timed
    over it, or None while the target is not bracketed. Sizes rounded to their multiples of 8 make a
    coarse grid: a 3-D convolution's five constants at 0.25 and 0.5 of their own ran 7 ms and 218 ms,
    and the step between them rounded back onto the first."""
    under = [factor for factor, _task, ms in tried if ms < target_ms]
    over = [factor for factor, _task, ms in tried if ms > target_ms]
    if not under or not over:
        return None
    return math.sqrt(max(under) * min(over))


def _reference_ms(task: Task, threads: int) -> float:
    """The median of a few timed forwards of the eager reference, as a run's baseline is timed."""
    from ..verifier import VerifySettings
    from ..verifier.reference import reference_timing

    try:
        return reference_timing(task, VerifySettings(threads=threads, warmup=1, reps=5)).median_ms
    except Exception as error:  # noqa: BLE001 - the task's own failure at these sizes
        raise TaskError(f"{task.path or task.name}: the reference failed at {task.sizes}: {error}") from None


def _largest_bytes() -> int:
    """A quarter of the memory free now (from /proc/meminfo; 4 GiB where it is not readable)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 // 4
    except (OSError, ValueError, IndexError):
        pass
    return 4 * 2**30
