"""Library kernels: the classifier on kernel names, and the note on recorded ncu output.

The names in the classifier tests are written here (they are inputs, not tool output); the notes
are checked on the recorded ncu pages in ``data/``.
"""

from __future__ import annotations

import pytest
from ncu_data import FIXTURES, fixture_text

from pragma_core.profiling.library_kernels import is_candidate_kernel, library_kernels, library_note, library_of
from pragma_ncu.collect import launch_times
from pragma_ncu.parse import read

TRITON = "ncu-2023.3-default-details-cc89-triton.txt"  # a Triton square kernel and torch.randn's kernel
PYTORCH = "ncu-default-details-A100-cc80-17kernels-pytorch.txt"  # the same, then 15 ATen kernels
CUBLASLT = "ncu-csv-details-set-full-b200-cc100-with-rules.log"  # superbench's cuBLASLt GEMM


@pytest.mark.parametrize(
    "kernel, library",
    [
        ("ampere_sgemm_128x64_nn", "cuBLAS"),
        ("volta_h884gemm_256x128_ldg8_nn", "cuBLAS"),
        ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma", "cuBLAS"),
        ("void gemv2T_kernel_val<int, int, float, float, float, float, (int)128>(T13, T6, T6)", "cuBLAS"),
        ("void dot_kernel<float, (int)128, (int)0, cublasDotParams<cublasGemvTensor<const float>>>(T4)", "cuBLAS"),
        (
            "void cublasLt::splitKreduce_kernel<(int)32, (int)16, int, float>(cublasLt::cublasSplitKParams<float>)",
            "cuBLAS",
        ),
        ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>(T1::Params)", "CUTLASS"),
        ("cutlass3x_sm100_tensorop_s64x256x32gemm_f8_f8_f32_f16_f16_64x256x128_1x1x1_0_tnn_align4", "CUTLASS"),
        ("void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(int)", "cuDNN"),
        ("ampere_scudnn_128x64_relu_small_nn_v1", "cuDNN"),
        ("sm86_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw", "cuDNN"),
        ("void implicit_convolve_sgemm<float, float, (int)1024, (int)5>(int, int)", "cuDNN"),
        (
            "void at::native::vectorized_elementwise_kernel<(int)4, at::native::AbsFunctor<float>>(int, T2, T3)",
            "PyTorch ATen",
        ),
        ("void at::native::<unnamed>::distribution_elementwise_grid_stride_kernel<float, (int)4>(int)", "PyTorch ATen"),
        (
            "void at::native::(anonymous namespace)::cunn_SoftMaxForward<(int)4, float>(float*, float const*, int)",
            "PyTorch ATen",
        ),
        (
            "void (anonymous namespace)::softmax_warp_forward<float, float, float, (int)7, (bool)0>(float*)",
            "PyTorch ATen",
        ),
        ("triton_poi_fused_add_relu_0", "PyTorch Inductor"),
        ("void regular_fft<(unsigned int)256, (EFFT_Direction)1>(kernel_arguments_t<unsigned int>)", "cuFFT"),
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "NCCL/RCCL"),
        ("Cijk_Ailk_Bljk_SB_MT64x64x8_SN_1LDSB0_APM1", "rocBLAS/hipBLASLt"),
        ("Custom_Cijk_Alik_Bljk_BBS_BH_MT256x256x64_MI16x16x1_UserArgs_shortname1_gfx950", "rocBLAS/hipBLASLt"),
        ("void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemm_xdl_cshuffle_v3<float>>(int)", "composable_kernel"),
        ("MIOpenBatchNormFwdTrainSpatial", "MIOpen"),
        ("miopenSp3AsmConv_v21_1_3_gfx9_fp32_stride1", "MIOpen"),
        ("igemm_fwd_gtcx3_nhwc_fp16_bx0_ex0_bt128x128x32_wt32x32x8", "MIOpen"),
        ("SubTensorOpWithScalar1d", "MIOpen"),
        # the candidate's own, and the runtime's copies
        ("square_kernel_0d1d234", ""),
        ("void relu_kernel<c10::Half>(c10::Half*, c10::Half const*, int)", ""),
        ("matmul_kernel_0d1d2d3d4d5d6d7c8d9c10d11c", ""),
        ("vecAdd", ""),
        ("gemm_tile_kernel(float const*, float const*, float*, int)", ""),
        ("__amd_rocclr_copyBuffer", ""),
    ],
)
def test_library_of(kernel, library):
    assert library_of(kernel) == library


