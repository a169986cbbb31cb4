"""Transposed convolutions: ``nn.ConvTranspose1d/2d/3d`` and ``F.conv_transpose1d/2d/3d``, with any
stride, padding, output padding, dilation and groups, bias or not.

The output is gathered, never scattered: output position ``o`` (per dim) sums the taps ``k`` for which
``o + padding - k * dilation`` is a multiple of the stride, reading input ``(o + padding - k *
dilation) / stride`` when it is in range. Along the width the output splits into ``stride`` phases
(``ow = r + stride * j``); within one phase every tap reads x at ``j + off`` for a fixed ``off``, so
the inner loop has no division and no branch and reads x contiguously. Lower ranks are the 3-D case
with size-1 leading dims; every size is a kernel argument, so one build serves every task.

The tuned kernel (``simd``) keeps a register tile of ``accumulators`` output channels x two vectors
of positions of one phase (one for a row's tail of a vector or less), summed over the valid taps and the group's input channels, with the
weights packed per block of output channels (``[tap][ci][channel]``: one broadcast each). Work items
(OpenMP) are output rows x blocks of ``block`` positions per phase, each writing its own outputs
once. An item first copies the input rows it reads (one group's channels at a time) into a slice
padded with zeros past the input's ends, so no tile needs a bounds check, with a row pitch of an odd
number of cache lines, so the channels' rows do not fall into the same cache sets as the input's
power-of-two pitches would; every output channel of the item is then done while the slice is in
cache. With ``layout="plane"`` (the start), a task with stride 1 along rows and columns is worked by
each depth's output plane instead, flattened at a row pitch of the width plus the kernel's span
over a zero-padded copy of the input rows at that pitch: one tap is one offset for the whole plane,
so a register tile runs on across row ends rather than finishing each row with a short tile that
costs as much as a full one. The plain version (the defaults) sums each output element over every
tap with the checks inside the loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..graph import Node, OpGraph, Ref
from ..modules import candidate_module, forward_argument, param_expr
from ..recipe import GenerationContext, Knob, Match, compiler_flags
from ._conv_transposed_kernels import conv_transposed_kernel
from ._matmul_kernels import register_rows_start
from ._tails import Tail

__all__ = ["ConvTransposedRecipe", "transposed_kernel", "transposed_facts", "transposed_lines", "describe_transposed"]

_FLOAT32 = "torch.float32"
_OPS = {"conv_transpose1d": 1, "conv_transpose2d": 2, "conv_transpose3d": 3}
_FUNCTIONAL_ORDER = ("input", "weight", "bias", "stride", "padding", "output_padding", "groups", "dilation")
_MODULE_ATTRIBUTES = ("stride", "padding", "output_padding", "groups", "dilation", "padding_mode", "weight", "bias")


class ConvTransposedRecipe:
    """One transposed convolution of a float32 input, its weight and bias parameters or inputs."""

    family = "conv_transposed"
    knobs: Mapping[str, Knob] = {
        "parallel": Knob(default=False, values=(False, True), start=True),
        "simd": Knob(default=False, values=(False, True), start=True),
        # Output channels per register tile: 6 x 2 vectors keeps 12 accumulators, two loads of x
        # and a broadcast in the 16 vector registers of AVX2 (8 rows, AVX-512's start, fit its 32).
        "accumulators": Knob(default=1, values=(1, 2, 4, 6, 8), start=6),
        # Positions per stride phase in one work item: the item's slice of x (input channels x
        # kernel rows x block) stays in L2 while every output channel block reads it.
        "block": Knob(default=0, values=(0, 64, 128, 256, 512), start=256, cache="L2"),
        "vector_width": Knob(default=256, values=(256, 512), start=512),
        # Work by output rows, or (stride 1 along rows and columns) by flattened output planes, where
        # a register tile runs on across row ends: a row of 34 took two tiles' time, one of 32 one.
        "layout": Knob(default="rows", values=("rows", "plane"), start="plane"),
    }

    def match(self, graph: OpGraph) -> Match | None:
        if len(graph.outputs) != 1 or not isinstance(graph.outputs[0], Ref) or not graph.inputs:
            return None
        ops = graph.ops
        if len(ops) != 1 or ops[0].op not in _OPS or graph.outputs[0] != Ref(ops[0].name):
            return None
        node = ops[0]
        arguments = _arguments(node)
        x = graph.node(arguments["input"]) if arguments is not None else None
        if x is None or x.op != "input" or graph.inputs[0] != x.name:
            return None
        facts = transposed_facts(graph, node)
        if facts is None:
            return None
        operands = [facts[name] for name in ("weight", "bias") if facts[name] is not None]
        if len(graph.inputs) != 1 + sum("input" in operand for operand in operands):
            return None
        return Match(family=self.family, summary=describe_transposed(facts), facts=facts, start=register_rows_start())

    def generate(self, match: Match, knobs: Mapping[str, Any], context: GenerationContext) -> str:
        x = forward_argument(context, 0)
        arguments = [forward_argument(context, i) for i in range(len(context.graph.inputs))]
        lines = [f"{x} = {x}.contiguous()", *transposed_lines(match.facts, x, "out", arguments), "return out"]
        cpp = transposed_kernel(knobs)
        return candidate_module(
            match=match,
            knobs=knobs,
            context=context,
            cpp=cpp,
            forward_body="\n".join(lines),
            flags=compiler_flags(knobs),
        )


def transposed_kernel(knobs: Mapping[str, Any], *, prefix: str = "", tail: Tail | None = None) -> str:
    """The kernel's C++ for the recipe's knobs (:func:`._conv_transposed_kernels.conv_transposed_kernel`)."""
    return conv_transposed_kernel(
        knobs["parallel"],
        knobs["simd"],
        knobs["accumulators"],
        knobs["block"],
        knobs["vector_width"],
        layout=knobs["layout"],
        prefix=prefix,
        tail=tail,
    )


def transposed_facts(graph: OpGraph, node: Node) -> dict[str, Any] | None:
    """One transposed convolution's facts (geometry, kernel, channels, weight and bias operands)
    whatever it reads; None when the recipe's kernel does not compute it."""
    rank = _OPS.get(node.op)
    arguments = _arguments(node) if rank is not None else None
    if rank is None or arguments is None:
        return None
    x = graph.node(arguments["input"])
    weight = graph.node(arguments["weight"])
    bias = graph.node(arguments["bias"]) if arguments["bias"] is not None else None
    if x is None or weight is None:
        return None
    if arguments["bias"] is not None and bias is None:
        return None
    if any(t.op not in ("param", "input") or t.name == x.name for t in (weight, bias) if t is not None):
        return None
    if not all(_is_float32(t) for t in (x, weight, node, *([bias] if bias is not None else []))):
        return None
    geometry = _geometry(arguments, rank)
    if geometry is None:
        return None
    groups = geometry["groups"]
    x_dims, w_dims = x.dims, weight.dims
    if len(x_dims) != rank + 2 or len(w_dims) != rank + 2 or x_dims[1] != w_dims[0] or w_dims[0] % groups:
        return None
    out_channels = w_dims[1] * groups
    if bias is not None and bias.dims != (out_channels,):
        return None
    kernel = list(w_dims[2:])
    expected = (
        x_dims[0],
        out_channels,
        *(
            (size - 1) * s - 2 * p + d * (k - 1) + op + 1
            for size, s, p, d, k, op in zip(
                x_dims[2:],
                geometry["stride"],
                geometry["padding"],
                geometry["dilation"],
                kernel,
                geometry["output_padding"],
            )
        ),
    )
    if node.dims != expected or 0 in expected or 0 in x_dims:
        return None
    return {
        "rank": rank,
        **geometry,
        "kernel": kernel,
        "out_channels": out_channels,
        "weight": _operand(graph, weight),
        "bias": _operand(graph, bias) if bias is not None else None,
    }


