"""GPU peaks: the datasheet table looked up by the names torch gives real devices, the override file,
the errors that say what to do, and the roofline floor. Only the measurement needs a GPU.

The device names are those torch reports (``torch.cuda.get_device_properties(i).name``) on the
machines named, as seen in public logs and cloud catalogues; the SM and CU counts are the devices'.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import attrs
import pytest

from pragma_core.backends.gpu import hardware
from pragma_core.backends.gpu.clock import gpu_available
from pragma_core.backends.gpu.hardware import (
    PEAKS_VARIABLE,
    describe_gpu,
    floor_ms,
    gpu_from_table,
    measure_gpu,
    read_peaks_file,
    write_peaks_file,
)
from pragma_core.backends.gpu.known_gpus import KNOWN_GPUS
from pragma_core.backends.gpu.peaks import GpuPeaks
from pragma_core.errors import PragmaError, RecordError
from pragma_core.machine.roofline import attainment
from pragma_core.records import BoundClass, TaskAnalysis, TensorSpec
from pragma_core.serialization import read_record, write_record

MiB = 1 << 20
NO_GPU = gpu_available()


@pytest.fixture(autouse=True)
def _no_peaks_file_from_the_shell(monkeypatch):
    monkeypatch.delenv(PEAKS_VARIABLE, raising=False)


def peaks(**changes) -> GpuPeaks:
    """1000 GB/s, 10 TFLOP/s fp32 and 100 TFLOP/s tensor: floors easy to check by hand."""
    base = GpuPeaks(
        name="Round GPU",
        vendor="nvidia",
        bandwidth_gbs=1000.0,
        fp32_gflops=10_000.0,
        tensor_gflops=100_000.0,
        source="file",
    )
    return attrs.evolve(base, **changes)


def spec(*shape: int) -> TensorSpec:
    return TensorSpec(shape=shape, dtype="float32", nbytes=4 * math.prod(shape))


def analysis(inputs, outputs, flops: int) -> TaskAnalysis:
    return TaskAnalysis(inputs=inputs, outputs=outputs, parameter_bytes=0, flops=flops, traced_on="meta")


def known(device_name: str, multiprocessors: int | None = None) -> GpuPeaks:
    found = gpu_from_table(device_name, multiprocessors)
    assert found is not None, device_name
    return found


RELU = analysis([spec(4096, 4096)], [spec(4096, 4096)], flops=0)  # 128 MiB moved
MATMUL = analysis([spec(4096, 4096), spec(4096, 4096)], [spec(4096, 4096)], flops=2 * 4096**3)  # 192 MiB


# -- the table ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("device_name", "multiprocessors", "entry", "bandwidth_gbs"),
    [
        ("NVIDIA A100-SXM4-80GB", 108, "NVIDIA A100 SXM4 80GB", 2039.0),
        ("NVIDIA A100-SXM4-40GB", 108, "NVIDIA A100 SXM4 40GB", 1555.0),
        ("Tesla A100-SXM4-40GB", 108, "NVIDIA A100 SXM4 40GB", 1555.0),  # older drivers
        ("NVIDIA A100 80GB PCIe", 108, "NVIDIA A100 PCIe 80GB", 1935.0),
        ("NVIDIA A100-PCIE-40GB", 108, "NVIDIA A100 PCIe 40GB", 1555.0),
        ("NVIDIA H100 80GB HBM3", 132, "NVIDIA H100 SXM5 80GB", 3350.0),
        ("NVIDIA H100 PCIe", 114, "NVIDIA H100 PCIe 80GB", 2000.0),
        ("NVIDIA H200", 132, "NVIDIA H200 SXM 141GB", 4800.0),
        ("NVIDIA L40S", 142, "NVIDIA L40S", 864.0),
        ("AMD Instinct MI250X", 110, "AMD Instinct MI250X (one GCD)", 1600.0),
        ("AMD Instinct MI250X / MI250", 110, "AMD Instinct MI250X (one GCD)", 1600.0),
        ("AMD Instinct MI250X / MI250", 104, "AMD Instinct MI250 (one GCD)", 1600.0),  # one name, two GPUs
        ("AMD Instinct MI300X", 304, "AMD Instinct MI300X", 5300.0),
        ("AMD Instinct MI300X VF", 304, "AMD Instinct MI300X", 5300.0),  # a cloud VM's SR-IOV function
    ],
)
def test_the_table_knows_real_device_names(device_name, multiprocessors, entry, bandwidth_gbs):
    found = gpu_from_table(device_name, multiprocessors)
    assert found is not None
    assert (found.name, found.bandwidth_gbs, found.source) == (entry, bandwidth_gbs, "table")


@pytest.mark.parametrize(
    "device_name",
    [
        "NVIDIA H100 NVL",  # 94 GB, 3.9 TB/s: not the SXM's figures
        "NVIDIA H200 NVL",  # lower clocks than the SXM
        "NVIDIA GH200 480GB",  # the superchip's GPU, not an H200
        "NVIDIA L40",  # the L40S's sibling, slower
        "NVIDIA A100",  # no form factor or memory size: which A100?
        "NVIDIA RTX A1000",
        "NVIDIA GeForce RTX 4090",
        "AMD Instinct MI300A",
        "AMD Instinct MI325X",
        "AMD Instinct MI210",
    ],
)
def test_other_gpus_are_not_mistaken_for_a_known_one(device_name):
    assert gpu_from_table(device_name, 100) is None
    assert gpu_from_table(device_name) is None


def test_without_a_count_the_first_matching_entry_answers():
    assert known("AMD Instinct MI250X / MI250").name == "AMD Instinct MI250X (one GCD)"


@pytest.mark.parametrize(
    ("device_name", "multiprocessors", "words"),
    [
        ("NVIDIA A100-SXM4-40GB MIG 1g.5gb", 14, ["MIG slice"]),
        ("NVIDIA H200 MIG 1g.18gb", None, ["MIG slice"]),  # the H200 entry states no SM count
        ("NVIDIA A100-SXM4-80GB", 14, ["14 SMs", "108"]),
        ("NVIDIA H100 80GB HBM3", 16, ["16 SMs", "132"]),
        ("AMD Instinct MI300X", 38, ["38 CUs", "304", "partition"]),  # one XCD in CPX mode
        ("AMD Instinct MI250X / MI250", 80, ["80 CUs", "110", "104"]),
    ],
)
def test_a_device_with_fewer_multiprocessors_than_its_entry_is_an_error(device_name, multiprocessors, words):
    with pytest.raises(PragmaError) as raised:
        gpu_from_table(device_name, multiprocessors)
    message = str(raised.value)
    for word in [device_name, PEAKS_VARIABLE, "measure=True", *words]:
        assert word in message


def test_every_entry_names_its_source_and_keeps_the_tensor_roof_above_the_fp32_one():
    assert len(KNOWN_GPUS) >= 8
    for _pattern, entry in KNOWN_GPUS:
        assert entry.source == "table"
        assert entry.source_url and entry.source_url.startswith("https://"), entry.name
        assert entry.tensor_gflops is not None and entry.tensor_gflops > entry.fp32_gflops, entry.name


def test_the_mi250x_entry_is_one_gcd_of_the_module():
    """Software sees an MI250X as two GPUs: AMD's module figures, halved."""
    gcd = known("AMD Instinct MI250X", 110)
    assert (gcd.bandwidth_gbs * 2, gcd.fp32_gflops * 2, (gcd.tensor_gflops or 0) * 2) == (3200.0, 95_700.0, 383_000.0)


