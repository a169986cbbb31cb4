"""Inputs and models built the same way in the parent and in the sandbox child.

Both sides call these with the same seeds and get bit-identical tensors, so large inputs never
travel between the processes: only seeds do. The rules follow KernelBench: the seed is reset to 42
before constructing ``Model`` and again before ``ModelNew``; each trial draws fresh inputs from its
own seed.
"""

from __future__ import annotations

import random
from typing import Any

import torch

__all__ = ["MODEL_SEED", "trial_seeds", "make_inputs", "make_probe_inputs", "construct"]

MODEL_SEED = 42


def trial_seeds(count: int, *, salt: int = 0) -> list[int]:
    """``count`` input seeds, derived from the model seed (``salt`` gives another series)."""
    rng = random.Random(MODEL_SEED * 1_000_003 + salt)
    return [rng.randrange(2**31) for _ in range(count)]


def make_inputs(namespace: dict[str, Any], seed: int) -> list[Any]:
    """``get_inputs()`` drawn from ``seed``: tensors, and any plain values the task passes."""
    torch.manual_seed(seed)
    return list(namespace["get_inputs"]())


def make_probe_inputs(like: list[Any], seed: int) -> list[Any]:
    """Small integers in the inputs' shapes and dtypes: sums of products stay exact in float32.
    Other tensors are copied; plain values (a float argument) are passed as they are."""
    generator = torch.Generator().manual_seed(seed)
    return [
        (torch.randint(-4, 5, tuple(t.shape), generator=generator).to(t.dtype) if t.is_floating_point() else t.clone())
        if isinstance(t, torch.Tensor)
        else t
        for t in like
    ]


def construct(namespace: dict[str, Any], model_class: type) -> torch.nn.Module:
    init_inputs = namespace["get_init_inputs"]()
    torch.manual_seed(MODEL_SEED)
    return model_class(*init_inputs)
