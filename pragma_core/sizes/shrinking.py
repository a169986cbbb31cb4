"""Shrinking a task's size constants so one forward touches less data, keeping its shape rules.

    from pragma_core.sizes.shrinking import shrink_task

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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ..records import Task
from ..tasks.loading import size_constants, task_namespace

__all__ = [
    "MIN_VALUE",
    "MIN_INTENSITY_KEPT",
    "ShapeConstant",
    "ShrunkTask",
    "shape_constants",
    "int_constants",
    "current_constants",
    "at_sizes",
    "scaling_constants",
    "scaled_by",
    "describe_sizes",
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
    """A module-level int constant that sizes the task's inputs (or one int of a tuple or list
    constant, ``input_shape = (4096,)``: ``index`` is its position): which axes, and whether innermost."""

    name: str
    value: int
    outermost_axis: int
    innermost: bool
    index: int | None = None

    @property
    def label(self) -> str:
        """``batch_size``, or ``input_shape[0]``."""
        return self.name if self.index is None else f"{self.name}[{self.index}]"

    def set_to(self, value: int, sizes: Mapping[str, Any], constants: Mapping[str, Any]) -> dict[str, Any]:
        """The override giving this constant ``value`` on top of ``sizes`` (``constants``: the task's own)."""
        if self.index is None:
            return {self.name: value}
        whole = list(sizes.get(self.name, constants[self.name]))
        whole[self.index] = value
        return {self.name: type(constants[self.name])(whole)}


@attrs.frozen(kw_only=True)
class ShrunkTask:
    """The outcome of :func:`shrink_task`.

    ``task`` runs at the new sizes (its ``sizes`` hold the task's own overrides plus ``sizes``);
    ``sizes`` are only the constants changed. ``full_bytes`` and ``bytes`` are the data of one
    forward at the task's sizes and at the new ones; ``note`` says what was done, or why nothing was.
    """

    task: Task
    sizes: dict[str, Any] = attrs.field(factory=dict)
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
    constants = current_constants(task)
    found = []
    for candidate in int_constants(constants):
        trial = _traced(task, candidate.set_to(candidate.value // 2, {}, constants))
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
            found.append(attrs.evolve(candidate, outermost_axis=min(axes), innermost=innermost))
    return sorted(found, key=lambda constant: (constant.innermost, constant.outermost_axis))


def int_constants(constants: Mapping[str, Any]) -> list[ShapeConstant]:
    """Every int of at least 2 among the constants, alone or in a tuple or list (axes not yet known)."""
    found = []
    for name, value in constants.items():
        if isinstance(value, int) and not isinstance(value, bool) and value >= 2:
            found.append(ShapeConstant(name=name, value=value, outermost_axis=0, innermost=False))
        elif isinstance(value, (tuple, list)):
            found += [
                ShapeConstant(name=name, value=item, outermost_axis=0, innermost=False, index=index)
                for index, item in enumerate(value)
                if isinstance(item, int) and not isinstance(item, bool) and item >= 2
            ]
    return found


def scaling_constants(task: Task) -> list[ShapeConstant]:
    """The constants to scale by one factor: the shape constants, and when those cannot change on
    their own (or there are none), also the ints that fail alone but change the inputs together
    with them. :func:`~pragma_core.sizes.fitting.fit_task` scales these; :func:`shrink_task` does when
    no constant shrinks alone."""
    shaping = shape_constants(task)
    own = current_constants(task)
    if shaping and _traced(task, scaled_by(shaping, 0.5, own)) is not None:
        return shaping
    labels = {constant.label for constant in shaping}
    failing_alone = [
        constant
        for constant in int_constants(own)
        if constant.label not in labels and _traced(task, constant.set_to(constant.value // 2, {}, own)) is None
    ]
    together = [*shaping, *failing_alone]
    trial = _traced(task, scaled_by(together, 0.5, own))
    if not failing_alone or trial is None or trial.analysis is None or task.analysis is None:
        return shaping
    if [spec.shape for spec in trial.analysis.inputs] == [spec.shape for spec in task.analysis.inputs]:
        return shaping
    return together


def scaled_by(constants: Sequence[ShapeConstant], factor: float, own: Mapping[str, Any]) -> dict[str, Any]:
    """Every constant times ``factor``, on the multiple of 2, 4 or 8 it was (at least 1)."""
    sizes: dict[str, Any] = {}
    for constant in constants:
        step = math.gcd(constant.value, MIN_VALUE)
        wanted = constant.value * factor
        value = max(step, round(wanted / step) * step) if wanted >= step else max(1, round(wanted))
        sizes.update(constant.set_to(value, sizes, own))
    return sizes


def shrink_task(task: Task, target_bytes: int, *, intensity_kept: float = MIN_INTENSITY_KEPT) -> ShrunkTask:
    """The task at the smallest sizes along the rule (module docstring) whose data is still at least
    ``target_bytes``; the task itself when its data is not above ``target_bytes`` or cannot shrink.
    ``intensity_kept``: the share of FLOPs per byte kept (0: any, for a size only checked for correctness)."""
    if task.analysis is None:
        return ShrunkTask(task=task, note="the task's data size is unknown (it was not traced), so it is not shrunk")
    full = task.analysis.min_bytes
    if full <= target_bytes:
        return ShrunkTask(task=task, full_bytes=full, bytes=full)
    constants = shape_constants(task)
    own = current_constants(task)
    if not constants:
        together = scaling_constants(task)
        if together:
            return _shrunk_together(task, together, own, target_bytes)
        return ShrunkTask(
            task=task,
            full_bytes=full,
            bytes=full,
            note="the task has no module-level int constant that sizes its inputs, so it runs at its own size",
        )
    changed: dict[str, Any] = {}
    current, current_bytes = task, full
    met = False
    least_intensity = intensity_kept * _intensity(task)
    held: list[str] = []  # constants whose shrinking FLOPs per byte stopped: at their floor for this rule
    for constant in constants:
        floor = min(constant.value, MIN_VALUE)
        value, smaller, by_intensity = _smallest_above(current, changed, constant, floor, target_bytes, least_intensity)
        if value < constant.value and smaller is not None and smaller.analysis is not None:
            changed.update(constant.set_to(value, changed, own))
            current, current_bytes = smaller, smaller.analysis.min_bytes
        if by_intensity:
            held.append(constant.label)
        elif value > floor:
            met = True  # as close to the target as this constant's step allows: the next ones keep theirs
            break
    kept = (
        f"; {', '.join(held)} not smaller: FLOPs per byte would fall below {intensity_kept:.0%} of the "
        "full size's, and a kernel that reuses data (tiles of a matrix product) would show other miss rates"
        if held
        else ""
    )
    if not changed and held:
        return ShrunkTask(task=task, full_bytes=full, bytes=full, note=f"the task runs at its own size{kept}")
    if not changed and met:
        return ShrunkTask(task=task, full_bytes=full, bytes=full)  # within one step of the target already
    if not changed:
        names = ", ".join(constant.label for constant in constants)
        return ShrunkTask(
            task=task,
            full_bytes=full,
            bytes=full,
            note=f"the task's shape constants ({names}) could not be made smaller, so it runs at its own size",
        )
    of = describe_sizes(changed, own)
    return ShrunkTask(
        task=current,
        sizes=changed,
        full_bytes=full,
        bytes=current_bytes,
        note=f"{of}: inputs+outputs {format_bytes(current_bytes)} of {format_bytes(full)}{kept}",
    )


def _shrunk_together(
    task: Task, constants: list[ShapeConstant], own: Mapping[str, Any], target_bytes: int
) -> ShrunkTask:
    """Constants that change only together (see :func:`scaling_constants`), all scaled by the least
    factor at which the data is still at least ``target_bytes`` (a bisection on the factor)."""
    assert task.analysis is not None
    full = task.analysis.min_bytes
    low, high = 0.0, 1.0
    best: Task | None = None
    for _ in range(20):
        middle = (low + high) / 2
        trial = _traced(task, scaled_by(constants, middle, own))
        if trial is not None and trial.analysis is not None and trial.analysis.min_bytes >= target_bytes:
            best, high = trial, middle
        else:
            low = middle
    if best is None or best.analysis is None:
        return ShrunkTask(task=task, full_bytes=full, bytes=full, note="the task's sizes could not be made smaller")
    changed = {name: value for name, value in best.sizes.items() if own.get(name) != value and name in own}
    of = describe_sizes(changed, own)
    note = f"{of}, scaled together: inputs+outputs {format_bytes(best.analysis.min_bytes)} of {format_bytes(full)}"
    return ShrunkTask(task=best, sizes=changed, full_bytes=full, bytes=best.analysis.min_bytes, note=note)


def describe_sizes(changed: Mapping[str, Any], own: Mapping[str, Any]) -> str:
    """``batch_size=8 (of 4096), input_shape=(64,) (of (32768,))``: for notes."""
    return ", ".join(f"{name}={value!r} (of {own[name]!r})" for name, value in changed.items())


def _intensity(task: Task) -> float:
    """FLOPs per byte of data (0 when torch counts no FLOPs for the task: no matrix product nor convolution)."""
    if task.analysis is None or not task.analysis.min_bytes:
        return 0.0
    return task.analysis.flops / task.analysis.min_bytes


def _smallest_above(
    task: Task,
    changed: Mapping[str, Any],
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
        trial = _traced(task, {**changed, **constant.set_to(middle * step, changed, current_constants(task))})
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


def at_sizes(task: Task, sizes: Mapping[str, Any]) -> Task | None:
    """``task`` with ``sizes`` (a :attr:`ShrunkTask.sizes`, or a profile's) applied on top of its
    own overrides and traced again: what a profile taken at those sizes ran. None when the task
    fails at those sizes; ``task`` itself for no sizes."""
    return _traced(task, sizes) if sizes else task


def current_constants(task: Task) -> dict[str, Any]:
    """The task's size constants with its overrides applied."""
    return {**size_constants(task.source), **task.sizes}


def _traced(task: Task, sizes: Mapping[str, Any]) -> Task | None:
    """``task`` with ``sizes`` applied on top of its own overrides, traced again; None when it fails
    at those sizes (a task may reject a size, as a convolution smaller than its kernel does)."""
    from ..tasks.analysis import analyze_task_module  # imports torch

    resized = attrs.evolve(task, sizes={**task.sizes, **sizes}, analysis=None)
    try:
        namespace = task_namespace(resized)
        analysis = analyze_task_module(
            namespace,
            task.path or Path(f"{task.name}.py"),
            meta_only=task.analysis is not None and task.analysis.traced_on == "meta",
        )
    except Exception:  # noqa: BLE001 - the task's own error at these sizes: they are not usable
        return None
    return attrs.evolve(resized, analysis=analysis)