def test_flush_bytes_cover_l2_and_infinity_cache():
    assert known("AMD Instinct MI300X", 304).flush_bytes == 2 * (32 + 256) * MiB
    assert known("NVIDIA H100 80GB HBM3", 132).flush_bytes == 100 * MiB
    assert known("NVIDIA L40S").flush_bytes is None  # the datasheet does not say


# -- the record ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        {"bandwidth_gbs": 0.0},
        {"fp32_gflops": -1.0},
        {"tensor_gflops": float("nan")},
        {"bandwidth_gbs": float("inf")},
        {"bandwidth_gbs": True},
        {"vendor": "intel"},
        {"source": "guessed"},
        {"l2_bytes": 0},
        {"multiprocessors": 0},
        {"infinity_cache_bytes": -1},
        {"name": ""},
    ],
)
def test_impossible_peaks_are_refused(changes):
    with pytest.raises((ValueError, TypeError)):
        peaks(**changes)


def test_peaks_round_trip_as_a_record(tmp_path):
    table_entry = known("AMD Instinct MI300X", 304)
    write_record(tmp_path / "peaks.json", table_entry)
    assert read_record(tmp_path / "peaks.json", GpuPeaks) == table_entry


# -- the override file --------------------------------------------------------------------------


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_an_override_file_needs_no_gpu(tmp_path):
    path = write_json(tmp_path / "lab.json", {"name": "NVIDIA lab GPU 7", "bandwidth_gbs": 2500, "fp32_gflops": 40000})
    described = describe_gpu(override=path)
    assert described == GpuPeaks(
        name="NVIDIA lab GPU 7",
        vendor="nvidia",  # read from the name
        bandwidth_gbs=2500.0,
        fp32_gflops=40_000.0,
        source="file",
        source_url=path.resolve().as_uri(),
    )


