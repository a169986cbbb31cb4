"""Describing the CPU: lscpu, /proc/cpuinfo and sysfs parsed from output captured on real machines.

``tests/data/lscpu/<machine>.txt`` is ``lscpu`` piped (identical to ``LC_ALL=C lscpu`` there),
``.bytes.txt`` is ``LC_ALL=C lscpu -B`` and ``.terminal.txt`` is lscpu on an 80-column terminal
(``script -qc "env LC_ALL=C lscpu" /dev/null``), all util-linux 2.38.1. ``tests/data/cpuinfo/`` and
``tests/data/sysfs-cpu/`` hold ``/proc/cpuinfo`` and ``/sys/devices/system/cpu/cpu*/cache`` of the
same machine.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs
import pytest

from pragma_core.machine import hardware
from pragma_core.machine.hardware import (
    HardwareDescription,
    describe_cpu,
    parse_cpuinfo,
    parse_lscpu,
    read_sysfs_caches,
)
from pragma_core.serialization import read_record, write_record

DATA = Path(__file__).parent / "data"
LSCPU_FILES = sorted((DATA / "lscpu").glob("*.txt"))
EPYC = "amd-epyc-kvm-2cpu"
KiB, MiB = 1 << 10, 1 << 20


def lscpu_text(name: str) -> str:
    return (DATA / "lscpu" / name).read_text()


def test_there_are_captured_lscpu_files():
    assert len(LSCPU_FILES) >= 3


@pytest.mark.parametrize("path", LSCPU_FILES, ids=lambda path: path.name)
def test_parse_lscpu_on_captured_output(path):
    cpu = parse_lscpu(path.read_text())
    assert cpu.source == "lscpu"
    assert cpu.logical_cpus >= cpu.physical_cores >= cpu.sockets >= 1
    assert cpu.logical_cpus == cpu.physical_cores * cpu.threads_per_core
    assert cpu.model_name and cpu.architecture


@pytest.mark.parametrize("form", [f"{EPYC}.txt", f"{EPYC}.bytes.txt", f"{EPYC}.terminal.txt"])
def test_epyc_vm_in_every_form(form):
    """Human sizes totalled over instances, bytes (-B), and a terminal's nested, wrapped layout."""
    cpu = parse_lscpu(lscpu_text(form))
    assert cpu == HardwareDescription(
        model_name="AMD EPYC",
        architecture="x86_64",
        sockets=1,
        physical_cores=2,
        logical_cpus=2,
        threads_per_core=1,
        l1d_bytes=32 * KiB,  # "64 KiB (2 instances)"
        l2_bytes=1 * MiB,  # "2 MiB (2 instances)"
        l3_bytes=32 * MiB,  # "32 MiB (1 instance)"
        l3_total_bytes=32 * MiB,
        features=("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni"),
        source="lscpu",
    )


def test_wrapped_flags_are_glued_back_exactly():
    """The terminal form cuts the Flags line mid-word ("pg" / "e"); the words come back whole."""
    plain = parse_lscpu(lscpu_text(f"{EPYC}.txt"))
    terminal = parse_lscpu(lscpu_text(f"{EPYC}.terminal.txt"))
    assert terminal.features == plain.features
    assert terminal.fingerprint() == plain.fingerprint()


def test_sysfs_caches_in_the_short_form_agree_with_lscpu():
    """sysfs writes "32K" and "32768K", one instance each; instances are distinct sharing lists."""
    caches = read_sysfs_caches(DATA / "sysfs-cpu" / EPYC)
    cpu = parse_lscpu(lscpu_text(f"{EPYC}.txt"))
    assert caches == {
        "l1d_bytes": cpu.l1d_bytes,
        "l2_bytes": cpu.l2_bytes,
        "l3_bytes": cpu.l3_bytes,
        "l3_total_bytes": cpu.l3_total_bytes,
    }


def test_sysfs_without_caches_gives_none(tmp_path):
    assert set(read_sysfs_caches(tmp_path).values()) == {None}