def transposed_lines(
    facts: Mapping[str, Any],
    x: str,
    target: str,
    arguments: list[str],
    *,
    prefix: str = "",
    tail_arguments: str = "",
) -> list[str]:
    """The lines of ``forward`` running the transposed convolution of the contiguous tensor ``x``
    into a new ``target``: the output's sizes from ``x``'s shape, then ``lib.{prefix}conv_transpose``
    with ``tail_arguments`` after its own."""
    rank = facts["rank"]
    weight = _expression(facts["weight"], arguments)
    bias = _expression(facts["bias"], arguments) if facts["bias"] is not None else weight
    pad = 3 - rank  # leading size-1 dims of the 3-D kernel

    def full(values: list[int], fill: int) -> list[str]:
        return [str(fill)] * pad + [str(v) for v in values]

    inputs = ["1"] * pad + [f"{x}.shape[{2 + d}]" for d in range(rank)]
    outputs = ["1"] * pad + [
        f"({x}.shape[{2 + d}] - 1) * {facts['stride'][d]} - {2 * facts['padding'][d]} "
        f"+ {facts['dilation'][d] * (facts['kernel'][d] - 1) + facts['output_padding'][d] + 1}"
        for d in range(rank)
    ]
    spatial = ", ".join(f"o{d}" for d in range(3))
    return [
        f"{', '.join(f'i{d}' for d in range(3))} = {', '.join(inputs)}",
        *(f"o{d} = {outputs[d]}" for d in range(3)),
        f"{target} = torch.empty(({x}.shape[0], {facts['out_channels']}, "
        f"{', '.join(f'o{d}' for d in range(pad, 3))}), dtype=torch.float32)",
        f"lib.{prefix}conv_transpose({x}, {weight}, {bias}, {target}, {1 if facts['bias'] is not None else 0}, "
        f"{x}.shape[0], {x}.shape[1], {facts['out_channels']}, {facts['groups']}, i0, i1, i2, {spatial}, "
        f"{', '.join(full(facts['kernel'], 1))}, {', '.join(full(facts['stride'], 1))}, "
        f"{', '.join(full(facts['padding'], 0))}, {', '.join(full(facts['dilation'], 1))}{tail_arguments})",
    ]


