"""Roofline floors for CPU tasks: how fast a task could possibly run on this machine.

A task must move at least ``min_bytes`` (inputs and parameters read once, outputs written once) and
do ``flops`` of arithmetic, so no implementation beats ``max(min_bytes / bandwidth, flops / peak)``.
The two peaks are measured once per machine kind, thread count and torch version, and cached::

    peaks = machine_peaks(threads=2)            # measures on first use (a few seconds), then reads
    floor = floor_ms(task.analysis, peaks)      # floor.floor_ms, floor.bound
    attainment(candidate_ms, floor)             # 1.0 means at the roofline

Bandwidth is that of a large ``copy_``, counting bytes read plus bytes written, the way
``min_bytes`` counts them; the compute peak is an fp32 sgemm's. Both are what torch attains, not
datasheet numbers, so a kernel can exceed them slightly; a task whose bytes fit in the last-level
cache can exceed the memory floor a lot when timed warm.
"""

from __future__ import annotations

import functools
import math
import re
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
from .timing_slot import timing_slot

__all__ = [
    "DEFAULT_COPY_BYTES",
    "DEFAULT_GEMM_N",
    "DEFAULT_REPEATS",
    "MachinePeaks",
    "RooflineFloor",
    "measure_peaks",
    "machine_peaks",
    "peaks_cache_path",
    "floor_ms",
    "floor_at",
    "attainment",
    "roofline_table",
]

DEFAULT_COPY_BYTES = 256 * 1024 * 1024
"""Size of the copied buffer: well above any last-level cache, so the copy streams from memory."""
DEFAULT_GEMM_N = 2048
"""Side of the square sgemm: large enough for the BLAS to reach its steady rate."""
DEFAULT_REPEATS = 10
"""Timed runs of each kernel after one warm-up; the best one counts, as a peak is a ceiling."""

_FLOAT32_BYTES = 4


def _positive_finite(_instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < math.inf):
        raise ValueError(f"{attribute.name} must be a positive finite number, got {value!r}")


def _non_negative_finite(_instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 <= value < math.inf):
        raise ValueError(f"{attribute.name} must be a finite number >= 0, got {value!r}")


_positive_int = v.and_(v.instance_of(int), v.ge(1))


@attrs.frozen(kw_only=True)
class MachinePeaks:
    """What this machine attains with torch at ``threads`` threads, and how it was measured.

    ``bandwidth_gbs`` is GB/s (10^9 bytes) read plus written by ``dst.copy_(src)`` of two
    ``copy_bytes`` buffers; ``flops_gflops`` is GFLOP/s of an fp32 ``torch.mm`` of two
    ``gemm_n``-square matrices. ``elapsed_s`` is how long measuring took.
    """

    bandwidth_gbs: float = attrs.field(validator=_positive_finite)
    flops_gflops: float = attrs.field(validator=_positive_finite)
    threads: int = attrs.field(validator=_positive_int)
    torch_version: str = attrs.field(validator=v.and_(v.instance_of(str), v.min_len(1)))
    hardware: HardwareDescription = attrs.field(validator=v.instance_of(HardwareDescription))
    measured_at: str = attrs.field(validator=v.and_(v.instance_of(str), v.min_len(1)))
    copy_bytes: int = attrs.field(validator=_positive_int)
    gemm_n: int = attrs.field(validator=_positive_int)
    repeats: int = attrs.field(validator=_positive_int)
    elapsed_s: float = attrs.field(default=0.0, validator=_non_negative_finite)

    @property
    def ridge_intensity(self) -> float:
        """FLOP per byte where the two roofs meet: tasks above it are compute-bound here."""
        return self.flops_gflops / self.bandwidth_gbs


@attrs.frozen(kw_only=True)
class RooflineFloor:
    """The least time one forward of a task can take, and which roof sets it.

    ``intensity`` is FLOPs per minimal byte, None when the task moves no bytes.
    """

    memory_ms: float = attrs.field(validator=_non_negative_finite)
    compute_ms: float = attrs.field(validator=_non_negative_finite)
    floor_ms: float = attrs.field(validator=_non_negative_finite)
    bound: BoundClass = attrs.field(converter=BoundClass, validator=v.in_((BoundClass.MEMORY, BoundClass.COMPUTE)))
    intensity: float | None = attrs.field(default=None, validator=v.optional(_non_negative_finite))

    def __attrs_post_init__(self) -> None:
        if self.floor_ms != max(self.memory_ms, self.compute_ms):
            raise ValueError(
                f"floor_ms {self.floor_ms} is not the larger of memory_ms {self.memory_ms} "
                f"and compute_ms {self.compute_ms}"
            )


