"""The ``triton`` backend: Triton kernels, on an NVIDIA or AMD GPU, or under Triton's interpreter.

A candidate is a Python module with ``@triton.jit`` kernels and a ``ModelNew`` that launches them.
It is loaded from a file (Triton's ``jit`` reads the kernels' source). On a machine with a GPU the
candidate's tensors live on it, its launches are the proof that it ran and the GPU clock times it
(:mod:`pragma_core.backends.gpu.clock`). With no GPU, the child sets ``TRITON_INTERPRET=1`` and
the kernels run on the CPU under the interpreter: correct or not is known, timing is refused
(interpreter times say nothing about a GPU). The Coder's guide is ``guide.md``.
"""

from __future__ import annotations

import functools
import importlib.util
from importlib import resources
from pathlib import Path

from ...plugin_api.components import Availability, Backend, Clock
from ...plugin_api.hookspecs import hookimpl
from ..gpu.hardware import device_floor_ms
from ..loading import load_module_file
from ._launches import TritonLaunchEvidence

__all__ = ["BACKEND_NAME", "KERNEL_HINT", "guide", "probe", "interpreted", "recognizes"]

BACKEND_NAME = "triton"
KERNEL_HINT = "triton kernels are @triton.jit functions launched as kernel[grid](...)"
INTERPRETER_NOTE = (
    "no GPU here: Triton kernels run under Triton's interpreter (TRITON_INTERPRET=1) on the CPU, which "
    "checks correctness; its times say nothing about a GPU"
)


def guide() -> str:
    """The Coder's guide: how a Triton candidate looks, autotuning, a worked example."""
    return resources.files(__package__).joinpath("guide.md").read_text(encoding="utf-8")


def probe() -> Availability:
    if importlib.util.find_spec("triton") is None:
        return Availability(
            available=False,
            reason="triton is not installed: pip install triton",
            still_works="the cpu-cpp backend",
        )
    if interpreted():
        return Availability(
            available=True, reason="no GPU: candidates run under Triton's interpreter, checked but not timed"
        )
    return Availability(available=True)


@functools.cache
def interpreted() -> bool:
    """True when no GPU can run Triton here, so candidates run under the interpreter (asked once
    per process: the backend's fields ask it on every verification)."""
    from ..gpu.clock import gpu_available

    return bool(gpu_available())


def _execution_device() -> str:
    if interpreted():
        return "cpu"
    import torch

    return "rocm" if getattr(torch.version, "hip", None) else "cuda"


def _timing_refusal() -> str:
    return INTERPRETER_NOTE if interpreted() else ""


def _environment(build_dir: Path) -> dict[str, str]:
    environment = {"TRITON_CACHE_DIR": str(Path(build_dir) / "triton-cache")}
    if interpreted():
        environment["TRITON_INTERPRET"] = "1"
    return environment


def _clock() -> Clock | None:
    if interpreted():
        return None
    from ..gpu.clock import GpuClock

    return GpuClock().time


def recognizes(source: str) -> bool:
    """A module that imports triton."""
    return "import triton" in source or "from triton" in source


@hookimpl
def pragma_register_backends(register):
    register(
        Backend(
            name=BACKEND_NAME,
            device="cuda",
            language="triton",
            description="Triton kernels on an NVIDIA or AMD GPU; with no GPU, under Triton's interpreter "
            "(correctness only)",
            guide=guide(),
            probe=probe,
            load=load_module_file,
            evidence=TritonLaunchEvidence,
            kernel_hint=KERNEL_HINT,
            execution_device=_execution_device,
            timing_refusal=_timing_refusal,
            clock=_clock,
            child_environment=_environment,
            recognizes=recognizes,
            floor_ms=device_floor_ms,
        )
    )
