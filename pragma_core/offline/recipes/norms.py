"""Normalizations: per-row statistics over a block of dims, then one scaling pass.

Recognizes L1 and L2 normalization (``x / sum(|x|)``, ``x / norm(x)``, ``linalg.vector_norm``,
``F.normalize``), the Frobenius normalization of a whole tensor, RMS normalization written out
(``mean(x**2)`` or ``mean(x*x)``, ``+ eps``, ``sqrt`` then ``div`` or ``rsqrt`` then ``mul``, an
optional learned weight), ``nn.LayerNorm`` over trailing dims and ``nn.InstanceNorm2d``.

Every variant views the input as ``(outer, reduced, inner)``: the reduced dims are one contiguous
block of dims. With ``inner == 1`` each row is reduced then scaled while it is still in cache (rows
in parallel; a row too large for one core is split among the threads, each scaling the slice it
summed). With ``inner > 1`` (RMS over the features of ``(B, F, H, W)``) tiles of the inner dims are
walked contiguously for every reduced index, the statistics kept per inner position. Sums are taken
in float over blocks of 4096 elements, the blocks added in double; means and variances are taken
about the row's first element, so a large mean does not cancel the variance away.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..graph import Node, OpGraph, Ref
from ..modules import candidate_module, param_expr
from ..recipe import GenerationContext, Knob, Match
from .elementwise import c_float, elementwise_expression

__all__ = ["NormRecipe"]

_FLOAT32 = "torch.float32"
_LANES = 16  # floats per accumulator when vectorized: one AVX-512 register, two AVX2 ones
_REDUCTIONS = ("sum", "mean", "norm", "vector_norm")
_SPLIT_ROW_ELEMENTS = 1 << 18  # rows longer than this (1 MiB) are shared by all threads


class NormRecipe:
    """Statistics per row then a scale (and shift, and learned affine) of every element."""

    family = "norm"
    knobs: Mapping[str, Knob] = {
        "parallel": Knob(default=False, values=(False, True), start=True),
        "simd": Knob(default=False, values=(False, True), start=True),
        "accumulators": Knob(default=1, values=(1, 2, 4, 8), start=4),
        "fast_math": Knob(default=False, values=(False, True)),
        "chunk": Knob(default=0, values=(0, 1, 4, 16)),
    }

    def match(self, graph: OpGraph) -> Match | None:
        if len(graph.inputs) != 1 or len(graph.outputs) != 1 or not isinstance(graph.outputs[0], Ref):
            return None
        x = graph.input_node(0)
        if x.shape is None or not x.shape or str(x.dtype) != _FLOAT32 or 0 in x.shape:
            return None
        ops = graph.ops
        if not ops or ops[-1].name != graph.outputs[0].name or ops[-1].shape != x.shape:
            return None
        if str(ops[-1].dtype) != _FLOAT32:
            return None
        if len(ops) == 1 and ops[0].op == "layer_norm":
            return _match_layer_norm(graph, x, ops[0])
        if len(ops) == 1 and ops[0].op == "instance_norm":
            return _match_instance_norm(graph, x, ops[0])
        if len(ops) == 1 and ops[0].op == "normalize":
            return _match_normalize(x, ops[0])
        return _match_written_out(graph, x, ops)

    def generate(self, match: Match, knobs: Mapping[str, Any], context: GenerationContext) -> str:
        facts = match.facts
        cpp = _kernel_source(facts, knobs)
        x = context.graph.inputs[0]
        first, last = facts["dims"]
        ndim = len(context.graph.input_node(0).dims)
        outer, reduced, inner = (
            _product(x, range(0, first)),
            _product(x, range(first, last)),
            _product(x, range(last, ndim)),
        )
        params = [param_expr(path) for path in (facts.get("weight"), facts.get("bias")) if path]
        if facts["layout"] == "columns":
            call = f"lib.norm_columns({', '.join([x, *params])}, out, {outer}, {reduced}, {inner})"
        else:
            channels = f"{x}.shape[1]" if ndim > 1 else "1"
            call = f"lib.norm_rows({', '.join([x, *params])}, out, {outer}, {reduced}, {channels})"
        forward = "\n".join([f"{x} = {x}.contiguous()", f"out = torch.empty_like({x})", call, "return out"])
        flags = (["-ffast-math"] if knobs["fast_math"] else []) + ([] if knobs["simd"] else ["-fno-tree-vectorize"])
        return candidate_module(match=match, knobs=knobs, context=context, cpp=cpp, forward_body=forward, flags=flags)


# -- matching ---------------------------------------------------------------------------------------


def _facts(
    *,
    kind: str,
    stat: str,
    dims: tuple[int, int],
    ndim: int,
    scale: list[str] | None = None,
    eps: float | None = None,
    weight: str | None = None,
    bias: str | None = None,
    weight_per: str = "reduced",
) -> dict[str, Any]:
    """The generator's facts: ``stat`` is ``abs_sum``, ``sq_sum`` or ``moments``; ``scale`` the C
    statements turning the row's double sum ``s`` (and element count ``count``) into ``float scale``;
    ``weight_per`` says what the affine weight is indexed by (``reduced`` index or ``channel``)."""
    return {
        "kind": kind,
        "stat": stat,
        "dims": list(dims),
        "scale": scale or [],
        "eps": eps,
        "weight": weight,
        "bias": bias,
        "weight_per": weight_per,
        "layout": "columns" if dims[1] < ndim else "rows",
    }


def _match_layer_norm(graph: OpGraph, x: Node, node: Node) -> Match | None:
    if node.args[:1] != (Ref(x.name),):
        return None
    shape = node.arg(1, "normalized_shape")
    shape = (shape,) if isinstance(shape, int) else shape
    if not isinstance(shape, tuple) or not shape or len(shape) > len(x.dims):
        return None
    if tuple(x.dims[len(x.dims) - len(shape) :]) != tuple(shape):
        return None
    eps = node.arg(4, "eps", 1e-5)
    affine = _param_paths(graph, (node.arg(2, "weight"), node.arg(3, "bias")), tuple(shape))
    if affine is None or not isinstance(eps, (int, float)):
        return None
    weight, bias = affine
    dims = (len(x.dims) - len(shape), len(x.dims))
    return Match(
        family="norm",
        summary=f"layer norm over the last {len(shape)} dim(s)",
        facts=_facts(
            kind="layer_norm",
            stat="moments",
            dims=dims,
            ndim=len(x.dims),
            eps=float(eps),
            weight=weight,
            bias=bias,
        ),
    )


def _match_instance_norm(graph: OpGraph, x: Node, node: Node) -> Match | None:
    # The module op does not say which InstanceNorm it came from; a 4-D input is taken as a batch of
    # images (InstanceNorm2d), the common case; the functional form reduces every dim after the second.
    functional = "use_input_stats" in node.kwargs
    if node.args[:1] != (Ref(x.name),) or len(node.args) > 1:
        return None
    if functional and (
        node.kwargs.get("use_input_stats") is not True
        or node.kwargs.get("running_mean") is not None
        or node.kwargs.get("running_var") is not None
    ):
        return None
    if len(x.dims) < 3 or (not functional and len(x.dims) != 4):
        return None
    eps = node.kwargs.get("eps", 1e-5)
    affine = _param_paths(graph, (node.kwargs.get("weight"), node.kwargs.get("bias")), (x.dims[1],))
    if affine is None or not isinstance(eps, (int, float)):
        return None
    weight, bias = affine
    return Match(
        family="norm",
        summary="instance norm over the spatial dims",
        facts=_facts(
            kind="instance_norm",
            stat="moments",
            dims=(2, len(x.dims)),
            ndim=len(x.dims),
            eps=float(eps),
            weight=weight,
            bias=bias,
            weight_per="channel",
        ),
    )


def _match_normalize(x: Node, node: Node) -> Match | None:
    if node.args[:1] != (Ref(x.name),):
        return None
    p, dim, eps = node.arg(1, "p", 2.0), node.arg(2, "dim", 1), node.arg(3, "eps", 1e-12)
    dims = _dim_range(dim, len(x.dims))
    if p not in (1, 2) or dims is None or not isinstance(eps, (int, float)) or node.kwargs.get("out") is not None:
        return None
    norm = "(float)s" if p == 1 else "std::sqrt((float)s)"
    scale = [f"const float v = {norm};", f"const float scale = 1.0f / std::fmax(v, {c_float(eps)});"]
    return Match(
        family="norm",
        summary=f"F.normalize (p={p:g}) over {_dims_text(dims)}",
        facts=_facts(kind=f"l{p:g}", stat="abs_sum" if p == 1 else "sq_sum", dims=dims, ndim=len(x.dims), scale=scale),
    )


def _match_written_out(graph: OpGraph, x: Node, ops: tuple[Node, ...]) -> Match | None:
    """``[pre] -> reduction -> per-row elementwise chain -> div/mul with x -> [* weight] [+ bias]``."""
    position = next((i for i, node in enumerate(ops) if node.op in _REDUCTIONS), None)
    if position is None or position > 1:
        return None
    reduction = ops[position]
    source = _reduction_source(graph, x, ops[:position], reduction)
    reduced = _reduction(reduction, x)
    if source is None or reduced is None:
        return None
    dims, value, order = reduced
    if reduction.op in ("sum", "mean"):
        if source == "x":
            return None
        stat = "abs_sum" if source == "abs" else "sq_sum"
    else:
        if source != "x":
            return None
        stat = "abs_sum" if order == 1 else "sq_sum"
    ndim = len(x.dims)
    keep_shape = tuple(1 if dims[0] <= d < dims[1] else x.dims[d] for d in range(ndim))
    if reduction.shape is None or (1,) * (ndim - len(reduction.shape)) + reduction.shape != keep_shape:
        return None  # not one tensor, or the reduced value would not broadcast back over its rows
    statements = [f"const float v_{reduction.name} = {value};"]
    previous = reduction
    rest = list(ops[position + 1 :])
    while rest and rest[0].shape == reduction.shape and _single_user(graph, previous):
        node = rest[0]
        operands = _chain_operands(node, previous)
        expression = elementwise_expression(node, operands, False) if operands is not None else None
        if expression is None:
            return None
        statements.append(f"const float v_{node.name} = {expression};")
        previous = rest.pop(0)
    if not rest or not _single_user(graph, previous):
        return None
    combine = rest.pop(0)
    if combine.op == "div" and combine.args == (Ref(x.name), Ref(previous.name)):
        statements.append(f"const float scale = 1.0f / v_{previous.name};")
    elif combine.op == "mul" and set(combine.args) == {Ref(x.name), Ref(previous.name)} and len(combine.args) == 2:
        statements.append(f"const float scale = v_{previous.name};")
    else:
        return None
    if combine.shape != x.shape or combine.kwargs:
        return None
    affine = _trailing_affine(graph, combine, rest, x, dims)
    if affine is None:
        return None
    kind = _kind(reduction, stat, dims, ndim)
    return Match(
        family="norm",
        summary=f"{kind} normalization over {_dims_text(dims)}",
        facts=_facts(kind=kind, stat=stat, dims=dims, ndim=ndim, scale=statements, weight=affine[0], bias=affine[1]),
    )


def _reduction_source(graph: OpGraph, x: Node, before: tuple[Node, ...], reduction: Node) -> str | None:
    """What the reduction reads: ``x`` itself, ``abs`` of x or the ``square`` of x; None otherwise."""
    if not reduction.args or not isinstance(reduction.args[0], Ref):
        return None
    if not before:
        return "x" if reduction.args[0] == Ref(x.name) else None
    pre = before[0]
    if reduction.args[0] != Ref(pre.name) or pre.shape != x.shape or len(graph.users(pre.name)) != 1 or pre.kwargs:
        return None
    here = Ref(x.name)
    if pre.op == "abs" and pre.args == (here,):
        return "abs"
    if (
        (pre.op == "pow" and pre.args in ((here, 2), (here, 2.0)))
        or (pre.op == "mul" and pre.args == (here, here))
        or (pre.op == "square" and pre.args == (here,))
    ):
        return "square"
    return None


def _reduction(node: Node, x: Node) -> tuple[tuple[int, int], str, int] | None:
    """The reduced dims (a contiguous range), the C expression of the reduction's value from the
    double sum ``s`` and element count ``count``, and the norm order (1 or 2)."""
    ndim = len(x.dims)
    if node.kwargs.get("dtype") is not None or node.kwargs.get("out") is not None:
        return None
    if node.op in ("sum", "mean"):
        dims = _dim_range(node.arg(1, "dim"), ndim)
        if dims is None or not isinstance(node.arg(2, "keepdim", False), bool) or len(node.args) > 3:
            return None
        value = "(float)s" if node.op == "sum" else "(float)(s / (double)count)"
        return dims, value, 0
    order = _norm_order(node, ndim)
    dims = _dim_range(node.arg(2, "dim"), ndim)
    if order is None or dims is None or not isinstance(node.arg(3, "keepdim", False), bool) or len(node.args) > 4:
        return None
    return dims, ("(float)s" if order == 1 else "std::sqrt((float)s)"), order


def _norm_order(node: Node, ndim: int) -> int | None:
    """1 or 2 when the norm is the sum of |x| or the square root of the sum of x**2 over its dims.

    ``torch.norm`` and ``Tensor.norm`` (``p=``) take vector norms; ``torch.linalg.norm`` (``ord=``)
    takes a matrix norm over two dims, where only ``'fro'`` or no order is a sum of squares. A
    positional order may be either, so it is accepted only for one dim."""
    dim = node.arg(2, "dim")
    one_dim = isinstance(dim, int) or (isinstance(dim, tuple) and len(dim) == 1) or (dim is None and ndim == 1)
    if node.op == "vector_norm":
        order = node.arg(1, "ord", 2)
    elif "p" in node.kwargs:
        order = node.kwargs["p"]
    else:
        order = node.arg(1, "ord", None)
        if order not in (None, "fro") and not one_dim:
            return None
    if order in (None, "fro"):
        return 2 if node.op == "norm" else None
    if isinstance(order, bool) or order not in (1, 2):
        return None
    return int(order)


def _dim_range(dim: Any, ndim: int) -> tuple[int, int] | None:
    """The reduced dims as a half-open range; None unless they are one contiguous block."""
    if dim is None:
        return 0, ndim
    dims = (dim,) if isinstance(dim, int) and not isinstance(dim, bool) else dim
    if not isinstance(dims, tuple) or not dims or not all(isinstance(d, int) and -ndim <= d < ndim for d in dims):
        return None
    normalized = sorted({d % ndim for d in dims})
    if len(normalized) != len(dims) or normalized[-1] - normalized[0] + 1 != len(normalized):
        return None
    return normalized[0], normalized[-1] + 1


def _dims_text(dims: tuple[int, int]) -> str:
    return f"dim {dims[0]}" if dims[1] - dims[0] == 1 else f"dims {dims[0]}..{dims[1] - 1}"


def _single_user(graph: OpGraph, node: Node) -> bool:
    return len(graph.users(node.name)) == 1


def _chain_operands(node: Node, previous: Node) -> list[str] | None:
    """Operand expressions of a per-row step: the previous value once, other operands numbers."""
    operands, refs = [], 0
    for argument in node.args:
        if argument == Ref(previous.name):
            operands.append(f"v_{previous.name}")
            refs += 1
        elif isinstance(argument, (int, float)) and not isinstance(argument, bool):
            operands.append(c_float(argument))
        else:
            return None
    if refs != 1 or any(k != "alpha" for k in node.kwargs) or (node.op == "clamp"):
        return None
    return operands


def _trailing_affine(
    graph: OpGraph, combine: Node, rest: list[Node], x: Node, dims: tuple[int, int]
) -> tuple[str | None, str | None] | None:
    """``* weight`` then ``+ bias`` after the scaling, each a parameter over the reduced dims."""
    ndim = len(x.dims)
    reduced_shape = x.dims[dims[0] : dims[1]]
    padded = (1,) * dims[0] + reduced_shape + (1,) * (ndim - dims[1])
    found: dict[str, str | None] = {"mul": None, "add": None}
    previous = combine
    for node in rest:
        if (
            node.op not in found
            or found[node.op] is not None
            or (node.op == "add" and node.kwargs)
            or node.kwargs.get("alpha") is not None
            or not _single_user(graph, previous)
        ):
            return None
        if node.op == "mul" and found["mul"] is None and found["add"] is not None:
            return None
        other = [a for a in node.args if a != Ref(previous.name)]
        if len(node.args) != 2 or len(other) != 1 or not isinstance(other[0], Ref) or node.shape != x.shape:
            return None
        param = graph.tensor(other[0])
        if param.op != "param" or str(param.dtype) != _FLOAT32 or param.shape is None:
            return None
        if (1,) * (ndim - len(param.shape)) + param.shape != padded:
            return None
        found[node.op] = graph.params[param.name]
        previous = node
    return found["mul"], found["add"]


def _param_paths(graph: OpGraph, refs: tuple[Any, ...], shape: tuple[int, ...]) -> list[str | None] | None:
    """The attribute path of each float32 parameter of ``shape`` among ``refs`` (None for an absent
    one); None when one is not such a parameter."""
    paths: list[str | None] = []
    for ref in refs:
        if ref is None:
            paths.append(None)
            continue
        node = graph.node(ref)
        if node is None or node.op != "param" or tuple(node.shape or ()) != shape or str(node.dtype) != _FLOAT32:
            return None
        paths.append(graph.params[node.name])
    return paths


def _kind(reduction: Node, stat: str, dims: tuple[int, int], ndim: int) -> str:
    if stat == "abs_sum":
        return "L1"
    if reduction.op == "mean":
        return "RMS"
    return "Frobenius" if dims == (0, ndim) and ndim > 1 else "L2"


# -- generating --------------------------------------------------------------------------------------


def _product(x: str, dims: range) -> str:
    return " * ".join(f"{x}.shape[{d}]" for d in dims) or "1"


def _kernel_source(facts: Mapping[str, Any], knobs: Mapping[str, Any]) -> str:
    parallel, simd = bool(knobs["parallel"]), bool(knobs["simd"])
    lanes = _LANES if simd else 1
    helpers = _reduce_helper(facts["stat"], lanes * int(knobs["accumulators"]), simd)
    helpers += _scale_helper(facts)
    helpers += _apply_helper(facts, simd)
    kernel = (
        _columns_kernel(facts, parallel, simd, int(knobs["chunk"]))
        if facts["layout"] == "columns"
        else _rows_kernel(facts, parallel, int(knobs["chunk"]))
    )
    return "\n".join(
        [
            "#include <algorithm>",
            "#include <cmath>",
            "#include <cstdint>",
            "#include <vector>",
            "#include <omp.h>",
            "",
            "constexpr int64_t BLOCK = 4096;  // elements summed in float before the sum goes into double",
            helpers,
            kernel,
        ]
    )


def _term(stat: str, value: str) -> str:
    return f"std::fabs({value})" if stat == "abs_sum" else f"{value} * {value}"


def _reduce_helper(stat: str, partials: int, simd: bool) -> str:
    """``reduce_span``: the double sum of |x| or x*x over a span, or ``moments_span``: the sums of
    (x - k) and (x - k)**2, from ``partials`` independent float accumulators per block."""
    pragma = "            #pragma omp simd\n" if simd else ""
    if stat == "moments":
        return f"""
