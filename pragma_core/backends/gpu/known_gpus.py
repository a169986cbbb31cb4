"""The datasheet table of the GPUs pragma knows: each entry the vendor's figures for one torch device,
with the document they come from. :func:`pragma_core.backends.gpu.hardware.gpu_from_table` looks a
device up in it by the name torch gives it.
"""

from __future__ import annotations

import re
from typing import Any

from .peaks import GpuPeaks

__all__ = ["KNOWN_GPUS"]

_MiB = 1 << 20

# Every figure is from the vendor. The MI300X and MI250 figures, and every AMD cache size and CU
# count, were read in AMD's ROCm documentation itself (the microarchitecture pages and the GPU
# specifications table, whose sources are in the ROCm repository). The MI250X's are AMD's product
# page figures as reproduced elsewhere, checked against AMD's documented per-CU rates, CU count and
# clock (which give them exactly). The NVIDIA figures are those of NVIDIA's datasheets at the URLs
# given; the PDFs could not be opened from where this table was written, so they were checked
# against several reproductions of the datasheets' tables (which agree), not against the PDFs.
# NVIDIA quotes tensor rates "with sparsity"; the dense rate used here is half of it, as the
# datasheets' footnotes say. A figure no vendor document states is None, never estimated.

_A100_DATASHEET = (
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
)
_A100_40GB_DATASHEET = (
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet.pdf"
)
# L2 (40 MB) and SMs (108) of every A100: the NVIDIA Ampere architecture whitepaper,
# https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/nvidia-ampere-architecture-whitepaper.pdf
_H100_DATASHEET = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
# L2 (50 MB) and SMs (132 SXM5, 114 PCIe) of the H100: the NVIDIA H100 Tensor Core GPU architecture
# whitepaper, https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper. The H100 PCIe
# figures are from the datasheet's first edition (later editions list the H100 NVL instead) and
# NVIDIA's H100 PCIe product brief PB-11133-001, which says "greater than 2,000" GB/s.
_H200_DATASHEET = "https://www.nvidia.com/en-us/data-center/h200/"
_L40S_DATASHEET = "https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413"
_MI250X_SPECS = "https://www.amd.com/en/products/accelerators/instinct/mi200/mi250x.html"
# MI250X per module: vector FP32 47.9, packed FP32 95.7, matrix FP16 383.0 TFLOPS, 3.2 TB/s; 220 CUs
# at 1.7 GHz. The rates agree with AMD's per-CU rates (packed FP32 256, matrix FP16 1024 FLOPs per
# clock per CU: https://gpuopen.com/learn/amd-lab-notes/amd-lab-notes-matrix-cores-readme/). Per GCD:
# half of each, 110 CUs, 8 MB L2 (https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html).
_MI250_ARCHITECTURE = "https://rocm.docs.amd.com/en/latest/reference/gpu-arch/mi250.html"
# MI250 per module: packed FP32 90.5, matrix FP16 362.1 TFLOPS; 1.6 TB/s per GCD (all from the page
# above); 104 CUs and 8 MB L2 per GCD (the GPU specifications table).
_MI300X_ARCHITECTURE = "https://rocm.docs.amd.com/en/latest/reference/gpu-arch/mi300.html"
# MI300X: vector FP32 163.4, matrix FP16 1307.4 TFLOPS, 5.3 TB/s (the page above); 304 CUs, L2 4 MB
# per XCD (32 MB), 256 MB Infinity Cache ("L3" in the GPU specifications table).


def _entry(pattern: str, **fields: Any) -> tuple[re.Pattern[str], GpuPeaks]:
    return re.compile(pattern, re.IGNORECASE), GpuPeaks(source="table", **fields)


