"""The GPU clock: why a GPU is not usable (runs anywhere), the timing record, and on a GPU the
clock itself: flush, device-wide synchronization and work hidden on another stream (INTEGRITY.md
items 1, 4 and 6)."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest
import torch

from pragma_core.backends.gpu import clock
from pragma_core.backends.gpu.clock import (
    MIN_FLUSH_BYTES,
    GpuClock,
    GpuTiming,
    gpu_available,
)
from pragma_core.errors import PragmaError

NO_GPU = gpu_available()
CPU_BUILD = torch.version.cuda is None and torch.version.hip is None


# -- gpu_available ------------------------------------------------------------------------------


@pytest.mark.skipif(not CPU_BUILD, reason="torch here is a CUDA or ROCm build")
def test_a_cpu_build_of_torch_says_so():
    reason = gpu_available()
    assert reason.startswith(f"torch {torch.__version__} is a CPU build")
    assert "CUDA or ROCm build" in reason


def test_without_torch_the_reason_is_that(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    assert gpu_available() == "torch is not installed"


def pretend_build(monkeypatch, *, cuda: str | None, hip: str | None, devices: int) -> None:
    monkeypatch.setattr(torch.version, "cuda", cuda)
    monkeypatch.setattr(torch.version, "hip", hip)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: devices > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: devices)
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)


def test_a_cuda_build_that_sees_no_device_names_the_variable_that_hides_them(monkeypatch):
    pretend_build(monkeypatch, cuda="12.8", hip=None, devices=0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert (
        gpu_available()
        == f"torch {torch.__version__} is built for CUDA (NVIDIA) but sees no device with CUDA_VISIBLE_DEVICES=''"
    )


def test_a_rocm_build_that_sees_no_device_asks_about_the_driver(monkeypatch):
    pretend_build(monkeypatch, cuda=None, hip="6.4.1", devices=0)
    reason = gpu_available()
    assert "ROCm (AMD)" in reason
    assert "driver" in reason


def test_a_broken_driver_gives_its_message(monkeypatch):
    pretend_build(monkeypatch, cuda="12.8", hip=None, devices=1)

    def broken() -> bool:
        raise RuntimeError("The NVIDIA driver on your system is too old\n(found version 11040).")

    monkeypatch.setattr(torch.cuda, "is_available", broken)
    assert gpu_available().endswith(
        "cannot reach a GPU: The NVIDIA driver on your system is too old (found version 11040)."
    )


def test_a_visible_device_is_usable(monkeypatch):
    pretend_build(monkeypatch, cuda="12.8", hip=None, devices=2)
    assert gpu_available() == ""


@pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU")
def test_the_clock_refuses_to_start_without_a_gpu_and_says_why():
    with pytest.raises(PragmaError) as raised:
        GpuClock()
    assert str(raised.value) == f"cannot time on a GPU: {NO_GPU}"


def test_the_gpu_modules_do_not_import_torch():
    """The parent imports them to describe the GPU; torch loads only when a function needs it."""
    code = (
        "import sys, pragma_core.backends.gpu.clock, pragma_core.backends.gpu.hardware; print('torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "False"


# -- the timing record --------------------------------------------------------------------------


def test_a_call_whose_work_ended_with_its_stream_is_timed_by_its_events():
    timing = GpuTiming(event_ms=2.0, wall_ms=2.3, tail_ms=0.01, other_work=False)
    assert timing.milliseconds == 2.0


def test_a_call_whose_work_outlived_its_stream_is_timed_by_the_wall_clock():
    timing = GpuTiming(event_ms=0.01, wall_ms=9.0, tail_ms=8.9, other_work=True)
    assert timing.milliseconds == 9.0


@pytest.mark.parametrize("field", ["event_ms", "wall_ms", "tail_ms"])
@pytest.mark.parametrize("value", [-1.0, float("nan"), float("inf")])
def test_impossible_timings_are_refused(field, value):
    fields = {"event_ms": 1.0, "wall_ms": 1.0, "tail_ms": 0.0, "other_work": False, field: value}
    with pytest.raises(ValueError, match=field):
        GpuTiming(**fields)


def _cuda_driver_loads() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(_cuda_driver_loads(), reason="the CUDA driver library is installed here")
def test_without_the_cuda_driver_the_persisting_l2_reset_is_a_note():
    reset, note = clock._l2_reset()
    assert reset is None
    assert "cuCtxResetPersistingL2Cache" in note


# -- on a GPU -----------------------------------------------------------------------------------

needs_gpu = pytest.mark.skipif(bool(NO_GPU), reason=NO_GPU or "a GPU is here")


@pytest.fixture
def matrices():
    generator = torch.Generator(device="cuda").manual_seed(0)
    a = torch.rand(2048, 2048, device="cuda", generator=generator)
    return a, a.clone(), torch.empty_like(a)


@pytest.mark.gpu
@needs_gpu
def test_the_clock_returns_the_result_and_its_event_time(matrices):
    a, b, c = matrices
    gpu_clock = GpuClock()
    result, ms = gpu_clock.time(lambda: torch.mm(a, b, out=c))
    assert result is c
    timing = gpu_clock.last
    assert timing is not None and ms == timing.milliseconds
    assert 0 < timing.event_ms <= timing.wall_ms
    torch.testing.assert_close(c, a @ b)


@pytest.mark.gpu
@needs_gpu
def test_the_flush_covers_twice_the_l2():
    l2_bytes = torch.cuda.get_device_properties(0).L2_cache_size
    gpu_clock = GpuClock(flush_bytes=1)
    assert gpu_clock.flush_bytes >= 2 * l2_bytes
    assert GpuClock().flush_bytes >= max(2 * l2_bytes, MIN_FLUSH_BYTES)


@pytest.mark.gpu
@needs_gpu
def test_work_hidden_on_another_stream_is_seen_and_timed(matrices):
    """INTEGRITY.md item 1: forward returns at once and its work runs on a side stream; the events on
    the current stream see nothing, the device-wide synchronize does."""
    a, b, c = matrices
    side = torch.cuda.Stream()

    def hide_the_work():
        with torch.cuda.stream(side):
            for _ in range(50):
                torch.mm(a, b, out=c)
        return c

    gpu_clock = GpuClock()
    _result, ms = gpu_clock.time(hide_the_work)
    timing = gpu_clock.last
    assert timing is not None and timing.other_work
    assert ms == timing.wall_ms > 10 * timing.event_ms


@pytest.mark.gpu
@needs_gpu
def test_the_clock_keeps_the_synchronize_it_was_built_with(matrices, monkeypatch):
    """INTEGRITY.md item 4: a candidate that replaces torch.cuda.synchronize after the clock exists
    does not blind it."""
    a, b, c = matrices
    side = torch.cuda.Stream()
    gpu_clock = GpuClock()
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)

    def hide_the_work():
        with torch.cuda.stream(side):
            for _ in range(50):
                torch.mm(a, b, out=c)
        return c

    gpu_clock.time(hide_the_work)
    assert gpu_clock.last is not None and gpu_clock.last.other_work


def _has_persisting_l2() -> bool:
    return not NO_GPU and torch.version.hip is None and torch.cuda.get_device_capability(0) >= (8, 0)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.skipif(
    not NO_GPU and not _has_persisting_l2(), reason="this GPU has no persisting L2 (before sm_80, or AMD)"
)
def test_persisting_l2_is_reset_where_the_gpu_has_it(matrices):
    a, b, c = matrices
    gpu_clock = GpuClock()
    gpu_clock.time(lambda: torch.mm(a, b, out=c))
    gpu_clock.time(lambda: torch.mm(a, b, out=c))
    assert [note for note in gpu_clock.notes if "persisting" in note] == []
