"""The machine's physical peak kernels: which ISA they are built for, that they build once, run and
report positive figures, and that a failure is one clear error (never how fast they are)."""

from __future__ import annotations

import math
import os
import subprocess
from pathlib import Path

import attrs
import pytest

from pragma_core.machine import physical_peaks
from pragma_core.machine.hardware import describe_cpu, parse_lscpu
from pragma_core.machine.physical_peaks import (
    CACHE_SHARE,
    DRAM_CACHE_MULTIPLE,
    DRAM_MIN_ARRAY_BYTES,
    MEMORY_SHARE,
    PeakMeasurementError,
    cache_array_bytes,
    dram_array_bytes,
    kernel_flags,
    kernel_program,
    last_level_cache_bytes,
    measure_fma,
    measure_stream,
    quick_copy_gbs,
    timing_cpus,
    vector_isas,
)

EPYC = parse_lscpu((Path(__file__).parent / "data" / "lscpu" / "amd-epyc-kvm-2cpu.txt").read_text())
HERE = describe_cpu()
KiB, MiB = 1 << 10, 1 << 20


def cpu(architecture: str, *features: str):
    return attrs.evolve(EPYC, architecture=architecture, features=features)


@pytest.mark.parametrize(
    ("hardware", "expected"),
    [
        (
            cpu("x86_64", "avx512f", "avx2", "fma", "avx"),
            [("avx512f", 64), ("avx2+fma", 32), ("avx", 32), ("sse2", 16)],
        ),
        (cpu("x86_64", "avx2", "fma", "avx"), [("avx2+fma", 32), ("avx", 32), ("sse2", 16)]),
        (cpu("x86_64", "avx"), [("avx", 32), ("sse2", 16)]),
        (cpu("x86_64"), [("sse2", 16)]),
        (cpu("aarch64", "asimd"), [("neon", 16), ("neon", 16)]),
        (cpu("riscv64"), []),
    ],
)
def test_the_widest_reported_isa_comes_first(hardware, expected):
    isas = vector_isas(hardware)
    assert [(isa.name, isa.vector_bytes) for isa in isas] == [*expected, ("generic", 16)]
    assert all(isa.accumulators >= 8 for isa in isas)  # 4-cycle FMA latency x 2 ports at least


def test_fma_isas_are_built_to_fuse():
    avx2 = vector_isas(cpu("x86_64", "avx2", "fma"))[0]
    assert "-mfma" in avx2.flags


