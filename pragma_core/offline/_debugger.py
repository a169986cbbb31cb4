"""The offline debugger (tree and beam search): a child that applied one knob move and failed is
written again with the riskiest knob that move changed set back, keeping the rest of the move;
when the move changed one knob, that knob is the fault and the parent's version comes back."""

from __future__ import annotations

from ..backends import DEFAULT_BACKEND
from ..records import CompletionRequest, VerdictStatus
from .coder import attempt_numbered, backend_knobs, generate_module, recognized
from .graph import NotRecognized
from .knobs import defaults, knobs_of

__all__ = ["write_fix", "RISK_ORDER"]

RISK_ORDER = ("fast_math", "branchless", "vector_width", "unroll", "accumulators", "block", "chunk", "simd", "parallel")
"""Knobs in the order a failure is blamed on them: fast math first for wrong outputs (it relaxes
the floating-point rules the tolerance was set for), then the code-shape knobs."""


def write_fix(request: CompletionRequest) -> str:
    """The debugger's reply: what it blames, and the module with that knob set back."""
    task, failed = request.task, request.parent
    if task is None or failed is None:
        raise NotRecognized("the offline debugger needs the task and the failing attempt in the request")
    backend = request.backend or DEFAULT_BACKEND
    recipe, _match, _graph = recognized(task)
    knobs = backend_knobs(task, backend)
    broken = knobs_of(failed, recipe.family, knobs) or defaults(knobs)
    parent = attempt_numbered(request.history, failed.parent)
    before = knobs_of(parent, recipe.family, knobs) or defaults(knobs)
    changed = [name for name in broken if broken[name] != before.get(name)]
    order = [name for name in RISK_ORDER if name in changed] + [name for name in changed if name not in RISK_ORDER]
    status = failed.verdict.status if failed.verdict else VerdictStatus.COMPILE_ERROR
    if not order:
        blamed: list[str] = []
        why = "the move changed no knob; the same version again"
    elif len(order) == 1:
        blamed = order
        why = f"the move changed only {order[0]}, so it is the fault; back to attempt {failed.parent}'s version"
    else:
        blamed = order[:1]
        why = f"{order[0]} is the riskiest knob the move changed for a {status.value}; the rest of the move stays"
    fixed = {**broken, **{name: before.get(name, broken[name]) for name in blamed}}
    source = generate_module(task, backend, fixed)
    setting = ", ".join(f"{name}={value}" for name, value in fixed.items())
    return f"Attempt {failed.number} is {status.value}: {why}. Knobs: {setting}.\n\n```python\n{source.rstrip()}\n```\n"
