"""Timing one call on the GPU, inside the sandbox child: what one forward costs on the device.

::

    clock = GpuClock(0)                   # before the candidate is imported: binds torch's functions
    result, ms = clock.time(lambda: model(*inputs))
    clock.last                            # GpuTiming: event_ms, wall_ms, tail_ms, other_work
    clock.notes                           # what could not be done here (a persisting-L2 reset)

Each :meth:`GpuClock.time` call, in order:

1. resets the persisting L2 lines to normal (``cuCtxResetPersistingL2Cache``; INTEGRITY.md item 6:
   inputs pinned in a persisting window would survive the flush), then flushes the caches by
   writing a buffer of at least twice the L2 (at least 256 MiB; 512 MiB on ROCm, where the MI300's
   256 MiB Infinity Cache is not in ``L2_cache_size``), so every call starts cold;
2. synchronizes the whole device, so no earlier work (the flush included) runs into the timing;
3. records a CUDA event on the current stream, reads the host clock, makes the call, records the
   end event;
4. waits for the end event (the current stream is done), reads the host clock, synchronizes the
   whole device and reads the host clock again.

The event pair is the precise time of the work on the current stream. The host clock from before
the call to the device-wide synchronize (``wall_ms``) covers every stream of the process, and the
time the device stayed busy after the current stream was done (``tail_ms``) is work that outlived
it: INTEGRITY.md item 1, work launched on another stream so that the events time nothing. When
``tail_ms`` exceeds ``tail_threshold_ms`` the call is marked ``other_work`` and its time is the
wall time, which contains that work: a candidate gains nothing by hiding work on another stream.

Limits, by design of what a process can observe:

- ``tail_ms`` is host time, so it also holds the cost of a device-wide synchronize (microseconds)
  and any moment the OS takes the thread away; the threshold (50 µs by default) absorbs the first,
  and a call marked by the second is timed by its wall time, higher than its event time, never
  lower. Work on another stream that ends within the threshold after the current stream is not
  seen; work that ends before the current stream ran concurrently and is inside the event time.
- Only this process's work is synchronized (``torch.cuda.synchronize`` waits for this context):
  work handed to another process, or launched by a thread after the synchronize, is outside the
  clock's reach; the sandbox forbids child processes and the verifier counts threads (item 2).
- The persisting-L2 reset needs an NVIDIA GPU of compute capability 8.0 or newer and the CUDA
  driver library; elsewhere it is skipped and :attr:`GpuClock.notes` says why. AMD GPUs have no
  persisting L2 window. A candidate may set a window during its own call; lines it pins then can
  only serve that same call, which is fair reuse.
- torch's functions the clock calls (``torch.cuda.synchronize``, the event methods, the flush's
  ``fill_``) are bound when the clock is built: build it before the candidate is imported, or a
  candidate could replace them first (item 4). ``time.perf_counter`` is bound when this module is
  imported.

torch is imported only inside functions: importing this module costs nothing without a GPU.
"""

from __future__ import annotations

import ctypes
import math
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

import attrs
from attrs import validators as v

from ...errors import PragmaError

__all__ = [
    "DEFAULT_TAIL_THRESHOLD_MS",
    "MIN_FLUSH_BYTES",
    "MIN_FLUSH_BYTES_ROCM",
    "GpuTiming",
    "GpuClock",
    "gpu_available",
]

_perf_counter = time.perf_counter  # bound at import, before any candidate code can replace it

DEFAULT_TAIL_THRESHOLD_MS = 0.05
"""Device time after the current stream is done beyond which a call is marked ``other_work``."""
MIN_FLUSH_BYTES = 256 << 20
"""Least flush on CUDA, and what is written when the device does not report its L2 size."""
MIN_FLUSH_BYTES_ROCM = 512 << 20
"""Least flush on ROCm: twice the MI300's 256 MiB Infinity Cache, which ``L2_cache_size`` omits."""

