"""Library kernels among what rocprof recorded: the note on real output, and AMD kernel names.

The names in the classifier tests are written here (inputs, not tool output); the notes are read
from the recorded files in data/.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pragma_core.profiling.library_kernels import library_kernels, library_note, library_of
from pragma_rocprof.parse import parse

DATA = Path(__file__).parent / "data"
RESNET = DATA / "rocprofv3-pytorch-resnet-mpi-kernel_stats-head.csv"  # PyTorch ResNet training


def kernel_times(path: Path) -> list[tuple[str, float | None]]:
    """(kernel, total GPU time) of each kernel of a stats file, or (kernel, None) of a file with no times."""
    metrics = parse(path.read_text(encoding="utf-8", errors="replace"))
    kernels = dict.fromkeys(metric.kernel for metric in metrics if metric.kernel)
    total = {metric.kernel: metric.value for metric in metrics if metric.name == "TotalDurationNs"}
    return [(kernel, total.get(kernel)) for kernel in kernels]


def test_a_pytorch_program_on_rocm():
    # the first 9 kernels of the run (the file is the head of the stats), shares among them
    times = kernel_times(RESNET)
    libraries = library_kernels(kernel for kernel, _ in times)
    assert [library_of(kernel) for kernel in libraries] == [
        "NCCL/RCCL",
        "MIOpen",
        "PyTorch ATen",
        "MIOpen",
        "MIOpen",
        "MIOpen",
        "MIOpen",
        "MIOpen",
    ]
    assert "__amd_rocclr_copyBuffer" not in libraries  # the runtime's copies are not a library's work
    note = library_note(times, where="in the profiled run")
    assert note == (
        "library kernels did work in the profiled run, 98% of kernel time: "
        "rccl_main_kernel (NCCL/RCCL, 92%), MIOpenBatchNormBwdSpatial (MIOpen, 1%), "
        "at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, at::n... "
        "(PyTorch ATen, 1%) and 5 more (4%)"
    )


@pytest.mark.parametrize(
    "path",
    [path for path in sorted(DATA.glob("*.csv")) if path != RESNET and "marker_api_trace" not in path.name],
    ids=lambda path: path.name,
)
def test_no_library_kernel_in_programs_of_hand_written_kernels(path):
    # programs of hand-written kernels: their own kernels and the runtime's __amd_rocclr_* copies
    assert library_note(kernel_times(path)) == ""


@pytest.mark.parametrize(
    "kernel, library",
    [
        ("Cijk_Ailk_Bljk_SB_MT64x64x8_SN_1LDSB0_APM1_ABV0_ACED0_AF0EM1_AF1EM1_AMAS3_ASE_ASGT", "rocBLAS/hipBLASLt"),
        ("Cijk_Alik_Bljk_HHS_BH_MT128x128x16_MI16x16x16x1_SN_1LDSB0_APM1", "rocBLAS/hipBLASLt"),
        ("void rocblas_gemvt_kernel<false, 256, float, float, float>(int, int, float, long)", "rocBLAS/hipBLASLt"),
        ("MIOpenBatchNormFwdTrainSpatial", "MIOpen"),
        ("igemm_wrw_gtcx3_nhwc_fp16_bx0_ex1_bt256x256x32_wt32x32x8_ws2x2_wr2x2", "MIOpen"),
        ("naive_conv_ab_nonpacked_fwd_nchw_float_double_float", "MIOpen"),
        ("void ck_tile::kentry<1, ck_tile::GroupedGemmKernel<int>>(int)", "composable_kernel"),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >(int)",
            "PyTorch ATen",
        ),
        ("rccl_main_kernel(ncclDevComm*, unsigned long, ncclWork*)", "NCCL/RCCL"),
        ("__amd_rocclr_fillBufferAligned", ""),
        ("relu_kernel_0d1d2", ""),
        ("void relu_kernel<__half>(__half*, int)", ""),
    ],
)
def test_library_of_amd_kernels(kernel, library):
    assert library_of(kernel) == library
