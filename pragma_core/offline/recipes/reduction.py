"""Reductions over one dimension: sum, mean, prod, max, min (and amax, amin), argmax, argmin.

The input is viewed as ``(outer, reduced, inner)`` around the reduced dimension. When ``inner`` is 1
each output element reduces one contiguous row, with several independent partial results (lanes) the
vectorizer can keep in registers. Otherwise the kernel walks ``inner`` contiguously: a tile of
outputs is initialized once, and the ``reduced`` rows of that tile are folded into it in order,
a few rows per pass. argmax and argmin keep the first index of the extreme value, like torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ..graph import Node, OpGraph, Ref
from ..modules import candidate_module, forward_argument
from ..recipe import GenerationContext, Knob, Match
from ._tails import Tail, tail_definition, tail_parameters

__all__ = ["ReductionRecipe", "reduced_dim", "forward_argument", "reduction_source", "VALUE_REDUCTIONS"]

_VECTOR_LANES = 16
"""Floats per accumulator when the loop is written for the vectorizer (one AVX-512 register)."""
_TILE = 1024
"""Outputs folded together in the strided kernel: the tile (and argmax's best values) stay in L1."""


@attrs.frozen
class _Reducer:
    """How one value reduction starts, combines two values, ends, and its OpenMP reduction operator."""

    identity: str
    combine: str  # a C expression of ``a`` (the partial result) and ``b`` (the next value)
    finish: str  # a C expression of ``a`` (the total) and ``n`` (the reduced size)


_VALUE_REDUCERS = {
    "sum": _Reducer("0.0f", "(a + b)", "a"),
    "mean": _Reducer("0.0f", "(a + b)", "(a / (float)n)"),
    "prod": _Reducer("1.0f", "(a * b)", "a"),
    "max": _Reducer("-INFINITY", "(b > a ? b : a)", "a"),
    "min": _Reducer("INFINITY", "(b < a ? b : a)", "a"),
}
VALUE_REDUCTIONS = (*_VALUE_REDUCERS, "logsumexp")
"""The value reductions :func:`reduction_source` writes (logsumexp: the row's maximum, then the sum
of exponentials about it)."""
_INDEX_REDUCERS = {"argmax": ">", "argmin": "<"}
_SPELLINGS = {
    "sum": "sum",
    "mean": "mean",
    "prod": "prod",
    "amax": "max",
    "amin": "min",
    "argmax": "argmax",
    "argmin": "argmin",
}
_TUPLE_RESULT = {"max", "min"}  # torch.max(x, dim) gives (values, indices)


def reduced_dim(dim: Any, rank: int) -> int | None:
    """``dim`` normalized to ``0 <= dim < rank``; None when it is not one valid dimension."""
    if isinstance(dim, (tuple, list)) and len(dim) == 1:
        dim = dim[0]
    if isinstance(dim, bool) or not isinstance(dim, int) or not -rank <= dim < rank:
        return None
    return dim % rank


class ReductionRecipe:
    """A float32 tensor reduced over one dimension."""

    family = "reduction"
    knobs: Mapping[str, Knob] = {
        "parallel": Knob(default=False, values=(False, True), start=True),
        "simd": Knob(default=False, values=(False, True), start=True),
        "accumulators": Knob(default=1, values=(1, 2, 4, 8), start=4),
    }

    def match(self, graph: OpGraph) -> Match | None:
        if len(graph.inputs) != 1 or graph.params or len(graph.outputs) != 1:
            return None
        source = graph.input_node(0)
        if source.dtype is not None and str(source.dtype) != "torch.float32" or not source.shape:
            return None
        ops = graph.ops
        if not ops or not isinstance(graph.outputs[0], Ref) or graph.outputs[0].name != ops[-1].name:
            return None
        reduction = ops[0]
        if len(ops) == 2 and not (reduction.op in _TUPLE_RESULT and _takes_values(ops[1], reduction)):
            return None
        if len(ops) > 2 or (len(ops) == 1 and reduction.op in _TUPLE_RESULT):
            return None
        op = _SPELLINGS.get(reduction.op, reduction.op if reduction.op in _TUPLE_RESULT else None)
        if op is None or reduction.args[:1] != (Ref(source.name),) or len(reduction.args) > 3:
            return None
        if set(reduction.kwargs) - {"dim", "keepdim", "dtype"} or reduction.kwargs.get("dtype") is not None:
            return None
        rank = len(source.shape)
        dim = reduced_dim(reduction.arg(1, "dim"), rank)
        keepdim = reduction.arg(2, "keepdim", False)
        if dim is None or not isinstance(keepdim, bool):
            return None
        shape = source.shape[:dim] + ((1,) if keepdim else ()) + source.shape[dim + 1 :]
        dtype = "int64" if op in _INDEX_REDUCERS else "float32"
        result = ops[-1]
        if result.shape != shape or str(result.dtype) != f"torch.{dtype}":
            return None
        return Match(
            family=self.family,
            summary=f"{op} over dim {dim}{' (keepdim)' if keepdim else ''}",
            facts={"op": op, "dim": dim, "keepdim": keepdim, "rank": rank, "input": source.name, "dtype": dtype},
        )

    def generate(self, match: Match, knobs: Mapping[str, Any], context: GenerationContext) -> str:
        facts = match.facts
        op, dim, name = facts["op"], facts["dim"], forward_argument(context, 0)
        simd, parallel = bool(knobs["simd"]), bool(knobs["parallel"])
        accumulators = int(knobs["accumulators"])
        if op in _INDEX_REDUCERS:
            cpp = _index_source(_INDEX_REDUCERS[op], simd=simd, parallel=parallel, accumulators=accumulators)
        else:
            cpp = reduction_source(op, simd=simd, parallel=parallel, accumulators=accumulators)
        kept = "(1,) + " if facts["keepdim"] else ""
        forward = "\n".join(
            [
                f"{name} = {name}.contiguous()",
                f"shape = {name}.shape",
                f"out = torch.empty(shape[:{dim}] + {kept}shape[{dim + 1}:], dtype=torch.{facts['dtype']})",
                f"lib.reduce(out, {name}, shape[:{dim}].numel(), shape[{dim}], shape[{dim + 1}:].numel())",
                "return out",
            ]
        )
        flags = [] if simd else ["-fno-tree-vectorize"]
        return candidate_module(match=match, knobs=knobs, context=context, cpp=cpp, forward_body=forward, flags=flags)


def _takes_values(node: Node, reduction: Node) -> bool:
    """``result[0]`` or ``result.values`` of a (values, indices) reduction."""
    if node.args[:1] != (Ref(reduction.name),) or len(node.args) != 2:
        return False
    return (node.op == "getitem" and node.args[1] == 0) or (node.op == "getattr" and node.args[1] == "values")


def _pragmas(simd: bool, parallel: bool) -> tuple[str, str]:
    """The pragma over the outer loop and the one over contiguous inner loops."""
    return ("#pragma omp parallel for schedule(static)" if parallel else "", "#pragma omp simd" if simd else "")


def _strided_parallel(parallel: bool) -> str:
    return "#pragma omp parallel for collapse(2) schedule(static)" if parallel else ""


def reduction_source(
    op: str, *, simd: bool, parallel: bool, accumulators: int, prefix: str = "", tail: Tail | None = None
) -> str:
    """The C++ entry point ``{prefix}reduce(out, x, outer, n, inner)`` of a value reduction
    (:data:`VALUE_REDUCTIONS`) over the middle of ``(outer, n, inner)``; a ``tail``
    (:mod:`._tails`) is applied to each block of outputs as it is finished."""
    if op == "logsumexp":
        return _logsumexp_source(simd=simd, parallel=parallel, accumulators=accumulators, prefix=prefix, tail=tail)
    return _value_source(
        _VALUE_REDUCERS[op], simd=simd, parallel=parallel, accumulators=accumulators, prefix=prefix, tail=tail
    )


_ROWS_PER_TAIL = 256
"""Outputs of a row reduction (``inner == 1``) written before the tail runs over them."""


def _row_outputs(parallel: bool, value: str, tail: Tail | None) -> str:
    """The loop writing ``out[o] = value`` for every row ``o`` (``a``: the row's folded value), the
    tail applied per block of rows."""
    outer_pragma = "#pragma omp parallel for schedule(static)" if parallel else ""
    if tail is None:
        return f"""{outer_pragma}
        for (int64_t o = 0; o < outer; ++o) {{
            {value}
        }}"""
    return f"""{outer_pragma}
        for (int64_t o0 = 0; o0 < outer; o0 += {_ROWS_PER_TAIL}) {{
            const int64_t o1 = o0 + {_ROWS_PER_TAIL} < outer ? o0 + {_ROWS_PER_TAIL} : outer;
            for (int64_t o = o0; o < o1; ++o) {{
                {value}
            }}
            {tail.call("out + o0", "o0", "o1 - o0")}
        }}"""


def _finish_tile(tail: Tail | None, tile: str) -> str:
    return "" if tail is None else "\n            " + tail.call(tile, "o * inner + start", "width")


def _value_source(
    reducer: _Reducer, *, simd: bool, parallel: bool, accumulators: int, prefix: str = "", tail: Tail | None = None
) -> str:
    outer_pragma, simd_pragma = _pragmas(simd, parallel)
    lanes = accumulators * (_VECTOR_LANES if simd else 1)
    combine = reducer.combine
    # Strided kernel: ``accumulators`` rows are combined, in order, before touching the tile.
    rows = " ".join(f"v = combine(v, p[{j} * inner + k]);" for j in range(1, accumulators))
    return f"""
#include <cmath>
#include <cstdint>

static inline float combine(float a, float b) {{ return {combine}; }}

// One contiguous row of n values, folded into {lanes} independent lanes.
static inline float reduce_row(const float* __restrict__ row, int64_t n) {{
    float lane[{lanes}];
    for (int l = 0; l < {lanes}; ++l) lane[l] = {reducer.identity};
    const int64_t blocks = n / {lanes};
    for (int64_t b = 0; b < blocks; ++b) {{
        const float* __restrict__ p = row + b * {lanes};
        {simd_pragma}
        for (int l = 0; l < {lanes}; ++l) lane[l] = combine(lane[l], p[l]);
    }}
    float a = lane[0];
    for (int l = 1; l < {lanes}; ++l) a = combine(a, lane[l]);
    for (int64_t i = blocks * {lanes}; i < n; ++i) a = combine(a, row[i]);
    return a;
}}

{tail_definition(tail)}
extern "C" void {prefix}reduce(float* __restrict__ out, const float* __restrict__ x,
                       int64_t outer, int64_t n, int64_t inner{tail_parameters(tail)}) {{
    if (inner == 1) {{
        {_row_outputs(parallel, f"const float a = reduce_row(x + o * n, n); out[o] = {reducer.finish};", tail)}
        return;
    }}
    const int64_t tiles = (inner + {_TILE} - 1) / {_TILE};
    {_strided_parallel(parallel)}
    for (int64_t o = 0; o < outer; ++o) {{
        for (int64_t t = 0; t < tiles; ++t) {{
            const int64_t start = t * {_TILE};
            const int64_t width = inner - start < {_TILE} ? inner - start : {_TILE};
            float* __restrict__ acc = out + o * inner + start;
            const float* __restrict__ base = x + o * n * inner + start;
            {simd_pragma}
            for (int64_t k = 0; k < width; ++k) acc[k] = {reducer.identity};
            int64_t r = 0;
            for (; r + {accumulators} <= n; r += {accumulators}) {{
                const float* __restrict__ p = base + r * inner;
                {simd_pragma}
                for (int64_t k = 0; k < width; ++k) {{
                    float v = p[k]; {rows}
                    acc[k] = combine(acc[k], v);
                }}
            }}
            for (; r < n; ++r) {{
                const float* __restrict__ p = base + r * inner;
                {simd_pragma}
                for (int64_t k = 0; k < width; ++k) acc[k] = combine(acc[k], p[k]);
            }}
            {simd_pragma}
            for (int64_t k = 0; k < width; ++k) {{
                const float a = acc[k];
                acc[k] = {reducer.finish};
            }}{_finish_tile(tail, "acc")}
        }}
    }}
}}
"""


def _logsumexp_source(*, simd: bool, parallel: bool, accumulators: int, prefix: str, tail: Tail | None) -> str:
    """``log(sum(exp(x)))`` over the reduced dim, as torch computes it: the maximum ``m`` first, then
    ``m + log(sum(exp(x - m)))`` (``m`` itself where it is infinite)."""
    _outer_pragma, simd_pragma = _pragmas(simd, parallel)
    lanes = accumulators * (_VECTOR_LANES if simd else 1)
    return f"""
#include <cmath>
#include <cstdint>

// The maximum of one contiguous row, then the sum of exp(x - m) over it, each over {lanes} lanes.
static inline float row_logsumexp(const float* __restrict__ row, int64_t n) {{
    float lane[{lanes}];
    for (int l = 0; l < {lanes}; ++l) lane[l] = -INFINITY;
    const int64_t blocks = n / {lanes};
    for (int64_t b = 0; b < blocks; ++b) {{
        const float* __restrict__ p = row + b * {lanes};
        {simd_pragma}
        for (int l = 0; l < {lanes}; ++l) lane[l] = p[l] > lane[l] ? p[l] : lane[l];
    }}
    float m = -INFINITY;
    for (int l = 0; l < {lanes}; ++l) m = lane[l] > m ? lane[l] : m;
    for (int64_t i = blocks * {lanes}; i < n; ++i) m = row[i] > m ? row[i] : m;
    if (std::isinf(m)) return m;
    for (int l = 0; l < {lanes}; ++l) lane[l] = 0.0f;
    for (int64_t b = 0; b < blocks; ++b) {{
        const float* __restrict__ p = row + b * {lanes};
        {simd_pragma}
        for (int l = 0; l < {lanes}; ++l) lane[l] += std::exp(p[l] - m);
    }}
    float s = 0.0f;
    for (int l = 0; l < {lanes}; ++l) s += lane[l];
    for (int64_t i = blocks * {lanes}; i < n; ++i) s += std::exp(row[i] - m);
    return m + std::log(s);
}}
{tail_definition(tail)}
extern "C" void {prefix}reduce(float* __restrict__ out, const float* __restrict__ x,
                       int64_t outer, int64_t n, int64_t inner{tail_parameters(tail)}) {{
    if (inner == 1) {{
        {_row_outputs(parallel, "out[o] = row_logsumexp(x + o * n, n);", tail)}
        return;
    }}
    const int64_t tiles = (inner + {_TILE} - 1) / {_TILE};
    {_strided_parallel(parallel)}
    for (int64_t o = 0; o < outer; ++o) {{
        for (int64_t t = 0; t < tiles; ++t) {{
            const int64_t start = t * {_TILE};
            const int64_t width = inner - start < {_TILE} ? inner - start : {_TILE};
            float* __restrict__ acc = out + o * inner + start;
            const float* __restrict__ base = x + o * n * inner + start;
            float sum[{_TILE}];
            {simd_pragma}
            for (int64_t k = 0; k < width; ++k) {{ acc[k] = -INFINITY; sum[k] = 0.0f; }}
            for (int64_t r = 0; r < n; ++r) {{
                const float* __restrict__ p = base + r * inner;
                {simd_pragma}
                for (int64_t k = 0; k < width; ++k) acc[k] = p[k] > acc[k] ? p[k] : acc[k];
            }}
            for (int64_t r = 0; r < n; ++r) {{
                const float* __restrict__ p = base + r * inner;
                {simd_pragma}
                for (int64_t k = 0; k < width; ++k) sum[k] += std::isinf(acc[k]) ? 0.0f : std::exp(p[k] - acc[k]);
            }}
            {simd_pragma}
            for (int64_t k = 0; k < width; ++k) acc[k] = std::isinf(acc[k]) ? acc[k] : acc[k] + std::log(sum[k]);{_finish_tile(tail, "acc")}
        }}
    }}
}}
"""


def _index_source(better: str, *, simd: bool, parallel: bool, accumulators: int) -> str:
    outer_pragma, simd_pragma = _pragmas(simd, parallel)
    lanes = accumulators * (_VECTOR_LANES if simd else 1)
    start = "-INFINITY" if better == ">" else "INFINITY"
    return f"""
#include <cmath>
#include <cstdint>

// First index of the extreme value of one contiguous row, over {lanes} independent lanes:
// lane l sees indices l, l + {lanes}, ... and keeps its first extreme; the lanes then agree on
// the extreme value and the smallest index holding it.
static inline int64_t reduce_row(const float* __restrict__ row, int64_t n) {{
    float best[{lanes}];
    int64_t where[{lanes}];
    for (int l = 0; l < {lanes}; ++l) {{ best[l] = {start}; where[l] = l; }}
    const int64_t blocks = n / {lanes};
    for (int64_t b = 0; b < blocks; ++b) {{
        const float* __restrict__ p = row + b * {lanes};
        {simd_pragma}
        for (int l = 0; l < {lanes}; ++l) {{
            const bool take = p[l] {better} best[l];
            best[l] = take ? p[l] : best[l];
            where[l] = take ? b * {lanes} + l : where[l];
        }}
    }}
    float value = best[0];
    int64_t index = blocks > 0 ? where[0] : 0;
    for (int l = 1; l < {lanes} && blocks > 0; ++l) {{
        if (best[l] {better} value || (best[l] == value && where[l] < index)) {{ value = best[l]; index = where[l]; }}
    }}
    for (int64_t i = blocks * {lanes}; i < n; ++i) {{
        if (row[i] {better} value || i == 0) {{ value = row[i]; index = i; }}
    }}
    return index;
}}

extern "C" void reduce(int64_t* __restrict__ out, const float* __restrict__ x,
                       int64_t outer, int64_t n, int64_t inner) {{
    if (inner == 1) {{
        {outer_pragma}
        for (int64_t o = 0; o < outer; ++o) out[o] = reduce_row(x + o * n, n);
        return;
    }}
    const int64_t tiles = (inner + {_TILE} - 1) / {_TILE};
    {_strided_parallel(parallel)}
    for (int64_t o = 0; o < outer; ++o) {{
        for (int64_t t = 0; t < tiles; ++t) {{
            const int64_t start = t * {_TILE};
            const int64_t width = inner - start < {_TILE} ? inner - start : {_TILE};
            int64_t* __restrict__ where = out + o * inner + start;
            const float* __restrict__ base = x + o * n * inner + start;
            float best[{_TILE}];
            {simd_pragma}
            for (int64_t k = 0; k < width; ++k) {{ best[k] = base[k]; where[k] = 0; }}
            for (int64_t r = 1; r < n; ++r) {{
                const float* __restrict__ p = base + r * inner;
                {simd_pragma}
                for (int64_t k = 0; k < width; ++k) {{
                    const bool take = p[k] {better} best[k];
                    best[k] = take ? p[k] : best[k];
                    where[k] = take ? r : where[k];
                }}
            }}
        }}
    }}
}}
"""
