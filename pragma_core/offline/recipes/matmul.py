"""Matrix products: ``a @ b``, ``torch.mm``, ``torch.bmm``, ``torch.matmul``, ``nn.Linear`` and the
``torch.einsum`` forms that are one of them, with transposed operands, a fused elementwise epilogue
and an optional ``triu``/``tril`` of the result.

Recognizes one product of float32 operands, each an input or a parameter read directly or through a
swap of its last two dims (``a.T``, ``a.t()``, ``a.mT``, ``transpose(-2, -1)``, ``permute``), then a
chain of elementwise ops on the product (bias, ReLU, GELU, scaling by constants or per-column
vectors). The transposes are never materialized: the generated loads read the stored layout.

The blocked kernel packs a ``kc``-deep panel of B (``NR``-wide strips) once for a column of cache
tiles and a block of A (``MR``-tall strips) per tile, and a register-blocked micro-kernel keeps an
``MR x NR`` tile of accumulators, added into C in place: ``MR`` is the accumulators knob (8 to start
with AVX-512's 32 registers, 6 otherwise: :func:`._matmul_kernels.register_rows_start`), ``NR`` two
vector registers of the compiling machine when ``simd`` (16 floats with AVX-512, 8 with AVX, 4
otherwise, chosen by the preprocessor: a tile written for wider registers than the machine has
spills, 30x slower). A work item for OpenMP is a batch entry's column of tiles: all of M when the
items deal evenly to the threads, else one share of the rows per thread, the column tiles cut to
one width (a ragged last tile would idle its thread); when there are too few tiles for the threads
(a small C with a long K), the threads also split K into whole panels and sum private copies of C
in a fixed order. The epilogue is applied when a tile's last K panel is stored. The summation over
K runs in order within each panel and panels add in order, so results stay well
within fp32 tolerance of a BLAS sgemm. When the product has a single column (matrix-vector), a
row-blocked dot-product kernel is generated instead.

A ``triu``/``tril`` of the product (``torch.triu(a @ b, diagonal)``) is applied on the store: tiles
and register tiles wholly outside the kept triangle are not computed (about half the work). When the
inputs are themselves triangular the same way and finite (checked at run time, in O(n^2)), the sums
also skip the K ranges where one factor is zero, e.g. ``k`` in ``[i, j]`` for two upper triangular
factors (about a sixth of a full product's work); any other inputs get the full sums.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeGuard

import attrs

from ..graph import Node, OpGraph, Ref
from ..modules import candidate_module, forward_argument, param_expr
from ..recipe import GenerationContext, Knob, Match
from ._matmul_kernels import matmul_kernel, register_rows_start
from .elementwise import TRANSCENDENTAL, c_float, elementwise_expression

__all__ = [
    "MatmulRecipe",
    "epilogue_lines",
    "saved_value",
    "product_facts",
    "product_source",
    "product_sizes",
    "product_shape",
    "operand_expression",
]

_PRODUCTS = ("matmul", "mm", "bmm", "linear", "einsum")
_TRIANGLES = ("triu", "tril")
_SWAPS = ("transpose", "swapaxes", "swapdims")
_FLOAT32 = "torch.float32"
_EXTRA_INDEX = {"scalar": "0", "column": "j", "full": "x"}
"""How an extra tensor of the epilogue is indexed: one element, output column ``j``, or the
output's flat element ``x`` (fusion tails only)."""


def _is_float32(node: Node | None) -> TypeGuard[Node]:
    """Whether ``node`` is one float32 tensor (its ``dims`` then exist)."""
    return node is not None and node.shape is not None and str(node.dtype) == _FLOAT32


