"""Normalizations in Triton: per-row statistics, then one scaling pass.

Covers what the C++ norm recipe matches: ``nn.LayerNorm`` (any number of trailing dims, with its
weight and bias), ``nn.InstanceNorm2d`` (with or without its per-channel affine map), RMS, L1, L2
and Frobenius normalizations written out (the reduction, the per-row chain after it, the division
or product with ``x``, a trailing weight and bias) and ``F.normalize``.

Each program owns a strip of the ``(outer, count, inner)`` view (:mod:`.tiling`): the reduced dims
are rows, so RMS over the features of ``(B, F, H, W)`` reads contiguous runs of ``H * W`` as layer
norm reads contiguous rows. Sums are kept per tile element and reduced at the end. Means and
variances are taken about each column's first element, so a large mean does not cancel the
variance away. A row that fits in one tile is read once; a longer one twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..graph import NotRecognized, OpGraph, Ref
from ..modules import forward_argument, param_expr
from ..recipe import GenerationContext, Knob, Match
from ._module import launch_constants, tl_float, triton_module
from ._tiling import TILE_HELPER, kernel_prologue, tile_loads, tiled_launch
from .elementwise import helpers_used, tl_expression

__all__ = ["KNOBS", "generate"]

KNOBS: Mapping[str, Knob] = {
    "block": Knob(default=1024, values=(256, 512, 1024, 2048, 4096, 8192), start=4096),
    "num_warps": Knob(default=4, values=(1, 2, 4, 8), start=8),
}

_REDUCTIONS = ("sum", "mean", "norm", "vector_norm")


def _scale_lines(graph: OpGraph, facts: Mapping[str, Any], key: str) -> list[str]:
    """Kernel lines turning each column's sum ``s`` (``[1, BLOCK_I]``) over ``count`` elements into
    the multiplier ``scale``: the reference's own ops between its reduction and ``x``."""
    ops = graph.ops
    if len(ops) == 1 and ops[0].op == "normalize":
        p, eps = ops[0].arg(1, "p", 2.0), ops[0].arg(3, "eps", 1e-12)
        norm = "s" if p == 1 else "tl.sqrt(s)"
        return [f"scale = 1.0 / tl.maximum({norm}, {tl_float(eps)})"]
    position = next((i for i, node in enumerate(ops) if node.op in _REDUCTIONS), None)
    if position is None:
        raise NotRecognized(f"{key}: the triton backend finds no reduction in this normalization")
    reduction = ops[position]
    if reduction.op == "sum":
        value = "s"
    elif reduction.op == "mean":
        value = "(s / count)"
    else:
        value = "s" if facts["stat"] == "abs_sum" else "tl.sqrt(s)"
    lines = [f"v_{reduction.name} = {value}"]
    previous = reduction
    rest = list(ops[position + 1 :])
    while rest and rest[0].shape == reduction.shape:
        node = rest.pop(0)
        operands = []
        for argument in node.args:
            if argument == Ref(previous.name):
                operands.append(f"v_{previous.name}")
            elif isinstance(argument, (int, float)) and not isinstance(argument, bool):
                operands.append(tl_float(argument))
            else:
                raise NotRecognized(f"{key}: the triton backend cannot write {node.op} on a row's statistic")
        expression = tl_expression(node, operands)
        if expression is None:
            raise NotRecognized(f"{key}: the triton backend writes no elementwise {node.op!r}")
        lines.append(f"v_{node.name} = {expression}")
        previous = node
    if not rest or rest[0].op not in ("div", "mul"):
        raise NotRecognized(f"{key}: the triton backend finds no division or product with x in this normalization")
    lines.append(f"scale = 1.0 / v_{previous.name}" if rest[0].op == "div" else f"scale = v_{previous.name}")
    return lines


