"""Which kernels of a profile belong to a library and not to the candidate, and the note that says so.

A candidate that lets PyTorch, cuBLAS, cuDNN, rocBLAS or MIOpen do the work (a fallback to a
library call, or a decoy kernel that never runs: INTEGRITY.md items 17 and 19) still launches
kernels inside the profiled forward, and their names give it away: libraries name their kernels
after their own namespaces and conventions (``at::native::...``, ``ampere_sgemm_128x64_nn``,
``Cijk_Ailk_Bljk_...``, ``MIOpenBatchNormFwdTrainSpatial``). Triton kernels carry the name of the
candidate's ``@triton.jit`` function (``square_kernel_0d1d234``), and every name that matches no
library is counted as the candidate's own::

    library_kernels(["square_kernel_0d1d234", "ampere_sgemm_128x64_nn"])   # ["ampere_sgemm_128x64_nn"]
    library_note([("ampere_sgemm_128x64_nn", 710.0), ("my_kernel", 290.0)])
    # "library kernels did work inside the candidate's forward: ampere_sgemm_128x64_nn (cuBLAS, 71% of kernel time)"

Names are matched as profilers print them demangled (ncu ``--kernel-name-base demangled``,
rocprofv3's default), on the kernel's own qualified name (``at::native::vectorized_elementwise_kernel``
of ``void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)``), so a candidate's kernel
templated on ``c10::Half`` stays the candidate's. A name the candidate gave (``candidate_kernels``)
is the candidate's, unless the kernel sits in a library's namespace. CUTLASS and composable_kernel
are header libraries a candidate may instantiate itself; their kernels are reported all the same,
with the library named, for the reader to judge. The runtime's own copy and fill kernels
(``__amd_rocclr_copyBuffer``) are not a library's work. The patterns cover the common kernel names
of each library, not every one.

The ncu and rocprof plugins use it to check the kernels they saw inside the candidate's forward; it
imports the standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["LIBRARIES", "library_of", "is_candidate_kernel", "library_kernels", "library_note"]

_ARCH = r"(?:kepler|maxwell|pascal|volta|turing|ampere|hopper|ada|blackwell)"

LIBRARIES: tuple[tuple[str, str], ...] = (
    # (library, regular expression matched at the start of the kernel's qualified name)
    ("PyTorch ATen", r"(?:at|at_cuda_detail|c10|pytorch_flash)::|softmax_warp_(?:forward|backward)$|fmha_cutlass"),
    ("PyTorch Inductor", r"triton_(?:poi|red|per|tem)_fused"),  # torch.compile's generated Triton kernels
    (
        "cuBLAS",
        rf"(?i:cublas)|{_ARCH}_\w*gem[mv]|sm\d+_xmma_gemm|gemv2[NT]_kernel|gemvx::|gemmk1_kernel|gemmSN_[NT][NT]_kernel|splitKreduce_kernel",
    ),
    ("CUTLASS", r"(?i:cutlass)"),
    (
        "cuDNN",
        rf"(?i:cudnn)|{_ARCH}_\w*(?:cudnn|conv)|sm\d+_xmma_(?:fprop|dgrad|wgrad)|(?:implicit|explicit)_convolve_[sdh]gemm",
    ),
    ("cuFFT", r"(?:regular_fft|vector_fft|composite_2way_fft)\b"),
    ("NCCL/RCCL", r"(?:nccl|rccl)"),
    ("rocBLAS/hipBLASLt", r"(?:Custom_)?Cijk_|rocblas_|(?i:hipblaslt)"),
    ("composable_kernel", r"ck(?:_tile)?::"),
    (
        "MIOpen",
        r"(?i:miopen)|igemm_(?:fwd|bwd|wrw)_gtc|SubTensorOpWith|Op[1-5]dTensor|OpTensorFwdBias|naive_conv_|gridwise_convolution_",
    ),
)
"""Each library and the start of its kernels' qualified names (PyTorch's kernels on CUDA and ROCm,
cuBLAS/cuBLASLt's architecture-named and ``sm<N>_xmma`` GEMMs and its GEMV helpers, Tensile's
``Cijk_`` GEMMs of rocBLAS and hipBLASLt, MIOpen's batch-norm, tensor-op and implicit-GEMM
convolution kernels, ...)."""

_COMPILED = tuple((library, re.compile(pattern)) for library, pattern in LIBRARIES)
# Library types in template arguments that no candidate's own kernel is instantiated with.
_IN_ARGUMENTS = (("cuBLAS", re.compile(r"(?i)cublas")), ("cuDNN", re.compile(r"(?i)cudnn")))
# A kernel in one of these namespaces is the library's, whatever the candidate named its kernels.
_LIBRARY_NAMESPACE = re.compile(
    r"(?:at|at_cuda_detail|c10|pytorch_flash|cutlass|cudnn\w*|cublas\w*|ck|ck_tile|rocblas|miopen)::", re.IGNORECASE
)
_ANONYMOUS = re.compile(r"(?:\(anonymous namespace\)|<unnamed>|\{anonymous\})::")
_SHOWN = 100  # characters of a kernel name a note shows
_LISTED = 3  # library kernels a note names; the others are counted


def library_of(kernel: str) -> str:
    """The library whose kernel this is (``"cuBLAS"``, ``"PyTorch ATen"``, ...), or ``""`` for none."""
    name = _qualified_name(kernel)
    for library, pattern in _COMPILED:
        if pattern.match(name):
            return library
    for library, pattern in _IN_ARGUMENTS:
        if pattern.search(kernel):
            return library
    return ""


def is_candidate_kernel(kernel: str, candidate_kernels: Iterable[str]) -> bool:
    """True when the kernel's qualified name contains one of the candidate's function names as a
    whole name: ``void relu_kernel<float>(float*)`` and Triton's ``relu_kernel_0d1d2`` are
    ``relu_kernel``'s; ``my_relu_kernel`` is not."""
    name = _qualified_name(kernel)
    return any(
        re.search(rf"(?<![A-Za-z0-9_]){re.escape(function.strip())}(?![A-Za-z0-9])", name)
        for function in candidate_kernels
        if function.strip()
    )


