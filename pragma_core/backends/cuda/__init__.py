"""Pieces of the ``cuda`` and ``hip`` backends: CUDA C++ kernels built with ``load_inline``.

A candidate is KernelBench's format: a module whose ``ModelNew`` calls a kernel that
``torch.utils.cpp_extension.load_inline(cuda_sources=...)`` built at import. On a ROCm build of
torch the same call hipifies the source and builds it with hipcc, so one format serves both
backends. Here:

- the Coder's guides, ``guide_cuda.md`` and ``guide_hip.md`` (:func:`guide`);
- :mod:`.sources`: the CUDA text of a candidate's ``load_inline`` calls, read without running it;
- :mod:`.compile_check`: compiling that text with nvcc or hipcc where there is no GPU;
- :mod:`.diagnostics`: nvcc's messages as :class:`~pragma_core.native.BuildDiagnostic` records;
- the two backends' registration: the kernels of ``load_inline`` modules count their calls (the
  ``cpu-cpp`` evidence), tensors live on the GPU, the GPU clock times them, the GPU's peaks give
  the floor. Without a GPU neither runs (the probe says why); ``compile_only`` still checks a
  candidate's CUDA with nvcc.

Nothing here imports torch at import time.
"""

from __future__ import annotations

import functools
import os
import shutil
from importlib import resources

from ...plugin_api.components import Availability, Backend, Clock
from ...plugin_api.hookspecs import hookimpl
from ..cpu_cpp import load_candidate
from ..cpu_cpp.evidence import NativeCallEvidence
from ..gpu.hardware import device_floor_ms

__all__ = ["GUIDES", "guide", "probe", "recognizes"]

GUIDES = {"cuda": "guide_cuda.md", "hip": "guide_hip.md"}


def guide(backend: str = "cuda") -> str:
    """The Coder's guide for ``backend`` (``cuda`` or ``hip``): the candidate's form, rules, an example, tips."""
    try:
        name = GUIDES[backend]
    except KeyError:
        raise ValueError(f"backend must be one of {sorted(GUIDES)}, got {backend!r}") from None
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


_HIP_MARKERS = ("hip_runtime.h", "hipLaunchKernelGGL", "__HIP_PLATFORM")


def recognizes(backend: str, source: str) -> bool:
    """A module that builds CUDA sources with ``load_inline``: ``hip`` when they are written for
    HIP (its runtime header or launch macro), ``cuda`` otherwise."""
    if "cuda_sources" not in source:
        return False
    hip = any(marker in source for marker in _HIP_MARKERS)
    return hip if backend == "hip" else not hip


def probe(backend: str) -> Availability:
    """Runs here when torch is a build for this backend's GPUs, sees one, and its compiler is found."""
    from ..gpu.clock import gpu_available

    still = "a compile-only check of the candidate's kernels (pragma_core.backends.cuda.compile_check.compile_only)"
    compiler = "hipcc" if backend == "hip" else "nvcc"
    reason = gpu_available()
    if not reason:
        import torch

        if backend == "hip" and not getattr(torch.version, "hip", None):
            reason = "torch is a CUDA build; HIP candidates need a ROCm build of torch"
        elif backend == "cuda" and not getattr(torch.version, "cuda", None):
            reason = "torch is a ROCm build; CUDA candidates need a CUDA build of torch (or use the hip backend)"
    if (
        not reason
        and shutil.which(compiler) is None
        and not os.environ.get("CUDA_HOME" if backend == "cuda" else "ROCM_HOME")
    ):
        reason = f"{compiler} is not on PATH: load_inline cannot build the kernels"
    if reason:
        return Availability(available=False, reason=reason, still_works=still if shutil.which(compiler) else "")
    return Availability(available=True)


def _clock() -> Clock | None:
    from ..gpu.clock import GpuClock

    return GpuClock().time


@hookimpl
def pragma_register_backends(register):
    for name, device, language, description in (
        ("cuda", "cuda", "cuda", "CUDA C++ kernels built by load_inline with nvcc, on an NVIDIA GPU"),
        ("hip", "rocm", "hip", "HIP kernels built by load_inline with hipcc, on an AMD GPU (ROCm build of torch)"),
    ):
        register(
            Backend(
                name=name,
                device=device,
                language=language,
                description=description,
                guide=guide(name),
                probe=functools.partial(probe, name),
                load=load_candidate,
                evidence=NativeCallEvidence,
                kernel_hint=f"{name} kernels are built with torch.utils.cpp_extension.load_inline(cuda_sources=...) "
                "and called through the module it returns",
                execution_device=functools.partial(str, device),
                clock=_clock,
                recognizes=functools.partial(recognizes, name),
                floor_ms=device_floor_ms,
            )
        )
