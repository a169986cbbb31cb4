"""What a recipe is: a recognizer of one family of references and a generator of its C++ candidate.

A recipe looks at the traced reference (:class:`~pragma_core.offline.graph.OpGraph`) and, when it
knows the pattern, returns a :class:`Match`: which family, a one-line description and the facts the
generator needs (ops, dims, constants, parameter paths; JSON values only). ``generate`` turns a match
and a choice of :class:`Knob` values into a complete candidate module for the ``cpu-cpp`` fast
path. The knobs are the moves the Conductor makes: each has a default (the plain first version), the
values it may take in the order a move walks them, and what it changes.

Knob names are shared across recipes so one Conductor rule works on all of them:

``parallel``      OpenMP over the outer (independent) loop: ``False`` / ``True``
``simd``          inner loop written for the vectorizer (``#pragma omp simd``, no branches in it)
``fast_math``     ``-ffast-math`` (vectorized ``tanhf``, ``logf`` ... from libmvec; ``exp`` and
                  ``erf`` inline: :mod:`~pragma_core.offline.fast_functions`), where the tolerance allows
``vector_width``  bits per vector the compiler prefers (``-mprefer-vector-width``): 256, 512
``unroll``        inner-loop unroll factor: 1, 2, 4, 8 (a recipe may unroll in its code, or by
                  ``compiler_flags``)
``accumulators``  independent partial results in a reduction: 1, 2, 4, 8
``block``         tile edge for loops that reuse data: 0 (none), 32, 64, 128
``branchless``    selects instead of data-dependent branches
``chunk``         rows (or elements) per OpenMP work item: 0 lets OpenMP split evenly
``key_tile``      keys per tile of a running softmax (attention): 32 ... 512
``method``        the algorithm (convolution): ``direct`` loops over the input, or ``gemm``, an
                  implicit GEMM on packed patches
``fusion``        where a level-2 chain runs: ``passes`` (each its own pass) or ``epilogue`` (the
                  elementwise ops in the main operator's store, one pass per stage)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import attrs

from ..records import frozen_tuple
from .graph import OpGraph

__all__ = ["Knob", "Match", "Recipe", "GenerationContext", "RECIPE_MARKER", "KNOB_MEANINGS", "compiler_flags"]

RECIPE_MARKER = "# pragma-recipe: "
"""The first comment line of a generated module: the family and knob values, as JSON."""

KNOB_MEANINGS = {
    "parallel": "OpenMP over the outer, independent loop",
    "simd": "inner loop written for the vectorizer (omp simd, no branches inside)",
    "fast_math": "-ffast-math: vectorized exp/erf inline, tanh/log from libmvec, within the tolerance",
    "vector_width": "bits per vector the compiler prefers (-mprefer-vector-width)",
    "unroll": "inner-loop unroll factor",
    "accumulators": "independent partial results in a reduction",
    "block": "tile edge for loops that reuse data (0: no tiling)",
    "branchless": "selects instead of data-dependent branches",
    "chunk": "rows or elements per OpenMP work item (0: even split)",
    "key_tile": "keys per tile of attention's running softmax (the score tile's width)",
    "method": "the algorithm: direct loops over the input, or an implicit GEMM on packed patches",
    "fusion": "where a chain runs: its own passes, or the main operator's epilogue and one pass per stage",
    "order": "the loop over a work item's register tiles: column strips outer, or channel strips outer",
    "layout": "what a work item covers: output rows, or a block of the flattened output plane",
}


@attrs.frozen(kw_only=True)
class Knob:
    """One tunable of a recipe: its plain default, the values a move may set (in order), and the
    value a performance engineer starts from on a multicore CPU (``start``; the default when None).
    ``cache`` is, for a tile's edge, the cache its data is sized for: ``"L1"`` (the default; the
    D1 miss rate speaks to it) or ``"L2"`` (it does not: a work item's slab or panel that D1 could
    never hold, and cachegrind simulates only D1 and the last level)."""

    default: Any
    values: tuple[Any, ...] = attrs.field(converter=frozen_tuple)
    start: Any = None
    cache: str = attrs.field(default="L1", validator=attrs.validators.in_(("L1", "L2")))

    def __attrs_post_init__(self) -> None:
        if self.default not in self.values:
            raise ValueError(f"default {self.default!r} is not among {self.values!r}")
        if self.start is not None and self.start not in self.values:
            raise ValueError(f"start {self.start!r} is not among {self.values!r}")

    @property
    def starting(self) -> Any:
        return self.default if self.start is None else self.start

    def after(self, value: Any) -> Any | None:
        """The next value a move reaches from ``value``; None at the end."""
        position = self.values.index(value) if value in self.values else -1
        return self.values[position + 1] if position + 1 < len(self.values) else None

    def before(self, value: Any) -> Any | None:
        """The value one step back from ``value``; None at the start or for a value not listed."""
        position = self.values.index(value) if value in self.values else 0
        return self.values[position - 1] if position > 0 else None


@attrs.frozen(kw_only=True)
class Match:
    """A recognized reference: ``family`` (e.g. ``elementwise``), ``summary`` for people and prompts,
    ``facts`` for the generator (JSON values), and ``start``: knob values this task starts from
    instead of the family's start, chosen from its shape."""

    family: str
    summary: str
    facts: dict[str, Any] = attrs.field(factory=dict)
    start: dict[str, Any] = attrs.field(factory=dict)


class Recipe(Protocol):
    """A family of references the offline Coder can write C++ for."""

    family: str
    knobs: Mapping[str, Knob]

    def match(self, graph: OpGraph) -> Match | None:
        """The match when the reference is of this family; None otherwise."""

    def generate(self, match: Match, knobs: Mapping[str, Any], context: GenerationContext) -> str:
        """A complete candidate module (Python source with the C++ inside) for these knob values."""


@attrs.frozen(kw_only=True)
class GenerationContext:
    """What a generator needs besides the match: the traced reference, the task's source
    (``ModelNew`` copies ``Model.__init__`` so parameters are created identically) and its key."""

    graph: OpGraph
    task_source: str
    task_key: str


def compiler_flags(knobs: Mapping[str, Any]) -> list[str]:
    """The flags the shared knobs mean: no vectorizer without ``simd``, ``-ffast-math`` with
    ``fast_math``, the preferred vector width with ``vector_width``, loops unrolled up to
    ``unroll`` times (where a recipe has them)."""
    flags = []
    if knobs.get("fast_math"):
        flags.append("-ffast-math")
    if "simd" in knobs and not knobs["simd"]:
        flags.append("-fno-tree-vectorize")
    if knobs.get("vector_width"):
        flags.append(f"-mprefer-vector-width={knobs['vector_width']}")
    if knobs.get("unroll", 1) > 1:
        flags += ["-funroll-loops", f"--param=max-unroll-times={knobs['unroll']}"]
    return flags
