"""Roofline floors, attainment, the peaks cache and the measurement itself (never its speed)."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest
import torch
from rich.console import Console

from pragma_core.errors import TaskError
from pragma_core.machine import roofline
from pragma_core.machine.hardware import parse_lscpu
from pragma_core.machine.roofline import (
    DEFAULT_COPY_BYTES,
    DEFAULT_GEMM_N,
    DEFAULT_REPEATS,
    MachinePeaks,
    RooflineFloor,
    attainment,
    floor_ms,
    machine_peaks,
    measure_peaks,
    peaks_cache_path,
    roofline_table,
)
from pragma_core.records import BoundClass, Category, Task, TaskAnalysis, TensorSpec
from pragma_core.serialization import read_record, write_record
from pragma_core.tasks.loading import load_task

EPYC = parse_lscpu((Path(__file__).parent / "data" / "lscpu" / "amd-epyc-kvm-2cpu.txt").read_text())
MiB = 1 << 20


def make_peaks(threads: int = 1, *, hardware=EPYC, **changes) -> MachinePeaks:
    """10 GB/s and 100 GFLOP/s: round numbers that make the floors easy to check by hand."""
    peaks = MachinePeaks(
        bandwidth_gbs=10.0,
        flops_gflops=100.0,
        threads=threads,
        torch_version=torch.__version__,
        hardware=hardware,
        measured_at="2026-01-01T00:00:00+00:00",
        copy_bytes=DEFAULT_COPY_BYTES,
        gemm_n=DEFAULT_GEMM_N,
        repeats=DEFAULT_REPEATS,
    )
    return attrs.evolve(peaks, **changes)


def spec(*shape: int) -> TensorSpec:
    numel = 1
    for size in shape:
        numel *= size
    return TensorSpec(shape=shape, dtype="float32", nbytes=4 * numel)


def analysis(inputs, outputs, flops: int, parameter_bytes: int = 0) -> TaskAnalysis:
    return TaskAnalysis(inputs=inputs, outputs=outputs, parameter_bytes=parameter_bytes, flops=flops, traced_on="meta")


GELU = analysis([spec(1024, 8192)], [spec(1024, 8192)], flops=0)  # 64 MiB moved, no FLOPs counted
MATMUL = analysis([spec(1024, 1024), spec(1024, 1024)], [spec(1024, 1024)], flops=2 * 1024**3)


# -- floors -------------------------------------------------------------------------------------


def test_elementwise_task_is_memory_bound():
    floor = floor_ms(GELU, make_peaks())
    assert floor.memory_ms == pytest.approx(64 * MiB / 10e9 * 1e3)  # 6.71 ms
    assert floor.compute_ms == 0
    assert floor.floor_ms == floor.memory_ms
    assert floor.bound is BoundClass.MEMORY
    assert floor.intensity == 0


def test_large_matmul_is_compute_bound():
    floor = floor_ms(MATMUL, make_peaks())
    assert floor.compute_ms == pytest.approx(2 * 1024**3 / 100e9 * 1e3)  # 21.5 ms
    assert floor.memory_ms == pytest.approx(12 * MiB / 10e9 * 1e3)  # 1.26 ms
    assert floor.floor_ms == floor.compute_ms
    assert floor.bound is BoundClass.COMPUTE
    assert floor.intensity == pytest.approx(2 * 1024**3 / (12 * MiB))  # 170.7 FLOP/B


def test_the_bound_moves_with_the_machine_balance():
    """The same matmul on a machine with 100x the compute is memory-bound."""
    floor = floor_ms(MATMUL, make_peaks(flops_gflops=10_000.0))
    assert floor.bound is BoundClass.MEMORY
    assert MATMUL.flops / MATMUL.min_bytes < make_peaks(flops_gflops=10_000.0).ridge_intensity


def test_parameters_count_as_bytes():
    with_weights = attrs.evolve(GELU, parameter_bytes=64 * MiB)
    assert floor_ms(with_weights, make_peaks()).memory_ms == pytest.approx(2 * floor_ms(GELU, make_peaks()).memory_ms)


def test_a_task_that_moves_nothing_has_a_zero_floor():
    empty = analysis([spec(0)], [spec(0)], flops=0)
    floor = floor_ms(empty, make_peaks())
    assert (floor.floor_ms, floor.bound, floor.intensity) == (0, BoundClass.MEMORY, None)


def test_floor_record_must_be_consistent():
    with pytest.raises(ValueError, match="not the larger"):
        RooflineFloor(memory_ms=2.0, compute_ms=1.0, floor_ms=1.0, bound="memory")
    with pytest.raises(ValueError):
        RooflineFloor(memory_ms=2.0, compute_ms=1.0, floor_ms=2.0, bound="latency")


# -- attainment ---------------------------------------------------------------------------------


def test_attainment_is_floor_over_time():
    floor = floor_ms(GELU, make_peaks())
    assert attainment(floor.floor_ms, floor) == pytest.approx(1.0)
    assert attainment(10 * floor.floor_ms, floor) == pytest.approx(0.1)
    assert attainment(floor.floor_ms / 2, floor) == pytest.approx(2.0)  # beat the roof: warm cache


@pytest.mark.parametrize("time_ms", [0, -1.0, float("nan"), float("inf")])
def test_attainment_needs_a_positive_time(time_ms):
    with pytest.raises(ValueError, match="time_ms"):
        attainment(time_ms, floor_ms(GELU, make_peaks()))


# -- records ------------------------------------------------------------------------------------


def test_peaks_round_trip_through_json(tmp_path):
    peaks = make_peaks(threads=2)
    write_record(tmp_path / "peaks.json", peaks)
    assert read_record(tmp_path / "peaks.json", MachinePeaks) == peaks


@pytest.mark.parametrize("field", ["bandwidth_gbs", "flops_gflops"])
@pytest.mark.parametrize("value", [0.0, -1.0, float("nan"), float("inf")])
def test_peaks_must_be_positive(field, value):
    with pytest.raises(ValueError, match=field):
        make_peaks(**{field: value})


# -- measuring ----------------------------------------------------------------------------------


def test_measure_peaks_with_tiny_sizes():
    before = torch.get_num_threads()
    peaks = measure_peaks(1, copy_bytes=4096, gemm_n=16, repeats=2, hardware=EPYC)
    assert peaks.bandwidth_gbs > 0 and peaks.flops_gflops > 0
    assert (peaks.threads, peaks.copy_bytes, peaks.gemm_n, peaks.repeats) == (1, 4096, 16, 2)
    assert peaks.torch_version == torch.__version__
    assert peaks.hardware == EPYC
    assert torch.get_num_threads() == before


def test_measure_peaks_leaves_the_global_seed_alone():
    torch.manual_seed(42)
    expected = torch.rand(3)
    torch.manual_seed(42)
    measure_peaks(1, copy_bytes=4096, gemm_n=16, repeats=1, hardware=EPYC)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize("bad", [{"threads": 0}, {"copy_bytes": 0}, {"gemm_n": -1}, {"repeats": 0}])
def test_measure_peaks_refuses_bad_sizes(bad):
    arguments = {"threads": 1, "copy_bytes": 4096, "gemm_n": 16, "repeats": 1, **bad}
    threads = arguments.pop("threads")
    with pytest.raises(ValueError, match=next(iter(bad))):
        measure_peaks(threads, hardware=EPYC, **arguments)


# -- the cache ----------------------------------------------------------------------------------


@pytest.fixture
def measured(tmp_path, monkeypatch) -> list[int]:
    """An empty cache under tmp_path and a stand-in measurement that records its thread counts."""
    monkeypatch.setenv("PRAGMA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(roofline, "describe_cpu", lambda: EPYC)
    calls: list[int] = []

    def fake_measure(threads, *, hardware=None, **sizes):
        assert not sizes, "machine_peaks measures with the default sizes"
        calls.append(threads)
        return make_peaks(threads, hardware=hardware, bandwidth_gbs=10.0 + len(calls))

    monkeypatch.setattr(roofline, "measure_peaks", fake_measure)
    return calls


def test_peaks_are_measured_once_then_read(measured, tmp_path):
    first = machine_peaks(2)
    second = machine_peaks(2)
    assert measured == [2]
    assert second == first
    path = peaks_cache_path(2)
    assert path.parent == tmp_path / "cache" / "roofline"
    assert path.exists() and EPYC.fingerprint() in path.name


def test_refresh_measures_again(measured):
    first = machine_peaks(1)
    refreshed = machine_peaks(1, refresh=True)
    assert measured == [1, 1]
    assert refreshed.bandwidth_gbs != first.bandwidth_gbs
    assert machine_peaks(1) == refreshed  # and replaces the cached entry


def test_each_thread_count_is_its_own_entry(measured):
    machine_peaks(1)
    machine_peaks(2)
    machine_peaks(1)
    machine_peaks(2)
    assert measured == [1, 2]
    assert peaks_cache_path(1) != peaks_cache_path(2)


@pytest.mark.parametrize("content", ["{not json", "[]", '{"schema_version": 1, "record": "Verdict"}'])
def test_corrupt_cache_is_measured_again(measured, content):
    machine_peaks(1)
    peaks_cache_path(1).write_text(content)
    peaks = machine_peaks(1)
    assert measured == [1, 1]
    assert read_record(peaks_cache_path(1), MachinePeaks) == peaks


def test_binary_garbage_in_the_cache_is_measured_again(measured):
    machine_peaks(1)
    peaks_cache_path(1).write_bytes(b"\xff\xfe\x00garbage")
    machine_peaks(1)
    assert measured == [1, 1]


def test_cache_from_a_newer_schema_is_measured_again(measured):
    machine_peaks(1)
    path = peaks_cache_path(1)
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "schema_version": data["schema_version"] + 1}))
    machine_peaks(1)
    assert measured == [1, 1]


def test_cache_measured_with_other_sizes_is_measured_again(measured):
    write_record(peaks_cache_path(1), make_peaks(1, gemm_n=64))
    assert machine_peaks(1).gemm_n == DEFAULT_GEMM_N
    assert measured == [1]


def test_cache_of_another_machine_kind_is_not_used(measured, monkeypatch):
    machine_peaks(1)
    other = attrs.evolve(EPYC, physical_cores=1, logical_cpus=1)
    monkeypatch.setattr(roofline, "describe_cpu", lambda: other)
    assert machine_peaks(1).hardware == other
    assert measured == [1, 1]


def test_unwritable_cache_warns_and_still_answers(measured, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("PRAGMA_CACHE_DIR", str(blocker))
    with pytest.warns(RuntimeWarning, match="cannot cache"):
        assert machine_peaks(1).threads == 1


def test_cache_folder_follows_xdg_then_home(tmp_path, monkeypatch):
    monkeypatch.delenv("PRAGMA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    path = peaks_cache_path(1, hardware=EPYC, torch_version="2.13.0+cpu")
    assert path == tmp_path / "xdg" / "pragma" / "roofline" / f"{EPYC.fingerprint()}-1t-torch2.13.0+cpu.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    path = peaks_cache_path(1, hardware=EPYC, torch_version="2.13.0")
    assert path.parent == tmp_path / "home" / ".cache" / "pragma" / "roofline"


# -- the table ----------------------------------------------------------------------------------


def render(table) -> str:
    console = Console(record=True, width=120)
    console.print(table)
    return console.export_text()


def test_table_of_an_example_task(examples):
    task = load_task(examples / "level1" / "1_GELUTanh.py")
    text = render(roofline_table(task, make_peaks()))
    for label in ("memory floor", "compute floor", "bound", "10.0 GB/s", "100.0 GFLOP/s", "AMD EPYC"):
        assert label in text
    assert "memory" in text and "attainment" not in text


def test_table_with_a_reference_time():
    task = Task(name="matmul", source="...", category=Category.MATMUL, analysis=MATMUL)
    floor = floor_ms(MATMUL, make_peaks())
    text = render(roofline_table(task, make_peaks(), reference_ms=2 * floor.floor_ms))
    assert "reference attainment" in text and "50.0%" in text and "compute" in text


def test_table_needs_an_analysis():
    task = Task(name="bare", source="...", category=Category.OTHER)
    with pytest.raises(TaskError, match="not analyzed"):
        roofline_table(task, make_peaks())
