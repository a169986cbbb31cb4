"""Softmax and log-softmax over one dimension, numerically stable (the row's maximum subtracted).

The input is viewed as ``(outer, reduced, inner)`` around the normalized dimension. When ``inner``
is 1 each row is contiguous: one pass finds its maximum, a second sums ``exp(x - max)`` (softmax
stores the exponentials on the way), a third scales (softmax) or shifts by ``max + log(sum)``
(log-softmax). Otherwise the same three passes walk a tile of ``inner`` contiguously, keeping the
tile's maxima and sums in L1.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..graph import OpGraph, Ref
from ..modules import candidate_module, forward_argument
from ..recipe import GenerationContext, Knob, Match
from ._tails import Tail, tail_call, tail_definition, tail_parameters
from .reduction import reduced_dim

__all__ = ["SoftmaxRecipe", "softmax_source"]

_VECTOR_LANES = 16
"""Floats per accumulator of the row maximum when the loop is written for the vectorizer."""
_TILE = 512
"""Columns handled together when the normalized dimension is not the last one."""


class SoftmaxRecipe:
    """``softmax`` or ``log_softmax`` of a float32 tensor over one dimension."""

    family = "softmax"
    knobs: Mapping[str, Knob] = {
        "parallel": Knob(default=False, values=(False, True), start=True),
        "simd": Knob(default=False, values=(False, True), start=True),
        "accumulators": Knob(default=1, values=(1, 2, 4, 8), start=4),
        # Every element calls exp: without fast math a scalar libm call each (0.48x of eager at the
        # fitted sizes on a Zen 5, 1.05x with it).
        "fast_math": Knob(default=False, values=(False, True), start=True),
    }

    def match(self, graph: OpGraph) -> Match | None:
        if len(graph.inputs) != 1 or graph.params or len(graph.ops) != 1 or len(graph.outputs) != 1:
            return None
        node, source = graph.ops[0], graph.input_node(0)
        if node.op not in ("softmax", "log_softmax") or graph.outputs[0] != Ref(node.name):
            return None
        if node.args[:1] != (Ref(source.name),) or len(node.args) > 2 or node.kwargs.get("dtype") is not None:
            return None
        if set(node.kwargs) - {"dim", "dtype", "_stacklevel"} or not source.shape:
            return None
        if str(source.dtype) != "torch.float32" or node.shape != source.shape or str(node.dtype) != "torch.float32":
            return None
        dim = reduced_dim(node.arg(1, "dim"), len(source.shape))
        if dim is None:
            return None
        return Match(
            family=self.family,
            summary=f"{node.op} over dim {dim}",
            facts={"op": node.op, "dim": dim, "input": source.name},
        )

    def generate(self, match: Match, knobs: Mapping[str, Any], context: GenerationContext) -> str:
        facts = match.facts
        dim, name = facts["dim"], forward_argument(context, 0)
        simd, fast = bool(knobs["simd"]), bool(knobs["fast_math"])
        cpp = softmax_source(
            log=facts["op"] == "log_softmax",
            simd=simd,
            parallel=bool(knobs["parallel"]),
            accumulators=int(knobs["accumulators"]),
        )
        forward = "\n".join(
            [
                f"{name} = {name}.contiguous()",
                f"shape = {name}.shape",
                f"out = torch.empty_like({name})",
                f"lib.softmax(out, {name}, shape[:{dim}].numel(), shape[{dim}], shape[{dim + 1}:].numel())",
                "return out",
            ]
        )
        flags = (["-ffast-math"] if fast else []) + ([] if simd else ["-fno-tree-vectorize"])
        return candidate_module(match=match, knobs=knobs, context=context, cpp=cpp, forward_body=forward, flags=flags)


def softmax_source(
    *, log: bool, simd: bool, parallel: bool, accumulators: int, prefix: str = "", tail: Tail | None = None
) -> str:
    """The C++ entry point ``{prefix}softmax(out, x, outer, n, inner)``; a ``tail`` (:mod:`._tails`)
    is applied to each row (or each row of a tile) of the output as it is finished."""
    simd_pragma = "#pragma omp simd" if simd else ""
    sum_pragma = "#pragma omp simd reduction(+:total)" if simd else ""
    row_pragma = "#pragma omp parallel for schedule(static)" if parallel else ""
    tile_pragma = "#pragma omp parallel for collapse(2) schedule(static)" if parallel else ""
    lanes = accumulators * (_VECTOR_LANES if simd else 1)
    if log:
        row_sum = "total += std::exp(row[i] - top);"
        row_finish = f"""const float shift = top + (float)std::log(total);
    {simd_pragma}
    for (int64_t i = 0; i < n; ++i) dst[i] = row[i] - shift;"""
        tile_sum = "sum[k] += std::exp(p[k] - top[k]);"
        tile_store = ""
        tile_finish = f"""{simd_pragma}
            for (int64_t k = 0; k < width; ++k) top[k] += std::log(sum[k]);
            for (int64_t r = 0; r < n; ++r) {{
                const float* __restrict__ p = base + r * inner;
                float* __restrict__ q = dst + r * inner;
                {simd_pragma}
                for (int64_t k = 0; k < width; ++k) q[k] = p[k] - top[k];
            }}"""
    else:
        row_sum = "const float e = std::exp(row[i] - top); dst[i] = e; total += e;"
        row_finish = f"""const float scale = (float)(1.0 / total);
    {simd_pragma}
    for (int64_t i = 0; i < n; ++i) dst[i] *= scale;"""
        tile_sum = "const float e = std::exp(p[k] - top[k]); q[k] = e; sum[k] += e;"
        tile_store = "float* __restrict__ q = dst + r * inner;"
        tile_finish = f"""{simd_pragma}
            for (int64_t k = 0; k < width; ++k) sum[k] = 1.0f / sum[k];
            for (int64_t r = 0; r < n; ++r) {{
                float* __restrict__ q = dst + r * inner;
                {simd_pragma}
                for (int64_t k = 0; k < width; ++k) q[k] *= sum[k];
            }}"""
    return f"""