def _is_float32(node: Node) -> bool:
    return node.shape is not None and str(node.dtype) == _FLOAT32


def _arguments(node: Node) -> dict[str, Any] | None:
    """The call's arguments by name, for the module form (attributes as kwargs) and the functional
    one (positional or keyword); None for arguments this recipe does not know (``output_size``)."""
    if "padding_mode" in node.kwargs:  # the module: x alone, the rest from its attributes
        if len(node.args) != 1 or set(node.kwargs) != set(_MODULE_ATTRIBUTES):
            return None
        if node.kwargs["padding_mode"] != "zeros":
            return None
        return {"input": node.args[0], **{k: node.kwargs[k] for k in _MODULE_ATTRIBUTES if k != "padding_mode"}}
    if len(node.args) > len(_FUNCTIONAL_ORDER) or not set(node.kwargs) <= set(_FUNCTIONAL_ORDER):
        return None
    defaults = {"bias": None, "stride": 1, "padding": 0, "output_padding": 0, "groups": 1, "dilation": 1}
    named = {**defaults, **dict(zip(_FUNCTIONAL_ORDER, node.args)), **node.kwargs}
    return named if "input" in named and "weight" in named else None


def _geometry(arguments: Mapping[str, Any], rank: int) -> dict[str, Any] | None:
    """Stride, padding, output padding and dilation as one int per spatial dim, and the groups;
    None when any is not what ``torch`` accepts for a transposed convolution."""
    geometry: dict[str, Any] = {}
    for name, low in (("stride", 1), ("padding", 0), ("output_padding", 0), ("dilation", 1)):
        value = arguments[name]
        values = (value,) if isinstance(value, int) else value
        if isinstance(values, tuple) and len(values) == 1:
            values = values * rank  # one value for every spatial dim, as torch reads it
        if not isinstance(values, tuple) or len(values) != rank:
            return None
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= low for v in values):
            return None
        geometry[name] = list(values)
    groups = arguments["groups"]
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        return None
    geometry["groups"] = groups
    return geometry


def _operand(graph: OpGraph, node: Node) -> dict[str, Any]:
    """A tensor the kernel reads: a parameter path or the position of a forward argument."""
    if node.op == "param":
        return {"param": graph.params[node.name]}
    return {"input": graph.inputs.index(node.name)}


def _expression(operand: Mapping[str, Any], arguments: list[str]) -> str:
    """The Python expression of a tensor operand in ``forward``: a forward argument made contiguous."""
    return param_expr(operand["param"]) if "param" in operand else f"{arguments[operand['input']]}.contiguous()"


def describe_transposed(facts: Mapping[str, Any]) -> str:
    """One line for people and prompts: the transposed convolution's kernel and geometry."""
    details = [
        f"{name.replace('_', ' ')} {'x'.join(map(str, facts[name]))}"
        for name, plain in (("stride", 1), ("padding", 0), ("output_padding", 0), ("dilation", 1))
        if any(v != plain for v in facts[name])
    ]
    if facts["groups"] > 1:
        details.append(f"groups {facts['groups']}")
    details.append("bias" if facts["bias"] is not None else "no bias")
    return (
        f"transposed {facts['rank']}-D convolution, kernel {'x'.join(map(str, facts['kernel']))} ({', '.join(details)})"
    )