def _swaps_last_two(node: Node, ndim: int) -> bool:
    """Whether ``node`` (reading a tensor of ``ndim`` dims) swaps exactly its last two dims."""
    if ndim < 2:
        return False
    if node.op == "t":
        return ndim == 2 and len(node.args) == 1
    if node.op == "getattr" and len(node.args) == 2:
        return (node.args[1] == "T" and ndim == 2) or node.args[1] == "mT"
    if node.op in _SWAPS:
        dims = (node.arg(1, "dim0"), node.arg(2, "dim1"))
        if not all(isinstance(d, int) and -ndim <= d < ndim for d in dims):
            return False
        return {d % ndim for d in dims} == {ndim - 2, ndim - 1}
    if node.op == "permute":
        order = node.kwargs.get("dims", node.args[1:])
        if len(order) == 1 and isinstance(order[0], tuple):
            order = order[0]
        if not all(isinstance(d, int) and -ndim <= d < ndim for d in order) or len(order) != ndim:
            return False
        return [d % ndim for d in order] == [*range(ndim - 2), ndim - 1, ndim - 2]
    return False


def _leaf(graph: OpGraph, ref: Any) -> tuple[Node, bool, list[str]] | None:
    """The input or parameter behind ``ref``, whether it is read transposed, and the swap nodes
    crossed; None when ``ref`` is anything else."""
    node, transposed, crossed = graph.node(ref), False, []
    while node is not None and node.op not in ("input", "param"):
        source = graph.node(node.args[0]) if node.args else None
        if source is None or source.shape is None or not _swaps_last_two(node, len(source.shape)):
            return None
        crossed.append(node.name)
        node, transposed = source, not transposed
    if not _is_float32(node):
        return None
    return node, transposed, crossed


def _einsum_as_matmul(equation: Any) -> tuple[bool, bool] | None:
    """Whether the two-operand einsum ``equation`` is ``matmul(A', B')`` with ``A'`` either A or its
    last two dims swapped (likewise ``B'``) and the result in matmul's order: the two swaps; None
    for any other equation (a diagonal, a permuted output, a sum over an index of one operand...)."""
    if not isinstance(equation, str) or "->" not in equation or "." in equation:
        return None
    inputs, out = equation.replace(" ", "").split("->")
    if inputs.count(",") != 1:
        return None
    x, y = inputs.split(",")
    if not all(s.isalpha() and len(set(s)) == len(s) for s in (x, y, out)) or not x or not y:
        return None
    if len(y) == 1:  # matrix (or batch of matrices) times a vector
        return (False, False) if len(x) >= 2 and x[-1] == y and out == x[:-1] else None
    if len(y) == 2:  # a matrix B, broadcast over A's leading dims
        shared = [letter for letter in y if letter in x]
        if len(shared) != 1:
            return None
        k = shared[0]
        n = y[0] if y[1] == k else y[1]
        if x[-1] == k and out == x[:-1] + n:
            return False, y[1] == k
        if len(x) >= 2 and x[-2] == k and out == x[:-2] + x[-1] + n:
            return True, y[1] == k
        return None
    if len(x) != len(y) or len(x) < 3 or x[:-2] != y[:-2]:
        return None
    common = set(x[-2:]) & set(y[-2:])
    if len(common) != 1:
        return None
    k = common.pop()
    m = x[-2] if x[-1] == k else x[-1]
    n = y[-1] if y[-2] == k else y[-2]
    if out != x[:-2] + m + n:
        return None
    return x[-2] == k, y[-1] == k


def _operand(graph: OpGraph, node: Node, transposed: bool) -> dict[str, Any]:
    """A tensor the kernel reads: a parameter path or the position of a forward argument."""
    if node.op == "param":
        return {"param": graph.params[node.name], "transposed": transposed}
    return {"input": graph.inputs.index(node.name), "transposed": transposed}


def _c_operands(
    operands: list[Any], extras: list[dict[str, Any]], offset: int, extra: Callable[[int], str] | None = None
) -> list[str]:
    """C expressions of an epilogue step's operands; extra ``i`` is kernel parameter ``e{i + offset}``
    (read as ``extra(i + offset)`` when given, else by its ``broadcast``)."""
    expressions = []
    for operand in operands:
        if operand == "v":
            expressions.append("v")
        elif "step" in operand:  # an earlier value of an epilogue DAG, saved when it was computed
            expressions.append(saved_value(operand["step"]))
        elif "const" in operand:
            expressions.append(c_float(operand["const"]))
        elif operand == "u":  # a fusion stage's input at this element
            expressions.append("u")
        else:
            index = operand["extra"] + offset
            if extra is not None:
                expressions.append(extra(index))
                continue
            broadcast = extras[index]["broadcast"] if index < len(extras) else "scalar"
            expressions.append(f"e{index}[{_EXTRA_INDEX[broadcast]}]")
    return expressions


