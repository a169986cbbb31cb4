"""Reductions over one dimension in Triton: sum, mean, prod, max, min, argmax, argmin.

Each program folds its strip of the ``(outer, count, inner)`` view (:mod:`.tiling`) into a tile of
partial results, one per tile element, so every loaded element is combined without a reduction
inside the loop; the tile is reduced along the rows once at the end. argmax and argmin keep, per
tile element, the first index of its extreme value; the final reduction takes the extreme value,
then the smallest index holding it, so ties resolve to the first index, like torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..graph import NotRecognized
from ..modules import forward_argument
from ..recipe import GenerationContext, Knob, Match
from ._module import WARPS, launch_constants, triton_module
from ._tiling import TILE_HELPER, kernel_prologue, tile_loads, tiled_launch

__all__ = ["KNOBS", "generate"]

KNOBS: Mapping[str, Knob] = {
    "block": Knob(default=1024, values=(128, 256, 512, 1024, 2048, 4096), start=2048),
    "num_warps": WARPS,
}

# op -> (identity, how a tile element folds in the next value ``v``, the final reduction of ``acc``).
_VALUE_REDUCTIONS = {
    "sum": ("0.0", "acc + v", "tl.sum(acc, axis=0)"),
    "mean": ("0.0", "acc + v", "tl.sum(acc, axis=0) / count"),
    "prod": ("1.0", "acc * v", "tl.reduce(acc, 0, _multiply)"),
    "max": ('-float("inf")', "tl.maximum(acc, v)", "tl.max(acc, axis=0)"),
    "min": ('float("inf")', "tl.minimum(acc, v)", "tl.min(acc, axis=0)"),
}
_INDEX_REDUCTIONS = {"argmax": ">", "argmin": "<"}

_MULTIPLY = """
@triton.jit
def _multiply(a, b):
    return a * b
"""


def _value_kernel(op: str) -> str:
    identity, fold, final = _VALUE_REDUCTIONS[op]
    return f'''
@triton.jit
def reduce_kernel(x, out, count, inner, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    """{op} over the rows of one strip; one partial result per tile element."""
{kernel_prologue()}    acc = tl.full([BLOCK_R, BLOCK_I], {identity}, tl.float32)
    for start in range(0, count, BLOCK_R):
{tile_loads("start", 8)}        v = tl.load(x + offsets, mask=mask, other={identity})
        acc = {fold}
    tl.store(out + outer_index * inner + cols, {final}, mask=col_mask)
'''


def _index_kernel(op: str) -> str:
    better = _INDEX_REDUCTIONS[op]
    worst = '-float("inf")' if better == ">" else 'float("inf")'
    extreme = "max" if better == ">" else "min"
    return f'''
@triton.jit
def reduce_kernel(x, out, count, inner, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    """{op} over the rows of one strip: each tile element keeps the first index of its extreme."""
{kernel_prologue()}    best = tl.full([BLOCK_R, BLOCK_I], {worst}, tl.float32)
    where = tl.zeros([BLOCK_R, BLOCK_I], tl.int32)
    for start in range(0, count, BLOCK_R):
{tile_loads("start", 8)}        v = tl.load(x + offsets, mask=mask, other={worst})
        take = v {better} best
        best = tl.where(take, v, best)
        where = tl.where(take, rows, where)
    top = tl.{extreme}(best, axis=0)
    index = tl.min(tl.where(best == top[None, :], where, count), axis=0)  # the first index holding it
    tl.store(out + outer_index * inner + cols, index.to(tl.int64), mask=col_mask)
'''


def generate(match: Match, knobs: Mapping[str, Any], context: GenerationContext) -> str:
    facts = match.facts
    op, dim = facts["op"], int(facts["dim"])
    if op in _INDEX_REDUCTIONS:
        kernels = [_index_kernel(op)]
    elif op in _VALUE_REDUCTIONS:
        kernels = ([_MULTIPLY] if op == "prod" else []) + [_value_kernel(op)]
    else:
        raise NotRecognized(f"{context.task_key}: the triton backend writes no {op!r} reduction")
    x = forward_argument(context, 0)
    kept = " + (1,)" if facts["keepdim"] else ""
    allocate = (
        f"out = torch.empty(shape[:{dim}]{kept} + shape[{dim + 1}:], dtype=torch.{facts['dtype']}, device={x}.device)"
    )
    forward = tiled_launch("reduce_kernel", x, dim, dim + 1, f"{x}, out", after=allocate) + "\nreturn out"
    return triton_module(
        match=match,
        knobs=knobs,
        context=context,
        kernels=kernels,
        constants=launch_constants(knobs),
        helpers=[TILE_HELPER],
        forward_body=forward,
    )
