"""The GPU's hardware description for the roofline: datasheet peaks, an override file, or measured.

A GPU task's roofline floor needs the device's memory bandwidth and arithmetic peak, as the CPU's
needs :class:`pragma_core.machine.roofline.MachinePeaks`. They come from one of three places, in this order::

    peaks = describe_gpu(override=Path("peaks.json"))  # a file (or the one $PRAGMA_GPU_PEAKS names)
    peaks = describe_gpu(measure=True)                  # a copy and a matmul on the device: seconds
    peaks = describe_gpu()                              # the vendor's datasheet, by the device's name
    floor = floor_ms(task.analysis, peaks)              # a pragma_core.machine.roofline.RooflineFloor

The table (:data:`~pragma_core.backends.gpu.known_gpus.KNOWN_GPUS`) holds datasheet figures, each entry with its source: they are
ceilings no kernel exceeds, where measured peaks are what torch attains (a little lower). A GPU that
is not in the table, and a device that has fewer SMs or CUs than its table entry (a MIG slice, an
MI300X partition), is an error that says to write the file or measure; pragma never guesses a peak.

One torch device is what the figures describe: an MI250X or MI250 is two GPUs to software (one per
graphics compute die), so their entries hold half the module's datasheet figures; an MI300X is
described in its default single-partition mode (SPX), where it is one device of 304 CUs.

The override file is JSON with at least ``name``, ``bandwidth_gbs`` (GB/s, 10^9 bytes) and
``fp32_gflops``; ``tensor_gflops``, ``l2_bytes``, ``infinity_cache_bytes``, ``vendor`` and
``source_url`` are optional (:func:`read_peaks_file`, :func:`write_peaks_file`).
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from ...errors import PragmaError, RecordError
from ...files import atomic_write_text
from ...machine.roofline import RooflineFloor, floor_at
from ...records import TaskAnalysis
from ...serialization import read_json_object
from .clock import gpu_available
from .known_gpus import KNOWN_GPUS
from .peaks import GpuPeaks

__all__ = [
    "PEAKS_VARIABLE",
    "DEFAULT_COPY_BYTES",
    "DEFAULT_GEMM_N",
    "DEFAULT_REPEATS",
    "gpu_from_table",
    "describe_gpu",
    "measure_gpu",
    "read_peaks_file",
    "write_peaks_file",
    "floor_ms",
]

PEAKS_VARIABLE = "PRAGMA_GPU_PEAKS"
"""Environment variable naming an override file, used when ``describe_gpu`` is given none."""

DEFAULT_COPY_BYTES = 1 << 30
"""Size of each buffer of the measured copy: far above any GPU's L2 and the MI300X's 256 MiB
Infinity Cache, so the copy streams from device memory."""
DEFAULT_GEMM_N = 8192
"""Side of the square matrices of the measured matmuls: large enough for cuBLAS and hipBLAS to
reach their steady rate on a data-centre GPU."""
DEFAULT_REPEATS = 10
"""Timed runs of each measured kernel after one warm-up; the fastest counts, as a peak is a ceiling."""

Roof = Literal["fp32", "tensor"]

_FLOAT32_BYTES = 4


def gpu_from_table(name: str, multiprocessors: int | None = None) -> GpuPeaks | None:
    """The table's peaks for a device named ``name`` (``torch.cuda.get_device_properties(i).name``).

    With ``multiprocessors`` (the device's SM or CU count) an entry that states its count must have
    the same: among several entries the name matches, that picks one; a device with a count no
    matching entry has is a MIG slice, a partition or another model, and raises
    :class:`~pragma_core.errors.PragmaError`, as a name that says MIG does. None when no entry
    matches the name.
    """
    matches = [peaks for pattern, peaks in KNOWN_GPUS if pattern.search(name)]
    if not matches:
        return None
    remedy = f"write a peaks file and name it in {PEAKS_VARIABLE}, or pass measure=True to measure this device"
    if _MIG.search(name):  # NVIDIA names a MIG slice after its GPU: "NVIDIA A100-SXM4-40GB MIG 1g.5gb"
        raise PragmaError(f"{name!r} is a MIG slice, which has a share of its GPU's peaks: {remedy}")
    if multiprocessors is None:
        return matches[0]
    for peaks in matches:
        if peaks.multiprocessors in (None, multiprocessors):
            return peaks
    unit = "CUs" if matches[0].vendor == "amd" else "SMs"
    expected = " or ".join(f"{peaks.multiprocessors} ({peaks.name})" for peaks in matches)
    raise PragmaError(
        f"{name!r} has {multiprocessors} {unit} where pragma's table expects {expected}: a MIG slice or a "
        f"partition has a share of the peaks; {remedy}"
    )


_MIG = re.compile(r"\bMIG\b")


# -- describing the device ----------------------------------------------------------------------


def describe_gpu(device_index: int = 0, *, override: Path | None = None, measure: bool = False) -> GpuPeaks:
    """The peaks of GPU ``device_index``: from ``override`` (or the file ``$PRAGMA_GPU_PEAKS``
    names) if there is one, else measured on the device with ``measure``, else from the table.

    An override file needs no GPU here. Without one, no usable GPU, or a GPU the table does not
    know, raises :class:`~pragma_core.errors.PragmaError` saying what to do; a bad file raises
    :class:`~pragma_core.errors.RecordError` naming the file and the field.
    """
    path = override if override is not None else _override_from_environment()
    if path is not None:
        return read_peaks_file(path)
    reason = gpu_available()
    if reason:
        raise PragmaError(
            f"no GPU to describe: {reason}; to give the peaks of a GPU anyway, write a peaks file and name it "
            f"in {PEAKS_VARIABLE}"
        )
    name, multiprocessors = _device_identity(device_index)
    if measure:
        return measure_gpu(device_index)
    peaks = gpu_from_table(name, multiprocessors)
    if peaks is None:
        raise PragmaError(
            f"GPU {device_index} ({name!r}) is not in pragma's table of GPU peaks: write a JSON file "
            '{"name": ..., "bandwidth_gbs": ..., "fp32_gflops": ...} from its datasheet and name it in '
            f"{PEAKS_VARIABLE} (or pass it as override), or pass measure=True to measure the device"
        )
    return peaks


def _override_from_environment() -> Path | None:
    value = os.environ.get(PEAKS_VARIABLE, "").strip()
    return Path(value).expanduser() if value else None


def _device_identity(device_index: int) -> tuple[str, int]:
    """The device's name and SM (or CU) count, as torch reports them."""
    import torch  # only once a GPU is there to ask

    count = torch.cuda.device_count()
    if isinstance(device_index, bool) or not isinstance(device_index, int) or not 0 <= device_index < count:
        raise PragmaError(f"there is no GPU {device_index!r}: torch sees {count} (numbered from 0)")
    properties = torch.cuda.get_device_properties(device_index)
    return str(properties.name), int(properties.multi_processor_count)


# -- the override file --------------------------------------------------------------------------

_REQUIRED_FIELDS = ("name", "bandwidth_gbs", "fp32_gflops")
_OPTIONAL_FIELDS = ("vendor", "tensor_gflops", "l2_bytes", "infinity_cache_bytes", "source_url")
_UNITS = {"bandwidth_gbs": "GB/s", "fp32_gflops": "GFLOP/s", "tensor_gflops": "GFLOP/s"}


def read_peaks_file(path: Path) -> GpuPeaks:
    """Read an override file: a JSON object of :class:`GpuPeaks` fields, in the units they name.

    ``vendor``, when absent, is read from the name ("AMD", "Instinct" or "Radeon" say amd,
    "NVIDIA" and the like nvidia). Any problem raises one :class:`~pragma_core.errors.RecordError`
    naming the file and the field.
    """
    path = Path(path)
    data = read_json_object(path, what="GPU peaks file")
    unknown = sorted(set(data) - set(_REQUIRED_FIELDS) - set(_OPTIONAL_FIELDS))
    if unknown:
        known = ", ".join((*_REQUIRED_FIELDS, *_OPTIONAL_FIELDS))
        raise RecordError(f"{path}: unknown field {unknown[0]!r} (the fields are {known})")
    for field in _REQUIRED_FIELDS:
        if field not in data:
            raise RecordError(f"{path}: field {field!r} is missing (required: {', '.join(_REQUIRED_FIELDS)})")
    name = data["name"]
    if not isinstance(name, str) or not name.strip():
        raise RecordError(f"{path}: field 'name' must be the GPU's name, got {name!r}")
    for field, least in (("l2_bytes", 1), ("infinity_cache_bytes", 0)):
        value = data.get(field, least)
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise RecordError(f"{path}: field {field!r} must be a whole number of bytes >= {least}, got {value!r}")
    for field in ("bandwidth_gbs", "fp32_gflops", "tensor_gflops"):
        value = data.get(field, 1.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
            raise RecordError(f"{path}: field {field!r} must be a positive number of {_UNITS[field]}, got {value!r}")
    source_url = data.get("source_url")
    if "source_url" in data and not isinstance(source_url, str):
        raise RecordError(f"{path}: field 'source_url' must be a string, got {source_url!r}")
    vendor = data.get("vendor", _vendor_of(name))
    if vendor not in ("nvidia", "amd"):
        shown = "cannot be told from the name" if vendor is None else f"is {vendor!r}"
        raise RecordError(f"{path}: field 'vendor' {shown}: give nvidia or amd")
    return GpuPeaks(
        name=name.strip(),
        vendor=vendor,
        bandwidth_gbs=float(data["bandwidth_gbs"]),
        fp32_gflops=float(data["fp32_gflops"]),
        tensor_gflops=None if data.get("tensor_gflops") is None else float(data["tensor_gflops"]),
        l2_bytes=data.get("l2_bytes"),
        infinity_cache_bytes=data.get("infinity_cache_bytes", 0),
        source="file",
        source_url=source_url if source_url is not None else path.resolve().as_uri(),
    )


def write_peaks_file(path: Path, peaks: GpuPeaks) -> None:
    """Write ``peaks`` as an override file (atomically), say to keep measured peaks for later runs."""
    data: dict[str, Any] = {
        "name": peaks.name,
        "vendor": peaks.vendor,
        "bandwidth_gbs": peaks.bandwidth_gbs,
        "fp32_gflops": peaks.fp32_gflops,
    }
    if peaks.tensor_gflops is not None:
        data["tensor_gflops"] = peaks.tensor_gflops
    if peaks.l2_bytes is not None:
        data["l2_bytes"] = peaks.l2_bytes
    if peaks.infinity_cache_bytes:
        data["infinity_cache_bytes"] = peaks.infinity_cache_bytes
    if peaks.source_url is not None:
        data["source_url"] = peaks.source_url
    atomic_write_text(Path(path), json.dumps(data, indent=2) + "\n")


def _vendor_of(name: str) -> str | None:
    if re.search(r"\b(AMD|Instinct|Radeon)\b", name, re.IGNORECASE):
        return "amd"
    if re.search(r"\b(NVIDIA|Tesla|GeForce|Quadro|RTX)\b", name, re.IGNORECASE):
        return "nvidia"
    return None


# -- measuring ----------------------------------------------------------------------------------


def measure_gpu(
    device_index: int = 0,
    *,
    copy_bytes: int = DEFAULT_COPY_BYTES,
    gemm_n: int = DEFAULT_GEMM_N,
    repeats: int = DEFAULT_REPEATS,
) -> GpuPeaks:
    """Measure GPU ``device_index``: bandwidth of a device-to-device ``copy_`` of ``copy_bytes``
    (bytes read plus written), the rate of an fp32 ``torch.mm`` with TF32 off (the fp32 roof) and
    of an fp16 one (the tensor roof), each timed with CUDA events, the fastest of ``repeats``.

    These are what torch attains, a little below the datasheet; a floor from them is a little
    higher than one from the table. torch's TF32 setting is restored afterwards.
    """
    import torch

    for label, value in (("copy_bytes", copy_bytes), ("gemm_n", gemm_n), ("repeats", repeats)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{label} must be a positive integer, got {value!r}")
    name, multiprocessors = _device_identity(device_index)
    properties = torch.cuda.get_device_properties(device_index)
    elements = max(1, copy_bytes // _FLOAT32_BYTES)
    previous_tf32 = torch.backends.cuda.matmul.allow_tf32
    with torch.cuda.device(device_index):
        try:
            copy_s = _copy_seconds(elements, repeats)
            torch.backends.cuda.matmul.allow_tf32 = False
            fp32_s, fp16_s = _matmul_seconds(gemm_n, repeats)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous_tf32
            torch.cuda.empty_cache()
    flops = 2 * gemm_n**3
    l2_bytes = int(getattr(properties, "L2_cache_size", 0) or 0)
    return GpuPeaks(
        name=name,
        vendor="amd" if torch.version.hip else "nvidia",
        bandwidth_gbs=2 * elements * _FLOAT32_BYTES / copy_s / 1e9,
        fp32_gflops=flops / fp32_s / 1e9,
        tensor_gflops=flops / fp16_s / 1e9,
        l2_bytes=l2_bytes or None,
        multiprocessors=multiprocessors,
        source="measured",
    )


def _copy_seconds(elements: int, repeats: int) -> float:
    import torch

    source = torch.ones(elements, dtype=torch.float32, device="cuda")  # ones, not empty: touch every page
    target = torch.empty_like(source)
    return _best_seconds(functools.partial(target.copy_, source), repeats)


def _matmul_seconds(n: int, repeats: int) -> tuple[float, float]:
    """Seconds of an fp32 and of an fp16 ``n``-square matmul."""
    import torch

    generator = torch.Generator(device="cuda").manual_seed(0)  # leaves the global seed alone
    a = torch.rand(n, n, device="cuda", generator=generator)
    b = torch.rand(n, n, device="cuda", generator=generator)
    fp32_s = _best_seconds(functools.partial(torch.mm, a, b, out=torch.empty_like(a)), repeats)
    a, b = a.half(), b.half()
    fp16_s = _best_seconds(functools.partial(torch.mm, a, b, out=torch.empty_like(a)), repeats)
    return fp32_s, fp16_s


def _best_seconds(run: Callable[[], Any], repeats: int) -> float:
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    run()
    torch.cuda.synchronize()
    best = math.inf
    for _ in range(repeats):
        start.record()
        run()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)
    return max(best, 1e-9)  # an event pair that measured nothing must not divide by zero


# -- the floor ----------------------------------------------------------------------------------


def floor_ms(analysis: TaskAnalysis, peaks: GpuPeaks, *, roof: Roof = "fp32") -> RooflineFloor:
    """The roofline floor of one forward of the analyzed task on this GPU, the same record and the
    same arithmetic as :func:`pragma_core.machine.roofline.floor_ms` for a CPU.

    ``roof`` picks the compute roof. ``fp32`` (the fp32 rate without tensor cores) is the
    attainment scale for fp32 code. ``tensor`` (the dense FP16/BF16 tensor-core rate) is the
    highest rate honest fp32-accurate code can reach (TF32, 3xTF32 and split-precision schemes run
    on tensor cores; torch's cuDNN convolutions use TF32 by default), so it is the roof for a
    below-the-floor rejection; it needs ``tensor_gflops``. Memory is the same roof in both.
    """
    if roof == "fp32":
        gflops = peaks.fp32_gflops
    elif roof == "tensor":
        if peaks.tensor_gflops is None:
            raise PragmaError(
                f"{peaks.name}: no tensor-core peak is known (tensor_gflops); add it to the peaks file, or measure"
            )
        gflops = peaks.tensor_gflops
    else:
        raise ValueError(f"roof must be 'fp32' or 'tensor', got {roof!r}")
    return floor_at(analysis, bandwidth_gbs=peaks.bandwidth_gbs, gflops=gflops)


def device_floor_ms(analysis: TaskAnalysis, _threads: int) -> float | None:
    """The floor a GPU backend's verifier rejects below (the ``Backend.floor_ms`` of the GPU
    backends): the tensor-core roof where it is known, else the fp32 one; None where no GPU is
    usable or its peaks are unknown (no file, not in the table), so nothing is rejected by it."""
    if gpu_available():
        return None
    try:
        peaks = describe_gpu()
    except PragmaError:
        return None
    return floor_ms(analysis, peaks, roof="tensor" if peaks.tensor_gflops is not None else "fp32").floor_ms