def test_the_compiler_emits_fused_multiply_adds_here():
    """The FMA kernel's loop compiles to vfmadd on an x86 CPU with FMA: the peak is the fused one."""
    if HERE.architecture != "x86_64" or "fma" not in HERE.features:
        pytest.skip("needs an x86_64 CPU with FMA")
    isa = vector_isas(HERE)[0]
    compiler = os.environ.get("CC") or "cc"
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=True).stdout
    source = Path(physical_peaks.__file__).parent / "peak_kernels" / "fma.c"
    assembly = subprocess.run(
        [compiler, str(source), *kernel_flags(isa, version), "-S", "-o", "-"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert assembly.count("vfmadd") >= isa.accumulators


def test_stream_arrays_reach_beyond_the_cache_and_fit_in_half_of_it(monkeypatch):
    llc = 32 * MiB
    assert last_level_cache_bytes(EPYC) == llc
    monkeypatch.setattr(physical_peaks, "_memory_bytes", lambda: 64 << 30)
    assert dram_array_bytes(EPYC) == DRAM_CACHE_MULTIPLE * llc
    small = attrs.evolve(EPYC, l3_bytes=4 * MiB, l3_total_bytes=4 * MiB)
    assert dram_array_bytes(small) == DRAM_MIN_ARRAY_BYTES
    monkeypatch.setattr(physical_peaks, "_memory_bytes", lambda: 1 << 30)
    assert dram_array_bytes(EPYC) == (1 << 30) // (3 * MEMORY_SHARE) // MiB * MiB  # the memory caps it
    assert 3 * (cache_array_bytes(EPYC) or llc) <= llc // CACHE_SHARE
    unknown = attrs.evolve(EPYC, l2_bytes=None, l3_bytes=None, l3_total_bytes=None)
    assert cache_array_bytes(unknown) is None


def test_the_stream_arrays_do_not_follow_the_free_memory(monkeypatch, tmp_path):
    """The arrays' size is part of what makes recorded peaks valid: read from the free memory, it
    changed between two calls on a machine whose memory capped it (a 480 MiB L3), and every pragma
    process measured the peaks again (minutes each, with 1.5 GB arrays)."""
    meminfo = tmp_path / "meminfo"
    monkeypatch.setattr(physical_peaks, "_MEMINFO", meminfo)
    huge_cache = attrs.evolve(EPYC, l3_bytes=480 * MiB, l3_total_bytes=480 * MiB)
    sizes = []
    for available_kib in (20 << 20, 12 << 20):
        meminfo.write_text(f"MemTotal: {24 << 20} kB\nMemFree: {available_kib} kB\nMemAvailable: {available_kib} kB\n")
        sizes.append(dram_array_bytes(huge_cache))
    assert sizes[0] == sizes[1] == (24 << 30) // (3 * MEMORY_SHARE) // MiB * MiB


def test_timing_cpus_come_from_this_process_cpu_set():
    allowed = sorted(os.sched_getaffinity(0))
    assert timing_cpus(1) == allowed[:1]
    assert timing_cpus(len(allowed) + 1) == [*allowed, allowed[0]]
    with pytest.raises(ValueError, match="threads"):
        timing_cpus(0)


def test_the_kernels_are_built_once(tmp_path, monkeypatch):
    monkeypatch.setenv("PRAGMA_CACHE_DIR", str(tmp_path))
    program, isa = kernel_program("fma", HERE)
    assert program.parent == tmp_path / "roofline" / "kernels" and isa.name in program.name
    built = program.stat().st_mtime_ns
    assert kernel_program("fma", HERE) == (program, isa) and program.stat().st_mtime_ns == built


def test_the_kernels_run_here_and_give_positive_figures():
    cpus = timing_cpus(1)
    fma = measure_fma(cpus, HERE, repeats=1, sample_seconds=0.001)
    assert 0 < fma.gflops < math.inf and fma.threads == 1
    assert fma.fused == (any(flag in HERE.features for flag in ("fma", "avx512f", "asimd", "sve")))
    figures = measure_stream(cpus, HERE, 256 * KiB, repeats=1, sample_seconds=0.001)
    for value in (figures.copy_gbs, figures.triad_gbs, figures.best_gbs):
        assert 0 < value < math.inf
    assert figures.array_bytes <= 256 * KiB and figures.best_gbs >= figures.best_copy_gbs
    assert quick_copy_gbs(cpus, HERE, 256 * KiB, nontemporal=False, repeats=1) > 0


def test_two_threads_run_on_two_cpus():
    fma = measure_fma(timing_cpus(2), HERE, repeats=1, sample_seconds=0.001)
    assert fma.threads == 2 and fma.gflops > 0


def test_without_a_working_compiler_the_error_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("PRAGMA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CC", "false")
    with pytest.raises(PeakMeasurementError, match="cannot build the fma peak kernel with false for any ISA"):
        measure_fma(timing_cpus(1), HERE)
    monkeypatch.setenv("CC", "no-such-compiler-here")
    with pytest.raises(PeakMeasurementError, match="CC names 'no-such-compiler-here'"):
        measure_fma(timing_cpus(1), HERE)


def test_a_crashing_kernel_is_one_clear_error(tmp_path):
    crash = tmp_path / "crash"
    crash.write_text("#!/bin/sh\necho 'out of luck' >&2\nexit 3\n")
    crash.chmod(0o755)
    with pytest.raises(PeakMeasurementError, match=r"the peak kernel crash failed \(out of luck\)"):
        physical_peaks._run(crash, [])
    crash.write_text("#!/bin/sh\necho not json\n")
    with pytest.raises(PeakMeasurementError, match="printed no JSON"):
        physical_peaks._run(crash, [])