def saved_value(step: int) -> str:
    """The C name of an epilogue step's result that a later step reads (-1: the epilogue's input)."""
    return "t_in" if step < 0 else f"t{step}"


def epilogue_lines(
    steps: Any,
    extras: list[dict[str, Any]],
    graph: OpGraph,
    fast: bool,
    offset: int,
    *,
    extra: Callable[[int], str] | None = None,
) -> list[str]:
    """The C statements applying epilogue ``steps`` to ``v``: each step ``v = expression;``; a DAG's
    step whose result a later step reads as ``{"step": k}`` is saved as ``t{k}`` (a chain saves
    nothing). A step's ``op`` overrides the traced one (``torch.min(a, b)`` is ``minimum``).
    ``extra(i)`` gives the C expression of extra tensor ``i`` where the caller indexes them itself
    (a fused stage's tail, :mod:`._tails`)."""
    read = {
        operand["step"]
        for step in steps
        for operand in step["operands"]
        if isinstance(operand, dict) and "step" in operand
    }
    lines = ["const float t_in = v;"] if -1 in read else []
    for index, step in enumerate(steps):
        node = graph[step["name"]]
        if "op" in step and step["op"] != node.op:
            node = attrs.evolve(node, op=step["op"])
        expression = elementwise_expression(node, _c_operands(step["operands"], extras, offset, extra), fast)
        lines.append(f"v = {expression};  // {node.op}")
        if index in read:
            lines.append(f"const float {saved_value(index)} = v;")
    return lines


def operand_expression(operand: Mapping[str, Any], arguments: list[str]) -> str:
    """The Python expression of an operand in ``forward``."""
    return param_expr(operand["param"]) if "param" in operand else arguments[operand["input"]]


def product_sizes(facts: Mapping[str, Any], extras: list[dict[str, Any]], arguments: list[str]) -> list[str]:
    """The lines of ``forward`` that make the operands contiguous (``a_``, ``b_``, ``e0_``...) and
    read the product's sizes from them at run time: ``M``, ``N``, ``K`` and ``batch``."""
    lines = [f"a_ = {operand_expression(facts['a'], arguments)}.contiguous()"]
    lines.append(f"b_ = {operand_expression(facts['b'], arguments)}.contiguous()")
    lines += [f"e{i}_ = {operand_expression(extra, arguments)}.contiguous()" for i, extra in enumerate(extras)]
    if facts["a"]["transposed"]:
        lines.append("K, M = a_.shape[-2], a_.shape[-1]")
    elif facts["layout"] == "batched":
        lines.append("M, K = a_.shape[-2], a_.shape[-1]")
    else:
        lines += ["K = a_.shape[-1]", "M = a_.numel() // K"]
    if facts["b_vector"]:
        lines.append("N = 1")
    else:
        lines.append("N = b_.shape[-2]" if facts["b"]["transposed"] else "N = b_.shape[-1]")
    lines.append("batch = a_.numel() // (M * K)" if facts["layout"] == "batched" else "batch = 1")
    return lines


def product_shape(facts: Mapping[str, Any]) -> str:
    """The Python expression of the product's shape, after :func:`product_sizes`' lines."""
    if facts["layout"] == "batched":
        return "(*a_.shape[:-2], M, N)"
    if facts["b_vector"]:
        return "(*a_.shape[:-2], M)" if facts["a"]["transposed"] else "tuple(a_.shape[:-1])"
    return "(M, N)" if facts["a"]["transposed"] else "(*a_.shape[:-1], N)"


