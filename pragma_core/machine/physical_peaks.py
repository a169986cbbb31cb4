"""What this CPU can physically do: its FMA throughput and its streaming memory bandwidth.

Two small C programs (``peak_kernels/fma.c`` and ``peak_kernels/stream.c``, package data) are built
with the system compiler for the widest vector ISA the CPU reports (AVX-512F, AVX2 with FMA, AVX,
SSE2; SVE or NEON on aarch64), cached by a hash of their source, flags and compiler version, and
run in a child process that prints its figures as JSON: pragma's process never runs the code it
builds, and a crash is one clear error::

    fma = measure_fma(cpus, hardware)                        # FmaPeak: GFLOP/s, ISA, vector bytes
    dram = measure_stream(cpus, hardware, dram_array_bytes(hardware))   # StreamFigures, GB/s

The FMA kernel keeps enough independent vector accumulators per thread to cover FMA latency times
ports; the STREAM kernel runs copy and triad, each with ordinary and with non-temporal stores,
counting bytes read plus written (no write-allocate), the way a task's minimal bytes are counted.
Every figure is the best of several runs, one thread per CPU given, each pinned to its CPU.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import attrs
from attrs import validators as v

from ..errors import PragmaError
from ..paths import cache_dir
from .hardware import HardwareDescription

__all__ = [
    "DEFAULT_PEAK_REPEATS",
    "FMA_SAMPLE_SECONDS",
    "FMA_REPEATS",
    "STREAM_SAMPLE_SECONDS",
    "DRAM_CACHE_MULTIPLE",
    "DRAM_MIN_ARRAY_BYTES",
    "MEMORY_SHARE",
    "CACHE_SHARE",
    "QUICK_CHECK_REPEATS",
    "RUN_TIMEOUT_S",
    "PeakMeasurementError",
    "VectorIsa",
    "FmaPeak",
    "StreamFigures",
    "vector_isas",
    "last_level_cache_bytes",
    "dram_array_bytes",
    "cache_array_bytes",
    "kernel_program",
    "kernel_flags",
    "measure_fma",
    "measure_stream",
    "quick_copy_gbs",
    "timing_cpus",
]

DEFAULT_PEAK_REPEATS = 5
"""Timed runs of each kernel after its warm-up; the fastest counts, as a peak is a ceiling."""
FMA_SAMPLE_SECONDS = 0.005
"""Least length of one timed FMA run: long enough for the clock (about a million FMAs a thread),
short enough that one of :data:`FMA_REPEATS` runs finds its cores alone on a busy machine."""
FMA_REPEATS = 40
"""Timed FMA runs after the warm-up, the fastest counting: many short runs rather than a few long
ones, as a neighbour that takes a core for a moment spoils only the runs it overlaps (40 runs of
5 ms: 0.2 s)."""
STREAM_SAMPLE_SECONDS = 0.005
"""Least length of one timed STREAM sample: small (cache-resident) arrays are swept several times
per sample until it lasts this long; arrays beyond the caches take longer in one sweep."""
DRAM_CACHE_MULTIPLE = 4
"""Each STREAM array is at least this many times the last-level cache, so nearly every byte comes
from memory."""
DRAM_MIN_ARRAY_BYTES = 64 << 20
"""Each STREAM array is at least 64 MiB, whatever the caches say (STREAM's own rule of thumb)."""
MEMORY_SHARE = 8
"""The three STREAM arrays together take at most this fraction (1/8) of the machine's memory. Its
installed memory, not what is free at the moment: the arrays' size is part of what makes recorded
peaks valid, and a size that moved with the free memory made every run measure them again."""
CACHE_SHARE = 2
"""The cache-resident arrays, all three together, fill at most this fraction (1/2) of the
last-level cache, so they stay in it between sweeps."""
QUICK_CHECK_REPEATS = 2
"""Timed sweeps of the quick copy check after its warm-up sweep."""
RUN_TIMEOUT_S = 300
"""How long one kernel program may run before it is taken as hung."""

_KERNELS = resources.files(__package__) / "peak_kernels"
_HEADERS = ("peak_team.h",)
_SVE_VECTOR_LENGTH = Path("/proc/sys/abi/sve_default_vector_length")
_ACCUMULATORS_16_REGISTERS = 12
"""Accumulators for ISAs with 16 vector registers (SSE, AVX, AVX2): 12 cover a 4-cycle FMA on two
ports (8) with room, and leave registers for the two constants."""
_ACCUMULATORS_32_REGISTERS = 24
"""Accumulators for ISAs with 32 vector registers (AVX-512, NEON, SVE): 24 cover a 4-cycle FMA on
four ports (16, as on Apple and Neoverse cores) with room."""


class PeakMeasurementError(PragmaError):
    """The peak kernels could not be built or run here; the message says which and why."""


def _positive_finite(_instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < math.inf):
        raise ValueError(f"{attribute.name} must be a positive finite number, got {value!r}")


_optional_positive = v.optional(_positive_finite)
_positive_int = v.and_(v.instance_of(int), v.ge(1))


@attrs.frozen(kw_only=True)
class VectorIsa:
    """One vector instruction set to build the kernels for: its name, register width in bytes, the
    compiler flags that enable it, and the accumulators the FMA kernel keeps per thread."""

    name: str
    vector_bytes: int = attrs.field(validator=_positive_int)
    flags: tuple[str, ...] = ()
    accumulators: int = attrs.field(default=_ACCUMULATORS_16_REGISTERS, validator=_positive_int)


@attrs.frozen(kw_only=True)
class FmaPeak:
    """The fp32 FMA throughput of ``threads`` threads: 2 FLOPs per lane per fused multiply-add (or
    per multiply and add where the ISA has no FMA: ``fused`` False)."""

    gflops: float = attrs.field(validator=_positive_finite)
    isa: str = attrs.field(validator=v.and_(v.instance_of(str), v.min_len(1)))
    vector_bytes: int = attrs.field(validator=_positive_int)
    fused: bool = attrs.field(validator=v.instance_of(bool))
    threads: int = attrs.field(validator=_positive_int)


@attrs.frozen(kw_only=True)
class StreamFigures:
    """STREAM bandwidths in GB/s (10^9 bytes, read plus written) over arrays of ``array_bytes``
    each: copy and triad with ordinary stores, and with non-temporal stores where measured (None
    where this ISA has none, or where they were not asked for)."""

    copy_gbs: float = attrs.field(validator=_positive_finite)
    triad_gbs: float = attrs.field(validator=_positive_finite)
    copy_nt_gbs: float | None = attrs.field(default=None, validator=_optional_positive)
    triad_nt_gbs: float | None = attrs.field(default=None, validator=_optional_positive)
    array_bytes: int = attrs.field(validator=_positive_int)

    @property
    def best_gbs(self) -> float:
        """The highest of the variants: what the memory can deliver."""
        return max(value for value in attrs.astuple(self)[:4] if value is not None)

    @property
    def best_copy_gbs(self) -> float:
        """The better copy, the figure a quick copy check compares with."""
        return max(value for value in (self.copy_gbs, self.copy_nt_gbs) if value is not None)


# -- what to build for -----------------------------------------------------------------------------


def vector_isas(hardware: HardwareDescription) -> list[VectorIsa]:
    """The ISAs to try, widest first, from the CPU's reported features; the last always builds."""
    features = set(hardware.features)
    architecture = hardware.architecture.lower()
    isas: list[VectorIsa] = []
    if architecture in ("x86_64", "amd64", "i686", "i386"):
        if "avx512f" in features:
            isas.append(VectorIsa(name="avx512f", vector_bytes=64, flags=("-march=native", "-mavx512f", "-mfma"),
                                  accumulators=_ACCUMULATORS_32_REGISTERS))  # fmt: skip
        if "avx2" in features and "fma" in features:
            isas.append(VectorIsa(name="avx2+fma", vector_bytes=32, flags=("-march=native", "-mavx2", "-mfma")))
        if "avx" in features:
            isas.append(VectorIsa(name="avx", vector_bytes=32, flags=("-march=native", "-mavx")))
        isas.append(VectorIsa(name="sse2", vector_bytes=16, flags=("-msse2",)))
    elif architecture in ("aarch64", "arm64"):
        sve_bytes = _sve_vector_bytes() if "sve" in features else None
        if sve_bytes:
            isas.append(VectorIsa(name="sve", vector_bytes=sve_bytes,
                                  flags=("-march=armv8.2-a+sve", f"-msve-vector-bits={8 * sve_bytes}"),
                                  accumulators=_ACCUMULATORS_32_REGISTERS))  # fmt: skip
        isas.append(VectorIsa(name="neon", vector_bytes=16, flags=("-march=native",),
                              accumulators=_ACCUMULATORS_32_REGISTERS))  # fmt: skip
        isas.append(VectorIsa(name="neon", vector_bytes=16, accumulators=_ACCUMULATORS_32_REGISTERS))
    isas.append(VectorIsa(name="generic", vector_bytes=16))
    return isas


def _sve_vector_bytes() -> int | None:
    try:
        value = int(_SVE_VECTOR_LENGTH.read_text().strip())
    except (OSError, ValueError):
        return None
    return value if value >= 16 and value & (value - 1) == 0 else None


# -- sizes -----------------------------------------------------------------------------------------


def last_level_cache_bytes(hardware: HardwareDescription) -> int | None:
    """All of the last-level cache together (every L3 instance, else the L2), None when unknown."""
    return hardware.l3_total_bytes or hardware.l3_bytes or hardware.l2_bytes


def dram_array_bytes(hardware: HardwareDescription) -> int:
    """Bytes of each STREAM array for a memory figure: :data:`DRAM_CACHE_MULTIPLE` times the
    last-level cache and at least :data:`DRAM_MIN_ARRAY_BYTES`, the three within
    1/:data:`MEMORY_SHARE` of the machine's memory: the same size on every call on one machine."""
    cache = last_level_cache_bytes(hardware) or 0
    wanted = max(DRAM_CACHE_MULTIPLE * cache, DRAM_MIN_ARRAY_BYTES)
    memory = _memory_bytes()
    if memory:
        wanted = min(wanted, memory // (3 * MEMORY_SHARE))
    return max(_MIB, wanted // _MIB * _MIB)


def cache_array_bytes(hardware: HardwareDescription) -> int | None:
    """Bytes of each STREAM array for a cache figure: the three fill 1/:data:`CACHE_SHARE` of the
    last-level cache. None when the cache size is unknown."""
    cache = last_level_cache_bytes(hardware)
    if not cache:
        return None
    return max(4096, cache // (3 * CACHE_SHARE) // 4096 * 4096)


_MIB = 1 << 20
_MEMINFO = Path("/proc/meminfo")


def _memory_bytes() -> int | None:
    """The machine's installed memory (``MemTotal``), None where it cannot be read."""
    try:
        for line in _MEMINFO.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def timing_cpus(threads: int) -> list[int]:
    """The CPUs the ``threads`` timing threads are pinned to: the first of this process's CPU set,
    taken again from the start when there are more threads than CPUs."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    allowed = allowed or list(range(os.cpu_count() or 1))
    return [allowed[index % len(allowed)] for index in range(threads)]


# -- building --------------------------------------------------------------------------------------


def kernel_program(kernel: str, hardware: HardwareDescription) -> tuple[Path, VectorIsa]:
    """The built ``fma`` or ``stream`` program for the widest ISA whose build succeeds, and that ISA.

    Built once per source, flags and compiler version, in ``roofline/kernels/`` of the cache folder.
    """
    return next(_programs(kernel, hardware))


def _programs(kernel: str, hardware: HardwareDescription) -> Iterator[tuple[Path, VectorIsa]]:
    """The programs that build, widest ISA first (built as they are asked for)."""
    compiler = _compiler()
    version = _compiler_version(compiler)
    failures = []
    for isa in vector_isas(hardware):
        try:
            yield _build(kernel, isa, compiler, version), isa
        except _BuildFailed as failure:
            failures.append(f"{isa.name}: {failure}")
    raise PeakMeasurementError(
        f"cannot build the {kernel} peak kernel with {shlex.join(compiler)} for any ISA "
        f"({'; '.join(failures)[:400]}); set CC to a working C compiler"
    )


def _run_widest(kernel: str, hardware: HardwareDescription, arguments: list[str]) -> tuple[dict[str, Any], VectorIsa]:
    """Run the kernel built for the widest ISA that builds and runs: a CPU that reports an ISA its
    operating system does not enable kills the program with SIGILL, and the next ISA is tried."""
    for program, isa in _programs(kernel, hardware):
        try:
            return _run(program, arguments), isa
        except _IllegalInstruction:
            continue
    raise AssertionError("unreachable: _programs raises when no ISA is left")


class _IllegalInstruction(PeakMeasurementError):
    pass


class _BuildFailed(Exception):
    pass


def _compiler() -> list[str]:
    chosen = os.environ.get("CC", "").strip()
    if chosen:
        command = shlex.split(chosen)
        if shutil.which(command[0]) is None:
            raise PeakMeasurementError(f"CC names {command[0]!r}, which is not on PATH; set CC to a C compiler")
        return command
    for name in ("cc", "gcc", "clang"):
        if shutil.which(name):
            return [name]
    raise PeakMeasurementError(
        "cannot measure the machine's peaks: no C compiler (cc, gcc or clang) on PATH; install one or set CC"
    )


def _compiler_version(compiler: list[str]) -> str:
    try:
        result = subprocess.run(
            [*compiler, "--version"], capture_output=True, text=True, timeout=60, check=False,
            env={**os.environ, "LC_ALL": "C"},
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as error:
        raise PeakMeasurementError(f"cannot run the C compiler {shlex.join(compiler)}: {error}") from error
    return (result.stdout.splitlines() or ["unknown"])[0]


def kernel_flags(isa: VectorIsa, compiler_version: str) -> list[str]:
    """The compiler flags the peak kernels are built with for ``isa``, by a compiler whose
    ``--version`` starts with ``compiler_version``."""
    flags = [
        "-O2",
        *isa.flags,
        "-ffp-contract=fast",  # fuse a * b + c into one FMA wherever the ISA has it
        f"-DVECTOR_BYTES={isa.vector_bytes}",
        f"-DACCUMULATORS={isa.accumulators}",
        "-pthread",
    ]
    if "clang" not in compiler_version.lower():
        flags.append("-fno-tree-loop-distribute-patterns")  # GCC: keep the copy loop, not a memcpy call
    return flags


def _build(kernel: str, isa: VectorIsa, compiler: list[str], version: str) -> Path:
    sources = {name: (_KERNELS / name).read_text() for name in (f"{kernel}.c", *_HEADERS)}
    flags = kernel_flags(isa, version)
    identity = json.dumps(
        {"sources": sources, "flags": flags, "compiler": compiler, "version": version, "machine": platform.machine()},
        sort_keys=True,
    )
    key = hashlib.sha256(identity.encode()).hexdigest()[:16]
    folder = cache_dir("roofline", "kernels")
    program = folder / f"{kernel}-{isa.name}-{key}"
    if program.exists():
        return program
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pragma-peaks-") as scratch:
        for name, text in sources.items():
            (Path(scratch) / name).write_text(text)
        output = Path(scratch) / "program"
        try:
            result = subprocess.run(
                [*compiler, str(Path(scratch) / f"{kernel}.c"), *flags, "-o", str(output)],
                capture_output=True, text=True, timeout=120, check=False, cwd=scratch,
            )  # fmt: skip
        except (OSError, subprocess.SubprocessError) as error:
            raise _BuildFailed(str(error)) from error
        if result.returncode != 0:
            raise _BuildFailed((result.stderr.strip().splitlines() or ["failed"])[-1])
        partial = folder / f".{program.name}.{os.getpid()}"
        shutil.copy2(output, partial)
        os.replace(partial, program)  # readers see no program or a whole one
    return program


# -- running ---------------------------------------------------------------------------------------


def measure_fma(
    cpus: Sequence[int],
    hardware: HardwareDescription,
    *,
    repeats: int = FMA_REPEATS,
    sample_seconds: float = FMA_SAMPLE_SECONDS,
) -> FmaPeak:
    """The FMA throughput of one thread on each of ``cpus``, best of ``repeats`` timed runs."""
    figures, isa = _run_widest("fma", hardware, [_cpu_list(cpus), repr(float(sample_seconds)), str(repeats)])
    return FmaPeak(
        gflops=_figure(figures, "gflops", "fma"),
        isa=isa.name,
        vector_bytes=isa.vector_bytes,
        fused=bool(figures.get("fused")),
        threads=len(cpus),
    )


def measure_stream(
    cpus: Sequence[int],
    hardware: HardwareDescription,
    array_bytes: int,
    *,
    kernels: Sequence[str] = ("copy", "copy_nt", "triad", "triad_nt"),
    repeats: int = DEFAULT_PEAK_REPEATS,
    sample_seconds: float = STREAM_SAMPLE_SECONDS,
) -> StreamFigures:
    """STREAM bandwidths over arrays of ``array_bytes`` each, one thread on each of ``cpus``.

    ``kernels`` chooses among copy, copy_nt, triad and triad_nt; a kernel left out reads as the
    plain copy's figure for triad, None for the non-temporal ones."""
    unknown = set(kernels) - {"copy", "copy_nt", "triad", "triad_nt"}
    if unknown or "copy" not in kernels:
        raise ValueError(f"kernels must include copy and be among copy, copy_nt, triad, triad_nt, got {kernels!r}")
    arguments = [_cpu_list(cpus), str(int(array_bytes)), str(repeats), repr(float(sample_seconds)), ",".join(kernels)]
    figures, _isa = _run_widest("stream", hardware, arguments)
    copy = _figure(figures, "copy", "stream")
    return StreamFigures(
        copy_gbs=copy,
        triad_gbs=_figure(figures, "triad", "stream") if "triad" in kernels else copy,
        copy_nt_gbs=_optional_figure(figures, "copy_nt", "stream"),
        triad_nt_gbs=_optional_figure(figures, "triad_nt", "stream"),
        array_bytes=int(figures.get("array_bytes") or array_bytes),
    )


def quick_copy_gbs(
    cpus: Sequence[int],
    hardware: HardwareDescription,
    array_bytes: int,
    *,
    nontemporal: bool,
    repeats: int = QUICK_CHECK_REPEATS,
) -> float:
    """One STREAM copy (with non-temporal stores or without), best of ``repeats`` sweeps: a check
    of the memory bandwidth that takes a fraction of a second."""
    kernel = "copy_nt" if nontemporal else "copy"
    figures, _isa = _run_widest("stream", hardware, [_cpu_list(cpus), str(int(array_bytes)), str(repeats), "0", kernel])
    return _figure(figures, kernel, "stream")


def _cpu_list(cpus: Sequence[int]) -> str:
    if not cpus:
        raise ValueError("cpus must name at least one CPU")
    return ",".join(str(int(cpu)) for cpu in cpus)


def _run(program: Path, arguments: list[str]) -> dict[str, Any]:
    try:
        result = subprocess.run(
            [str(program), *arguments], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as error:
        raise PeakMeasurementError(
            f"the peak kernel {program.name} ran over {RUN_TIMEOUT_S} s and was stopped"
        ) from error
    except OSError as error:
        raise PeakMeasurementError(f"cannot run the peak kernel {program}: {error}") from error
    if result.returncode == -signal.SIGILL:
        raise _IllegalInstruction(f"the peak kernel {program.name} used an instruction this CPU does not run")
    if result.returncode != 0:
        detail = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
        raise PeakMeasurementError(f"the peak kernel {program.name} failed ({detail}); delete {program} to rebuild it")
    try:
        figures = json.loads(result.stdout)
    except ValueError as error:
        raise PeakMeasurementError(
            f"the peak kernel {program.name} printed no JSON: {result.stdout[:200]!r}"
        ) from error
    if not isinstance(figures, dict):
        raise PeakMeasurementError(f"the peak kernel {program.name} printed {result.stdout[:200]!r}, not a JSON object")
    return figures


def _figure(figures: dict[str, Any], name: str, kernel: str) -> float:
    value = figures.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise PeakMeasurementError(f"the {kernel} peak kernel gave {name} = {value!r}, not a positive figure")
    return float(value)


def _optional_figure(figures: dict[str, Any], name: str, kernel: str) -> float | None:
    return None if figures.get(name) is None else _figure(figures, name, kernel)
