"""Roofline floors for CPU tasks: how fast a task could possibly run on this machine.

A task must move at least ``min_bytes`` (inputs and parameters read once, outputs written once) and
do ``flops`` of arithmetic, so no implementation beats ``max(min_bytes / bandwidth, flops / peak)``.
The peaks are the machine's own, measured with small C kernels (:mod:`.physical_peaks`): the FMA
throughput of the widest vector ISA the CPU has, and STREAM copy and triad bandwidths, from memory
(arrays well beyond the last-level cache) and from that cache::

    peaks = machine_peaks(threads=2)                # measures when stale (a few seconds), else reads
    floor = floor_ms(task.analysis, peaks)          # the physical floor: floor.floor_ms, floor.bound
    library = library_floor_ms(task.analysis, peaks)  # the same at torch's sgemm and copy_ rates
    attainment(candidate_ms, floor)                 # 1.0 means at the roofline

torch's own sgemm and ``copy_`` rates are measured beside them (``library_gflops``,
``library_gbs``): what the library attains, shown beside the floor and never used as it, since a
kernel can beat them. Bytes count read plus written, the way ``min_bytes`` counts them. A call's
bytes up to the last-level cache's size count at the cache's bandwidth, the rest at memory's (a
task timed on inputs just written can find that much in cache, no more).

The peaks are cached per machine kind and thread count and measured again, never silently reused,
when the machine booted again, the CPU or torch changed, the file cannot be read, or the first
quick copy check in a process reads :data:`QUICK_CHECK_LIMIT` above the recorded bandwidth; the
record says why it was measured (``remeasured_because``). A check another process made of the same
record less than :data:`QUICK_CHECK_SHARED_S` ago stands for this process's own
(:mod:`.quick_checks`).
"""

from __future__ import annotations

import functools
import math
import time
import warnings
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import attrs
from attrs import validators as v
from rich.table import Table

from ..errors import RecordError, TaskError
from ..paths import cache_dir
from ..progress import progress_bar
from ..records import BoundClass, Task, TaskAnalysis
from ..serialization import read_record, write_record
from .hardware import HardwareDescription, describe_cpu
from .physical_peaks import (
    DEFAULT_PEAK_REPEATS,
    FMA_REPEATS,
    FMA_SAMPLE_SECONDS,
    StreamFigures,
    cache_array_bytes,
    dram_array_bytes,
    last_level_cache_bytes,
    measure_fma,
    measure_stream,
    quick_copy_gbs,
    timing_cpus,
)
from .quick_checks import keep_check, recent_check
from .timing_slot import timing_slot

__all__ = [
    "DEFAULT_COPY_BYTES",
    "DEFAULT_GEMM_N",
    "DEFAULT_REPEATS",
    "QUICK_CHECK_LIMIT",
    "QUICK_CHECK_SHARED_S",
    "MachinePeaks",
    "RooflineFloor",
    "measure_peaks",
    "machine_peaks",
    "peaks_cache_path",
    "boot_id",
    "floor_ms",
    "library_floor_ms",
    "floor_at",
    "memory_ms",
    "attainment",
    "roofline_table",
    "last_level_cache_bytes",
]

DEFAULT_COPY_BYTES = 256 * 1024 * 1024
"""Size of the buffer torch copies for the library rate: well above any last-level cache."""
DEFAULT_GEMM_N = 2048
"""Side of torch's square sgemm for the library rate: large enough for the BLAS to reach its steady rate."""
DEFAULT_REPEATS = DEFAULT_PEAK_REPEATS
"""Timed runs of each kernel after one warm-up; the best one counts, as a peak is a ceiling."""
QUICK_CHECK_LIMIT = 0.15
"""The first quick copy check in a process that reads more than 15% above the recorded copy
bandwidth measures the peaks again (the machine can do more than recorded; the higher figures are
kept). Memory bandwidth on a VM moves this much and more; a reading below is a busy moment and is
not a reason: a peak is a ceiling."""
QUICK_CHECK_SHARED_S = 60.0
"""A quick check that another pragma process made on this boot, of the same record, less than this
long ago stands for this process's own: the bandwidth it reads moves over minutes (a neighbour's
burst lasted about one), and touching the check's 2 GB for the first time took a VM's process 2-2.6 s
(:mod:`.quick_checks`)."""