def product_source(
    facts: Mapping[str, Any],
    extras: list[dict[str, Any]],
    graph: OpGraph,
    *,
    fast: bool,
    parallel: bool,
    simd: bool,
    accumulators: int,
    block: int,
    prefix: str = "",
) -> str:
    """The C++ of a matrix product with ``facts`` (operands, layout, epilogue ``steps``) and the
    epilogue's ``extras``: headers, the operand loads, the epilogue and the ``{prefix}matmul`` entry
    point; a fused level-2 module writes it as one of its stages."""
    return "\n".join(
        [
            "#include <algorithm>",
            "#include <cmath>",
            "#include <cstdint>",
            "#include <cstdlib>",
            "#include <cstring>",
            "#include <omp.h>",
            "",
            MatmulRecipe._loads(facts),
            MatmulRecipe._epilogue_function(facts, extras, graph, fast),
            matmul_kernel(facts, parallel, simd, accumulators, block, len(extras), prefix=prefix),
        ]
    )


def product_facts(graph: OpGraph, product: Node) -> dict[str, Any] | None:
    """Operands, layout (``flat``: leading dims of A fold into rows, or ``batched``) and
    the traced sizes; None for shapes this recipe does not generate."""
    swaps = (False, False)
    if product.op == "linear":
        left_ref, right_ref = product.arg(0, "input"), product.arg(1, "weight")
        bias_ref = product.arg(2, "bias")
    elif product.op == "einsum":
        operands = product.args[1:]
        if len(operands) == 1 and isinstance(operands[0], (tuple, list)):
            operands = tuple(operands[0])
        read = _einsum_as_matmul(product.args[0] if product.args else None)
        if read is None or len(operands) != 2 or product.kwargs:
            return None
        (left_ref, right_ref), bias_ref, swaps = operands, None, read
    else:
        left_ref, right_ref, bias_ref = (
            product.arg(0, "input"),
            product.arg(1, "other" if product.op == "matmul" else "mat2"),
            None,
        )
    if "out" in product.kwargs:
        return None
    left, right = _leaf(graph, left_ref), _leaf(graph, right_ref)
    if left is None or right is None:
        return None
    (a, a_t, a_crossed), (b, b_t, b_crossed) = left, right
    a_t, b_t = a_t != swaps[0], b_t != swaps[1]
    sa, sb = a.dims, b.dims
    if product.op == "linear":
        if b_t or len(sb) != 2 or len(sa) < 2 or a_t:
            return None
        b_t = True  # the weight is (N, K): the product reads it transposed
    if len(sa) < 2:
        return None
    m, k = (sa[-1], sa[-2]) if a_t else (sa[-2], sa[-1])
    if len(sb) == 1:
        if product.op not in ("matmul", "einsum") or b_t or (a_t and len(sa) != 2):
            return None
        kb, n, layout = sb[0], 1, "flat"
    else:
        kb, n = (sb[-1], sb[-2]) if b_t else (sb[-2], sb[-1])
        if product.op == "mm" and (len(sa), len(sb)) != (2, 2):
            return None
        if product.op == "bmm" and (len(sa), len(sb)) != (3, 3):
            return None
        if len(sb) == 2:
            layout = "batched" if a_t and len(sa) > 2 else "flat"
        elif len(sa) == len(sb) and sa[:-2] == sb[:-2]:
            layout = "batched"
        else:
            return None
    if kb != k or min(m, n, k) < 1:
        return None
    expected = (*sa[:-2], m) if len(sb) == 1 else (*sa[:-2], m, n)
    if product.dims != expected:
        return None
    bias = None
    if bias_ref is not None:
        bias_node = graph.node(bias_ref)
        if (
            bias_node is None
            or bias_node.op not in ("param", "input")
            or not _is_float32(bias_node)
            or bias_node.dims != (n,)
        ):
            return None
        bias = _operand(graph, bias_node, False)
    return {
        "layout": layout,
        "a": _operand(graph, a, a_t),
        "b": _operand(graph, b, b_t),
        "b_vector": len(sb) == 1,
        "b_batched": len(sb) > 2,
        "bias": bias,
        "m": m,
        "n": n,
        "k": k,
        "crossed": [*a_crossed, *b_crossed],
    }


