"""Writing a generated Triton candidate: the recipe marker, ``@triton.jit`` kernels at module level
and a ``ModelNew`` whose constructor is the task's own ``Model.__init__`` (as
:func:`~pragma_core.offline.modules.candidate_module` writes it for C++) and whose forward launches
the kernels.

The module must be a file on disk when it runs: ``triton.jit`` reads each kernel's source. It
names no device: on a GPU the kernels run on CUDA or ROCm tensors, elsewhere under the Triton
interpreter (``TRITON_INTERPRET=1`` set before triton is imported) on CPU tensors.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from ..modules import module_frame
from ..recipe import GenerationContext, Knob, Match

__all__ = ["triton_module", "tl_float", "WARPS", "launch_constants", "KNOB_MEANINGS"]

WARPS = Knob(default=4, values=(1, 2, 4, 8), start=4)
"""``num_warps``: the warps (32 threads each; a wavefront of 64 on AMD) that run one program."""

KNOB_MEANINGS = {
    "block": "elements one program handles per step (BLOCK, a power of two): a whole tile or row chunk",
    "num_warps": "warps per program (num_warps): the threads that share one block",
}
"""What the Triton knobs change, as :data:`~pragma_core.offline.recipe.KNOB_MEANINGS` says for C++."""

_STANDARD_IMPORTS = ("import torch", "import torch.nn as nn", "import triton", "import triton.language as tl")


def tl_float(value: float) -> str:
    """A float literal inside a kernel that keeps the value (``0.044715``, ``float("inf")``)."""
    value = float(value)
    if math.isinf(value):
        return 'float("inf")' if value > 0 else '-float("inf")'
    if math.isnan(value):
        return 'float("nan")'
    return repr(value)


def launch_constants(knobs: Mapping[str, Any]) -> dict[str, int]:
    """The module-level constants the forward launches with: ``BLOCK`` and ``NUM_WARPS``."""
    return {"BLOCK": int(knobs["block"]), "NUM_WARPS": int(knobs["num_warps"])}


def triton_module(
    *,
    match: Match,
    knobs: Mapping[str, Any],
    context: GenerationContext,
    kernels: Sequence[str],
    constants: Mapping[str, Any],
    forward_body: str,
    helpers: Sequence[str] = (),
    notes: str = "",
) -> str:
    """The whole candidate: ``kernels`` are ``@triton.jit`` functions (source, unindented),
    ``constants`` module-level names the forward reads (the knob values, e.g. ``BLOCK``),
    ``helpers`` plain Python functions of the forward, ``forward_body`` the body of ``forward``
    (unindented), which sees the forward's own argument names."""
    frame = module_frame(match, knobs, context, _STANDARD_IMPORTS)
    extra = f"\n\n{notes}" if notes else ""
    header = f'"""{match.summary}: written by pragma\'s offline recipe Coder for the triton backend.{extra}\n"""'
    sections = [textwrap.dedent(kernel).strip() for kernel in (*kernels, *helpers)]
    lines = [
        header,
        frame.marker,
        *_STANDARD_IMPORTS,
        *frame.imports,
        "",
        *frame.constants,
        *(f"{name} = {value!r}" for name, value in constants.items()),
        "",
        "",
        *(part for section in sections for part in (section, "", "")),
        *frame.model_new(forward_body),
    ]
    return "\n".join(lines)
