"""Shrinking a task's size constants so one forward touches less data, keeping its shape rules.

    from pragma_core.size_scaling import shrink_task

    smaller = shrink_task(task, target_bytes=64 * 2**20)
    smaller.task          # the task at the new sizes (analysis included), or ``task`` itself
    smaller.sizes         # {"batch_size": 256}: the constants changed, with their new values
    smaller.note          # "batch_size=256 (of 1024): inputs+outputs 64 MiB of 256 MiB"

A task's data is what its forward reads and writes (``TaskAnalysis.min_bytes``: inputs, outputs,
parameters). Which module-level constants shape it is found by trying: each int constant is
halved on its own and the task traced again on the meta device (a few milliseconds); a constant
that changes an input's shape is a *shape constant*. The rule shrinks the outermost first: shape
constants that never size the last (innermost) axis of an input of two or more dimensions go first, ordered by the outermost
axis they size (the batch before channels before rows), and those sizing an innermost axis (the
row length a reduction or a normalization runs over) only when the others are at their floor. Each
is set to the smallest value, not below :data:`MIN_VALUE`, at which the data is still at least
``target_bytes`` (a binary search, tracing each size tried; in steps of 2, 4 or 8 when the value
was a multiple of them, so a batch of 1024 becomes 128, not 127); the next constant is shrunk only
when one stopped at its floor, so the ratios of the constants not reached stay as they were. A size the task rejects (a convolution smaller than its kernel)
counts as too small. Tasks whose data cannot be changed this way come back unchanged, with
:attr:`ShrunkTask.note` saying why.

A size must also keep the task's FLOPs per byte (``TaskAnalysis.flops``, which torch counts for
matrix products and convolutions) at :data:`MIN_INTENSITY_KEPT` of the full size's. Those are the
kernels that reuse what they load (a tile of B serves every row of A), and their reuse per byte is
what their miss rates show: a matrix product shrunk to 8 rows reads each element of B for 8 rows
instead of 1024, and its blocked kernel's last-level miss rate rose tenfold under cachegrind
(measured). Shrinking a batch keeps the ratio; shrinking a matrix's rows does not, so such a
constant stops where the ratio would fall below that, counts as at its floor (the next constant
may shrink), and the note says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import attrs

from .errors import PragmaError
from .records import Task
from .tasks import size_constants, task_namespace

__all__ = [
    "MIN_VALUE",
    "MIN_INTENSITY_KEPT",
    "ShapeConstant",
    "ShrunkTask",
    "shape_constants",
    "shrink_task",
    "format_bytes",
]

MIN_VALUE = 8
"""The least a shape constant is shrunk to (or its own value, when smaller): a batch of 8 rows
still gives every thread of a small machine work, and loops keep more than one trip."""

MIN_INTENSITY_KEPT = 0.9
"""The least share of the full size's FLOPs per byte a smaller size keeps (see the module docstring)."""


@attrs.frozen(kw_only=True)
class ShapeConstant:
    """A module-level int constant that sizes the task's inputs: which axes, and whether innermost."""

    name: str
    value: int
    outermost_axis: int
    innermost: bool


@attrs.frozen(kw_only=True)
class ShrunkTask:
    """The outcome of :func:`shrink_task`.

    ``task`` runs at the new sizes (its ``sizes`` hold the task's own overrides plus ``sizes``);
    ``sizes`` are only the constants changed. ``full_bytes`` and ``bytes`` are the data of one
    forward at the task's sizes and at the new ones; ``note`` says what was done, or why nothing was.
    """

    task: Task
    sizes: dict[str, int | float] = attrs.field(factory=dict)
    full_bytes: int | None = None
    bytes: int | None = None
    note: str = ""

    @property
    def reduced(self) -> bool:
        return bool(self.sizes)


