"""The ``cpu-cpp`` backend: C and C++ kernels for the host CPU, built by the system compiler.

A candidate is a Python module defining ``ModelNew``. Its kernels reach the CPU one of three ways:
the fast path (``pragma_core.native.load_library``: extern "C" functions called through ctypes,
built in well under a second and cached by content), a pybind11 module
(``pragma_core.native.load_extension``), or ``torch.utils.cpp_extension.load_inline`` as in
KernelBench (accepted, but tens of seconds to build). The Coder's guide is ``guide.md``.
"""

from __future__ import annotations

import shutil
from importlib import resources

from ...plugin_api.components import Availability, Backend
from ...plugin_api.hookspecs import hookimpl
from ..loading import exec_module
from ._replay import KERNEL_REPLAY
from .evidence import NativeCallEvidence

__all__ = ["BACKEND_NAME", "KERNEL_HINT", "guide", "probe", "load_candidate", "recognizes"]

BACKEND_NAME = "cpu-cpp"
KERNEL_HINT = (
    "cpu-cpp kernels run through pragma_core.native.load_library, load_extension or "
    "torch.utils.cpp_extension.load_inline"
)


def guide() -> str:
    """The Coder's guide: how a candidate looks, with a worked example."""
    return resources.files(__package__).joinpath("guide.md").read_text(encoding="utf-8")


def probe() -> Availability:
    import os

    compiler = os.environ.get("CXX") or "g++"
    if shutil.which(compiler) is None:
        return Availability(
            available=False,
            reason=f"no C++ compiler: {compiler} is not on PATH (install g++ or set CXX)",
            still_works="task listing, profiling of the reference",
        )
    return Availability(available=True)


load_candidate = exec_module
"""Run the candidate's module (inside the sandbox child) and return its ``ModelNew``."""


def watch_loads():  # noqa: ANN201 - the plugin API's machine_code hook
    """In the child, before the candidate loads: what tells the machine code it then runs."""
    from .native.fingerprint import LoadWatch

    return LoadWatch().machine_code


def recognizes(source: str) -> bool:
    """A module that loads its kernel through pragma's native path or builds C++ with torch's
    extension loader (and no CUDA sources)."""
    return "pragma_core.native" in source or ("cpp_extension" in source and "cuda_sources" not in source)


@hookimpl
def pragma_register_backends(register):
    register(
        Backend(
            name=BACKEND_NAME,
            device="cpu",
            language="c++",
            description="C/C++ kernels built by the system compiler; ctypes fast path, pybind11 or load_inline",
            guide=guide(),
            probe=probe,
            load=load_candidate,
            evidence=NativeCallEvidence,
            kernel_hint=KERNEL_HINT,
            replay=KERNEL_REPLAY,
            recognizes=recognizes,
            machine_code=watch_loads,
        )
    )
