"""Norms whose statistics span several rows: batch norm (per channel, over the batch and the
spatial dims) and group norm (per sample and group of channels, over the group's channels and the
spatial dims).

Recognizes ``nn.BatchNorm1d/2d/3d`` (the module form; affine or not, with or without running
statistics) and ``nn.GroupNorm`` or ``F.group_norm``. A batch norm in training mode (as the verifier
builds the task's model) normalizes with the batch's mean and biased variance and updates the
running statistics as torch does (momentum, or the cumulative average when it is None); in eval
mode it uses the running statistics. The forward asks the module which mode it is in.

The input is viewed as ``(N, C, S)``. Both norms are one kernel (see :mod:`._channel_norm_kernels`):
sums of ``x - k`` and ``(x - k)**2`` over pieces of each ``(n, c)`` block of ``S`` contiguous
elements (``k`` the statistic's first element, so a large mean does not cancel the variance away;
float over blocks of 4096, double across them) in parallel, then each statistic's mean and variance,
a scale and shift per ``(n, c)``, and one vectorized pass ``y = x * scale + shift``. Group norm with
at least one group per thread takes a group's statistics and scaling one after the other in the same
thread, so the second pass reads the group from cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..graph import Node, OpGraph, Ref
from ..modules import candidate_module, forward_argument, param_expr
from ..recipe import GenerationContext, Knob, Match
from ._channel_norm_kernels import channel_norm_source

__all__ = ["ChannelNormRecipe", "channel_norm_facts", "channel_norm_lines"]

_FLOAT32 = "torch.float32"


class ChannelNormRecipe:
    """Batch norm and group norm: statistics over several rows, then one scale and shift per row."""

    family = "channel_norm"
    knobs: Mapping[str, Knob] = {
        "parallel": Knob(default=False, values=(False, True), start=True),
        "simd": Knob(default=False, values=(False, True), start=True),
        "accumulators": Knob(default=1, values=(1, 2, 4, 8), start=4),
    }

    def match(self, graph: OpGraph) -> Match | None:
        if len(graph.inputs) != 1 or len(graph.outputs) != 1:
            return None
        ops = graph.ops
        if len(ops) != 1 or graph.outputs[0] != Ref(ops[0].name):
            return None
        node, x = ops[0], graph.input_node(0)
        if x.shape is None or len(x.shape) < 2 or 0 in x.shape or str(x.dtype) != _FLOAT32:
            return None
        if node.args[:1] != (Ref(x.name),) or node.shape != x.shape or str(node.dtype) != _FLOAT32:
            return None
        if node.op == "batch_norm":
            return _match_batch_norm(graph, x, node)
        if node.op == "group_norm":
            return _match_group_norm(graph, x, node)
        return None

    def generate(self, match: Match, knobs: Mapping[str, Any], context: GenerationContext) -> str:
        facts = match.facts
        cpp = channel_norm_source(facts, knobs)
        name = forward_argument(context, 0)
        forward = "\n".join([f"{name} = {name}.contiguous()", *channel_norm_lines(facts, name, "out"), "return out"])
        flags = [] if knobs["simd"] else ["-fno-tree-vectorize"]
        return candidate_module(match=match, knobs=knobs, context=context, cpp=cpp, forward_body=forward, flags=flags)


def channel_norm_lines(
    facts: Mapping[str, Any], x: str, target: str, *, prefix: str = "", tail_arguments: str = ""
) -> list[str]:
    """The lines of ``forward`` normalizing the contiguous tensor ``x`` into a new ``target``:
    ``lib.{prefix}group_norm`` or ``batch_norm`` (``batch_norm_eval`` when the module is in eval mode),
    with ``tail_arguments`` after its own."""
    affine = [param_expr(facts[key]) for key in ("weight", "bias") if facts[key]]
    sizes = f"{x}.shape[0], {x}.shape[1], torch.Size({x}.shape[2:]).numel()"
    head = [f"{target} = torch.empty_like({x})"]
    if facts["kind"] == "group_norm":
        return [
            *head,
            f"lib.{prefix}group_norm({', '.join([x, *affine])}, {target}, {sizes}, {facts['groups']}{tail_arguments})",
        ]
    if facts["running_mean"] is None:
        return [*head, f"lib.{prefix}batch_norm({', '.join([x, *affine])}, {target}, {sizes}{tail_arguments})"]
    module = param_expr(facts["module"])
    running = [param_expr(facts[key]) for key in ("running_mean", "running_var", "tracked")]
    return [
        *head,
        f"if {module}.training:",
        f"    momentum = -1.0 if {module}.momentum is None else float({module}.momentum)",
        f"    lib.{prefix}batch_norm({', '.join([x, *affine])}, {target}, {sizes}, {', '.join(running)}, momentum{tail_arguments})",
        "else:",
        f"    lib.{prefix}batch_norm_eval({', '.join([x, *affine, *running[:2]])}, {target}, {sizes}{tail_arguments})",
    ]


def channel_norm_facts(graph: OpGraph, x: Node, node: Node) -> dict[str, Any] | None:
    """The facts of a batch norm or group norm ``node`` of the float32 tensor ``x`` (2-D or more);
    None for any other node, or one the kernels do not compute."""
    if x.shape is None or len(x.shape) < 2 or 0 in x.shape or str(x.dtype) != _FLOAT32:
        return None
    if node.args[:1] != (Ref(x.name),) or node.shape != x.shape or str(node.dtype) != _FLOAT32:
        return None
    match = (
        _match_batch_norm(graph, x, node)
        if node.op == "batch_norm"
        else _match_group_norm(graph, x, node)
        if node.op == "group_norm"
        else None
    )
    return match.facts if match is not None else None


# -- matching ---------------------------------------------------------------------------------------


def _match_batch_norm(graph: OpGraph, x: Node, node: Node) -> Match | None:
    """The module form only: ``batch_norm(x)`` with the module's parameters and buffers as kwargs."""
    if len(node.args) != 1 or "running_mean" not in node.kwargs:
        return None
    channels = x.shape[1] if x.shape is not None else 0
    eps = node.kwargs.get("eps", 1e-5)
    paths = _paths(graph, node, ("weight", "bias", "running_mean", "running_var"), channels)
    if paths is None or not isinstance(eps, (int, float)) or len(x.dims) > 5:
        return None
    weight, bias, mean, var = paths
    if (mean is None) != (var is None):
        return None
    module = next((path.rsplit(".", 1)[0] for path in paths if path and "." in path), None)
    if mean is not None and module is None:
        return None
    return Match(
        family="channel_norm",
        summary=f"batch norm over {channels} channels" + (", affine" if weight else ""),
        facts={
            "kind": "batch_norm",
            "eps": float(eps),
            "weight": weight,
            "bias": bias,
            "running_mean": mean,
            "running_var": var,
            "tracked": f"{module}.num_batches_tracked" if mean is not None else None,
            "module": module,
        },
    )