_VISIBILITY_VARIABLES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
# The driver API acts on the calling thread's current context, the primary context torch made
# current; libcuda is one library per process, where a second copy of libcudart would hold state of
# its own.
_RESET_FUNCTIONS = (
    ("libcuda.so.1", "cuCtxResetPersistingL2Cache"),
    ("nvcuda.dll", "cuCtxResetPersistingL2Cache"),
)

R = TypeVar("R")


def gpu_available() -> str:
    """``""`` when torch can use a CUDA or ROCm device here, else why not, in one line.

    Asks ``torch.cuda.is_available()``, which initializes the CUDA runtime unless
    ``PYTORCH_NVML_BASED_CUDA_CHECK=1``: a process that forks workers afterwards should ask in a
    child, or set that variable.
    """
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    cuda = getattr(torch, "cuda", None)
    version = getattr(torch, "version", None)
    if cuda is None or not hasattr(cuda, "is_available"):
        return f"torch {torch.__version__} has no torch.cuda"
    if getattr(version, "cuda", None) is None and getattr(version, "hip", None) is None:
        return f"torch {torch.__version__} is a CPU build: install a CUDA or ROCm build of torch to use a GPU"
    kind = "ROCm (AMD)" if getattr(version, "hip", None) else "CUDA (NVIDIA)"
    try:
        count = cuda.device_count() if cuda.is_available() else 0
    except RuntimeError as error:  # a broken driver or runtime says so here
        return f"torch {torch.__version__} ({kind}) cannot reach a GPU: {' '.join(str(error).split())}"
    if count == 0:
        settings = [f"{name}={os.environ[name]!r}" for name in _VISIBILITY_VARIABLES if name in os.environ]
        where = f" with {', '.join(settings)}" if settings else "; is the driver installed and loaded?"
        return f"torch {torch.__version__} is built for {kind} but sees no device{where}"
    return ""