def library_kernels(kernel_names: Iterable[str], candidate_kernels: Iterable[str] = ()) -> list[str]:
    """The names that are a library's kernels and not the candidate's, each once, in first-seen order."""
    candidates = tuple(candidate_kernels)
    found: dict[str, None] = {}
    for kernel in kernel_names:
        if kernel not in found and _is_library(kernel, candidates):
            found[kernel] = None
    return list(found)


def library_note(
    launches: Iterable[tuple[str, float | None]],
    candidate_kernels: Iterable[str] = (),
    *,
    where: str = "inside the candidate's forward",
) -> str:
    """One line naming the library kernels among ``launches`` and their share of the kernel time.

    ``launches`` are (kernel name, duration) pairs, one per launch or one per kernel with its total
    time; a duration is None where the output has none. Empty when no library kernel ran.
    """
    launches = list(launches)
    candidates = tuple(candidate_kernels)
    time: dict[str, float] = {}
    timed = True
    for kernel, duration in launches:
        time.setdefault(kernel, 0.0)
        if duration is None:
            timed = False
        else:
            time[kernel] += duration
    libraries = library_kernels(time, candidates)
    if not libraries:
        return ""
    total = sum(time.values())
    if not timed or total <= 0:
        named = ", ".join(f"{_shown(kernel)} ({library_of(kernel)})" for kernel in libraries)
        return f"library kernels ran {where} (the output has no kernel durations): {named}"
    libraries.sort(key=lambda kernel: -time[kernel])
    if len(libraries) == 1:
        (kernel,) = libraries
        share = _percent(100 * time[kernel] / total)
        return f"library kernels did work {where}: {_shown(kernel)} ({library_of(kernel)}, {share} of kernel time)"
    listed = [f"{_shown(k)} ({library_of(k)}, {_percent(100 * time[k] / total)})" for k in libraries[:_LISTED]]
    rest = libraries[_LISTED:]
    if rest:
        listed[-1] += f" and {len(rest)} more ({_percent(100 * sum(time[k] for k in rest) / total)})"
    share = _percent(100 * sum(time[kernel] for kernel in libraries) / total)
    return f"library kernels did work {where}, {share} of kernel time: {', '.join(listed)}"


def _is_library(kernel: str, candidate_kernels: tuple[str, ...]) -> bool:
    if not library_of(kernel):
        return False
    if _LIBRARY_NAMESPACE.match(_qualified_name(kernel)):
        return True
    return not is_candidate_kernel(kernel, candidate_kernels)


def _qualified_name(kernel: str) -> str:
    """``void at::native::<unnamed>::k<float>(int)`` -> ``at::native::k``: the kernel's own name,
    before its template and call arguments, without its return type and anonymous namespaces."""
    name = kernel.strip().removesuffix(".kd")
    name = name.removeprefix("void ").lstrip()
    name = _ANONYMOUS.sub("", name)
    return re.split(r"[<(]", name, maxsplit=1)[0].strip()


def _shown(kernel: str) -> str:
    """The kernel's name for a note: no return type, no trailing argument list, at most 100 characters."""
    name = kernel.strip().removeprefix("void ")
    if name.endswith(")"):
        depth = 0
        for position in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[position], 0)
            if depth == 0:
                if position > 0:
                    name = name[:position]
                break
    return name if len(name) <= _SHOWN else name[: _SHOWN - 3] + "..."


def _percent(value: float) -> str:
    if 0 < value < 1:
        return "<1%"
    if 99 < value < 100:
        return ">99%"
    return f"{value:.0f}%"