def test_cpuinfo_and_sysfs_describe_the_same_machine_kind_as_lscpu():
    cpuinfo = parse_cpuinfo((DATA / "cpuinfo" / f"{EPYC}.txt").read_text(), architecture="x86_64")
    assert cpuinfo.source == "cpuinfo"
    assert (cpuinfo.logical_cpus, cpuinfo.physical_cores, cpuinfo.sockets) == (2, 2, 1)
    assert cpuinfo.l3_bytes is None  # "cache size" in /proc/cpuinfo is ambiguous: not used
    completed = attrs.evolve(cpuinfo, **read_sysfs_caches(DATA / "sysfs-cpu" / EPYC))
    assert completed.fingerprint() == parse_lscpu(lscpu_text(f"{EPYC}.txt")).fingerprint()


def test_each_parser_refuses_the_other_tools_output():
    with pytest.raises(ValueError, match="not the output of lscpu"):
        parse_lscpu((DATA / "cpuinfo" / f"{EPYC}.txt").read_text())
    with pytest.raises(ValueError, match="not /proc/cpuinfo"):
        parse_cpuinfo(lscpu_text(f"{EPYC}.txt"), architecture="x86_64")


def test_fingerprint_is_short_stable_and_ignores_the_source():
    cpu = parse_lscpu(lscpu_text(f"{EPYC}.txt"))
    assert cpu.fingerprint() == parse_lscpu(lscpu_text(f"{EPYC}.txt")).fingerprint()
    assert cpu.fingerprint().startswith("x86_64-") and len(cpu.fingerprint()) <= 20
    assert attrs.evolve(cpu, source="cpuinfo").fingerprint() == cpu.fingerprint()
    assert attrs.evolve(cpu, physical_cores=1, logical_cpus=1).fingerprint() != cpu.fingerprint()


def test_features_keep_only_kernel_flags_in_a_fixed_order():
    cpu = attrs.evolve(parse_lscpu(lscpu_text(f"{EPYC}.txt")), features=["fma", "mmx", "sse4_2"])
    assert cpu.features == ("sse4_2", "fma")


def test_description_round_trips_through_json(tmp_path):
    cpu = parse_lscpu(lscpu_text(f"{EPYC}.txt"))
    write_record(tmp_path / "cpu.json", cpu)
    assert read_record(tmp_path / "cpu.json", HardwareDescription) == cpu


@pytest.fixture
def read_again():
    """describe_cpu reads the machine once per process: these tests read it under their own PATH."""
    describe_cpu.cache_clear()
    yield
    describe_cpu.cache_clear()


def test_describe_cpu_on_this_machine(read_again):
    cpu = describe_cpu()
    assert cpu.logical_cpus >= 1 and cpu.physical_cores >= 1
    assert describe_cpu().fingerprint() == cpu.fingerprint()


def test_describe_cpu_runs_lscpu_once_per_process(read_again, monkeypatch):
    calls = []
    real = hardware._from_lscpu
    monkeypatch.setattr(hardware, "_from_lscpu", lambda: calls.append(1) or real())
    first = describe_cpu()
    assert describe_cpu() is first and describe_cpu() is first
    assert len(calls) == 1


@pytest.mark.skipif(not Path("/proc/cpuinfo").exists(), reason="needs Linux /proc/cpuinfo")
def test_describe_cpu_without_lscpu_reads_proc_cpuinfo(tmp_path, monkeypatch, read_again):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no lscpu
    cpu = describe_cpu()
    assert cpu.source == "cpuinfo"
    assert cpu.logical_cpus >= 1


def test_describe_cpu_with_neither_tool_counts_cpus(tmp_path, monkeypatch, read_again):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(hardware, "_from_cpuinfo", lambda: None)
    cpu = describe_cpu()
    assert cpu.source == "os"
    assert cpu.logical_cpus == (os.cpu_count() or 1)