def _non_negative_finite(_instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise ValueError(f"{attribute.name} must be a finite number >= 0, got {value!r}")


@attrs.frozen(kw_only=True)
class GpuTiming:
    """One timed call. ``event_ms``: the CUDA events around the call on the current stream.
    ``wall_ms``: host time from just before the call until the whole device was idle.
    ``tail_ms``: host time the device stayed busy after the current stream was done.
    ``other_work``: ``tail_ms`` exceeded the clock's threshold, so work outlived the stream."""

    event_ms: float = attrs.field(validator=_non_negative_finite)
    wall_ms: float = attrs.field(validator=_non_negative_finite)
    tail_ms: float = attrs.field(validator=_non_negative_finite)
    other_work: bool = attrs.field(validator=v.instance_of(bool))

    @property
    def milliseconds(self) -> float:
        """The call's time: the event time, or the wall time when work outlived the stream."""
        return self.wall_ms if self.other_work else self.event_ms


class GpuClock:
    """Times calls on one GPU with cold caches and device-wide synchronization (module docstring).

    ``flush_bytes`` is the size of the flush buffer; it is never less than twice the L2 the
    device reports, and defaults to that or :data:`MIN_FLUSH_BYTES` (:data:`MIN_FLUSH_BYTES_ROCM`
    on ROCm), whichever is larger; :attr:`GpuPeaks.flush_bytes` gives it from the peaks. Building
    the clock allocates the buffer on the device. No usable GPU raises
    :class:`~pragma_core.errors.PragmaError` with :func:`gpu_available`'s reason.
    """

    def __init__(
        self,
        device: int = 0,
        *,
        flush_bytes: int | None = None,
        tail_threshold_ms: float = DEFAULT_TAIL_THRESHOLD_MS,
    ) -> None:
        reason = gpu_available()
        if reason:
            raise PragmaError(f"cannot time on a GPU: {reason}")
        if flush_bytes is not None and (
            isinstance(flush_bytes, bool) or not isinstance(flush_bytes, int) or flush_bytes < 1
        ):
            raise ValueError(f"flush_bytes must be a positive whole number of bytes, got {flush_bytes!r}")
        if isinstance(tail_threshold_ms, bool) or not 0 <= tail_threshold_ms < math.inf:
            raise ValueError(f"tail_threshold_ms must be a finite number >= 0, got {tail_threshold_ms!r}")
        import torch

        count = torch.cuda.device_count()
        if isinstance(device, bool) or not isinstance(device, int) or not 0 <= device < count:
            raise PragmaError(f"there is no GPU {device!r}: torch sees {count} (numbered from 0)")
        # Bound now, so that a candidate imported later cannot blind the clock by replacing them.
        self._synchronize = torch.cuda.synchronize
        self._device_context = torch.cuda.device
        self._current_stream = torch.cuda.current_stream
        self._fill = torch.Tensor.fill_
        self._record = torch.cuda.Event.record
        self._wait = torch.cuda.Event.synchronize
        self._elapsed_ms = torch.cuda.Event.elapsed_time
        self.device = torch.device("cuda", device)
        self.tail_threshold_ms = float(tail_threshold_ms)
        rocm = bool(torch.version.hip)
        l2_bytes = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0)
        least = max(2 * l2_bytes, MIN_FLUSH_BYTES_ROCM if rocm else MIN_FLUSH_BYTES)
        self.flush_bytes = least if flush_bytes is None else max(flush_bytes, 2 * l2_bytes)
        notes = []
        if l2_bytes == 0:
            notes.append(f"the device reports no L2 size: the flush writes {self.flush_bytes >> 20} MiB")
        with self._device_context(self.device):
            self._flush_buffer = torch.empty(self.flush_bytes, dtype=torch.uint8, device=self.device)
            self._start = torch.cuda.Event(enable_timing=True)
            self._end = torch.cuda.Event(enable_timing=True)
            reset, note = (None, "AMD GPUs have no persisting L2 window") if rocm else _l2_reset()
        self._reset_persisting_l2: Callable[[], int] | None = reset
        if note:
            notes.append(note)
        self.notes: tuple[str, ...] = tuple(notes)
        self.last: GpuTiming | None = None
        self._calls = 0

    def time(self, call: Callable[[], R]) -> tuple[R, float]:
        """Run ``call()`` once, cold, and return its result and its time in milliseconds
        (:attr:`GpuTiming.milliseconds`); :attr:`last` holds the whole measurement."""
        with self._device_context(self.device):
            stream = self._current_stream()
            self._reset_l2()
            self._calls += 1
            self._fill(self._flush_buffer, self._calls % 255 + 1)  # a new value each call: every line written
            self._synchronize()
            self._record(self._start, stream)
            began = _perf_counter()
            result = call()
            self._record(self._end, stream)
            self._wait(self._end)
            stream_done = _perf_counter()
            self._synchronize()
            device_done = _perf_counter()
            event_ms = float(self._elapsed_ms(self._start, self._end))
        tail_ms = (device_done - stream_done) * 1e3
        self.last = GpuTiming(
            event_ms=max(event_ms, 0.0),
            wall_ms=(device_done - began) * 1e3,
            tail_ms=tail_ms,
            other_work=tail_ms > self.tail_threshold_ms,
        )
        return result, self.last.milliseconds

    def _reset_l2(self) -> None:
        if self._reset_persisting_l2 is None:
            return
        status = self._reset_persisting_l2()
        if status != 0:  # CUDA_ERROR_NOT_SUPPORTED before compute capability 8.0
            self._reset_persisting_l2 = None
            self.notes = (*self.notes, f"resetting the persisting L2 failed (CUresult {status}): skipped from now on")


def _l2_reset() -> tuple[Callable[[], int] | None, str]:
    """The driver's persisting-L2 reset, or None and why it is not there."""
    for library, symbol in _RESET_FUNCTIONS:
        try:
            function = getattr(ctypes.CDLL(library), symbol)
        except (OSError, AttributeError):
            continue
        function.restype = ctypes.c_int
        function.argtypes = []
        return function, ""
    return None, "the CUDA driver library has no cuCtxResetPersistingL2Cache: persisting L2 is not reset"