def test_the_candidates_names_win_unless_the_kernel_is_in_a_library_namespace():
    names = [
        "ampere_sgemm_tile(float*)",  # a candidate may name its kernel like cuBLAS's
        "void at::native::vectorized_elementwise_kernel<(int)4, at::native::AbsFunctor<float>>(int)",
        "relu_kernel_0d1d2",
    ]
    assert library_kernels(names) == names[:2]
    assert library_kernels(names, ["ampere_sgemm_tile", "vectorized_elementwise_kernel"]) == names[1:2]
    assert is_candidate_kernel("relu_kernel_0d1d2", ["relu_kernel"])
    assert not is_candidate_kernel("my_relu_kernel", ["relu_kernel"])
    assert not is_candidate_kernel("void cutlass::Kernel<cutlass::gemm::kernel::Gemm<float>>(int)", ["gemm"])


def test_library_kernels_are_named_once_in_order():
    names = ["ampere_sgemm_128x64_nn", "relu_kernel", "MIOpenBatchNormFwdTrainSpatial", "ampere_sgemm_128x64_nn"]
    assert library_kernels(names) == ["ampere_sgemm_128x64_nn", "MIOpenBatchNormFwdTrainSpatial"]
    assert library_kernels([]) == []


def test_the_note_gives_each_library_kernels_share_of_the_time():
    assert library_note([("ampere_sgemm_128x64_nn", 710.0), ("relu_kernel", 290.0)]) == (
        "library kernels did work inside the candidate's forward: ampere_sgemm_128x64_nn (cuBLAS, 71% of kernel time)"
    )
    launches = [("relu_kernel", 10.0)] + [(f"Cijk_Ailk_Bljk_MT{n}", float(n)) for n in (1, 2, 3, 40, 50)]
    assert library_note(launches, where="in the run") == (
        "library kernels did work in the run, 91% of kernel time: Cijk_Ailk_Bljk_MT50 (rocBLAS/hipBLASLt, 47%), "
        "Cijk_Ailk_Bljk_MT40 (rocBLAS/hipBLASLt, 38%), Cijk_Ailk_Bljk_MT3 (rocBLAS/hipBLASLt, 3%) and 2 more (3%)"
    )
    assert library_note([("ampere_sgemm_128x64_nn", None), ("relu_kernel", 5.0)]) == (
        "library kernels ran inside the candidate's forward (the output has no kernel durations): "
        "ampere_sgemm_128x64_nn (cuBLAS)"
    )
    assert library_note([("relu_kernel", 5.0), ("ampere_sgemm_128x64_nn", 5.0)], ["ampere_sgemm"]) == ""
    assert library_note([]) == ""


def note_of(name: str, candidate_kernels: tuple[str, ...] = ()) -> str:
    return library_note(launch_times(read(fixture_text(name))), candidate_kernels)


def test_torch_randn_kernel_beside_a_triton_kernel():
    # 5.92 us of ATen's normal-distribution kernel against 11.55 us of the Triton square kernel
    assert note_of(TRITON, ("square_kernel",)) == (
        "library kernels did work inside the candidate's forward: at::native::<unnamed>::"
        "distribution_elementwise_grid_stride_kernel<float, (int)4, void at::native... (PyTorch ATen, 34% of kernel time)"
    )


def test_a_pytorch_program_is_mostly_aten():
    launches = launch_times(read(fixture_text(PYTORCH)))
    assert len(launches) == 17 and all(duration is not None for _, duration in launches)
    assert library_kernels([kernel for kernel, _ in launches], ["square_kernel"]) == list(
        dict.fromkeys(kernel for kernel, _ in launches if kernel != "square_kernel_0d1d234")
    )
    note = note_of(PYTORCH, ("square_kernel",))
    assert note.startswith("library kernels did work inside the candidate's forward, 93% of kernel time: ")
    assert note.endswith(" and 10 more (57%)")
    assert "at::native::vectorized_elementwise_kernel<(int)4, at::native::AbsFunctor<float>" in note


def test_a_cublaslt_gemm():
    assert note_of(CUBLASLT) == (
        "library kernels did work inside the candidate's forward: cutlass3x_sm100_tensorop_s64x256x32gemm_f8_f8_f32_"
        "f16_f16_64x256x128_1x1x1_0_tnn_align4_1sm_bias_... (CUTLASS, 100% of kernel time)"
    )


@pytest.mark.parametrize(
    "name", [path.name for path in FIXTURES if path.name not in (TRITON, PYTORCH, CUBLASLT)], ids=str
)
def test_no_note_for_programs_of_hand_written_kernels(name):
    assert note_of(name) == ""


def test_launch_times_are_in_ns_per_launch():
    launches = launch_times(read(fixture_text("ncu-raw-page-csv-units-base-fp-gtx1080-3launches.csv")))
    assert launches == [("vecAdd", 2720.0)] * 3
