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
from ._norm_kernels import norm_kernel_source
from .elementwise import c_float, elementwise_expression

__all__ = ["NormRecipe", "norm_facts", "norm_lines"]

_FLOAT32 = "torch.float32"
_REDUCTIONS = ("sum", "mean", "norm", "vector_norm")


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
        cpp = norm_kernel_source(facts, knobs)
        x = context.graph.inputs[0]
        ndim = len(context.graph.input_node(0).dims)
        forward = "\n".join([f"{x} = {x}.contiguous()", *norm_lines(facts, x, "out", ndim), "return out"])
        flags = (["-ffast-math"] if knobs["fast_math"] else []) + ([] if knobs["simd"] else ["-fno-tree-vectorize"])
        return candidate_module(match=match, knobs=knobs, context=context, cpp=cpp, forward_body=forward, flags=flags)


def norm_lines(
    facts: Mapping[str, Any], x: str, target: str, ndim: int, *, prefix: str = "", tail_arguments: str = ""
) -> list[str]:
    """The lines of ``forward`` normalizing the contiguous tensor ``x`` (``ndim`` dims) into a new
    ``target``: ``lib.{prefix}norm_rows`` or ``norm_columns``, with ``tail_arguments`` after its own."""
    first, last = facts["dims"]
    outer, reduced, inner = (
        _product(x, range(0, first)),
        _product(x, range(first, last)),
        _product(x, range(last, ndim)),
    )
    params = [param_expr(path) for path in (facts.get("weight"), facts.get("bias")) if path]
    if facts["layout"] == "columns":
        call = f"lib.{prefix}norm_columns({', '.join([x, *params])}, {target}, {outer}, {reduced}, {inner}{tail_arguments})"
    else:
        channels = f"{x}.shape[1]" if ndim > 1 else "1"
        call = f"lib.{prefix}norm_rows({', '.join([x, *params])}, {target}, {outer}, {reduced}, {channels}{tail_arguments})"
    return [f"{target} = torch.empty_like({x})", call]


def norm_facts(graph: OpGraph, x: Node, node: Node) -> dict[str, Any] | None:
    """The facts of a layer norm or instance norm ``node`` of the float32 tensor ``x``; None for any
    other node, or one the kernels do not compute."""
    if x.shape is None or not x.shape or str(x.dtype) != _FLOAT32 or 0 in x.shape or node.shape != x.shape:
        return None
    match = (
        _match_layer_norm(graph, x, node)
        if node.op == "layer_norm"
        else _match_instance_norm(graph, x, node)
        if node.op == "instance_norm"
        else None
    )
    return match.facts if match is not None else None


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
    # A 5-D input can only be a batch of volumes (InstanceNorm3d); a 3-D one is left (a batch of
    # sequences or one image).
    if len(x.dims) < 3 or (not functional and len(x.dims) not in (4, 5)):
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


def _product(x: str, dims: range) -> str:
    return " * ".join(f"{x}.shape[{d}]" for d in dims) or "1"
