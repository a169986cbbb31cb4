"""Softmax and log-softmax over one dimension in Triton, numerically stable.

A row that fits in one tile (:mod:`.tiling`) is loaded once: its maximum, the sum of
``exp(x - max)``, then the result. A longer row is read twice: an online pass keeps, per tile
element, a running maximum and the sum of exponentials rescaled whenever the maximum grows; the
tile's partial results are merged into the row's maximum and sum, and a second pass writes
``exp(x - max) / sum`` (softmax) or ``x - max - log(sum)`` (log-softmax).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..modules import forward_argument
from ..recipe import GenerationContext, Knob, Match
from ._module import launch_constants, triton_module
from ._tiling import TILE_HELPER, kernel_prologue, tile_loads, tiled_launch

__all__ = ["KNOBS", "generate"]

KNOBS: Mapping[str, Knob] = {
    "block": Knob(default=1024, values=(256, 512, 1024, 2048, 4096, 8192), start=4096),
    "num_warps": Knob(default=4, values=(1, 2, 4, 8), start=8),
}


def _kernel(log: bool, summary: str) -> str:
    if log:
        one_pass = "y = x - top[None, :] - tl.log(total)[None, :]"
        finish = "shift = top + tl.log(total)"
        looped = "y = x - shift[None, :]"
    else:
        one_pass = "y = e / total[None, :]"
        finish = "scale = 1.0 / total"
        looped = "y = tl.exp(x - top[None, :]) * scale[None, :]"
    return f'''
@triton.jit
def softmax_kernel(x_ptr, out, count, inner, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr, ONE_PASS: tl.constexpr):
    """{summary} of the rows of one strip."""
{kernel_prologue()}    if ONE_PASS:
{tile_loads("0", 8)}        x = tl.load(x_ptr + offsets, mask=mask, other=-float("inf"))
        top = tl.max(x, axis=0)
        e = tl.exp(x - top[None, :])
        total = tl.sum(e, axis=0)
        {one_pass}
        tl.store(out + offsets, y, mask=mask)
    else:
        # Online pass: per tile element, the running maximum and the sum of exp(x - maximum).
        high = tl.full([BLOCK_R, BLOCK_I], -float("inf"), tl.float32)
        sums = tl.zeros([BLOCK_R, BLOCK_I], tl.float32)
        for start in range(0, count, BLOCK_R):
{tile_loads("start", 12)}            x = tl.load(x_ptr + offsets, mask=mask, other=-float("inf"))
            new_high = tl.maximum(high, x)
            seen = new_high > -float("inf")  # an element that has seen no value keeps a zero sum
            sums = tl.where(seen, sums * tl.exp(high - new_high) + tl.exp(x - new_high), 0.0)
            high = new_high
        top = tl.max(high, axis=0)
        total = tl.sum(tl.where(high > -float("inf"), sums * tl.exp(high - top[None, :]), 0.0), axis=0)
        {finish}
        for start in range(0, count, BLOCK_R):
{tile_loads("start", 12)}            x = tl.load(x_ptr + offsets, mask=mask)
            {looped}
            tl.store(out + offsets, y, mask=mask)
'''


def generate(match: Match, knobs: Mapping[str, Any], context: GenerationContext) -> str:
    facts = match.facts
    dim = int(facts["dim"])
    x = forward_argument(context, 0)
    forward = (
        tiled_launch(
            "softmax_kernel", x, dim, dim + 1, f"{x}, out", one_pass=True, after=f"out = torch.empty_like({x})"
        )
        + "\nreturn out"
    )
    return triton_module(
        match=match,
        knobs=knobs,
        context=context,
        kernels=[_kernel(facts["op"] == "log_softmax", match.summary)],
        constants=launch_constants(knobs),
        helpers=[TILE_HELPER],
        forward_body=forward,
    )