def format_bytes(count: int) -> str:
    """``64 MiB``, ``1.5 GiB``, ``512 KiB``: for notes."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.3g} {unit}" if unit != "B" else f"{count} B"
        value /= 1024
    raise AssertionError("unreachable")


def shape_constants(task: Task) -> list[ShapeConstant]:
    """The task's int constants that shape its inputs, in the order :func:`shrink_task` shrinks them."""
    if task.analysis is None:
        return []
    base = [spec.shape for spec in task.analysis.inputs]
    found = []
    for name, value in _current_constants(task).items():
        if not isinstance(value, int) or value < 2:
            continue
        trial = _traced(task, {name: value // 2})
        if trial is None or trial.analysis is None or len(trial.analysis.inputs) != len(base):
            continue
        axes = []
        innermost = False
        for before, after in zip(base, (spec.shape for spec in trial.analysis.inputs)):
            if len(before) != len(after):
                continue
            changed = [axis for axis, (a, b) in enumerate(zip(before, after)) if a != b]
            axes += changed
            # The last axis of a matrix or more: the row a kernel runs along. A vector's one axis is not.
            innermost = innermost or (len(before) > 1 and len(before) - 1 in changed)
        if axes:
            found.append(ShapeConstant(name=name, value=value, outermost_axis=min(axes), innermost=innermost))
    return sorted(found, key=lambda constant: (constant.innermost, constant.outermost_axis))


def shrink_task(task: Task, target_bytes: int) -> ShrunkTask:
    """The task at the smallest sizes along the rule (module docstring) whose data is still at least
    ``target_bytes``; the task itself when its data is not above ``target_bytes`` or cannot shrink."""
    if task.analysis is None:
        return ShrunkTask(task=task, note="the task's data size is unknown (it was not traced), so it is not shrunk")
    full = task.analysis.min_bytes
    if full <= target_bytes:
        return ShrunkTask(task=task, full_bytes=full, bytes=full)
    constants = shape_constants(task)
    if not constants:
        return ShrunkTask(
            task=task,
            full_bytes=full,
            bytes=full,
            note="the task has no module-level int constant that sizes its inputs, so it runs at its own size",
        )
    changed: dict[str, int | float] = {}
    current, current_bytes = task, full
    met = False
    least_intensity = MIN_INTENSITY_KEPT * _intensity(task)
    held: list[str] = []  # constants whose shrinking FLOPs per byte stopped: at their floor for this rule
    for constant in constants:
        floor = min(constant.value, MIN_VALUE)
        value, smaller, by_intensity = _smallest_above(current, changed, constant, floor, target_bytes, least_intensity)
        if value < constant.value and smaller is not None and smaller.analysis is not None:
            changed[constant.name] = value
            current, current_bytes = smaller, smaller.analysis.min_bytes
        if by_intensity:
            held.append(constant.name)
        elif value > floor:
            met = True  # as close to the target as this constant's step allows: the next ones keep theirs
            break
    kept = (
        f"; {', '.join(held)} not smaller: FLOPs per byte would fall below {MIN_INTENSITY_KEPT:.0%} of the "
        "full size's, and a kernel that reuses data (tiles of a matrix product) would show other miss rates"
        if held
        else ""
    )
    if not changed and held:
        return ShrunkTask(task=task, full_bytes=full, bytes=full, note=f"the task runs at its own size{kept}")
    if not changed and met:
        return ShrunkTask(task=task, full_bytes=full, bytes=full)  # within one step of the target already
    if not changed:
        names = ", ".join(constant.name for constant in constants)
        return ShrunkTask(
            task=task,
            full_bytes=full,
            bytes=full,
            note=f"the task's shape constants ({names}) could not be made smaller, so it runs at its own size",
        )
    of = ", ".join(f"{name}={value} (of {_current_constants(task)[name]})" for name, value in changed.items())
    return ShrunkTask(
        task=current,
        sizes=changed,
        full_bytes=full,
        bytes=current_bytes,
        note=f"{of}: inputs+outputs {format_bytes(current_bytes)} of {format_bytes(full)}{kept}",
    )


def _intensity(task: Task) -> float:
    """FLOPs per byte of data (0 when torch counts no FLOPs for the task: no matrix product nor convolution)."""
    if task.analysis is None or not task.analysis.min_bytes:
        return 0.0
    return task.analysis.flops / task.analysis.min_bytes


def _smallest_above(
    task: Task,
    changed: Mapping[str, int | float],
    constant: ShapeConstant,
    floor: int,
    target_bytes: int,
    least_intensity: float = 0.0,
) -> tuple[int, Task | None, bool]:
    """The least value in [floor, constant.value] at which the data is still >= target_bytes and
    the FLOPs per byte >= least_intensity (the constant's own value when none is smaller), with the
    task there (None for the constant's own value), and whether the FLOPs per byte decided it.
    Data and FLOPs per byte are taken to grow with the constant; a size the task rejects counts as
    too small."""
    step = math.gcd(constant.value, MIN_VALUE)  # keep what divisibility by 2, 4 or 8 the value had
    low, high = -(-floor // step), constant.value // step
    best: tuple[int, Task | None] = (constant.value, None)
    by_intensity = False
    while low <= high:
        middle = (low + high) // 2
        trial = _traced(task, {**changed, constant.name: middle * step})
        if trial is None or trial.analysis is None:
            low = middle + 1
            continue
        large_enough = trial.analysis.min_bytes >= target_bytes
        if large_enough and _intensity(trial) >= least_intensity * (1 - 1e-9):  # a ratio on the line passes
            best = (middle * step, trial)
            high = middle - 1
        else:
            by_intensity = by_intensity or large_enough  # data enough, reuse per byte not
            low = middle + 1
    return (*best, by_intensity)


def at_sizes(task: Task, sizes: Mapping[str, int | float]) -> Task | None:
    """``task`` with ``sizes`` (a :attr:`ShrunkTask.sizes`, or a profile's) applied on top of its
    own overrides and traced again: what a profile taken at those sizes ran. None when the task
    fails at those sizes; ``task`` itself for no sizes."""
    return _traced(task, sizes) if sizes else task


def _current_constants(task: Task) -> dict[str, int | float]:
    return {**size_constants(task.source), **task.sizes}


def _traced(task: Task, sizes: Mapping[str, int | float]) -> Task | None:
    """``task`` with ``sizes`` applied on top of its own overrides, traced again; None when it fails
    at those sizes (a task may reject a size, as a convolution smaller than its kernel does)."""
    from .task_analysis import analyze_task_module  # imports torch

    resized = attrs.evolve(task, sizes={**task.sizes, **sizes}, analysis=None)
    try:
        namespace = task_namespace(resized)
        analysis = analyze_task_module(namespace, task.path or Path(f"{task.name}.py"))
    except PragmaError:
        return None
    return attrs.evolve(resized, analysis=analysis)
