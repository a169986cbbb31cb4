"""Pooling: max and average pooling over the last 1, 2 or 3 dims (``nn.MaxPool1d/2d/3d``,
``nn.AvgPool1d/2d/3d`` and the ``F.`` forms).

Recognizes kernel size, stride (the kernel when not given), padding, dilation (max), ceil mode,
``count_include_pad`` and ``divisor_override`` (average), with or without a batch dim. A max pool
that returns indices is left to a language model. The window's constants are baked into the C++
(see :mod:`._pooling_kernels`); the output's shape is computed in the forward from the input's, with
torch's own formula.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from ..graph import Node, OpGraph, Ref
from ..modules import candidate_module, forward_argument
from ..recipe import GenerationContext, Knob, Match
from ._pooling_kernels import pooling_kernel_source

__all__ = ["PoolingRecipe", "pooled_size", "pool_facts", "pool_lines", "describe_pool", "POOLED_SIZE_SOURCE"]

_FLOAT32 = "torch.float32"
_OPS = {f"{kind}_pool{rank}d": (kind, rank) for kind in ("max", "avg") for rank in (1, 2, 3)}


def pooled_size(size: int, kernel: int, stride: int, padding: int, dilation: int, ceil_mode: bool) -> int:
    """The output length along one dim, as torch computes it (``pooling_output_shape``)."""
    out = (size + 2 * padding - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


class PoolingRecipe:
    """A float32 tensor max- or average-pooled over its last 1, 2 or 3 dims."""

    family = "pool"
    knobs: Mapping[str, Knob] = {
        "parallel": Knob(default=False, values=(False, True), start=True),
        "simd": Knob(default=False, values=(False, True), start=True),
        "block": Knob(default=0, values=(0, 64, 256, 1024), start=256),
    }

    def match(self, graph: OpGraph) -> Match | None:
        if len(graph.inputs) != 1 or graph.params or len(graph.outputs) != 1:
            return None
        ops = graph.ops
        if len(ops) != 1 or ops[0].op not in _OPS or graph.outputs[0] != Ref(ops[0].name):
            return None
        node, x = ops[0], graph.input_node(0)
        if node.args[:1] != (Ref(x.name),):
            return None
        facts = pool_facts(node, x)
        if facts is None:
            return None
        return Match(family=self.family, summary=describe_pool(facts), facts=facts)

    def generate(self, match: Match, knobs: Mapping[str, Any], context: GenerationContext) -> str:
        facts = {**match.facts, "tile": int(knobs["block"])}
        cpp = pooling_kernel_source(facts, knobs)
        name = forward_argument(context, 0)
        forward = "\n".join([f"{name} = {name}.contiguous()", *pool_lines(facts, name, "out"), "return out"])
        flags = [] if knobs["simd"] else ["-fno-tree-vectorize"]
        module = candidate_module(match=match, knobs=knobs, context=context, cpp=cpp, forward_body=forward, flags=flags)
        return module.replace("\n\nclass ModelNew", f"\n\n{POOLED_SIZE_SOURCE}\n\nclass ModelNew", 1)


POOLED_SIZE_SOURCE = inspect.getsource(pooled_size)
"""The formula the forward sizes a pooled output with, written into the module: the same one the
match checked the trace with."""


def pool_facts(node: Node, x: Node) -> dict[str, Any] | None:
    """A pooling's facts (``op`` max or avg, ``rank``, the window) on the float32 tensor ``x``;
    None for what the kernels do not compute, or where torch sizes the output otherwise."""
    if node.op not in _OPS:
        return None
    kind, rank = _OPS[node.op]
    if x.shape is None or str(x.dtype) != _FLOAT32 or len(x.shape) not in (rank + 1, rank + 2) or 0 in x.shape:
        return None
    if node.shape is None or str(node.dtype) != _FLOAT32:
        return None
    window = _window(node, kind, rank)
    if window is None:
        return None
    expected = x.shape[: len(x.shape) - rank] + tuple(
        pooled_size(size, k, s, p, d, window["ceil_mode"])
        for size, k, s, p, d in zip(
            x.shape[-rank:], *(window[key][3 - rank :] for key in ("kernel", "stride", "padding", "dilation"))
        )
    )
    if expected != node.shape:
        return None  # torch sizes the output otherwise: leave it rather than guess
    return {"op": kind, "rank": rank, **window}


def describe_pool(facts: Mapping[str, Any]) -> str:
    """One line for people and prompts: max or average pooling and its window."""
    rank = facts["rank"]
    return f"{facts['op']} pooling {rank}D, window {'x'.join(map(str, facts['kernel'][3 - rank :]))}"


def pool_lines(
    facts: Mapping[str, Any], x: str, target: str, *, prefix: str = "", tail_arguments: str = ""
) -> list[str]:
    """The lines of ``forward`` pooling the contiguous tensor ``x`` into a new ``target``: the
    output's sizes (``pooled_size``, :data:`POOLED_SIZE_SOURCE`) from ``x``'s shape, then
    ``lib.{prefix}pool`` with ``tail_arguments`` after its own."""
    rank = facts["rank"]
    spatial = ["1"] * (3 - rank) + [f"{x}.shape[{d - rank}]" for d in range(rank)]
    outputs = [
        f"pooled_size({size}, {k}, {s}, {p}, {d}, {facts['ceil_mode']})"
        for size, k, s, p, d in zip(
            spatial, facts["kernel"], facts["stride"], facts["padding"], facts["dilation"], strict=True
        )
    ]
    return [
        f"D, H, W = {', '.join(spatial)}",
        f"OD, OH, OW = {', '.join(outputs)}",
        f"lead = tuple({x}.shape[:{-rank}])",
        f"{target} = torch.empty(lead + (OD, OH, OW)[{3 - rank}:], dtype={x}.dtype)",
        "planes = torch.Size(lead).numel()",
        f"lib.{prefix}pool({x}, {target}, planes, D, H, W, OD, OH, OW{tail_arguments})",
    ]


def _window(node: Node, kind: str, rank: int) -> dict[str, Any] | None:
    """The window's parameters, each as 3 values (D, H, W; size-1 in front for lower ranks), and the
    flags; None for a variant the kernel does not compute."""
    kernel = _triple(node.arg(1, "kernel_size"), rank)
    stride_given = node.arg(2, "stride")
    stride = kernel if stride_given in (None, (), []) else _triple(stride_given, rank)
    padding = _triple(node.arg(3, "padding", 0), rank, low=0, pad=0)
    if kind == "max":
        dilation = _triple(node.arg(4, "dilation", 1), rank)
        ceil_mode, return_indices = node.arg(5, "ceil_mode", False), node.arg(6, "return_indices", False)
        include_pad, override = True, None
        if return_indices is not False:
            return None
    else:
        dilation = [1, 1, 1]
        ceil_mode, include_pad = node.arg(4, "ceil_mode", False), node.arg(5, "count_include_pad", True)
        override = node.arg(6, "divisor_override", None)
        if not isinstance(include_pad, bool) or not (
            override is None or (isinstance(override, int) and not isinstance(override, bool) and override > 0)
        ):
            return None
    if None in (kernel, stride, padding, dilation) or not isinstance(ceil_mode, bool):
        return None
    return {
        "kernel": kernel,
        "stride": stride,
        "padding": padding,
        "dilation": dilation,
        "ceil_mode": ceil_mode,
        "count_include_pad": include_pad,
        "divisor_override": override,
    }


def _triple(value: Any, rank: int, *, low: int = 1, pad: int = 1) -> list[int] | None:
    """An int or a tuple of ``rank`` ints (each at least ``low``) as 3 values, ``pad`` in front."""
    values = (value,) * rank if isinstance(value, int) else value
    if isinstance(values, tuple) and len(values) == 1:
        values = values * rank
    if (
        not isinstance(values, tuple)
        or len(values) != rank
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= low for v in values)
    ):
        return None
    return [pad] * (3 - rank) + list(values)
