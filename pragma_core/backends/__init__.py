"""Backends: the ways a candidate's kernels are written, built, proven to run and timed.

Each built-in backend is a package registered as a plugin (see
``pragma_core.plugin_api.registry.BUILTIN_PLUGINS``): ``cpu_cpp`` (C and C++ on the host CPU), ``triton``
(Triton kernels: on a GPU, or under Triton's interpreter for correctness only), ``cuda`` (CUDA
C++ and, where torch is a ROCm build, HIP). ``gpu`` holds what the GPU backends share: the GPU's
peaks for the roofline and the clock. A backend from outside the repository registers the same
way, through the ``pragma`` entry-point group (docs/plugins.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..plugin_api.registry import PluginRegistry

__all__ = ["DEFAULT_BACKEND", "backend_for_source", "torch_device"]

DEFAULT_BACKEND = "cpu-cpp"
"""The backend of a candidate whose backend is not named and that no other backend recognizes."""


def backend_for_source(source: str, registry: PluginRegistry) -> str:
    """The backend a candidate's source is written for: the one backend other than the default
    that recognizes it, else the default (which may not recognize it either: the verifier then
    says what it misses)."""
    claimed = [
        name for name, backend in registry.backends().items() if name != DEFAULT_BACKEND and backend.recognizes(source)
    ]
    return claimed[0] if len(claimed) == 1 else DEFAULT_BACKEND


def torch_device(kind: str) -> str:
    """The torch device type of a device kind: ``rocm`` GPUs are ``cuda`` devices to torch."""
    return "cuda" if kind in ("cuda", "rocm") else kind