_FLOAT32_BYTES = 4
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
_MEMORY_ROOFS = ("cache", "dram", "library")


def _positive_finite(_instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < math.inf):
        raise ValueError(f"{attribute.name} must be a positive finite number, got {value!r}")


def _non_negative_finite(_instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 <= value < math.inf):
        raise ValueError(f"{attribute.name} must be a finite number >= 0, got {value!r}")


_positive_int = v.and_(v.instance_of(int), v.ge(1))
_text = v.and_(v.instance_of(str), v.min_len(1))


@attrs.frozen(kw_only=True)
class MachinePeaks:
    """What this machine can do at ``threads`` threads, what torch attains on it, and how and why
    both were measured.

    Physical peaks: ``fma_gflops`` (fp32, 2 FLOPs per FMA lane, with ``isa`` vectors of
    ``vector_bytes``; ``fused`` False where the ISA multiplies and adds apart), ``dram_gbs`` (the
    best of ``dram_stream``'s copy and triad, plain and non-temporal, over arrays beyond the
    last-level cache) and ``cache_gbs`` (the best of ``cache_stream``, arrays within half that
    cache; None when its size is unknown). Library rates: ``library_gflops`` of an fp32 ``torch.mm``
    of ``library_gemm_n``-square matrices and ``library_gbs`` of ``copy_`` between two
    ``library_copy_bytes`` buffers. GB/s are 10^9 bytes read plus written.

    ``boot_id`` is the boot they were measured in, ``remeasured_because`` why they were measured,
    ``quick_check_gbs`` the copy bandwidth the quick check this process relies on read (its own, or
    another process's less than :data:`QUICK_CHECK_SHARED_S` before; None in a fresh measurement),
    ``elapsed_s`` how long measuring took.
    """

    threads: int = attrs.field(validator=_positive_int)
    hardware: HardwareDescription = attrs.field(validator=v.instance_of(HardwareDescription))
    isa: str = attrs.field(validator=_text)
    vector_bytes: int = attrs.field(validator=_positive_int)
    fused: bool = attrs.field(validator=v.instance_of(bool))
    fma_gflops: float = attrs.field(validator=_positive_finite)
    dram_gbs: float = attrs.field(validator=_positive_finite)
    dram_stream: StreamFigures = attrs.field(validator=v.instance_of(StreamFigures))
    cache_gbs: float | None = attrs.field(validator=v.optional(_positive_finite))
    cache_stream: StreamFigures | None = attrs.field(validator=v.optional(v.instance_of(StreamFigures)))
    library_gflops: float = attrs.field(validator=_positive_finite)
    library_gbs: float = attrs.field(validator=_positive_finite)
    library_gemm_n: int = attrs.field(validator=_positive_int)
    library_copy_bytes: int = attrs.field(validator=_positive_int)
    repeats: int = attrs.field(validator=_positive_int)
    torch_version: str = attrs.field(validator=_text)
    boot_id: str = attrs.field(validator=v.instance_of(str))
    measured_at: str = attrs.field(validator=_text)
    remeasured_because: str = attrs.field(validator=_text)
    quick_check_gbs: float | None = attrs.field(default=None, validator=v.optional(_positive_finite))
    elapsed_s: float = attrs.field(default=0.0, validator=_non_negative_finite)

    def __attrs_post_init__(self) -> None:
        if self.dram_gbs != self.dram_stream.best_gbs:
            raise ValueError(f"dram_gbs {self.dram_gbs} is not the best of dram_stream ({self.dram_stream.best_gbs})")
        best_cache = None if self.cache_stream is None else self.cache_stream.best_gbs
        if self.cache_gbs != best_cache:
            raise ValueError(f"cache_gbs {self.cache_gbs} is not the best of cache_stream ({best_cache})")

    @property
    def ridge_intensity(self) -> float:
        """FLOP per byte where the physical roofs meet (memory's): tasks above it are compute-bound here."""
        return self.fma_gflops / self.dram_gbs