def _kernel(facts: Mapping[str, Any], scale: list[str], summary: str) -> str:
    moments = facts["stat"] == "moments"
    per_channel = facts["weight_per"] == "channel"
    weight, bias = bool(facts["weight"]), bool(facts["bias"])
    parameters = ["x_ptr", *(["w_ptr"] if weight else []), *(["b_ptr"] if bias else []), "out"]
    if per_channel:
        parameters.append("channels")
    if moments:
        # Sums of (x - k) and (x - k)^2, k the column's first element.
        init = [
            "k = tl.load(x_ptr + base, mask=col_mask[None, :], other=0.0)",
            "s1 = tl.zeros([BLOCK_R, BLOCK_I], tl.float32)",
            "s2 = tl.zeros([BLOCK_R, BLOCK_I], tl.float32)",
        ]
        fold = ["d = tl.where(mask, x - k, 0.0)", "s1 += d", "s2 += d * d"]
        finish = [
            "m = tl.sum(s1, axis=0, keep_dims=True) / count",
            "var = tl.maximum(tl.sum(s2, axis=0, keep_dims=True) / count - m * m, 0.0)",
            "mean = k + m",
            f"scale = 1.0 / tl.sqrt(var + {tl_float(facts['eps'])})",
        ]
        value = "(x - mean) * scale"
    else:
        term = "tl.abs(x)" if facts["stat"] == "abs_sum" else "x * x"
        init = ["acc = tl.zeros([BLOCK_R, BLOCK_I], tl.float32)"]
        fold = [f"acc += {term}"]
        finish = ["s = tl.sum(acc, axis=0, keep_dims=True)", *scale]
        value = "x * scale"
    if per_channel and (weight or bias):
        # Instance norm's affine map is per channel: one (weight, bias) per program.
        channel = "outer_index % channels"
        if weight:
            finish.append(f"scale = scale * tl.load(w_ptr + {channel})")
        if bias:
            value = f"{value} + tl.load(b_ptr + {channel})"
    else:
        if weight:
            value = f"({value}) * tl.load(w_ptr + rows, mask=rows < count)"
        if bias:
            value = f"{value} + tl.load(b_ptr + rows, mask=rows < count)"

    def block(lines: list[str], indent: int) -> str:
        return "".join(" " * indent + line + "\n" for line in lines)

    return f'''
@triton.jit
def norm_kernel({", ".join(parameters)}, count, inner, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr, ONE_PASS: tl.constexpr):
    """{summary} of the rows of one strip."""
{kernel_prologue()}{block(init, 4)}    if ONE_PASS:
{tile_loads("0", 8)}        x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
{block(fold, 8)}{block(finish, 8)}        y = {value}
        tl.store(out + offsets, y, mask=mask)
    else:
        for start in range(0, count, BLOCK_R):
{tile_loads("start", 12)}            x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
{block(fold, 12)}{block(finish, 8)}        for start in range(0, count, BLOCK_R):
{tile_loads("start", 12)}            x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
            y = {value}
            tl.store(out + offsets, y, mask=mask)
'''


def generate(match: Match, knobs: Mapping[str, Any], context: GenerationContext) -> str:
    facts = match.facts
    if facts["stat"] not in ("moments", "abs_sum", "sq_sum"):
        raise NotRecognized(f"{context.task_key}: the triton backend writes no {facts['stat']!r} normalization")
    scale = [] if facts["stat"] == "moments" else _scale_lines(context.graph, facts, context.task_key)
    kernel = _kernel(facts, scale, match.summary)
    x = forward_argument(context, 0)
    first, last = facts["dims"]
    params = [param_expr(path) for path in (facts.get("weight"), facts.get("bias")) if path]
    arguments = ", ".join([x, *params, "out", *([f"{x}.shape[1]"] if facts["weight_per"] == "channel" else [])])
    forward = (
        tiled_launch("norm_kernel", x, first, last, arguments, one_pass=True, after=f"out = torch.empty_like({x})")
        + "\nreturn out"
    )
    return triton_module(
        match=match,
        knobs=knobs,
        context=context,
        kernels=[*helpers_used(kernel), kernel],
        constants=launch_constants(knobs),
        helpers=[TILE_HELPER],
        forward_body=forward,
    )
