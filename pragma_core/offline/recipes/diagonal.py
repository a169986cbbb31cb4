"""Products with a diagonal matrix written as a broadcast: ``a.unsqueeze(1) * b`` is ``diag(a) @ b``
(row i of ``b`` scaled by ``a[i]``, KernelBench's ``12_Matmul_with_diagonal_matrices_``), and
``b * a.unsqueeze(0)`` (or ``b * a``) is ``b @ diag(a)`` (column j scaled by ``a[j]``).

The n x n diagonal matrix is never made: one pass over ``b``, O(n^2), rows shared among the threads
and each row's scaling a contiguous vector loop. The column vector may be spelled
``unsqueeze(1)``/``unsqueeze(-1)``, ``view``/``reshape`` to ``(-1, 1)`` or ``(n, 1)``, or ``a[:, None]``;
the factors may come in either order. ``torch.diag(a) @ b`` itself is not claimed: with a non-finite
value in ``b`` its zeros make whole columns NaN, which a scaling would not reproduce.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..graph import Node, OpGraph, Ref
from ..modules import candidate_module, forward_argument
from ..recipe import GenerationContext, Knob, Match, compiler_flags

__all__ = ["DiagonalRecipe"]

_FLOAT32 = "torch.float32"


def _float32_input(node: Node | None) -> bool:
    return node is not None and node.op == "input" and node.shape is not None and str(node.dtype) == _FLOAT32


def _as_column(graph: OpGraph, node: Node, rows: int) -> Node | None:
    """The 1-D input ``node`` reshapes to a ``(rows, 1)`` column, or None."""
    source = graph.node(node.args[0]) if node.args else None
    if not _float32_input(source) or source is None or source.shape != (rows,) or node.shape != (rows, 1):
        return None
    if node.op == "unsqueeze" and node.arg(1, "dim") in (1, -1):
        return source
    if node.op in ("view", "reshape"):
        shape = node.args[1:] if len(node.args) > 2 else node.args[1] if len(node.args) == 2 else None
        return source if tuple(shape or ()) in ((-1, 1), (rows, 1)) else None
    if node.op == "getitem" and len(node.args) == 2:
        index = node.args[1]
        whole = slice(None, None, None)
        return source if isinstance(index, tuple) and index in ((whole, None), (Ellipsis, None)) else None
    return None


def _as_row(graph: OpGraph, node: Node, columns: int) -> Node | None:
    """The 1-D input of ``columns`` values ``node`` is, or reshapes to a ``(1, columns)`` row; None otherwise."""
    if node.op == "input":
        return node if _float32_input(node) and node.shape == (columns,) else None
    source = graph.node(node.args[0]) if node.args else None
    if not _float32_input(source) or source is None or source.shape != (columns,) or node.shape != (1, columns):
        return None
    if node.op == "unsqueeze" and node.arg(1, "dim") in (0, -2):
        return source
    return None


class DiagonalRecipe:
    """A matrix scaled row by row (``diag(a) @ b``) or column by column (``b @ diag(a)``) by a vector."""

    family = "diagonal"
    knobs: Mapping[str, Knob] = {
        "parallel": Knob(default=False, values=(False, True), start=True),
        "simd": Knob(default=False, values=(False, True), start=True),
    }

    def match(self, graph: OpGraph) -> Match | None:
        if len(graph.outputs) != 1 or not isinstance(graph.outputs[0], Ref) or graph.params:
            return None
        products = [node for node in graph.ops if node.op == "mul"]
        if len(products) != 1 or len(products[0].args) != 2 or products[0].kwargs:
            return None
        product = products[0]
        if graph.outputs[0] != Ref(product.name) or str(product.dtype) != _FLOAT32 or product.shape is None:
            return None
        if len(product.dims) != 2 or not all(isinstance(a, Ref) for a in product.args):
            return None
        rows, columns = product.dims
        left, right = (graph.tensor(a) for a in product.args)
        for matrix, other in ((left, right), (right, left)):
            if not _float32_input(matrix) or matrix.shape != (rows, columns) or other is matrix:
                continue
            vector, side = _as_column(graph, other, rows), "row"
            if vector is None:
                vector, side = _as_row(graph, other, columns), "column"
            if vector is None:
                continue
            if {node.name for node in graph.ops} - {product.name, other.name}:
                return None
            facts = {
                "scales": side,
                "vector": graph.inputs.index(vector.name),
                "matrix": graph.inputs.index(matrix.name),
            }
            summary = (
                f"diagonal matrix product ({'diag(a) @ b: rows' if side == 'row' else 'b @ diag(a): columns'} scaled)"
            )
            return Match(family=self.family, summary=summary, facts=facts)
        return None

    def generate(self, match: Match, knobs: Mapping[str, Any], context: GenerationContext) -> str:
        facts = match.facts
        factor = "d[i]" if facts["scales"] == "row" else "d[j]"
        omp = "#pragma omp parallel for schedule(static)" if knobs["parallel"] else ""
        simd = "#pragma omp simd" if knobs["simd"] else ""
        cpp = f"""
#include <cstdint>

// out = diag(d) @ b (d[i] scales row i) or b @ diag(d) (d[j] scales column j); b is rows x columns.
extern "C" void diagonal_product(const float* __restrict__ d, const float* __restrict__ b, float* __restrict__ out,
                                 int64_t rows, int64_t columns) {{
    {omp}
    for (int64_t i = 0; i < rows; ++i) {{
        const float* __restrict__ row = b + i * columns;
        float* __restrict__ target = out + i * columns;
        {simd}
        for (int64_t j = 0; j < columns; ++j) target[j] = {factor} * row[j];
    }}
}}
"""
        arguments = [forward_argument(context, i) for i in range(len(context.graph.inputs))]
        vector, matrix = arguments[facts["vector"]], arguments[facts["matrix"]]
        forward = "\n".join(
            [
                f"d_ = {vector}.contiguous()",
                f"b_ = {matrix}.contiguous()",
                "out = torch.empty_like(b_)",
                "lib.diagonal_product(d_, b_, out, b_.shape[0], b_.shape[1])",
                "return out",
            ]
        )
        return candidate_module(
            match=match, knobs=knobs, context=context, cpp=cpp, forward_body=forward, flags=compiler_flags(knobs)
        )