def _match_group_norm(graph: OpGraph, x: Node, node: Node) -> Match | None:
    channels = x.dims[1]
    groups, eps = node.arg(1, "num_groups"), node.arg(4, "eps", 1e-5)
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1 or channels % groups:
        return None
    if not isinstance(eps, (int, float)) or len(node.args) > 5:
        return None
    refs = {"weight": node.arg(2, "weight"), "bias": node.arg(3, "bias")}
    paths = []
    for ref in refs.values():
        param = graph.node(ref)
        if ref is not None and (param is None or not _is_param(param, channels)):
            return None
        paths.append(graph.params[param.name] if param is not None else None)
    return Match(
        family="channel_norm",
        summary=f"group norm, {groups} groups of {channels // groups} channels",
        facts={"kind": "group_norm", "groups": groups, "eps": float(eps), "weight": paths[0], "bias": paths[1]},
    )


def _paths(graph: OpGraph, node: Node, keys: tuple[str, ...], channels: int) -> list[str | None] | None:
    paths: list[str | None] = []
    for key in keys:
        ref = node.kwargs.get(key)
        param = graph.node(ref)
        if ref is not None and (param is None or not _is_param(param, channels)):
            return None
        paths.append(graph.params[param.name] if param is not None else None)
    return paths


def _is_param(node: Node, channels: int) -> bool:
    return node.op == "param" and node.shape == (channels,) and str(node.dtype) == _FLOAT32
