"""A fused stage's tail in C++: the elementwise ops that follow a kernel in a level-2 chain, applied
to each contiguous run of the kernel's output as soon as the kernel has written it, while the run
is still in cache.

    tail = tail_source(segment, graph, fast=True)    # None for a segment without steps
    tail.definition     # static inline void finish(float* out, int64_t x0, int64_t count, ...)
    tail.parameters     # what the kernel's entry point takes besides its own arguments
    tail.call("yr", "row * OW", "OW")                 # the statement a kernel writes after a run

A kernel that takes a tail writes ``tail.definition`` before itself, appends ``tail.parameters``
to its entry point's signature and calls ``tail.call`` on every run it finishes (a run: ``count``
consecutive output elements from flat index ``x0``); without a tail it writes none of these, so
its code is what its level-1 recipe writes.

The tail's extra tensors are indexed by the flat output index ``x``: ``scalar`` reads element 0,
``full`` element ``x``, and ``span`` element ``(x / a) % b`` (a tensor covering the output's dims
``[lo, hi)``: ``a`` is the product of the dims after ``hi``, ``b`` of those in the span, both given
at run time, so a per-channel bias of an ``(N, C, H, W)`` output has ``a = H * W``, ``b = C``). A
run inside one ``a``-block (a convolution's output row, a pooled row) reads each span tensor once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from ..graph import OpGraph
from .matmul import epilogue_lines

__all__ = ["Tail", "tail_source", "tail_call", "tail_parameters", "tail_definition"]


@attrs.frozen(kw_only=True)
class Tail:
    """The C++ of one stage's tail: its ``finish`` function and the parameters it needs."""

    definition: str
    parameters: str
    arguments: str

    def call(self, out: str, x0: str, count: str) -> str:
        """The statement applying the tail to ``count`` elements at ``out``, flat indices from ``x0``."""
        return f"finish({out}, {x0}, {count}{self.arguments});"


def tail_call(tail: Tail | None, out: str, x0: str, count: str) -> str:
    """``tail.call(...)``, or nothing without a tail."""
    return tail.call(out, x0, count) if tail is not None else ""


def tail_parameters(tail: Tail | None) -> str:
    """The entry point's parameters for the tail's tensors and sizes (``""`` without a tail)."""
    return tail.parameters if tail is not None else ""


def tail_definition(tail: Tail | None) -> str:
    """The ``finish`` function (``""`` without a tail)."""
    return tail.definition if tail is not None else ""


def tail_source(
    steps: Sequence[dict[str, Any]], extras: Sequence[dict[str, Any]], graph: OpGraph, fast: bool
) -> Tail | None:
    """The tail of a segment (its ``steps`` and their ``extras``, as the fusion planner writes them);
    None when it has no steps."""
    if not steps:
        return None
    parameters, arguments = [], []
    for index, extra in enumerate(extras):
        parameters.append(f", const float* __restrict__ e{index}")
        arguments.append(f", e{index}")
        if extra["broadcast"] == "span":
            parameters.append(f", int64_t a{index}, int64_t b{index}")
            arguments.append(f", a{index}, b{index}")
    spans = [i for i, extra in enumerate(extras) if extra["broadcast"] == "span"]

    def body(per_element: bool) -> str:
        def extra(index: int) -> str:
            kind = extras[index]["broadcast"]
            if kind == "scalar":
                return f"s{index}"
            if kind == "full":
                return f"e{index}[x0 + p]"
            return f"e{index}[(x0 + p) / a{index} % b{index}]" if per_element else f"r{index}"

        lines = epilogue_lines(steps, list(extras), graph, fast, 0, extra=extra)
        inner = "\n".join("            " + line for line in lines)
        return f"""        {"" if per_element else "#pragma omp simd"}
        for (int64_t p = 0; p < count; ++p) {{
            float v = out[p];
{inner}
            out[p] = v;
        }}"""

    scalars = "".join(f"\n    const float s{i} = e{i}[0];" for i, e in enumerate(extras) if e["broadcast"] == "scalar")
    if spans:
        within = " && ".join(f"x0 % a{i} + count <= a{i}" for i in spans)
        constants = "".join(f"\n        const float r{i} = e{i}[x0 / a{i} % b{i}];" for i in spans)
        loops = f"""    if ({within}) {{  // one a-block: each span tensor gives one value to the run{constants}
{body(False)}
    }} else {{
{body(True)}
    }}"""
    else:
        loops = body(False)
    definition = f"""#include <cmath>
#include <cstdint>

// The stage's tail on count elements of its output from flat index x0, in place.
static inline void finish(float* __restrict__ out, int64_t x0, int64_t count{"".join(parameters)}) {{{scalars}
{loops}
}}
"""
    return Tail(definition=definition, parameters="".join(parameters), arguments="".join(arguments))