@attrs.frozen(kw_only=True)
class RooflineFloor:
    """The least time one forward of a task can take, and which roof sets it.

    ``intensity`` is FLOPs per minimal byte, None when the task moves no bytes. ``memory_roof``
    says which bandwidth the memory floor used: ``cache`` (the call's bytes fit the last-level
    cache), ``dram`` (they do not: the cache's share at its bandwidth, the rest at memory's) or
    ``library`` (torch's copy rate); None for a device's floor (:func:`floor_at`).
    """

    memory_ms: float = attrs.field(validator=_non_negative_finite)
    compute_ms: float = attrs.field(validator=_non_negative_finite)
    floor_ms: float = attrs.field(validator=_non_negative_finite)
    bound: BoundClass = attrs.field(converter=BoundClass, validator=v.in_((BoundClass.MEMORY, BoundClass.COMPUTE)))
    intensity: float | None = attrs.field(default=None, validator=v.optional(_non_negative_finite))
    memory_roof: str | None = attrs.field(default=None, validator=v.optional(v.in_(_MEMORY_ROOFS)))

    def __attrs_post_init__(self) -> None:
        if self.floor_ms != max(self.memory_ms, self.compute_ms):
            raise ValueError(
                f"floor_ms {self.floor_ms} is not the larger of memory_ms {self.memory_ms} "
                f"and compute_ms {self.compute_ms}"
            )


# -- the floor ----------------------------------------------------------------------------------


def floor_ms(analysis: TaskAnalysis, peaks: MachinePeaks) -> RooflineFloor:
    """The physical roofline floor of one forward of the analyzed task: FLOPs at the FMA peak,
    bytes at the cache's bandwidth up to the last-level cache's size and at memory's beyond."""
    memory, roof = memory_ms(analysis.min_bytes, peaks)
    return _floor(analysis, memory, peaks.fma_gflops, roof)


def library_floor_ms(analysis: TaskAnalysis, peaks: MachinePeaks) -> RooflineFloor:
    """The floor at what torch attains here (its sgemm and ``copy_`` rates): shown beside the
    physical floor, never the floor itself, since a kernel can beat the library."""
    return floor_at(analysis, bandwidth_gbs=peaks.library_gbs, gflops=peaks.library_gflops, memory_roof="library")


def memory_ms(moved_bytes: int, peaks: MachinePeaks) -> tuple[float, str]:
    """The least time to move ``moved_bytes`` here, and the roof that sets it (``cache`` or ``dram``).

    Up to the last-level cache's size the bytes count at the cache's bandwidth (a call's inputs,
    written just before it, can be there), the rest at memory's: all of them at the cache's when
    they fit, nearly all at memory's when they are far larger."""
    cache = last_level_cache_bytes(peaks.hardware)
    if peaks.cache_gbs is None or not cache:
        return moved_bytes / (peaks.dram_gbs * 1e9) * 1e3, "dram"
    cached = min(moved_bytes, cache)
    seconds = cached / (peaks.cache_gbs * 1e9) + (moved_bytes - cached) / (peaks.dram_gbs * 1e9)
    return seconds * 1e3, "cache" if moved_bytes <= cache else "dram"


def floor_at(
    analysis: TaskAnalysis, *, bandwidth_gbs: float, gflops: float, memory_roof: str | None = None
) -> RooflineFloor:
    """The roofline floor of one forward at these peaks (GB/s, GFLOP/s), on any device."""
    return _floor(analysis, analysis.min_bytes / (bandwidth_gbs * 1e9) * 1e3, gflops, memory_roof)


def _floor(analysis: TaskAnalysis, memory: float, gflops: float, memory_roof: str | None) -> RooflineFloor:
    compute = analysis.flops / (gflops * 1e9) * 1e3
    return RooflineFloor(
        memory_ms=memory,
        compute_ms=compute,
        floor_ms=max(memory, compute),
        bound=BoundClass.COMPUTE if compute > memory else BoundClass.MEMORY,
        intensity=analysis.flops / analysis.min_bytes if analysis.min_bytes else None,
        memory_roof=memory_roof,
    )


def attainment(time_ms: float, floor: RooflineFloor) -> float:
    """``floor_ms / time_ms``: 1.0 at the roofline, 0.1 when ten times slower than it could be."""
    if isinstance(time_ms, bool) or not isinstance(time_ms, (int, float)) or not 0 < time_ms < math.inf:
        raise ValueError(f"time_ms must be a positive finite number, got {time_ms!r}")
    return floor.floor_ms / time_ms


