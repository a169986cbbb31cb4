"""The recipe Coder: answers a Coder request with a generated module, as a model would (prose and
one fenced block).

Attempt 1 is the family's best-known shape on a multicore CPU (each knob's ``start``: parallel and
vectorized, with the accumulators or tiles the family calls for), with the task's own starting
shape over it where its recipe chose one from the shapes (a convolution's method). Later attempts
apply the moves in the Conductor's last actions (``set simd=true (from attempt 3): ...``) to the
knobs of the attempt they name, else of the best so far, else (when no attempt was correct) of
the plain version: serial and scalar, the simplest code that can be right. In a tree or beam
search the request names a parent and one instruction of its plan: that move, applied to the
parent's knobs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from ..backends import DEFAULT_BACKEND
from ..records import Attempt, CompletionRequest, Task
from ..tasks.loading import task_program
from .graph import NotRecognized, OpGraph, trace_reference
from .knobs import defaults, knobs_of, parse_moves, starting
from .recipe import GenerationContext, Knob, Match, Recipe
from .recipes import recognize

__all__ = [
    "recognized",
    "write_module_reply",
    "check_backend",
    "backend_knobs",
    "first_knobs",
    "generate_module",
    "attempt_numbered",
    "OFFLINE_BACKENDS",
]

OFFLINE_BACKENDS = (DEFAULT_BACKEND, "triton")
"""The backends the recipe Coder writes for: C++ for the CPU, Triton for a GPU (or its interpreter)."""


def recognized(task: Task) -> tuple[Recipe, Match, OpGraph]:
    """The recipe and match for a task (traced once per task program); raises
    :class:`~pragma_core.offline.graph.NotRecognized` when no recipe knows it."""
    key = hashlib.sha256(task_program(task).encode()).hexdigest()
    if key not in _RECOGNIZED:
        try:
            graph = trace_reference(task)
            recipe, match = recognize(graph)
        except NotRecognized as error:
            raise NotRecognized(
                f"{task.key}: no offline recipe knows this task ({error}); a language model is "
                "needed (see docs/models.md)"
            ) from None
        _RECOGNIZED[key] = (recipe, match, graph)
    return _RECOGNIZED[key]


_RECOGNIZED: dict[str, tuple[Recipe, Match, OpGraph]] = {}


def check_backend(task: Task, backend: str) -> None:
    """Raise :class:`NotRecognized` unless the recipe Coder can write ``task`` for ``backend``."""
    if backend not in OFFLINE_BACKENDS:
        raise NotRecognized(
            f"the offline recipes write for {' and '.join(OFFLINE_BACKENDS)}, not {backend}; a language model is "
            "needed (see docs/models.md)"
        )
    recipe, match, _graph = recognized(task)
    if backend == "triton":
        from .triton import TRITON_KNOBS

        if recipe.family not in TRITON_KNOBS:
            raise NotRecognized(
                f"{task.key}: the offline Triton recipes cover {', '.join(sorted(TRITON_KNOBS))}, not "
                f"{recipe.family} ({match.summary}); use --backend cpu-cpp, or a language model"
            )


def write_module_reply(request: CompletionRequest) -> str:
    """The Coder's reply text for this request."""
    task = request.task
    if task is None:
        raise NotRecognized("the offline Coder needs the task in the request")
    backend = request.backend or DEFAULT_BACKEND
    recipe, match, _graph = recognized(task)
    family_knobs = backend_knobs(task, backend)
    if request.instruction is not None:  # tree or beam search: one planned change to the parent
        last = request.parent
        changes, _ = parse_moves((request.instruction,), family_knobs)
        base = request.parent
    else:
        last = request.history[-1] if request.history else None
        changes, base_number = parse_moves(last.guidance.actions if last and last.guidance else (), family_knobs)
        base = attempt_numbered(request.history, base_number) or request.best
    first = first_knobs(family_knobs, match, backend) if not request.history else defaults(family_knobs)
    base_knobs = knobs_of(base, recipe.family, family_knobs) or first
    knobs = {**base_knobs, **changes}
    source = generate_module(task, backend, knobs)
    setting = ", ".join(f"{name}={value}" for name, value in knobs.items())
    if last is None:
        opening = (
            f"Recognized {match.summary} (recipe family {recipe.family}). The family's best-known shape "
            f"{'in Triton' if backend == 'triton' else 'on a multicore CPU'} first: {setting}."
        )
    elif changes:
        moved = ", ".join(f"{name}={value}" for name, value in changes.items())
        origin = f"attempt {base.number}" if base is not None else "the plain version"
        opening = f"From {origin}, as the Conductor advised: {moved}. All knobs: {setting}."
    else:
        opening = f"The Conductor named no knob to change; the best version again: {setting}."
    return f"{opening}\n\n```python\n{source.rstrip()}\n```\n"


def first_knobs(family_knobs: Mapping[str, Knob], match: Match, backend: str) -> dict[str, Any]:
    """The knobs of a first attempt: the family's start, with the task's own starting shape
    (``match.start``) over it for the C++ backend."""
    if backend == "triton":
        return starting(family_knobs)
    return starting(family_knobs) | {k: v for k, v in match.start.items() if k in family_knobs}


def backend_knobs(task: Task, backend: str) -> Mapping[str, Knob]:
    """The knobs the task's recipe has for ``backend``; raises :class:`NotRecognized` when the
    recipe Coder cannot write the task for it."""
    check_backend(task, backend)
    recipe, _match, _graph = recognized(task)
    if backend == "triton":
        from .triton import TRITON_KNOBS

        return TRITON_KNOBS[recipe.family]
    return recipe.knobs


def generate_module(task: Task, backend: str, knobs: Mapping[str, Any]) -> str:
    """The module the task's recipe writes for ``backend`` with these knob values."""
    recipe, match, graph = recognized(task)
    context = GenerationContext(graph=graph, task_source=task.source, task_key=task.key)
    if backend == "triton":
        from .triton import generate_triton

        return generate_triton(recipe, match, knobs, context)
    return recipe.generate(match, knobs, context)


def attempt_numbered(history: tuple[Attempt, ...], number: int | None) -> Attempt | None:
    """The attempt of ``history`` with that number; None when there is none (or no number)."""
    if number is None:
        return None
    return next((attempt for attempt in history if attempt.number == number), None)