def test_an_override_file_takes_every_optional_field(tmp_path):
    data = {
        "name": "my accelerator",
        "vendor": "amd",
        "bandwidth_gbs": 6000.0,
        "fp32_gflops": 160_000,
        "tensor_gflops": 1_300_000,
        "l2_bytes": 4 * MiB,
        "infinity_cache_bytes": 256 * MiB,
        "source_url": "https://example.com/datasheet.pdf",
    }
    described = read_peaks_file(write_json(tmp_path / "peaks.json", data))
    assert (described.vendor, described.tensor_gflops, described.l2_bytes, described.infinity_cache_bytes) == (
        "amd",
        1_300_000.0,
        4 * MiB,
        256 * MiB,
    )
    assert described.source_url == "https://example.com/datasheet.pdf"


def test_the_environment_names_the_file_and_an_explicit_one_wins(tmp_path, monkeypatch):
    from_environment = write_json(tmp_path / "a.json", {"name": "NVIDIA A", "bandwidth_gbs": 1, "fp32_gflops": 1})
    explicit = write_json(tmp_path / "b.json", {"name": "NVIDIA B", "bandwidth_gbs": 2, "fp32_gflops": 2})
    monkeypatch.setenv(PEAKS_VARIABLE, str(from_environment))
    assert describe_gpu().name == "NVIDIA A"
    assert describe_gpu(override=explicit).name == "NVIDIA B"
    assert describe_gpu(measure=True).name == "NVIDIA A"  # the file wins over measuring too


def test_written_peaks_read_back_as_a_file(tmp_path):
    table_entry = known("NVIDIA H100 80GB HBM3", 132)
    write_peaks_file(tmp_path / "peaks.json", table_entry)
    assert read_peaks_file(tmp_path / "peaks.json") == attrs.evolve(table_entry, source="file", multiprocessors=None)


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, ["no such GPU peaks file"]),
        ("{not json", ["not JSON"]),
        ([1, 2], ["JSON object"]),
        ({"name": "NVIDIA X", "fp32_gflops": 1}, ["'bandwidth_gbs'", "missing"]),
        ({"name": "NVIDIA X", "bandwith_gbs": 1, "bandwidth_gbs": 1, "fp32_gflops": 1}, ["'bandwith_gbs'", "unknown"]),
        ({"name": "NVIDIA X", "bandwidth_gbs": 0, "fp32_gflops": 1}, ["'bandwidth_gbs'", "GB/s", "0"]),
        ({"name": "NVIDIA X", "bandwidth_gbs": "3350", "fp32_gflops": 1}, ["'bandwidth_gbs'", "'3350'"]),
        ({"name": "NVIDIA X", "bandwidth_gbs": 1, "fp32_gflops": True}, ["'fp32_gflops'", "GFLOP/s"]),
        ({"name": "NVIDIA X", "bandwidth_gbs": 1, "fp32_gflops": 1, "tensor_gflops": -5}, ["'tensor_gflops'"]),
        ({"name": "NVIDIA X", "bandwidth_gbs": 1, "fp32_gflops": 1, "l2_bytes": 0}, ["'l2_bytes'", ">= 1"]),
        ({"name": "NVIDIA X", "bandwidth_gbs": 1, "fp32_gflops": 1, "l2_bytes": 1.5}, ["'l2_bytes'", "1.5"]),
        ({"name": "", "bandwidth_gbs": 1, "fp32_gflops": 1}, ["'name'"]),
        ({"name": "Mystery GPU", "bandwidth_gbs": 1, "fp32_gflops": 1}, ["'vendor'", "cannot be told"]),
        ({"name": "NVIDIA X", "vendor": "intel", "bandwidth_gbs": 1, "fp32_gflops": 1}, ["'vendor'", "'intel'"]),
        ({"name": "NVIDIA X", "bandwidth_gbs": 1, "fp32_gflops": 1, "source_url": 3}, ["'source_url'"]),
    ],
)
def test_a_bad_override_file_is_one_error_naming_the_file_and_the_field(tmp_path, content, words):
    path = tmp_path / "peaks.json"
    if content is not None:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(RecordError) as raised:
        describe_gpu(override=path)
    message = str(raised.value)
    assert str(path) in message
    for word in words:
        assert word in message


# -- describing the device ----------------------------------------------------------------------


def pretend_device(monkeypatch, name: str, multiprocessors: int) -> None:
    monkeypatch.setattr(hardware, "gpu_available", lambda: "")
    monkeypatch.setattr(hardware, "_device_identity", lambda index: (name, multiprocessors))