# -- measuring ----------------------------------------------------------------------------------


def measure_peaks(
    threads: int,
    *,
    repeats: int = DEFAULT_REPEATS,
    dram_bytes: int | None = None,
    cache_bytes: int | None = None,
    fma_seconds: float = FMA_SAMPLE_SECONDS,
    fma_repeats: int = FMA_REPEATS,
    copy_bytes: int = DEFAULT_COPY_BYTES,
    gemm_n: int = DEFAULT_GEMM_N,
    hardware: HardwareDescription | None = None,
    reason: str = "measured on request",
) -> MachinePeaks:
    """Measure the physical peaks with the C kernels and torch's rates, at ``threads`` threads.

    ``dram_bytes`` and ``cache_bytes`` are the STREAM arrays' sizes (by default from the caches:
    :func:`.physical_peaks.dram_array_bytes`, :func:`.physical_peaks.cache_array_bytes`),
    ``fma_seconds`` and ``fma_repeats`` the least length and the number of timed FMA runs, ``copy_bytes`` and ``gemm_n`` the sizes
    of torch's copy and sgemm. Each kernel runs once to warm up, then ``repeats`` times; the
    fastest run counts. torch's thread count is restored afterwards. Progress shows on stderr when
    it is a terminal. ``reason`` is recorded as ``remeasured_because``.
    """
    import torch  # pragma imports torch only when it needs it

    _check_threads(threads)
    sizes = (("copy_bytes", copy_bytes), ("gemm_n", gemm_n), ("repeats", repeats), ("fma_repeats", fma_repeats))
    for name, value in sizes:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    hardware = hardware or describe_cpu()
    dram_bytes = dram_bytes or dram_array_bytes(hardware)
    cache_bytes = cache_bytes or cache_array_bytes(hardware)
    cpus = timing_cpus(threads)
    elements = max(1, copy_bytes // _FLOAT32_BYTES)
    started = time.perf_counter()
    previous_threads = torch.get_num_threads()
    progress = progress_bar()
    label = f"{threads} thread{'s' if threads > 1 else ''}"
    try:
        with progress:
            bar = progress.add_task(f"measuring the FMA peak ({label})", total=5 + 2 * (repeats + 1))

            def step() -> None:
                progress.advance(bar)

            fma = measure_fma(cpus, hardware, repeats=fma_repeats, sample_seconds=fma_seconds)
            step()
            progress.update(bar, description=f"measuring memory bandwidth ({label})")
            dram = measure_stream(cpus, hardware, dram_bytes, repeats=repeats)
            step()
            progress.update(bar, description=f"measuring cache bandwidth ({label})")
            cache = None
            if cache_bytes:
                cache = measure_stream(cpus, hardware, cache_bytes, kernels=("copy", "triad"), repeats=repeats)
            step()
            progress.update(bar, description=f"measuring torch's copy_ ({label})")
            torch.set_num_threads(threads)
            src = torch.ones(elements, dtype=torch.float32)  # ones, not empty: touch every page
            dst = torch.empty_like(src)
            copy_s = _best_seconds(functools.partial(dst.copy_, src), repeats, step)
            del src, dst
            progress.update(bar, description=f"measuring torch's sgemm ({label})")
            generator = torch.Generator().manual_seed(0)  # leaves the global seed alone
            a = torch.rand(gemm_n, gemm_n, generator=generator)
            b = torch.rand(gemm_n, gemm_n, generator=generator)
            c = torch.empty(gemm_n, gemm_n)
            gemm_s = _best_seconds(functools.partial(torch.mm, a, b, out=c), repeats, step)
            del a, b, c
    finally:
        torch.set_num_threads(previous_threads)
    return MachinePeaks(
        threads=threads,
        hardware=hardware,
        isa=fma.isa,
        vector_bytes=fma.vector_bytes,
        fused=fma.fused,
        fma_gflops=fma.gflops,
        dram_gbs=dram.best_gbs,
        dram_stream=dram,
        cache_gbs=None if cache is None else cache.best_gbs,
        cache_stream=cache,
        library_gflops=2 * gemm_n**3 / gemm_s / 1e9,
        library_gbs=2 * elements * _FLOAT32_BYTES / copy_s / 1e9,
        library_gemm_n=gemm_n,
        library_copy_bytes=elements * _FLOAT32_BYTES,
        repeats=repeats,
        torch_version=torch.__version__,
        boot_id=boot_id(),
        measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        remeasured_because=reason,
        elapsed_s=time.perf_counter() - started,
    )


def _best_seconds(run: Callable[[], Any], repeats: int, step: Callable[[], None]) -> float:
    run()
    step()
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
        step()
    return max(best, 1e-9)  # a clock that did not tick must not divide by zero


def boot_id() -> str:
    """This boot's id (``/proc/sys/kernel/random/boot_id``), or "" where the system gives none."""
    try:
        return _BOOT_ID.read_text().strip()
    except OSError:
        return ""


# -- the cache ----------------------------------------------------------------------------------

_quick_checked: dict[Path, float] = {}
"""The quick check's reading per cache file, once per process."""


def machine_peaks(threads: int, *, refresh: bool = False, quick_check: bool = True) -> MachinePeaks:
    """This machine's peaks at ``threads`` threads: from the cache when still true, else measured
    (holding the timing slot) and cached.

    The cache is ``roofline/`` in pragma's cache folder (:func:`pragma_core.paths.cache_dir`), one
    file per machine kind and thread count. The peaks are measured again, and the record says why,
    when there are none, the file cannot be read, the machine booted since, the CPU, torch or the
    measurement's sizes differ, or (``quick_check``, once per process, unless another process
    checked the same record less than :data:`QUICK_CHECK_SHARED_S` ago) a quick copy reads
    :data:`QUICK_CHECK_LIMIT` above the recorded copy bandwidth: then the higher of each figure is
    kept. ``refresh`` measures again regardless (say, after measuring on a busy machine).
    """
    _check_threads(threads)
    hardware = describe_cpu()
    path = peaks_cache_path(threads, hardware=hardware)
    reason = "refresh asked" if refresh else None
    cached = None
    if not refresh:
        cached, reason = _cached_or_why_not(path, hardware, threads)
    if cached is not None and quick_check and path not in _quick_checked:
        boot = boot_id()
        shared = recent_check(path, cached.measured_at, boot, within_s=QUICK_CHECK_SHARED_S)
        if shared is not None:
            _quick_checked[path] = shared
        else:
            with timing_slot():
                reading = quick_copy_gbs(
                    timing_cpus(threads),
                    hardware,
                    cached.dram_stream.array_bytes,
                    nontemporal=cached.dram_stream.copy_nt_gbs is not None
                    and cached.dram_stream.copy_nt_gbs >= cached.dram_stream.copy_gbs,
                )
            _quick_checked[path] = reading
            recorded = cached.dram_stream.best_copy_gbs
            if reading > recorded * (1 + QUICK_CHECK_LIMIT):
                reason = (
                    f"a quick copy read {reading:.1f} GB/s, {reading / recorded - 1:.0%} above the recorded "
                    f"{recorded:.1f} GB/s (limit {QUICK_CHECK_LIMIT:.0%}): measured again, the higher figures kept"
                )
            else:
                keep_check(path, cached.measured_at, boot, reading)
    if cached is not None and reason is None:
        return attrs.evolve(cached, quick_check_gbs=_quick_checked.get(path))
    assert reason is not None
    with timing_slot():
        if not refresh and cached is None:
            # Another process may have measured while this one waited for the slot.
            again, _why = _cached_or_why_not(path, hardware, threads)
            if again is not None:
                return again
        peaks = measure_peaks(threads, hardware=hardware, reason=reason)
    if cached is not None:
        peaks = _higher_of(cached, peaks)
    try:
        write_record(path, peaks)
    except OSError as error:
        warnings.warn(
            f"cannot cache machine peaks in {path} ({error}): they are measured every time",
            RuntimeWarning,
            stacklevel=2,
        )
    if path in _quick_checked:
        peaks = attrs.evolve(peaks, quick_check_gbs=_quick_checked[path])
    return peaks


def peaks_cache_path(threads: int, *, hardware: HardwareDescription | None = None) -> Path:
    """Where :func:`machine_peaks` keeps the peaks for ``threads`` threads on this machine."""
    hardware = hardware or describe_cpu()
    return cache_dir("roofline") / f"{hardware.fingerprint()}-{threads}t.json"


def _cached_or_why_not(
    path: Path, hardware: HardwareDescription, threads: int
) -> tuple[MachinePeaks | None, str | None]:
    """The cached peaks when still true, else None and why they are not."""
    if not path.exists():
        return None, f"no peaks recorded for this CPU ({hardware.fingerprint()}) at {threads} thread(s)"
    try:
        cached = read_record(path, MachinePeaks)
    except (RecordError, OSError, UnicodeDecodeError) as error:
        return None, f"the recorded peaks could not be read ({str(error)[:160]})"
    current_boot = boot_id()
    if cached.boot_id != current_boot:
        return None, "the machine booted again since the peaks were measured"
    if cached.hardware.fingerprint() != hardware.fingerprint():
        return None, f"another CPU: recorded {cached.hardware.model_name}, now {hardware.model_name}"
    if cached.threads != threads:
        return None, f"recorded at {cached.threads} thread(s), wanted at {threads}"
    torch_version = _torch_version()
    if cached.torch_version != torch_version:
        return None, f"torch {torch_version} now, {cached.torch_version} when measured"
    sizes = (cached.repeats, cached.library_gemm_n, cached.library_copy_bytes, cached.dram_stream.array_bytes)
    if sizes != (DEFAULT_REPEATS, DEFAULT_GEMM_N, DEFAULT_COPY_BYTES, dram_array_bytes(hardware)):
        return None, "measured with other sizes or repeats than this pragma uses"
    return cached, None


def _higher_of(old: MachinePeaks, new: MachinePeaks) -> MachinePeaks:
    """``new`` with each figure the higher of the two: a peak is a ceiling, and a busy moment during
    one of the measurements only lowers it."""
    dram = _higher_stream(old.dram_stream, new.dram_stream)
    cache = new.cache_stream
    if old.cache_stream is not None and cache is not None and old.cache_stream.array_bytes == cache.array_bytes:
        cache = _higher_stream(old.cache_stream, cache)
    return attrs.evolve(
        new,
        fma_gflops=max(old.fma_gflops, new.fma_gflops) if old.isa == new.isa else new.fma_gflops,
        dram_gbs=dram.best_gbs,
        dram_stream=dram,
        cache_gbs=None if cache is None else cache.best_gbs,
        cache_stream=cache,
        library_gflops=max(old.library_gflops, new.library_gflops),
        library_gbs=max(old.library_gbs, new.library_gbs),
    )


def _higher_stream(old: StreamFigures, new: StreamFigures) -> StreamFigures:
    if old.array_bytes != new.array_bytes:
        return new

    def higher(a: float | None, b: float | None) -> float | None:
        return b if a is None else a if b is None else max(a, b)

    return attrs.evolve(
        new,
        copy_gbs=max(old.copy_gbs, new.copy_gbs),
        triad_gbs=max(old.triad_gbs, new.triad_gbs),
        copy_nt_gbs=higher(old.copy_nt_gbs, new.copy_nt_gbs),
        triad_nt_gbs=higher(old.triad_nt_gbs, new.triad_nt_gbs),
    )


def _torch_version() -> str:
    import torch

    return str(torch.__version__)


def _check_threads(threads: int) -> None:
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive integer, got {threads!r}")


# -- the table ----------------------------------------------------------------------------------


def roofline_table(task: Task, peaks: MachinePeaks, *, reference_ms: float | None = None) -> Table:
    """The task's roofline on this machine, one quantity a row, for ``pragma roofline TASK``: the
    physical peaks and floor, torch's rates and the floor at them beside.

    With ``reference_ms`` (the measured time of the reference), adds its attainment against both.
    """
    analysis = task.analysis
    if analysis is None:
        raise TaskError(f"{task.key}: the task was not analyzed; load it with load_task()")
    floor = floor_ms(analysis, peaks)
    library = library_floor_ms(analysis, peaks)
    plural = "s" if peaks.threads > 1 else ""
    table = Table(title=f"roofline of {task.key}", title_justify="left")
    table.add_column("quantity", no_wrap=True)
    table.add_column("value", justify="right")
    table.add_row("task", task.key)
    table.add_row("category", task.category.value)
    table.add_row("FLOPs", _si(analysis.flops, "FLOP") if analysis.flops else "0 (not counted)")
    table.add_row("min bytes", _si(analysis.min_bytes, "B"))
    table.add_row("intensity", "-" if floor.intensity is None else f"{floor.intensity:.3g} FLOP/B")
    fused = "FMA" if peaks.fused else "multiply and add, no FMA"
    table.add_row("vector ISA", f"{peaks.isa}, {8 * peaks.vector_bytes}-bit vectors, {fused}")
    table.add_row("FMA peak", f"{peaks.fma_gflops:.1f} GFLOP/s (fp32)")
    table.add_row("DRAM bandwidth", f"{peaks.dram_gbs:.1f} GB/s")
    table.add_row("  STREAM", _stream(peaks.dram_stream))
    if peaks.cache_gbs is not None and peaks.cache_stream is not None:
        table.add_row("cache bandwidth", f"{peaks.cache_gbs:.1f} GB/s")
        table.add_row("  STREAM", _stream(peaks.cache_stream))
    table.add_row("ridge intensity", f"{peaks.ridge_intensity:.3g} FLOP/B")
    table.add_row(
        "torch sgemm", f"{peaks.library_gflops:.1f} GFLOP/s ({peaks.library_gflops / peaks.fma_gflops:.0%} of FMA peak)"
    )
    table.add_row("torch copy_", f"{peaks.library_gbs:.1f} GB/s ({peaks.library_gbs / peaks.dram_gbs:.0%} of DRAM)")
    table.add_row("memory floor", f"{_duration(floor.memory_ms)} ({floor.memory_roof})")
    table.add_row("compute floor", _duration(floor.compute_ms))
    table.add_row("floor", _duration(floor.floor_ms))
    table.add_row("bound", floor.bound.value)
    table.add_row("library floor", f"{_duration(library.floor_ms)} (at torch's rates, not the floor)")
    if reference_ms is not None:
        table.add_row("reference", _duration(reference_ms))
        table.add_row("reference attainment", f"{attainment(reference_ms, floor):.1%}")
        table.add_row("  of library floor", f"{attainment(reference_ms, library):.1%}")

    notes = [
        f"{peaks.hardware.model_name}, {peaks.threads} thread{plural}, torch {peaks.torch_version}, "
        f"peaks measured {peaks.measured_at}: {peaks.remeasured_because}"
    ]
    if peaks.quick_check_gbs is not None:
        notes.append(
            f"quick copy check (this process's, or one less than a minute old): {peaks.quick_check_gbs:.1f} GB/s"
        )
    if not analysis.flops:
        notes.append("FLOPs count matrix products, convolutions and attention only")
    cache = last_level_cache_bytes(peaks.hardware)
    if cache and analysis.min_bytes <= cache:
        notes.append(
            f"{_si(analysis.min_bytes, 'B')} fit in the {_si(cache, 'B')} last-level cache: the cache's bandwidth bounds"
        )
    dtypes = sorted({spec.dtype for spec in (*analysis.inputs, *analysis.outputs) if spec.is_tensor} - {"float32"})
    if analysis.flops and dtypes:
        notes.append(f"the compute peak is fp32; this task also uses {', '.join(dtypes)}")
    table.caption = "\n".join(notes)
    return table


def _stream(figures: StreamFigures) -> str:
    parts = [("copy", figures.copy_gbs), ("copy NT", figures.copy_nt_gbs), ("triad", figures.triad_gbs),
             ("triad NT", figures.triad_nt_gbs)]  # fmt: skip
    shown = " · ".join(f"{name} {value:.1f}" for name, value in parts if value is not None)
    return f"{shown} ({_si(figures.array_bytes, 'B')} arrays)"


def _si(value: float, unit: str) -> str:
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= factor:
            return f"{value / factor:.2f} {prefix}{unit}"
    return f"{value:.0f} {unit}"


def _duration(ms: float) -> str:
    if ms == 0:
        return "0 ms"
    return f"{ms:.3f} ms" if ms >= 0.1 else f"{ms * 1e3:.2f} µs"