// Sums of (x - k) and (x - k)^2 over x[0, n), added to s1 and s2.
static inline void moments_span(const float* __restrict__ x, int64_t n, float k, double& s1, double& s2) {{
    constexpr int P = {partials};
    for (int64_t begin = 0; begin < n; begin += BLOCK) {{
        const int64_t end = std::min(n, begin + BLOCK);
        float p1[P] = {{}}, p2[P] = {{}};
        int64_t i = begin;
        for (; i + P <= end; i += P) {{
{pragma}            for (int j = 0; j < P; ++j) {{
                const float d = x[i + j] - k;
                p1[j] += d;
                p2[j] += d * d;
            }}
        }}
        float b1 = 0.0f, b2 = 0.0f;
        for (; i < end; ++i) {{
            const float d = x[i] - k;
            b1 += d;
            b2 += d * d;
        }}
        for (int j = 0; j < P; ++j) {{
            b1 += p1[j];
            b2 += p2[j];
        }}
        s1 += b1;
        s2 += b2;
    }}
}}
"""
    return f"""
// Sum of {"|x|" if stat == "abs_sum" else "x^2"} over x[0, n).
static inline double reduce_span(const float* __restrict__ x, int64_t n) {{
    constexpr int P = {partials};
    double total = 0.0;
    for (int64_t begin = 0; begin < n; begin += BLOCK) {{
        const int64_t end = std::min(n, begin + BLOCK);
        float partial[P] = {{}};
        int64_t i = begin;
        for (; i + P <= end; i += P) {{
{pragma}            for (int j = 0; j < P; ++j) partial[j] += {_term(stat, "x[i + j]")};
        }}
        float block = 0.0f;
        for (; i < end; ++i) block += {_term(stat, "x[i]")};
        for (int j = 0; j < P; ++j) block += partial[j];
        total += block;
    }}
    return total;
}}
"""


def _scale_helper(facts: Mapping[str, Any]) -> str:
    """``row_scale``: the multiplier of a row from its sum (the reference's ops after the reduction),
    or ``row_moments``: the scale and shift of a row from its shifted sums."""
    if facts["stat"] == "moments":
        return f"""
// Scale and shift that normalize a row from its sums about k: (x - mean) / sqrt(var + eps).
static inline void row_moments(double s1, double s2, float k, int64_t count, float& scale, float& shift) {{
    const double mean = s1 / (double)count;
    const double var = std::max(s2 / (double)count - mean * mean, 0.0);
    scale = 1.0f / std::sqrt((float)var + {c_float(facts["eps"])});
    shift = -(float)(k + mean) * scale;
}}
"""
    body = "\n".join("    " + line for line in facts["scale"])
    return f"""
// The row's multiplier from its sum s over count elements.
static inline float row_scale(double s, int64_t count) {{
    (void)count;
{body}
    return scale;
}}
"""


def _apply_helper(facts: Mapping[str, Any], simd: bool) -> str:
    """``apply_span``: y = x * scale + shift, then the learned weight and bias per reduced index."""
    weight = facts["weight"] and facts["weight_per"] == "reduced"
    bias = facts["bias"] and facts["weight_per"] == "reduced"
    value = "x[i] * scale" + (" + shift" if facts["stat"] == "moments" else "")
    if weight:
        value = f"({value}) * w[i]"
    if bias:
        value = f"{value} + b[i]"
    params = "".join(
        [", const float* __restrict__ w" if weight else "", ", const float* __restrict__ b" if bias else ""]
    )
    pragma = "    #pragma omp simd\n" if simd else ""
    return f"""
// y = normalized x over a span.
static inline void apply_span(const float* __restrict__ x{params}, float* __restrict__ y, int64_t n,
                              float scale, float shift) {{
    (void)shift;
{pragma}    for (int64_t i = 0; i < n; ++i) y[i] = {value};
}}
"""


def _schedule(chunk: int) -> str:
    return f"schedule(static, {chunk})" if chunk else "schedule(static)"


def _rows_kernel(facts: Mapping[str, Any], parallel: bool, chunk: int) -> str:
    """``norm_rows``: rows of ``count`` contiguous elements; each row's statistics then its scaling."""
    moments = facts["stat"] == "moments"
    per_reduced = facts["weight_per"] == "reduced"
    params = "".join(f", const float* __restrict__ {p}" for p, key in (("w", "weight"), ("b", "bias")) if facts[key])
    span_params = "".join(f", {p} + lo" for p, key in (("w", "weight"), ("b", "bias")) if facts[key] and per_reduced)
    row_params = "".join(f", {p}" for p, key in (("w", "weight"), ("b", "bias")) if facts[key] and per_reduced)
    if moments:
        stats = [
            "double s1 = 0.0, s2 = 0.0;",
            "const float k = xr[0];",
            "moments_span(xr, count, k, s1, s2);",
            "float scale, shift;",
            "row_moments(s1, s2, k, count, scale, shift);",
        ]
    else:
        stats = ["const float scale = row_scale(reduce_span(xr, count), count);", "const float shift = 0.0f;"]
    stats += _channel_fold(facts)
    serial_rows = "\n".join("        " + line for line in stats)
    serial = f"""
    {"#pragma omp parallel for " + _schedule(chunk) if parallel else "// rows one after another"}
    for (int64_t row = 0; row < rows; ++row) {{
        const float* xr = x + row * count;
        float* yr = y + row * count;
{serial_rows}
        apply_span(xr{row_params}, yr, count, scale, shift);
    }}"""
    split = _split_rows(facts, span_params) if parallel else ""
    return f"""
// Rows of count contiguous elements{"; channels for a per-channel affine map" if moments else ""}.
extern "C" void norm_rows(const float* __restrict__ x{params}, float* __restrict__ y, int64_t rows, int64_t count,
                          int64_t channels) {{
    (void)channels;{split}{serial}
}}
"""


def _channel_fold(facts: Mapping[str, Any]) -> list[str]:
    """Instance norm's affine map is per channel: it folds into the row's scale and shift."""
    if facts["weight_per"] != "channel" or not (facts["weight"] or facts["bias"]):
        return []
    return [
        "const int64_t c = row % channels;",
        f"const float gain = {'w[c]' if facts['weight'] else '1.0f'};",
        f"shift = shift * gain{' + b[c]' if facts['bias'] else ''};",
        "scale *= gain;",
    ]


def _split_rows(facts: Mapping[str, Any], span_params: str) -> str:
    """Few or long rows: every thread sums its slice of the row, then scales that same slice."""
    moments = facts["stat"] == "moments"
    partial = (
        "double s1 = 0.0, s2 = 0.0;\n                moments_span(xr + lo, hi - lo, k, s1, s2);\n"
        "                partials[2 * t] = s1;\n                partials[2 * t + 1] = s2;"
        if moments
        else "partials[2 * t] = reduce_span(xr + lo, hi - lo);"
    )
    total = (
        "double t1 = 0.0, t2 = 0.0;\n                for (int u = 0; u < threads; ++u) {\n"
        "                    t1 += partials[2 * u];\n                    t2 += partials[2 * u + 1];\n"
        "                }\n                float scale, shift;\n"
        "                row_moments(t1, t2, k, count, scale, shift);"
        if moments
        else "double s = 0.0;\n                for (int u = 0; u < threads; ++u) s += partials[2 * u];\n"
        "                const float scale = row_scale(s, count);\n                const float shift = 0.0f;"
    )
    channel = "".join("\n                " + line for line in _channel_fold(facts))
    return f"""
    const int threads = omp_get_max_threads();
    if (threads > 1 && (rows < 2 * threads || count > {_SPLIT_ROW_ELEMENTS})) {{
        std::vector<double> partials(2 * threads);
        #pragma omp parallel num_threads(threads)
        {{
            const int t = omp_get_thread_num();
            const int64_t lo = count * t / threads, hi = count * (t + 1) / threads;
            for (int64_t row = 0; row < rows; ++row) {{
                const float* xr = x + row * count;
                float* yr = y + row * count;{chr(10) + "                const float k = xr[0];" if moments else ""}
                {partial}
                #pragma omp barrier
                {total}{channel}
                apply_span(xr + lo{span_params}, yr + lo, hi - lo, scale, shift);
                #pragma omp barrier
            }}
        }}
        return;
    }}"""


def _columns_kernel(facts: Mapping[str, Any], parallel: bool, simd: bool, chunk: int) -> str:
    """``norm_columns``: (outer, count, inner) with the statistics per inner position, walked in
    tiles of the inner dims so every access is contiguous and a tile's rows stay in cache."""
    weight, bias = bool(facts["weight"]), bool(facts["bias"])
    params = "".join(f", const float* __restrict__ {p}" for p, on in (("w", weight), ("b", bias)) if on)
    per_row = "".join(
        f"\n            const float {v} = {p}[r];" for v, p, on in (("g", "w", weight), ("h", "b", bias)) if on
    )
    value = "xr[i] * scale[i]" + (" * g" if weight else "") + (" + h" if bias else "")
    pragma = "#pragma omp simd" if simd else "// scalar loop"
    term = _term(facts["stat"], "v")
    return f"""
constexpr int64_t MAX_TILE = 2048;

// x as (outer, count, inner): each (outer, inner) fibre of count elements is normalized.
extern "C" void norm_columns(const float* __restrict__ x{params},
                             float* __restrict__ y, int64_t outer, int64_t count, int64_t inner) {{
    // Tile width: about 64K floats of x per tile, so the second pass reads it from cache.
    const int64_t tile = std::min<int64_t>(std::min<int64_t>(MAX_TILE, inner),
                                           std::max<int64_t>(16, (65536 / count) / 16 * 16));
    const int64_t tiles = (inner + tile - 1) / tile;
    {"#pragma omp parallel for " + _schedule(chunk) if parallel else "// tiles one after another"}
    for (int64_t item = 0; item < outer * tiles; ++item) {{
        const int64_t o = item / tiles, first = (item % tiles) * tile;
        const int64_t n = std::min(tile, inner - first);
        const float* xo = x + o * count * inner + first;
        float* yo = y + o * count * inner + first;
        double sums[MAX_TILE];
        float scale[MAX_TILE];
        for (int64_t i = 0; i < n; ++i) sums[i] = 0.0;
        for (int64_t r = 0; r < count; ++r) {{
            const float* xr = xo + r * inner;
            {pragma}
            for (int64_t i = 0; i < n; ++i) {{
                const float v = xr[i];
                sums[i] += {term};
            }}
        }}
        for (int64_t i = 0; i < n; ++i) scale[i] = row_scale(sums[i], count);
        for (int64_t r = 0; r < count; ++r) {{
            const float* xr = xo + r * inner;
            float* yr = yo + r * inner;{per_row}
            {pragma}
            for (int64_t i = 0; i < n; ++i) yr[i] = {value};
        }}
    }}
}}
"""
