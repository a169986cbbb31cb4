"""Roofline floors, attainment, the peaks cache and when it is measured again (never its speed)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import attrs
import pytest
import torch
from rich.console import Console

from pragma_core.errors import TaskError
from pragma_core.machine import roofline
from pragma_core.machine.hardware import describe_cpu, parse_lscpu
from pragma_core.machine.physical_peaks import (
    StreamFigures,
    dram_array_bytes,
    last_level_cache_bytes,
    measure_fma,
    timing_cpus,
    vector_isas,
)
from pragma_core.machine.roofline import (
    DEFAULT_COPY_BYTES,
    DEFAULT_GEMM_N,
    DEFAULT_REPEATS,
    QUICK_CHECK_LIMIT,
    MachinePeaks,
    RooflineFloor,
    attainment,
    floor_ms,
    library_floor_ms,
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
LLC = last_level_cache_bytes(EPYC) or 0  # 32 MiB
HERE = describe_cpu()


def stream(gbs: float, array_bytes: int) -> StreamFigures:
    return StreamFigures(copy_gbs=gbs, triad_gbs=gbs, copy_nt_gbs=gbs, triad_nt_gbs=gbs, array_bytes=array_bytes)


def make_peaks(threads: int = 1, *, hardware=EPYC, dram_gbs: float = 10.0, cache_gbs: float | None = 100.0, **changes):
    """10 GB/s from memory, 100 GB/s from cache, 100 GFLOP/s; torch at half of each: round numbers
    that make the floors easy to check by hand."""
    dram = stream(dram_gbs, dram_array_bytes(hardware))
    cache = None if cache_gbs is None else stream(cache_gbs, 4 * MiB)
    peaks = MachinePeaks(
        threads=threads,
        hardware=hardware,
        isa="avx2+fma",
        vector_bytes=32,
        fused=True,
        fma_gflops=100.0,
        dram_gbs=dram.best_gbs,
        dram_stream=dram,
        cache_gbs=None if cache is None else cache.best_gbs,
        cache_stream=cache,
        library_gflops=50.0,
        library_gbs=5.0,
        library_gemm_n=DEFAULT_GEMM_N,
        library_copy_bytes=DEFAULT_COPY_BYTES,
        repeats=DEFAULT_REPEATS,
        torch_version=torch.__version__,
        boot_id=roofline.boot_id(),
        measured_at="2026-01-01T00:00:00+00:00",
        remeasured_because="no peaks recorded",
    )
    return attrs.evolve(peaks, **changes)


def spec(*shape: int) -> TensorSpec:
    return TensorSpec(shape=shape, dtype="float32", nbytes=4 * math.prod(shape))


def analysis(inputs, outputs, flops: int, parameter_bytes: int = 0) -> TaskAnalysis:
    return TaskAnalysis(inputs=inputs, outputs=outputs, parameter_bytes=parameter_bytes, flops=flops, traced_on="meta")


GELU = analysis([spec(4096, 8192)], [spec(4096, 8192)], flops=0)  # 256 MiB moved, no FLOPs counted
SMALL_GELU = analysis([spec(1024, 1024)], [spec(1024, 1024)], flops=0)  # 8 MiB: fits the 32 MiB L3
MATMUL = analysis([spec(1024, 1024), spec(1024, 1024)], [spec(1024, 1024)], flops=2 * 1024**3)


# -- floors -------------------------------------------------------------------------------------


def test_a_large_elementwise_task_is_memory_bound_at_dram_bandwidth():
    floor = floor_ms(GELU, make_peaks())
    cached, rest = LLC, 256 * MiB - LLC
    assert floor.memory_ms == pytest.approx((cached / 100e9 + rest / 10e9) * 1e3)  # 24.5 ms
    assert floor.memory_ms > 0.85 * 256 * MiB / 10e9 * 1e3  # nearly all of it at memory's bandwidth
    assert floor.compute_ms == 0
    assert (floor.floor_ms, floor.bound, floor.memory_roof) == (floor.memory_ms, BoundClass.MEMORY, "dram")
    assert floor.intensity == 0


def test_bytes_that_fit_the_last_level_cache_count_at_its_bandwidth():
    floor = floor_ms(SMALL_GELU, make_peaks())
    assert floor.memory_ms == pytest.approx(8 * MiB / 100e9 * 1e3)
    assert floor.memory_roof == "cache"


def test_the_memory_floor_grows_without_a_step_past_the_cache():
    """Just under and just over the last-level cache, the floors are a hair apart, not 10x."""
    under = analysis([spec(LLC // 8 - 1024)], [spec(LLC // 8 - 1024)], flops=0)
    over = analysis([spec(LLC // 8 + 1024)], [spec(LLC // 8 + 1024)], flops=0)
    low, high = floor_ms(under, make_peaks()), floor_ms(over, make_peaks())
    assert (low.memory_roof, high.memory_roof) == ("cache", "dram")
    assert low.memory_ms < high.memory_ms < 1.01 * low.memory_ms


def test_without_a_known_cache_size_every_byte_counts_at_dram_bandwidth():
    unknown = attrs.evolve(EPYC, l1d_bytes=None, l2_bytes=None, l3_bytes=None, l3_total_bytes=None)
    peaks = make_peaks(hardware=unknown, cache_gbs=None)
    floor = floor_ms(SMALL_GELU, peaks)
    assert floor.memory_ms == pytest.approx(8 * MiB / 10e9 * 1e3) and floor.memory_roof == "dram"


def test_large_matmul_is_compute_bound_at_the_fma_peak():
    floor = floor_ms(MATMUL, make_peaks())
    assert floor.compute_ms == pytest.approx(2 * 1024**3 / 100e9 * 1e3)  # 21.5 ms
    assert floor.memory_ms == pytest.approx(12 * MiB / 100e9 * 1e3)  # 12 MiB fit the cache
    assert floor.floor_ms == floor.compute_ms
    assert floor.bound is BoundClass.COMPUTE
    assert floor.intensity == pytest.approx(2 * 1024**3 / (12 * MiB))  # 170.7 FLOP/B


def test_the_library_floor_is_at_torchs_rates():
    library = library_floor_ms(MATMUL, make_peaks())
    assert library.compute_ms == pytest.approx(2 * 1024**3 / 50e9 * 1e3)
    assert library.memory_ms == pytest.approx(12 * MiB / 5e9 * 1e3)
    assert library.memory_roof == "library"
    assert library.floor_ms > floor_ms(MATMUL, make_peaks()).floor_ms


def test_the_bound_moves_with_the_machine_balance():
    """The same matmul on a machine with 1000x the compute is memory-bound."""
    fast = make_peaks(fma_gflops=100_000.0)
    assert floor_ms(MATMUL, fast).bound is BoundClass.MEMORY
    assert MATMUL.flops / MATMUL.min_bytes < fast.ridge_intensity


def test_parameters_count_as_bytes():
    with_weights = attrs.evolve(GELU, parameter_bytes=256 * MiB)
    extra = floor_ms(with_weights, make_peaks()).memory_ms - floor_ms(GELU, make_peaks()).memory_ms
    assert extra == pytest.approx(256 * MiB / 10e9 * 1e3)


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
    assert attainment(floor.floor_ms / 2, floor) == pytest.approx(2.0)


@pytest.mark.parametrize("time_ms", [0, -1.0, float("nan"), float("inf")])
def test_attainment_needs_a_positive_time(time_ms):
    with pytest.raises(ValueError, match="time_ms"):
        attainment(time_ms, floor_ms(GELU, make_peaks()))


# -- records ------------------------------------------------------------------------------------


def test_peaks_round_trip_through_json(tmp_path):
    peaks = make_peaks(threads=2)
    write_record(tmp_path / "peaks.json", peaks)
    assert read_record(tmp_path / "peaks.json", MachinePeaks) == peaks


@pytest.mark.parametrize("field", ["fma_gflops", "library_gflops", "library_gbs"])
@pytest.mark.parametrize("value", [0.0, -1.0, float("nan"), float("inf")])
def test_peaks_must_be_positive(field, value):
    with pytest.raises(ValueError, match=field):
        make_peaks(**{field: value})


def test_the_dram_figure_is_the_best_stream_variant():
    with pytest.raises(ValueError, match="dram_gbs"):
        make_peaks(dram_gbs=10.0, dram_stream=stream(12.0, 64 * MiB))


# -- measuring (tiny sizes: what runs, never how fast) -----------------------------------------


def test_measure_peaks_with_tiny_sizes():
    before = torch.get_num_threads()
    peaks = measure_peaks(
        1, repeats=2, dram_bytes=MiB, cache_bytes=64 * 1024, fma_seconds=0.002, copy_bytes=4096, gemm_n=16,
        reason="a test",
    )  # fmt: skip
    for figure in (peaks.fma_gflops, peaks.dram_gbs, peaks.cache_gbs, peaks.library_gflops, peaks.library_gbs):
        assert figure is not None and 0 < figure < math.inf
    assert peaks.dram_stream.array_bytes == MiB and peaks.cache_stream is not None
    assert peaks.cache_stream.copy_nt_gbs is None  # non-temporal stores would leave the cache
    assert (peaks.threads, peaks.library_copy_bytes, peaks.library_gemm_n, peaks.repeats) == (1, 4096, 16, 2)
    assert (peaks.torch_version, peaks.hardware, peaks.remeasured_because) == (torch.__version__, HERE, "a test")
    assert peaks.isa == vector_isas(HERE)[0].name and peaks.vector_bytes == vector_isas(HERE)[0].vector_bytes
    assert peaks.boot_id == roofline.boot_id()
    assert torch.get_num_threads() == before


def test_measure_peaks_leaves_the_global_seed_alone():
    torch.manual_seed(42)
    expected = torch.rand(3)
    torch.manual_seed(42)
    measure_peaks(1, repeats=1, dram_bytes=MiB, cache_bytes=64 * 1024, fma_seconds=0.001, copy_bytes=4096, gemm_n=16)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize("bad", [{"threads": 0}, {"copy_bytes": 0}, {"gemm_n": -1}, {"repeats": 0}])
def test_measure_peaks_refuses_bad_sizes(bad):
    arguments = {"threads": 1, "copy_bytes": 4096, "gemm_n": 16, "repeats": 1, **bad}
    threads = arguments.pop("threads")
    with pytest.raises(ValueError, match=next(iter(bad))):
        measure_peaks(threads, hardware=EPYC, **arguments)


def test_a_cpu_that_claims_more_than_it_runs_is_measured_with_what_it_runs():
    """A description that names AVX-512 on a CPU without it (or with it disabled by the OS): the
    AVX-512 program dies of SIGILL and the next ISA is measured."""
    if HERE.architecture != "x86_64":
        pytest.skip("x86_64 ISAs")
    claims = attrs.evolve(HERE, features=(*HERE.features, "avx512f"))
    fma = measure_fma(timing_cpus(1), claims, repeats=1, sample_seconds=0.001)
    assert fma.gflops > 0 and fma.isa == vector_isas(HERE)[0].name


def test_the_fma_peak_is_at_least_torchs_sgemm():
    """torch's sgemm is FMAs too: a micro-kernel below it is not at the machine's peak."""
    peaks = measure_peaks(1, repeats=3, dram_bytes=MiB, cache_bytes=64 * 1024, copy_bytes=4096, gemm_n=512)
    assert peaks.fma_gflops >= peaks.library_gflops, (peaks.isa, peaks.fma_gflops, peaks.library_gflops)


# -- the cache ----------------------------------------------------------------------------------


@pytest.fixture
def measured(tmp_path, monkeypatch) -> list[tuple[int, str]]:
    """An empty cache and boot id under tmp_path, a stand-in measurement that records its thread
    counts and reasons, and a quick copy check that reads what ``quick_reading`` holds. Each
    process checks for itself (no check is shared between processes) unless a test says otherwise."""
    monkeypatch.setenv("PRAGMA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(roofline, "QUICK_CHECK_SHARED_S", 0.0)
    monkeypatch.setattr(roofline, "describe_cpu", lambda: EPYC)
    boot = tmp_path / "boot_id"
    boot.write_text("boot-1\n")
    monkeypatch.setattr(roofline, "_BOOT_ID", boot)
    monkeypatch.setattr(roofline, "_quick_checked", {})
    calls: list[tuple[int, str]] = []

    def fake_measure(threads, *, hardware=None, reason, **sizes):
        assert not sizes, "machine_peaks measures with the default sizes"
        calls.append((threads, reason))
        return make_peaks(threads, hardware=hardware, fma_gflops=100.0 + len(calls), remeasured_because=reason)

    monkeypatch.setattr(roofline, "measure_peaks", fake_measure)
    quick_reading.clear()
    quick_reading.append(10.0)
    monkeypatch.setattr(roofline, "quick_copy_gbs", lambda *_args, **_kwargs: quick_reading[-1])
    return calls


quick_reading: list[float] = []


def test_peaks_are_measured_once_then_read(measured, tmp_path):
    first = machine_peaks(2)
    second = machine_peaks(2)
    assert [threads for threads, _ in measured] == [2]
    assert "no peaks recorded" in measured[0][1] and first.remeasured_because == measured[0][1]
    assert attrs.evolve(second, quick_check_gbs=None) == attrs.evolve(first, quick_check_gbs=None)
    path = peaks_cache_path(2)
    assert path.parent == tmp_path / "cache" / "roofline"
    assert path.exists() and EPYC.fingerprint() in path.name


def test_refresh_measures_again(measured):
    first = machine_peaks(1)
    refreshed = machine_peaks(1, refresh=True)
    assert measured[1] == (1, "refresh asked")
    assert refreshed.fma_gflops != first.fma_gflops
    assert machine_peaks(1).fma_gflops == refreshed.fma_gflops  # and replaces the cached entry


def test_each_thread_count_is_its_own_entry(measured):
    for threads in (1, 2, 1, 2):
        machine_peaks(threads)
    assert [threads for threads, _ in measured] == [1, 2]
    assert peaks_cache_path(1) != peaks_cache_path(2)


def test_another_boot_measures_again(measured, tmp_path):
    machine_peaks(1)
    (tmp_path / "boot_id").write_text("boot-2\n")
    assert machine_peaks(1).remeasured_because.startswith("the machine booted again")
    assert len(measured) == 2
    machine_peaks(1)
    assert len(measured) == 2  # the new boot's figures are kept


def test_another_cpu_measures_again(measured, monkeypatch):
    machine_peaks(1)
    other = attrs.evolve(EPYC, physical_cores=1, logical_cpus=1)
    monkeypatch.setattr(roofline, "describe_cpu", lambda: other)
    assert machine_peaks(1).hardware == other
    assert len(measured) == 2 and other.fingerprint() in measured[1][1]


def test_a_record_copied_from_another_cpu_is_not_used(measured):
    other = attrs.evolve(EPYC, model_name="AMD EPYC 9B45")
    write_record(peaks_cache_path(1), make_peaks(1, hardware=other))
    assert machine_peaks(1).hardware == EPYC
    assert measured[0][1].startswith("another CPU")


def test_another_torch_measures_again(measured):
    write_record(peaks_cache_path(1), make_peaks(1, torch_version="1.0.0"))
    machine_peaks(1)
    assert measured[0][1] == f"torch {torch.__version__} now, 1.0.0 when measured"


def test_other_sizes_measure_again(measured):
    write_record(peaks_cache_path(1), make_peaks(1, library_gemm_n=64))
    assert machine_peaks(1).library_gemm_n == DEFAULT_GEMM_N
    assert "other sizes" in measured[0][1]


def test_a_quick_check_far_above_the_record_measures_again_and_keeps_the_higher(measured):
    write_record(peaks_cache_path(1), make_peaks(1, dram_gbs=10.0, fma_gflops=500.0))
    quick_reading.append(10.0 * (1 + QUICK_CHECK_LIMIT) * 1.2)
    peaks = machine_peaks(1)
    assert len(measured) == 1 and "quick copy read 13.8 GB/s" in measured[0][1]
    assert peaks.fma_gflops == 500.0  # higher than the new 101: kept
    assert peaks.quick_check_gbs == pytest.approx(13.8)
    assert read_record(peaks_cache_path(1), MachinePeaks).remeasured_because == measured[0][1]


def test_a_quick_check_within_the_limit_or_below_keeps_the_record(measured):
    write_record(peaks_cache_path(1), make_peaks(1, dram_gbs=10.0))
    quick_reading.append(10.0 * (1 + QUICK_CHECK_LIMIT) * 0.99)
    assert machine_peaks(1).quick_check_gbs == pytest.approx(11.385)
    roofline._quick_checked.clear()
    quick_reading.append(3.0)  # a busy moment: a peak is a ceiling
    assert machine_peaks(1).quick_check_gbs == 3.0
    assert measured == []


def test_the_quick_check_runs_once_per_process(measured):
    machine_peaks(1)
    readings = []
    real = roofline.quick_copy_gbs

    def counting(*args, **kwargs):
        readings.append(1)
        return real(*args, **kwargs)

    roofline.quick_copy_gbs = counting
    try:
        machine_peaks(1)
        machine_peaks(1)
    finally:
        roofline.quick_copy_gbs = real
    assert readings == [1]


def test_a_quick_check_less_than_a_minute_old_stands_for_another_processs_own(measured, monkeypatch):
    """A second process (a bench's next worker, the next pragma command) takes the first one's check
    of the same record instead of copying 2 GB again; an older check, a check of a record measured
    since, or one that read far above the record (which measured again) does not stand."""
    from pragma_core.machine.quick_checks import check_path

    monkeypatch.setattr(roofline, "QUICK_CHECK_SHARED_S", 60.0)
    copies = []
    monkeypatch.setattr(roofline, "quick_copy_gbs", lambda *_args, **_kwargs: copies.append(1) or quick_reading[-1])
    write_record(peaks_cache_path(1), make_peaks(1, dram_gbs=10.0))
    assert machine_peaks(1).quick_check_gbs == 10.0 and copies == [1]
    roofline._quick_checked.clear()  # another process
    quick_reading.append(3.0)
    assert machine_peaks(1).quick_check_gbs == 10.0 and copies == [1]  # the first process's check

    kept = json.loads(check_path(peaks_cache_path(1)).read_text())
    check_path(peaks_cache_path(1)).write_text(json.dumps(kept | {"checked_at": kept["checked_at"] - 61}))
    roofline._quick_checked.clear()
    assert machine_peaks(1).quick_check_gbs == 3.0 and copies == [1, 1]  # a minute old: checked again

    write_record(peaks_cache_path(1), make_peaks(1, dram_gbs=10.0, measured_at="2026-01-02T00:00:00+00:00"))
    roofline._quick_checked.clear()
    quick_reading.append(4.0)
    assert machine_peaks(1).quick_check_gbs == 4.0 and copies == [1, 1, 1]  # another record: its own check

    check_path(peaks_cache_path(1)).unlink()
    roofline._quick_checked.clear()
    quick_reading.append(20.0)  # far above the record: measured again, nothing kept for the next process
    machine_peaks(1)
    assert len(measured) == 1 and "quick copy read 20.0 GB/s" in measured[0][1] and copies == [1] * 4
    assert not check_path(peaks_cache_path(1)).exists()
    roofline._quick_checked.clear()
    machine_peaks(1)
    assert copies == [1] * 5


@pytest.mark.parametrize("content", ["{not json", "[]", '{"schema_version": 1, "record": "Verdict"}'])
def test_corrupt_cache_is_measured_again(measured, content):
    machine_peaks(1)
    peaks_cache_path(1).write_text(content)
    peaks = machine_peaks(1)
    assert len(measured) == 2 and measured[1][1].startswith("the recorded peaks could not be read")
    assert read_record(peaks_cache_path(1), MachinePeaks) == attrs.evolve(peaks, quick_check_gbs=None)


def test_binary_garbage_in_the_cache_is_measured_again(measured):
    machine_peaks(1)
    peaks_cache_path(1).write_bytes(b"\xff\xfe\x00garbage")
    machine_peaks(1)
    assert len(measured) == 2


def test_cache_from_a_newer_schema_is_measured_again(measured):
    machine_peaks(1)
    path = peaks_cache_path(1)
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "schema_version": data["schema_version"] + 1}))
    machine_peaks(1)
    assert len(measured) == 2


def test_poisoned_figures_are_not_read(measured):
    """A file whose headline figure was raised without its STREAM variants does not load."""
    machine_peaks(1)
    path = peaks_cache_path(1)
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "dram_gbs": data["dram_gbs"] * 1000}))
    assert machine_peaks(1).dram_gbs == 10.0
    assert len(measured) == 2


def test_unwritable_cache_warns_and_still_answers(measured, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("PRAGMA_CACHE_DIR", str(blocker))
    with pytest.warns(RuntimeWarning, match="cannot cache"):
        assert machine_peaks(1).threads == 1


def test_cache_folder_follows_xdg_then_home(tmp_path, monkeypatch):
    monkeypatch.delenv("PRAGMA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    path = peaks_cache_path(1, hardware=EPYC)
    assert path == tmp_path / "xdg" / "pragma" / "roofline" / f"{EPYC.fingerprint()}-1t.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert peaks_cache_path(1, hardware=EPYC).parent == tmp_path / "home" / ".cache" / "pragma" / "roofline"


# -- the table ----------------------------------------------------------------------------------


def render(table) -> str:
    console = Console(record=True, width=160)
    console.print(table)
    return console.export_text()


def test_table_of_an_example_task(examples):
    task = load_task(examples / "level1" / "1_GELUTanh.py")
    text = render(roofline_table(task, make_peaks(quick_check_gbs=9.5)))
    for label in ("avx2+fma, 256-bit vectors, FMA", "100.0 GFLOP/s", "10.0 GB/s", "copy NT 10.0", "cache bandwidth"):
        assert label in text
    for label in ("torch sgemm", "50.0 GFLOP/s", "torch copy_", "5.0 GB/s", "library floor", "memory floor"):
        assert label in text
    assert "no peaks" in text and "quick copy check (this process's, or one less than a minute old): 9.5 GB/s" in text
    assert "AMD EPYC" in text and "attainment" not in text


def test_table_with_a_reference_time():
    task = Task(name="matmul", source="...", category=Category.MATMUL, analysis=MATMUL)
    floor = floor_ms(MATMUL, make_peaks())
    text = render(roofline_table(task, make_peaks(), reference_ms=2 * floor.floor_ms))
    assert "reference attainment" in text and "50.0%" in text and "compute" in text
    assert "of library floor" in text and "100.0%" in text  # torch's rates are half the peaks


def test_table_needs_an_analysis():
    task = Task(name="bare", source="...", category=Category.OTHER)
    with pytest.raises(TaskError, match="not analyzed"):
        roofline_table(task, make_peaks())