# -- the floor ----------------------------------------------------------------------------------


def floor_ms(analysis: TaskAnalysis, peaks: MachinePeaks) -> RooflineFloor:
    """The roofline floor of one forward of the analyzed task on the measured machine."""
    return floor_at(analysis, bandwidth_gbs=peaks.bandwidth_gbs, gflops=peaks.flops_gflops)


def floor_at(analysis: TaskAnalysis, *, bandwidth_gbs: float, gflops: float) -> RooflineFloor:
    """The roofline floor of one forward at these peaks (GB/s, GFLOP/s), on any device."""
    memory_ms = analysis.min_bytes / (bandwidth_gbs * 1e9) * 1e3
    compute_ms = analysis.flops / (gflops * 1e9) * 1e3
    return RooflineFloor(
        memory_ms=memory_ms,
        compute_ms=compute_ms,
        floor_ms=max(memory_ms, compute_ms),
        bound=BoundClass.COMPUTE if compute_ms > memory_ms else BoundClass.MEMORY,
        intensity=analysis.flops / analysis.min_bytes if analysis.min_bytes else None,
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
    copy_bytes: int = DEFAULT_COPY_BYTES,
    gemm_n: int = DEFAULT_GEMM_N,
    repeats: int = DEFAULT_REPEATS,
    hardware: HardwareDescription | None = None,
) -> MachinePeaks:
    """Measure copy bandwidth and sgemm rate with torch at ``threads`` threads.

    Each kernel runs once to warm up (page faults, thread pool, BLAS buffers), then ``repeats``
    times; the fastest run counts. torch's thread count is restored afterwards. Progress shows on
    stderr when it is a terminal. ``hardware`` saves describing the CPU again when known.
    """
    import torch  # pragma imports torch only when it needs it

    _check_threads(threads)
    for name, value in (("copy_bytes", copy_bytes), ("gemm_n", gemm_n), ("repeats", repeats)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    hardware = hardware or describe_cpu()
    elements = max(1, copy_bytes // _FLOAT32_BYTES)
    started = time.perf_counter()
    previous_threads = torch.get_num_threads()
    progress = progress_bar()
    label = f"{threads} thread{'s' if threads > 1 else ''}"
    try:
        torch.set_num_threads(threads)
        with progress:
            bar = progress.add_task(f"measuring memory bandwidth ({label})", total=2 * (repeats + 1))

            def step() -> None:
                progress.advance(bar)

            src = torch.ones(elements, dtype=torch.float32)  # ones, not empty: touch every page
            dst = torch.empty_like(src)
            copy_s = _best_seconds(functools.partial(dst.copy_, src), repeats, step)
            del src, dst
            progress.update(bar, description=f"measuring sgemm ({label})")
            generator = torch.Generator().manual_seed(0)  # leaves the global seed alone
            a = torch.rand(gemm_n, gemm_n, generator=generator)
            b = torch.rand(gemm_n, gemm_n, generator=generator)
            c = torch.empty(gemm_n, gemm_n)
            gemm_s = _best_seconds(functools.partial(torch.mm, a, b, out=c), repeats, step)
            del a, b, c
    finally:
        torch.set_num_threads(previous_threads)
    return MachinePeaks(
        bandwidth_gbs=2 * elements * _FLOAT32_BYTES / copy_s / 1e9,
        flops_gflops=2 * gemm_n**3 / gemm_s / 1e9,
        threads=threads,
        torch_version=torch.__version__,
        hardware=hardware,
        measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        copy_bytes=elements * _FLOAT32_BYTES,
        gemm_n=gemm_n,
        repeats=repeats,
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


# -- the cache ----------------------------------------------------------------------------------


def machine_peaks(threads: int, *, refresh: bool = False) -> MachinePeaks:
    """This machine's peaks at ``threads`` threads: from the cache, else measured and cached.

    The cache is ``roofline/`` in pragma's cache folder (:func:`pragma_core.paths.cache_dir`), one
    file per machine kind, thread count and torch version. A file that cannot be read, or that was
    measured differently, is measured again and replaced;
    ``refresh`` measures again regardless (say, after measuring on a busy machine).
    """
    _check_threads(threads)
    hardware = describe_cpu()
    torch_version = _torch_version()
    path = peaks_cache_path(threads, hardware=hardware, torch_version=torch_version)
    if not refresh:
        cached = _read_cached(path)
        if cached is not None and _matches(cached, hardware, threads, torch_version):
            return cached
    with timing_slot():
        peaks = measure_peaks(threads, hardware=hardware)
    try:
        write_record(path, peaks)
    except OSError as error:
        warnings.warn(
            f"cannot cache machine peaks in {path} ({error}): they are measured every time",
            RuntimeWarning,
            stacklevel=2,
        )
    return peaks


def peaks_cache_path(
    threads: int, *, hardware: HardwareDescription | None = None, torch_version: str | None = None
) -> Path:
    """Where :func:`machine_peaks` keeps the peaks for ``threads`` threads on this machine."""
    hardware = hardware or describe_cpu()
    torch_version = torch_version or _torch_version()
    version = re.sub(r"[^A-Za-z0-9_.+-]+", "-", torch_version)
    return cache_dir("roofline") / f"{hardware.fingerprint()}-{threads}t-torch{version}.json"


def _read_cached(path: Path) -> MachinePeaks | None:
    if not path.exists():
        return None
    try:
        return read_record(path, MachinePeaks)
    except (RecordError, OSError, UnicodeDecodeError):
        return None  # corrupt, unreadable, or of another schema: measure again


def _matches(peaks: MachinePeaks, hardware: HardwareDescription, threads: int, torch_version: str) -> bool:
    return (
        peaks.hardware.fingerprint() == hardware.fingerprint()
        and peaks.threads == threads
        and peaks.torch_version == torch_version
        and (peaks.copy_bytes, peaks.gemm_n, peaks.repeats) == (DEFAULT_COPY_BYTES, DEFAULT_GEMM_N, DEFAULT_REPEATS)
    )


def _torch_version() -> str:
    import torch

    return str(torch.__version__)


def _check_threads(threads: int) -> None:
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive integer, got {threads!r}")


# -- the table ----------------------------------------------------------------------------------


def roofline_table(task: Task, peaks: MachinePeaks, *, reference_ms: float | None = None) -> Table:
    """The task's roofline on this machine, one quantity a row, for ``pragma roofline TASK``.

    With ``reference_ms`` (the measured time of the reference), adds its attainment.
    """
    analysis = task.analysis
    if analysis is None:
        raise TaskError(f"{task.key}: the task was not analyzed; load it with load_task()")
    floor = floor_ms(analysis, peaks)
    plural = "s" if peaks.threads > 1 else ""
    table = Table(title=f"roofline of {task.key}", title_justify="left")
    table.add_column("quantity", no_wrap=True)
    table.add_column("value", justify="right")
    table.add_row("task", task.key)
    table.add_row("category", task.category.value)
    table.add_row("FLOPs", _si(analysis.flops, "FLOP") if analysis.flops else "0 (not counted)")
    table.add_row("min bytes", _si(analysis.min_bytes, "B"))
    table.add_row("intensity", "-" if floor.intensity is None else f"{floor.intensity:.3g} FLOP/B")
    table.add_row("peak bandwidth", f"{peaks.bandwidth_gbs:.1f} GB/s")
    table.add_row("peak GFLOP/s", f"{peaks.flops_gflops:.1f} GFLOP/s (fp32)")
    table.add_row("ridge intensity", f"{peaks.ridge_intensity:.3g} FLOP/B")
    table.add_row("memory floor", _duration(floor.memory_ms))
    table.add_row("compute floor", _duration(floor.compute_ms))
    table.add_row("floor", _duration(floor.floor_ms))
    table.add_row("bound", floor.bound.value)
    if reference_ms is not None:
        table.add_row("reference", _duration(reference_ms))
        table.add_row("reference attainment", f"{attainment(reference_ms, floor):.1%}")

    notes = [
        f"{peaks.hardware.model_name}, {peaks.threads} thread{plural}, torch {peaks.torch_version}, "
        f"peaks measured {peaks.measured_at}"
    ]
    if not analysis.flops:
        notes.append("FLOPs count matrix products, convolutions and attention only")
    l3 = peaks.hardware.l3_total_bytes
    if l3 and analysis.min_bytes <= l3:
        notes.append(
            f"{_si(analysis.min_bytes, 'B')} fit in the {_si(l3, 'B')} L3: warm runs can beat the memory floor"
        )
    dtypes = sorted({spec.dtype for spec in (*analysis.inputs, *analysis.outputs) if spec.is_tensor} - {"float32"})
    if analysis.flops and dtypes:
        notes.append(f"the compute peak is fp32; this task also uses {', '.join(dtypes)}")
    table.caption = "\n".join(notes)
    return table


def _si(value: float, unit: str) -> str:
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= factor:
            return f"{value / factor:.2f} {prefix}{unit}"
    return f"{value:.0f} {unit}"


def _duration(ms: float) -> str:
    if ms == 0:
        return "0 ms"
    return f"{ms:.3f} ms" if ms >= 0.1 else f"{ms * 1e3:.2f} µs"