class MatmulRecipe:
    """One matrix product (optionally batched, transposed operands) with a fused epilogue."""

    family = "matmul"
    knobs: Mapping[str, Knob] = {
        "parallel": Knob(default=False, values=(False, True), start=True),
        "simd": Knob(default=False, values=(False, True), start=True),
        "accumulators": Knob(default=1, values=(1, 2, 4, 6, 8), start=6),
        # Columns per cache tile: its kc-deep panel of B (kc x block floats) stays in L2.
        "block": Knob(default=0, values=(0, 32, 64, 128, 256), start=256, cache="L2"),
        "fast_math": Knob(default=False, values=(False, True)),
    }

    # -- recognizing --------------------------------------------------------------------------

    def match(self, graph: OpGraph) -> Match | None:
        if len(graph.outputs) != 1 or not isinstance(graph.outputs[0], Ref):
            return None
        products = [node for node in graph.ops if node.op in _PRODUCTS]
        if len(products) != 1 or not _is_float32(products[0]):
            return None
        product = products[0]
        facts = product_facts(graph, product)
        if facts is None:
            return None
        epilogue = self._epilogue(graph, product, facts["n"])
        if epilogue is None:
            return None
        steps, extras, last, triangle = epilogue
        if triangle is not None and (facts["b_vector"] or facts["layout"] == "flat" and len(product.dims) > 2):
            return None  # a triangle per matrix of leading dims folded into rows: not generated
        crossed = facts.pop("crossed")
        expected = {*crossed, product.name, *(step["name"] for step in steps)}
        if triangle is not None:
            expected.add(last)
        if {node.name for node in graph.ops} != expected or graph.outputs[0] != Ref(last):
            return None
        if any(len(graph.users(name)) != 1 for name in crossed):
            return None
        facts.update(steps=steps, extras=extras, triangle=triangle)
        kind = (
            "matrix-vector product"
            if facts["n"] == 1
            else "batched matrix product"
            if facts["layout"] == "batched"
            else "matrix product"
        )
        transposes = [name for name, side in (("A", "a"), ("B", "b")) if facts[side]["transposed"]]
        details = [f"{' and '.join(transposes)} transposed"] if transposes else []
        if steps:
            details.append("epilogue " + ", ".join(graph[step["name"]].op for step in steps))
        if triangle is not None:
            details.append(f"{'upper' if triangle['upper'] else 'lower'} triangle of the result")
        summary = f"{kind} ({product.op}{'; ' + '; '.join(details) if details else ''})"
        start: dict[str, Any] = register_rows_start()
        if any(graph[step["name"]].op in TRANSCENDENTAL for step in steps):
            # Scalar libm calls per element cost more than the product (29_Matmul_Mish_Mish: 0.31x of eager).
            start["fast_math"] = True
        return Match(family=self.family, summary=summary, facts=facts, start=start)

    def _epilogue(
        self, graph: OpGraph, product: Node, n: int
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str, dict[str, Any] | None] | None:
        """The chain of elementwise ops on the product: each step's node and operands (``"v"`` the
        running value, ``{"extra": i}`` a tensor read besides it, ``{"const": x}``), the extra
        tensors (per-column vectors or one-element tensors), the last node and the ``triu``/``tril``
        ending the chain (``{"upper": bool, "diagonal": int}``, or None); None when not a chain."""
        steps: list[dict[str, Any]] = []
        extras: list[dict[str, Any]] = []
        current = product
        while True:
            users = graph.users(current.name)
            if len(users) > 1:
                return None
            if not users or users[0].op == "output":
                return steps, extras, current.name, None
            node = users[0]
            if node.op in _TRIANGLES:
                diagonal = node.arg(1, "diagonal", 0)
                ends = all(user.op == "output" for user in graph.users(node.name))
                plain = set(node.kwargs) <= {"diagonal"} and len(node.args) <= 2
                if node.shape != product.shape or not ends or type(diagonal) is not int or not plain:
                    return None
                return steps, extras, node.name, {"upper": node.op == "triu", "diagonal": diagonal}
            if (
                node.shape != product.shape
                or str(node.dtype) != _FLOAT32
                or any(isinstance(v, Ref) for v in node.kwargs.values())
            ):
                return None
            operands: list[Any] = []
            for argument in node.args:
                if argument == Ref(current.name):
                    operands.append("v")
                elif isinstance(argument, Ref):
                    extra = graph.tensor(argument)
                    if extra.op not in ("input", "param") or not _is_float32(extra):
                        return None
                    if extra.dims in ((), (1,)):
                        broadcast = "scalar"
                    elif extra.dims in ((n,), (1, n)):
                        broadcast = "column"
                    else:
                        return None
                    extras.append({**_operand(graph, extra, False), "broadcast": broadcast})
                    operands.append({"extra": len(extras) - 1})
                elif isinstance(argument, (int, float)) and not isinstance(argument, bool):
                    operands.append({"const": float(argument)})
                elif argument is not None and not isinstance(argument, str):
                    return None
            if "v" not in operands or elementwise_expression(node, _c_operands(operands, extras, 0), False) is None:
                return None
            if node.op in ("maximum", "minimum", "pow") and len(operands) < 2:
                return None
            steps.append({"name": node.name, "operands": operands})
            current = node

    # -- generating ---------------------------------------------------------------------------

    def generate(self, match: Match, knobs: Mapping[str, Any], context: GenerationContext) -> str:
        facts = match.facts
        parallel, simd = bool(knobs["parallel"]), bool(knobs["simd"])
        accumulators, block = int(knobs["accumulators"]), int(knobs["block"])
        fast = bool(knobs["fast_math"])
        extras = ([{**facts["bias"], "broadcast": "column"}] if facts["bias"] else []) + list(facts["extras"])
        cpp = product_source(
            facts,
            extras,
            context.graph,
            fast=fast,
            parallel=parallel,
            simd=simd,
            accumulators=accumulators,
            block=block,
        )
        flags = (["-ffast-math"] if fast else []) + ([] if simd else ["-fno-tree-vectorize"])
        return candidate_module(
            match=match,
            knobs=knobs,
            context=context,
            cpp=cpp,
            forward_body=self._forward(
                facts, extras, [forward_argument(context, i) for i in range(len(context.graph.inputs))]
            ),
            flags=flags,
        )

    @staticmethod
    def _loads(facts: Mapping[str, Any]) -> str:
        a_index = "k * M + i" if facts["a"]["transposed"] else "i * K + k"
        b_index = "j * K + k" if facts["b"]["transposed"] else "k * N + j"
        if facts["n"] == 1:
            b_index = "k"  # one column (j = 0), contiguous in either layout
        return f"""// Element (i, k) of A and (k, j) of B in their stored layouts (one batch entry).
static inline float load_a(const float* __restrict__ a, int64_t i, int64_t k, int64_t M, int64_t K) {{
    return a[{a_index}];
}}
static inline float load_b(const float* __restrict__ b, int64_t k, int64_t j, int64_t N, int64_t K) {{
    return b[{b_index}];
}}
"""

    @staticmethod
    def _epilogue_function(facts: Mapping[str, Any], extras: list[dict[str, Any]], graph: OpGraph, fast: bool) -> str:
        offset = 1 if facts["bias"] else 0
        parameters = "".join(f", const float* __restrict__ e{i}" for i in range(len(extras)))
        lines = ["v = v + e0[j];  // bias"] if facts["bias"] else []
        lines += epilogue_lines(facts["steps"], extras, graph, fast, offset)
        body = "\n".join("    " + line for line in [*lines, "return v;"])
        return f"""// The fused epilogue of output column j.
static inline __attribute__((always_inline)) float epilogue(float v, int64_t j{parameters}) {{
{body}
}}
"""

    @staticmethod
    def _forward(facts: Mapping[str, Any], extras: list[dict[str, Any]], arguments: list[str]) -> str:
        lines = product_sizes(facts, extras, arguments)
        shape = product_shape(facts)
        extra_arguments = "".join(f", e{i}_" for i in range(len(extras)))
        lines += [
            f"out = torch.empty({shape}, dtype=torch.float32)",
            f"lib.matmul(a_, b_, out{extra_arguments}, batch, M, N, K)",
            "return out",
        ]
        return "\n".join(lines)