KNOWN_GPUS: tuple[tuple[re.Pattern[str], GpuPeaks], ...] = (
    # torch names the A100s "NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-40GB", "NVIDIA A100 80GB PCIe"
    # and "NVIDIA A100-PCIE-40GB" (older drivers say "Tesla" for "NVIDIA"): form factor and memory
    # size both have to match, as the 80GB parts have more bandwidth.
    _entry(
        r"\bA100\b(?=.*\bSXM)(?=.*\b80\s*GB)",
        name="NVIDIA A100 SXM4 80GB",
        vendor="nvidia",
        bandwidth_gbs=2039.0,
        fp32_gflops=19_500.0,
        tensor_gflops=312_000.0,
        l2_bytes=40 * _MiB,
        multiprocessors=108,
        source_url=_A100_DATASHEET,
    ),
    _entry(
        r"\bA100\b(?=.*\bSXM)(?=.*\b40\s*GB)",
        name="NVIDIA A100 SXM4 40GB",
        vendor="nvidia",
        bandwidth_gbs=1555.0,
        fp32_gflops=19_500.0,
        tensor_gflops=312_000.0,
        l2_bytes=40 * _MiB,
        multiprocessors=108,
        source_url=_A100_40GB_DATASHEET,
    ),
    _entry(
        r"\bA100\b(?=.*\bPCIE)(?=.*\b80\s*GB)",
        name="NVIDIA A100 PCIe 80GB",
        vendor="nvidia",
        bandwidth_gbs=1935.0,
        fp32_gflops=19_500.0,
        tensor_gflops=312_000.0,
        l2_bytes=40 * _MiB,
        multiprocessors=108,
        source_url=_A100_DATASHEET,
    ),
    _entry(
        r"\bA100\b(?=.*\bPCIE)(?=.*\b40\s*GB)",
        name="NVIDIA A100 PCIe 40GB",
        vendor="nvidia",
        bandwidth_gbs=1555.0,
        fp32_gflops=19_500.0,
        tensor_gflops=312_000.0,
        l2_bytes=40 * _MiB,
        multiprocessors=108,
        source_url=_A100_40GB_DATASHEET,
    ),
    # The H100 SXM5 is "NVIDIA H100 80GB HBM3"; the PCIe card "NVIDIA H100 PCIe" (HBM2e). The H100
    # NVL ("NVIDIA H100 NVL", 94 GB) has figures of its own and is not in the table.
    _entry(
        r"\bH100\b(?=.*\bHBM3\b)(?!.*\b(PCIE|NVL)\b)",
        name="NVIDIA H100 SXM5 80GB",
        vendor="nvidia",
        bandwidth_gbs=3350.0,
        fp32_gflops=67_000.0,
        tensor_gflops=989_500.0,  # 1,979 with sparsity
        l2_bytes=50 * _MiB,
        multiprocessors=132,
        source_url=_H100_DATASHEET,
    ),
    _entry(
        r"\bH100\b(?=.*\bPCIE\b)",
        name="NVIDIA H100 PCIe 80GB",
        vendor="nvidia",
        bandwidth_gbs=2000.0,
        fp32_gflops=51_000.0,
        tensor_gflops=756_500.0,  # 1,513 with sparsity
        l2_bytes=50 * _MiB,
        multiprocessors=114,
        source_url=_H100_DATASHEET,
    ),
    # "NVIDIA H200" is the SXM part; the H200 NVL (lower clocks) and the GH200 superchip
    # ("NVIDIA GH200 480GB": the word boundary keeps it out) are other GPUs. The H200 datasheet
    # states neither the L2 size nor the SM count.
    _entry(
        r"\bH200\b(?!.*\bNVL\b)",
        name="NVIDIA H200 SXM 141GB",
        vendor="nvidia",
        bandwidth_gbs=4800.0,
        fp32_gflops=67_000.0,
        tensor_gflops=989_500.0,  # 1,979 with sparsity
        source_url=_H200_DATASHEET,
    ),
    # "NVIDIA L40S", not the L40 (90.5 TFLOPS fp32). The datasheet gives FP16 as 362.05 dense and 733
    # with sparsity, and states neither the L2 size nor the SM count.
    _entry(
        r"\bL40S\b",
        name="NVIDIA L40S",
        vendor="nvidia",
        bandwidth_gbs=864.0,
        fp32_gflops=91_600.0,
        tensor_gflops=362_050.0,
        source_url=_L40S_DATASHEET,
    ),
    # ROCm names an MI250X "AMD Instinct MI250X" or, on some systems, "AMD Instinct MI250X / MI250",
    # the name an MI250 has too: the CU count (110 or 104 per GCD) tells them apart.
    _entry(
        r"\bMI250X\b",
        name="AMD Instinct MI250X (one GCD)",
        vendor="amd",
        bandwidth_gbs=1600.0,
        fp32_gflops=47_850.0,
        tensor_gflops=191_500.0,
        l2_bytes=8 * _MiB,
        multiprocessors=110,
        source_url=_MI250X_SPECS,
    ),
    _entry(
        r"\bMI250\b",
        name="AMD Instinct MI250 (one GCD)",
        vendor="amd",
        bandwidth_gbs=1600.0,
        fp32_gflops=45_250.0,
        tensor_gflops=181_050.0,
        l2_bytes=8 * _MiB,
        multiprocessors=104,
        source_url=_MI250_ARCHITECTURE,
    ),
    _entry(
        r"\bMI300X\b",
        name="AMD Instinct MI300X",
        vendor="amd",
        bandwidth_gbs=5300.0,
        fp32_gflops=163_400.0,
        tensor_gflops=1_307_400.0,
        l2_bytes=32 * _MiB,
        infinity_cache_bytes=256 * _MiB,
        multiprocessors=304,
        source_url=_MI300X_ARCHITECTURE,
    ),
)
"""``(pattern, peaks)`` of the GPUs pragma knows, searched in the name torch gives the device."""
