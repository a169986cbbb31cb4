"""The offline Coder's ``triton`` backend: the recipes' matches written as Triton kernels.

    from pragma_core.offline.triton import TRITON_KNOBS, generate_triton

    recipe, match, graph = recognized(task)                  # the C++ recipes recognize the task
    knobs = starting(TRITON_KNOBS[match.family])
    source = generate_triton(recipe, match, knobs, context)  # a Python module: @triton.jit + ModelNew

A recipe's :class:`~pragma_core.offline.recipe.Match` says what the reference computes, whatever the
backend; this package writes it for Triton instead of C++: elementwise chains, reductions over one
dim, softmax and log-softmax, and the norms. The module's first comment line is the recipe marker,
so :func:`~pragma_core.offline.knobs.knobs_of` reads its knobs back. Its knobs are ``block`` (the
elements a program handles per step, a power of two) and ``num_warps``; their meanings are in
:data:`KNOB_MEANINGS`. The module runs on a GPU as is, and on a CPU under the Triton interpreter
(``TRITON_INTERPRET=1`` in the environment before triton is imported).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..graph import NotRecognized
from ..recipe import GenerationContext, Knob, Match, Recipe
from . import _norms as norms
from . import _reduction as reduction
from . import _softmax as softmax
from . import elementwise
from ._module import KNOB_MEANINGS

__all__ = ["TRITON_KNOBS", "KNOB_MEANINGS", "generate_triton"]

_GENERATORS: dict[str, Callable[[Match, Mapping[str, Any], GenerationContext], str]] = {
    "elementwise": elementwise.generate,
    "reduction": reduction.generate,
    "softmax": softmax.generate,
    "norm": norms.generate,
}

TRITON_KNOBS: dict[str, Mapping[str, Knob]] = {
    "elementwise": elementwise.KNOBS,
    "reduction": reduction.KNOBS,
    "softmax": softmax.KNOBS,
    "norm": norms.KNOBS,
}
"""The knobs of each family the triton backend writes, by family."""


def generate_triton(recipe: Recipe, match: Match, knobs: Mapping[str, Any], context: GenerationContext) -> str:
    """The Triton candidate module for a recipe's match; raises
    :class:`~pragma_core.offline.graph.NotRecognized` for a family or op it does not write.
    ``knobs`` are :data:`TRITON_KNOBS` values of the family (missing ones take their default)."""
    family = match.family
    generator = _GENERATORS.get(family)
    if generator is None:
        known = ", ".join(_GENERATORS)
        raise NotRecognized(
            f"{context.task_key}: the triton backend writes no {family} kernels (recipe "
            f"{type(recipe).__name__}: {match.summary}); it writes {known}"
        )
    family_knobs = TRITON_KNOBS[family]
    unknown = set(knobs) - set(family_knobs)
    if unknown:
        raise ValueError(
            f"{family}: no triton knob {', '.join(sorted(unknown))}; the knobs are {', '.join(family_knobs)}"
        )
    chosen = {name: knobs.get(name, knob.default) for name, knob in family_knobs.items()}
    for name, value in chosen.items():
        if value not in family_knobs[name].values:
            raise ValueError(f"{family}: {name}={value!r} is not among {family_knobs[name].values!r}")
    return generator(match, chosen, context)
