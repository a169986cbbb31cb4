"""Compiling C and C++ kernels into shared libraries and calling them with torch tensors.

The fast path, for candidates of the ``cpu-cpp`` backend: write ``extern "C"`` functions that take
pointers and sizes, and call them through :func:`load_library`::

    import torch, torch.nn as nn
    from pragma_core.native import load_library

    SOURCE = r'''
    #include <cstdint>
    extern "C" void relu(const float* x, float* out, int64_t n) {
        #pragma omp parallel for
        for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.f ? x[i] : 0.f;
    }
    '''
    lib = load_library(SOURCE, flags=["-ffast-math"])  # compiled once, cached by content hash

    class ModelNew(nn.Module):
        def forward(self, x):
            out = torch.empty_like(x)
            lib.relu(x, out, x.numel())
            return out

A small kernel compiles in a fraction of a second (``-O3 -march=native -fopenmp``); once built,
loading it again, in any process, costs a few milliseconds. Each argument is checked against the
C signature before the call: a ``const float*`` takes a contiguous float32 CPU tensor, an
``int64_t`` a Python int that fits. A kernel that does not compile raises
:class:`NativeBuildError`, whose :meth:`~NativeBuildError.summary` is fit for a prompt.

Also here: pybind11 modules (:func:`load_extension`, with ``torch=True`` for modules that take
tensors), counting of every native call (:func:`native_call_count`, :func:`count_calls` for
``load_inline`` modules) and recording the calls of a forward for replay (:func:`record_calls`).

The modules: :mod:`.build` (compiler and cache), :mod:`.diagnostics` (compiler messages),
:mod:`.signatures` (reading ``extern "C"`` declarations), :mod:`.library` (loading and calling),
:mod:`.recording` and :mod:`.extension`. The last three import torch, on first use of one of
their names; the rest of the package does not need it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .build import CompilerNotFoundError, build_library, cache_dir, rebuild
from .diagnostics import BuildDiagnostic, NativeBuildError, parse_diagnostics
from .signatures import FunctionSignature, Parameter, SignatureError, parse_signatures

if TYPE_CHECKING:
    from .extension import CountingModule, count_calls, load_extension
    from .library import NativeCallError, NativeLibrary, load_library, native_call_count
    from .recording import CallRecording, PointerArgument, RecordedCall, ScalarArgument, record_calls

# Names whose modules import torch, imported on first use so that building and reading
# signatures (and importing this package) stay free of torch's start-up time.
_LAZY = {
    "load_library": "library",
    "NativeLibrary": "library",
    "NativeCallError": "library",
    "native_call_count": "library",
    "load_extension": "extension",
    "count_calls": "extension",
    "CountingModule": "extension",
    "record_calls": "recording",
    "CallRecording": "recording",
    "RecordedCall": "recording",
    "PointerArgument": "recording",
    "ScalarArgument": "recording",
}

__all__ = [
    # building
    "build_library",
    "rebuild",
    "cache_dir",
    "CompilerNotFoundError",
    "NativeBuildError",
    "BuildDiagnostic",
    "parse_diagnostics",
    # signatures
    "parse_signatures",
    "FunctionSignature",
    "Parameter",
    "SignatureError",
    # calling
    "load_library",
    "NativeLibrary",
    "NativeCallError",
    "native_call_count",
    # pybind11
    "load_extension",
    "count_calls",
    "CountingModule",
    # recording
    "record_calls",
    "CallRecording",
    "RecordedCall",
    "PointerArgument",
    "ScalarArgument",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
