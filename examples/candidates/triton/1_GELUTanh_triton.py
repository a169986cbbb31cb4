"""GELU (tanh approximation) in Triton: one fused kernel, one read and one write per element.

Runs on a GPU, or on the CPU under Triton's interpreter (correctness only):

    pragma verify examples/tasks/level1/1_GELUTanh.py examples/candidates/triton/1_GELUTanh_triton.py --set batch_size=4
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_tanh_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    v = tl.load(x_ptr + offsets, mask=mask)
    inner = 0.7978845608028654 * (v + 0.044715 * v * v * v)
    # 0.5 * v * (1 + tanh(u)) = v / (1 + exp(-2u))
    tl.store(out_ptr + offsets, v / (1.0 + tl.exp(-2.0 * inner)), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        gelu_tanh_kernel[(triton.cdiv(n, 4096),)](x, out, n, BLOCK=4096)
        return out