def test_a_known_device_is_described_from_the_table(monkeypatch):
    pretend_device(monkeypatch, "NVIDIA H100 PCIe", 114)
    assert describe_gpu() == gpu_from_table("NVIDIA H100 PCIe", 114)


def test_an_unknown_device_says_to_write_the_file_or_measure(monkeypatch):
    pretend_device(monkeypatch, "NVIDIA GeForce RTX 4090", 128)
    with pytest.raises(PragmaError) as raised:
        describe_gpu(1)
    message = str(raised.value)
    for word in ["GPU 1", "'NVIDIA GeForce RTX 4090'", PEAKS_VARIABLE, "bandwidth_gbs", "fp32_gflops", "measure=True"]:
        assert word in message


@pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU")
@pytest.mark.parametrize("measure", [False, True])
def test_without_a_gpu_or_a_file_the_error_gives_the_reason(measure):
    with pytest.raises(PragmaError) as raised:
        describe_gpu(measure=measure)
    assert NO_GPU in str(raised.value)
    assert PEAKS_VARIABLE in str(raised.value)


# -- the floor ----------------------------------------------------------------------------------


def test_an_elementwise_task_is_held_by_the_memory_roof():
    floor = floor_ms(RELU, peaks())
    assert floor.memory_ms == pytest.approx(128 * MiB / 1000e9 * 1e3)  # 0.134 ms
    assert (floor.compute_ms, floor.bound, floor.intensity) == (0, BoundClass.MEMORY, 0)
    assert floor.floor_ms == floor.memory_ms


def test_the_roof_decides_how_a_matmul_is_bound():
    fp32 = floor_ms(MATMUL, peaks())
    assert fp32.compute_ms == pytest.approx(2 * 4096**3 / 10_000e9 * 1e3)  # 13.7 ms
    assert fp32.bound is BoundClass.COMPUTE
    tensor = floor_ms(MATMUL, peaks(), roof="tensor")
    assert tensor.compute_ms == pytest.approx(fp32.compute_ms / 10)
    assert tensor.memory_ms == fp32.memory_ms == pytest.approx(192 * MiB / 1000e9 * 1e3)
    assert tensor.floor_ms < fp32.floor_ms
    assert attainment(fp32.floor_ms, fp32) == pytest.approx(1.0)


def test_a_table_entry_gives_the_datasheet_floor():
    h100 = known("NVIDIA H100 80GB HBM3", 132)
    floor = floor_ms(RELU, h100)
    assert floor.floor_ms == pytest.approx(128 * MiB / 3350e9 * 1e3)  # 40 µs
    assert floor_ms(MATMUL, h100, roof="tensor").compute_ms == pytest.approx(2 * 4096**3 / 989_500e9 * 1e3)


def test_the_tensor_roof_needs_a_tensor_peak():
    with pytest.raises(PragmaError, match="tensor_gflops"):
        floor_ms(MATMUL, peaks(tensor_gflops=None), roof="tensor")
    with pytest.raises(ValueError, match="roof"):
        floor_ms(MATMUL, peaks(), roof="fp64")  # type: ignore[arg-type]


# -- on a GPU -----------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(bool(NO_GPU), reason=NO_GPU or "a GPU is here")
def test_this_gpu_is_in_the_table_or_the_error_says_what_to_do():
    try:
        described = describe_gpu()
    except PragmaError as error:
        assert PEAKS_VARIABLE in str(error)
    else:
        assert described.source == "table"


@pytest.mark.gpu
@pytest.mark.skipif(bool(NO_GPU), reason=NO_GPU or "a GPU is here")
def test_measured_peaks_stay_below_the_datasheet():
    """The copy counts bytes read plus written, as the datasheet's bandwidth does, and the fp32
    matmul runs without TF32: a measured rate above the ceiling would mean a miscount (10% slack)."""
    measured = measure_gpu(copy_bytes=512 * MiB, gemm_n=2048, repeats=3)
    assert measured.source == "measured"
    assert measured.tensor_gflops is not None
    name, multiprocessors = hardware._device_identity(0)
    assert measured.name == name
    try:
        datasheet = gpu_from_table(name, multiprocessors)
    except PragmaError:
        datasheet = None
    if datasheet is not None:
        assert measured.bandwidth_gbs < 1.1 * datasheet.bandwidth_gbs
        assert measured.fp32_gflops < 1.1 * datasheet.fp32_gflops  # TF32 is off while measuring
        assert measured.tensor_gflops < 1.1 * (datasheet.tensor_gflops or math.inf)
