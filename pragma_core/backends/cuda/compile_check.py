"""Compiling a candidate's CUDA (or HIP) source without a GPU, to catch compile errors early.

Where nvcc is installed but no GPU is (a CI runner, a laptop, the machine that writes candidates),
a candidate cannot be loaded, but its kernel can still be compiled: ::

    from pragma_core.backends.cuda.compile_check import compile_only, extract_sources

    report = compile_only(extract_sources(candidate.source), arch="sm_80")
    if not report.ok:
        print(report.summary())  # kernel.cu:14:44: error: argument of type "float *" is ... (candidate line 24)

:func:`compile_only` writes each source the way ``torch.utils.cpp_extension.load_inline`` writes
``cuda.cu`` (its three ``#include`` lines first, unless the call said ``no_implicit_headers=True``)
and runs ``nvcc -c -std=c++17 -Xcompiler -fPIC`` on it in a temporary folder, with torch's include
folders, the defines and flags ``load_inline`` passes (``TORCH_EXTENSION_NAME``, torch's
``COMMON_NVCC_FLAGS``) and ``-arch`` when given. A ``#line 1 "kernel.cu"`` before the candidate's
text makes every message name ``kernel.cu`` and count lines from the text's first line. Nothing is
linked or loaded, and the candidate's own ``extra_cuda_cflags`` are not used (a flag can write files
or load compiler plugins; they are in :attr:`KernelSource.extra_cuda_cflags` for whoever trusts them).

``compiler="hipcc"`` does the same for AMD GPUs the way a ROCm build of torch does: the source is
hipified first (``torch.utils.hipify``, which rewrites ``cudaMalloc`` to ``hipMalloc`` and
``<<<...>>>`` to ``hipLaunchKernelGGL``), then compiled with torch's ``COMMON_HIP_FLAGS`` and
``--offload-arch`` when given.

Including torch's headers makes a compile slow. With nvcc 13 on a two-core machine a small kernel
took 130 to 320 s (by the machine's other load), most of it in torch's headers; an error in the
front end stops it after 25 to 55 s, a missing header after 4 to 13 s, and a source without torch's
headers (``no_implicit_headers=True`` and no ``#include <torch/...>``) takes 1 to 6 s.
``timeout_s`` bounds each compile.

torch's ``include_paths(device_type="cuda")`` (``include_paths(cuda=True)`` before torch 2.6) needs
``CUDA_HOME``, which a CPU build of torch never sets; there the CPU include folders are used and
nvcc adds the CUDA headers of its own installation, as it always does.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
import os
import shutil
import sysconfig
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs
from attrs import validators as v

from ...errors import ProfilerUnavailable
from ...records import frozen_tuple
from ...sandbox.tools import run_tool
from ..cpu_cpp.native import BuildDiagnostic, CompilerNotFoundError, NativeBuildError
from ..cpu_cpp.native.diagnostics import trim_lines
from .diagnostics import parse_nvcc_diagnostics, stable_log
from .sources import KernelSource, extract_sources

__all__ = [
    "COMPILERS",
    "DEFAULT_TIMEOUT_S",
    "CompiledSource",
    "CompileReport",
    "KernelSource",
    "compile_only",
    "extract_sources",
]

COMPILERS = ("nvcc", "hipcc")
DEFAULT_TIMEOUT_S = 600.0
"""Per source: about twice the slowest compile seen (320 s, a small kernel with torch's headers)."""

# What load_inline puts before the cuda_sources (torch/utils/cpp_extension.py); hipify turns the
# last two into <hip/hip_runtime.h>.
IMPLICIT_HEADERS = ("#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>")
# torch's own lists, read from torch when it is installed; these are torch 2.13's, for when it is not
_NVCC_FLAGS = (
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
    "--expt-relaxed-constexpr",
)
_HIP_FLAGS = ("-D__HIP_PLATFORM_AMD__=1", "-DUSE_ROCM=1", "-DHIPBLAS_V2")
_HIPCC_FLAGS = (
    "-DCUDA_HAS_FP16=1",
    "-D__HIP_NO_HALF_OPERATORS__=1",
    "-D__HIP_NO_HALF_CONVERSIONS__=1",
    "-DHIP_ENABLE_WARP_SYNC_BUILTINS=1",
)
_TORCH_GPU_HEADERS = ("c10/cuda/", "ATen/cuda/", "c10/hip/", "ATen/hip/", "cuda_cmake_macros.h")
_CPU_TORCH_NOTE = (
    "torch here is a CPU build, whose headers lack parts of torch's CUDA and ROCm headers "
    "(c10/cuda, ATen/cuda): a source that includes them cannot be checked here, and a missing-header "
    "error about them is this machine's, not the candidate's"
)
# English, ASCII quotes and no colour, as for the C++ builds.
_COMPILER_ENV = {"LC_ALL": "C", "LANG": "C", "GCC_COLORS": ""}
_VERSION_TIMEOUT_S = 60.0
SUMMARY_ERRORS = 5
SUMMARY_CHARS = 2000
"""The defaults of :meth:`CompileReport.summary`, those of ``NativeBuildError.summary``."""


@attrs.frozen(kw_only=True)
class CompiledSource:
    """One source through the compiler: the command, how it ended, what it said.

    ``command`` is relative to the build folder it ran in (``kernel.cu``, ``-o kernel.o``), so it can
    be run again by hand. ``returncode`` is None exactly when ``timed_out``. ``log`` is everything
    the compiler wrote, with the build folder's paths replaced by display names; ``diagnostics`` are
    its parsed messages.
    """

    source: KernelSource
    display_name: str = attrs.field(validator=v.min_len(1))
    command: tuple[str, ...] = attrs.field(converter=frozen_tuple)
    returncode: int | None
    timed_out: bool
    timeout_s: float = attrs.field(validator=v.gt(0))
    seconds: float = attrs.field(validator=v.ge(0))
    log: str
    diagnostics: tuple[BuildDiagnostic, ...] = attrs.field(converter=frozen_tuple)

    def __attrs_post_init__(self) -> None:
        if self.timed_out != (self.returncode is None):
            raise ValueError("a compile has no exit status exactly when it timed out")

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def errors(self) -> tuple[BuildDiagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.is_error)

    def error(self) -> NativeBuildError | None:
        """The failure as the C++ backend reports one (``str()`` one line, ``summary()`` for a prompt)."""
        if self.ok:
            return None
        log = self.log
        if self.timed_out:
            log += f"\n{self.command[0]} did not finish within {self.timeout_s:g} s and was stopped"
        return NativeBuildError(log=log, diagnostics=self.diagnostics, display_name=self.display_name)

    def describe(self, diagnostic: BuildDiagnostic) -> str:
        """``str(diagnostic)``, naming the candidate's line too when the message is about the source."""
        text = str(diagnostic)
        if diagnostic.file == self.display_name and diagnostic.line is not None:
            line = self.source.candidate_line(diagnostic.line)
            if line is not None:
                text += f" (candidate line {line})"
        return text


@attrs.frozen(kw_only=True)
class CompileReport:
    """What compiling a candidate's sources found.

    ``units`` are the sources that were compiled, ``skipped`` those whose text could not be read
    (their ``unresolved`` says why). ``ok`` is true when there was something to compile and all of
    it compiled. ``compiler`` is the compiler's path and ``compiler_version`` its release line.
    """

    compiler: str
    compiler_version: str
    units: tuple[CompiledSource, ...] = attrs.field(converter=frozen_tuple)
    skipped: tuple[KernelSource, ...] = attrs.field(default=(), converter=frozen_tuple)
    notes: tuple[str, ...] = attrs.field(default=(), converter=frozen_tuple)

    @property
    def ok(self) -> bool:
        return bool(self.units) and not self.skipped and all(unit.ok for unit in self.units)

    @property
    def diagnostics(self) -> tuple[BuildDiagnostic, ...]:
        return tuple(d for unit in self.units for d in unit.diagnostics)

    @property
    def errors(self) -> tuple[BuildDiagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.is_error)

    @property
    def seconds(self) -> float:
        return sum(unit.seconds for unit in self.units)

    def summary(self, *, max_errors: int = SUMMARY_ERRORS, max_chars: int = SUMMARY_CHARS) -> str:
        """The first errors with their source lines, and what was not compiled, for a prompt."""
        lines: list[str] = []
        shown = 0
        for unit in self.units:
            if unit.ok:
                continue
            if unit.timed_out:
                lines.append(f"{unit.display_name}: the compiler did not finish within {unit.timeout_s:g} s")
            elif not unit.errors:
                error = unit.error()
                lines.append(error.summary(max_chars=max_chars) if error else "")
            for diagnostic in unit.errors:
                if shown == max_errors:
                    break
                lines.append(unit.describe(diagnostic))
                lines.extend(diagnostic.context)
                shown += 1
        if len(self.errors) > shown:
            lines.append(f"... and {len(self.errors) - shown} more errors")
        lines.extend(f"not compiled: {reason}" for source in self.skipped for reason in source.unresolved)
        if not self.units and not self.skipped:
            lines.append("no load_inline call with cuda_sources was found")
        return trim_lines(lines, max_chars) if lines else "compiled with no errors"


def compile_only(
    sources: Iterable[KernelSource],
    *,
    compiler: str = "nvcc",
    arch: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    std: str = "c++17",
    extra_flags: Sequence[str] = (),
) -> CompileReport:
    """Compile each source to an object file in a temporary folder and report what the compiler said.

    ``compiler`` is ``nvcc`` or ``hipcc``, by name (looked up on PATH) or path. ``arch`` is passed as
    ``-arch=`` to nvcc (``sm_80``, ``sm_90a``) and as ``--offload-arch=`` to hipcc (``gfx942``);
    None leaves the compiler's default (nvcc 13: ``sm_75``). ``std`` is the C++ standard (note that
    torch 2.10 and later build extensions with ``c++20``). ``extra_flags`` go after the others.
    Sources without text are not compiled; they are listed in ``skipped``. Raises
    :class:`~pragma_core.native.CompilerNotFoundError` when the compiler is not installed.
    """
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    if isinstance(extra_flags, str):
        raise TypeError(f"extra_flags must be a sequence of strings, got the single string {extra_flags!r}")
    path, kind = _find_compiler(compiler)
    given = list(sources)
    readable = [source for source in given if source.text is not None]
    notes: list[str] = []
    includes, include_note = _torch_include_dirs()
    if include_note:
        notes.append(include_note)
    units = []
    for index, source in enumerate(readable, start=1):
        display = "kernel.cu" if len(readable) == 1 else f"kernel_{index}.cu"
        unit, unit_notes = _compile(
            source,
            display,
            path=path,
            kind=kind,
            arch=arch,
            std=std,
            includes=includes,
            extra_flags=list(extra_flags),
            timeout_s=timeout_s,
        )
        units.append(unit)
        notes.extend(note for note in unit_notes if note not in notes)
    return CompileReport(
        compiler=path,
        compiler_version=_compiler_version(path),
        units=units,
        skipped=[source for source in given if source.text is None],
        notes=notes,
    )


def _find_compiler(compiler: str) -> tuple[str, str]:
    name = Path(compiler).name
    kind = next((known for known in COMPILERS if known in name), None)
    if kind is None:
        raise ValueError(f"compiler must be nvcc or hipcc (a name or a path), got {compiler!r}")
    path = shutil.which(compiler)
    if path is None:
        package = "the CUDA toolkit" if kind == "nvcc" else "ROCm (the hip-dev package)"
        raise CompilerNotFoundError(f"cannot compile {kind} kernels: {compiler!r} is not on PATH; install {package}")
    return path, kind


def _compile(
    source: KernelSource,
    display: str,
    *,
    path: str,
    kind: str,
    arch: str | None,
    std: str,
    includes: tuple[str, ...],
    extra_flags: list[str],
    timeout_s: float,
) -> tuple[CompiledSource, list[str]]:
    assert source.text is not None
    notes: list[str] = []
    header = list(IMPLICIT_HEADERS) if source.implicit_headers else []
    text = "\n".join([*header, f'#line 1 "{display}"', source.text]) + "\n"
    extension = source.extension if source.extension and source.extension.isidentifier() else "pragma_kernel"
    defines = [f"-DTORCH_EXTENSION_NAME={extension}", "-DTORCH_API_INCLUDE_EXTENSION_H"]
    system = [flag for folder in includes for flag in ("-isystem", folder)]
    with tempfile.TemporaryDirectory(prefix="pragma-cuda-") as folder_name:
        folder = Path(folder_name)
        (folder / display).write_text(text, encoding="utf-8")
        target = display
        if kind == "nvcc":
            command = [path, "-c", f"-std={std}", "-Xcompiler", "-fPIC"]
            command += [f"-arch={arch}"] if arch else []
            command += [*defines, *_torch_flags("COMMON_NVCC_FLAGS", _NVCC_FLAGS)]
        else:
            target, note = _hipify(folder, display)
            if note:
                notes.append(note)
            command = [path, "-c", f"-std={std}", "-fPIC"]
            command += [f"--offload-arch={arch}"] if arch else []
            command += ["-DWITH_HIP", *defines, *_torch_flags("COMMON_HIP_FLAGS", _HIP_FLAGS)]
            command += _torch_flags("COMMON_HIPCC_FLAGS", _HIPCC_FLAGS)
        command += [*system, *extra_flags, target, "-o", Path(display).stem + ".o"]
        # nvcc's intermediates go to TMPDIR: keep them in the folder, removed with it even after a kill
        env = {**os.environ, **_COMPILER_ENV, "TMPDIR": folder_name}
        try:
            run = run_tool(
                command,
                tool=kind,
                env=env,
                timeout_s=timeout_s,
                cwd=folder,
                stdout_path=folder / "compile.log",
                stderr_to_stdout=True,
            )
        except ProfilerUnavailable as error:  # it was on PATH a moment ago, but will not start
            raise CompilerNotFoundError(str(error).replace("`", "")) from None
        raw = (folder / "compile.log").read_text(encoding="utf-8", errors="replace")
    log = raw
    for shown in dict.fromkeys([folder_name, os.path.realpath(folder_name)]):  # /tmp may be a link
        log = stable_log(log, folder=shown, display_names={target: display})
    diagnostics = parse_nvcc_diagnostics(log)
    if any(_missing_torch_gpu_header(diagnostic) for diagnostic in diagnostics) and _torch_is_cpu_build():
        notes.append(_CPU_TORCH_NOTE)
    unit = CompiledSource(
        source=source,
        display_name=display,
        command=command,
        returncode=run.returncode,
        timed_out=run.timed_out,
        timeout_s=timeout_s,
        seconds=run.wall_s,
        log=log,
        diagnostics=diagnostics,
    )
    return unit, notes


def _hipify(folder: Path, name: str) -> tuple[str, str]:
    """Rewrite ``folder/name`` for HIP as a ROCm torch's ``load_inline`` does; the file to compile, and a note."""
    try:
        from torch.utils.hipify import hipify_python
    except ImportError as error:
        return name, f"not hipified ({error}): CUDA names in the source are compiled as written"
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        results = hipify_python.hipify(
            project_directory=str(folder),
            output_directory=str(folder),
            extra_files=[str(folder / name)],
            hipify_extra_files_only=True,
            is_pytorch_extension=True,
            show_detailed=False,
            show_progress=False,
        )
    result = results.get(str(folder / name))
    hipified = getattr(result, "hipified_path", None)
    return (Path(hipified).name, "") if hipified else (name, "")


def _missing_torch_gpu_header(diagnostic: BuildDiagnostic) -> bool:
    """A header of torch's CUDA or ROCm part (``c10/cuda/...``, ``ATen/cuda/...``) was not found."""
    text = f"{diagnostic.file} {diagnostic.message}"
    missing = "No such file or directory" in text or "cannot open source file" in text
    return missing and any(part in text for part in _TORCH_GPU_HEADERS)


def _torch_is_cpu_build() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return getattr(torch.version, "cuda", None) is None and getattr(torch.version, "hip", None) is None


def _torch_flags(name: str, fallback: tuple[str, ...]) -> list[str]:
    """One of torch's flag lists for extensions (``COMMON_NVCC_FLAGS``), or torch 2.13's copy without torch."""
    try:
        from torch.utils import cpp_extension
    except ImportError:
        return list(fallback)
    flags = getattr(cpp_extension, name, None)
    return [flag for flag in flags if flag != "-fPIC"] if isinstance(flags, list) else list(fallback)


@functools.cache
def _torch_include_dirs() -> tuple[tuple[str, ...], str]:
    """torch's include folders for CUDA extensions and Python's, and a note when they are not all there."""
    python = sysconfig.get_path("include", scheme="posix_prefix")
    try:
        from torch.utils import cpp_extension
    except ImportError:
        return (python,), "torch is not installed: compiled without its headers"
    include_paths = cpp_extension.include_paths
    cuda_keyword = (
        {"device_type": "cuda"} if "device_type" in inspect.signature(include_paths).parameters else {"cuda": True}
    )
    try:
        folders = include_paths(**cuda_keyword)  # the keyword this torch has
    except OSError:
        # A CPU build of torch has no CUDA_HOME; nvcc adds the CUDA toolkit's headers on its own.
        folders = include_paths()
    return (*folders, python), ""


@functools.cache
def _compiler_version(path: str) -> str:
    """nvcc's ``release`` line or hipcc's ``HIP version`` line of ``--version``, else its first line."""
    with tempfile.TemporaryDirectory(prefix="pragma-cuda-") as folder:
        output = Path(folder) / "version.txt"
        try:
            run_tool(
                [path, "--version"],
                tool=Path(path).name,
                env={**os.environ, **_COMPILER_ENV},
                timeout_s=_VERSION_TIMEOUT_S,
                stdout_path=output,
                stderr_to_stdout=True,
            )
        except ProfilerUnavailable:
            return "unknown"
        lines = [line.strip() for line in output.read_text(errors="replace").splitlines() if line.strip()]
    wanted = [line for line in lines if "release" in line or line.startswith("HIP version")]
    return (wanted or lines or ["unknown"])[0]