#include <cmath>
#include <cstdint>

// The maximum of one contiguous row, over {lanes} independent lanes.
static inline float row_max(const float* __restrict__ row, int64_t n) {{
    float lane[{lanes}];
    for (int l = 0; l < {lanes}; ++l) lane[l] = -INFINITY;
    const int64_t blocks = n / {lanes};
    for (int64_t b = 0; b < blocks; ++b) {{
        const float* __restrict__ p = row + b * {lanes};
        {simd_pragma}
        for (int l = 0; l < {lanes}; ++l) lane[l] = p[l] > lane[l] ? p[l] : lane[l];
    }}
    float top = lane[0];
    for (int l = 1; l < {lanes}; ++l) top = lane[l] > top ? lane[l] : top;
    for (int64_t i = blocks * {lanes}; i < n; ++i) top = row[i] > top ? row[i] : top;
    return top;
}}

{tail_definition(tail)}
// One contiguous row: maximum, sum of exponentials, then the normalized values.
static inline void softmax_row(float* __restrict__ dst, const float* __restrict__ row, int64_t n) {{
    const float top = row_max(row, n);
    double total = 0.0;  // a long row's sum in float drifts by more than the tolerance
    {sum_pragma}
    for (int64_t i = 0; i < n; ++i) {{ {row_sum} }}
    {row_finish}
}}

extern "C" void {prefix}softmax(float* __restrict__ out, const float* __restrict__ x,
                        int64_t outer, int64_t n, int64_t inner{tail_parameters(tail)}) {{
    if (inner == 1) {{
        {row_pragma}
        for (int64_t o = 0; o < outer; ++o) {{
            softmax_row(out + o * n, x + o * n, n);
            {tail_call(tail, "out + o * n", "o * n", "n")}
        }}
        return;
    }}
    const int64_t tiles = (inner + {_TILE} - 1) / {_TILE};
    {tile_pragma}
    for (int64_t o = 0; o < outer; ++o) {{
        for (int64_t t = 0; t < tiles; ++t) {{
            const int64_t start = t * {_TILE};
            const int64_t width = inner - start < {_TILE} ? inner - start : {_TILE};
            const float* __restrict__ base = x + o * n * inner + start;
            float* __restrict__ dst = out + o * n * inner + start;
            float top[{_TILE}], sum[{_TILE}];
            {simd_pragma}
            for (int64_t k = 0; k < width; ++k) {{ top[k] = -INFINITY; sum[k] = 0.0f; }}
            for (int64_t r = 0; r < n; ++r) {{
                const float* __restrict__ p = base + r * inner;
                {simd_pragma}
                for (int64_t k = 0; k < width; ++k) top[k] = p[k] > top[k] ? p[k] : top[k];
            }}
            for (int64_t r = 0; r < n; ++r) {{
                const float* __restrict__ p = base + r * inner;
                {tile_store}
                {simd_pragma}
                for (int64_t k = 0; k < width; ++k) {{ {tile_sum} }}
            }}
            {tile_finish}{_finish_tile(tail)}
        }}
    }}
}}
"""


def _finish_tile(tail: Tail | None) -> str:
    if tail is None:
        return ""
    return f"""
            for (int64_t r = 0; r < n; ++r) {{
                {tail.call("dst + r * inner", "(o * n + r) * inner + start", "width")}
            }}"""
