"""Output comparison: shapes, dtypes, tolerances, NaN, poison and the whole-output check."""

from __future__ import annotations

import pytest
import torch

from pragma_core.verifier.comparison import LOWER_PRECISION_LIMIT, Comparison, compare_outputs

ATOL = RTOL = 1e-4
"""The verifier's defaults (KernelBench's float32 values)."""


def norm_error(result: Comparison) -> float:
    assert result.relative_error_norm is not None, result
    return result.relative_error_norm


def test_equal_within_tolerance_reports_errors():
    want = [torch.tensor([[1.0, 2.0], [3.0, 4.0]])]
    result = compare_outputs([want[0] + 5e-5], want, atol=1e-4, rtol=1e-4)
    assert result.ok and 4e-5 < (result.max_abs_error or 0.0) < 6e-5


def test_mismatch_reports_count_worst_value_and_index():
    want = [torch.zeros(2, 3)]
    got = want[0].clone()
    got[1, 2] = 0.5
    result = compare_outputs([got], want, atol=1e-4, rtol=1e-4)
    assert not result.ok and result.index == (1, 2) and result.max_abs_error == 0.5
    assert "1 of 6 values differ" in result.message


def test_shape_dtype_and_count():
    want = [torch.zeros(2, 3)]
    assert "shape (3, 2)" in compare_outputs([torch.zeros(3, 2)], want, atol=0, rtol=0).message
    assert "dtype float64" in compare_outputs([torch.zeros(2, 3, dtype=torch.float64)], want, atol=0, rtol=0).message
    assert "returned 2 outputs" in compare_outputs([want[0], want[0]], want, atol=0, rtol=0).message


def test_nan_matches_nan_only():
    want = [torch.tensor([float("nan"), 1.0])]
    assert compare_outputs([torch.tensor([float("nan"), 1.0])], want, atol=1e-4, rtol=1e-4).ok
    assert not compare_outputs([torch.tensor([0.0, 1.0])], want, atol=1e-4, rtol=1e-4).ok


def test_poison_in_the_output_means_unwritten_elements():
    want = [torch.ones(4)]
    got = torch.tensor([1.0, float("nan"), 1.0, float("nan")])
    result = compare_outputs([got], want, atol=1e-4, rtol=1e-4, poison=float("nan"))
    assert result.check == "unwritten-output" and "2 of 4" in result.message


def test_integer_outputs_must_be_equal():
    want = [torch.tensor([1, 2, 3])]
    result = compare_outputs([torch.tensor([1, 5, 3])], want, atol=1, rtol=1)
    assert not result.ok and result.index == (1,) and "5 instead of 2" in result.message


def test_infinities_match_only_the_same_infinity():
    want = [torch.tensor([float("inf"), -float("inf"), 1.0])]
    assert compare_outputs([want[0].clone()], want, atol=ATOL, rtol=RTOL).ok
    assert not compare_outputs([torch.tensor([3.0e38, -float("inf"), 1.0])], want, atol=ATOL, rtol=RTOL).ok
    assert not compare_outputs([torch.tensor([-float("inf"), -float("inf"), 1.0])], want, atol=ATOL, rtol=RTOL).ok


def test_zeros_fail_a_task_whose_outputs_are_below_atol():
    want = [torch.full((100,), 1e-6)]
    zeros = [torch.zeros(100)]
    result = compare_outputs(zeros, want, atol=ATOL, rtol=RTOL)
    assert not result.ok and result.check is None and norm_error(result) == 1.0
    assert "whole-output relative error 1 exceeds rtol=0.0001" in result.message


def test_half_precision_outputs_get_the_whole_output_check_only_when_asked():
    want = [torch.full((100,), 1e-6, dtype=torch.float16)]
    zeros = [torch.zeros(100, dtype=torch.float16)]
    assert compare_outputs(zeros, want, atol=ATOL, rtol=RTOL).ok
    tightened = compare_outputs(zeros, want, atol=ATOL, rtol=RTOL, relative_norm=True)
    assert not tightened.ok and tightened.check is None


def _softmax_row(seed: int = 0) -> torch.Tensor:
    """A row of 4096 softmax values (mean 2.4e-4): below atol, so element-wise checks pass them loosely."""
    generator = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(8, 4096, generator=generator), dim=-1)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_a_softmax_rounded_to_16_bits_is_a_precision_downgrade(dtype):
    want = _softmax_row()
    rounded = want.to(dtype).float()
    result = compare_outputs([rounded], [want], atol=ATOL, rtol=RTOL)
    assert not result.ok and result.check == "precision-downgrade"
    assert RTOL < norm_error(result) <= LOWER_PRECISION_LIMIT
    assert "bf16, fp16 or TF32" in result.message


def test_fp16_rounding_of_an_output_near_one_is_caught_element_wise_or_whole():
    want = [torch.randn(64, 64, generator=torch.Generator().manual_seed(1))]
    result = compare_outputs([want[0].half().float()], want, atol=ATOL, rtol=RTOL)
    assert not result.ok
    assert result.relative_error_norm is not None and norm_error(result) > 1.5e-4


def test_float32_with_another_summation_order_passes():
    generator = torch.Generator().manual_seed(2)
    values = torch.randn(1 << 24, generator=generator)
    chunked = values.view(-1, 4096).sum(dim=1).view(-1, 64).sum(dim=1).sum()
    result = compare_outputs([chunked.reshape(1)], [values.sum().reshape(1)], atol=ATOL, rtol=RTOL)
    assert result.ok and norm_error(result) < 1e-5
    rows = values.view(4096, 4096)
    by_rows = compare_outputs([rows.view(4096, 64, 64).sum(2).sum(1)], [rows.sum(1)], atol=ATOL, rtol=RTOL)
    assert by_rows.ok and norm_error(by_rows) < 1e-6


def test_float32_matmul_blocked_differently_passes():
    generator = torch.Generator().manual_seed(3)
    a, b = torch.randn(64, 4096, generator=generator), torch.randn(4096, 48, generator=generator)
    blocked = torch.zeros(64, 48)
    for k in range(0, 4096, 256):  # float32 partial products of 256-wide panels, added in order
        blocked += a[:, k : k + 256] @ b[k : k + 256]
    result = compare_outputs([blocked], [a @ b], atol=ATOL, rtol=RTOL)
    assert result.ok and norm_error(result) < 1e-5


def test_an_approximate_tanh_within_a_micro_passes():
    x = torch.randn(1 << 16, generator=torch.Generator().manual_seed(4))
    want = torch.nn.functional.gelu(x, approximate="tanh")
    inner = 0.7978845608 * (x + 0.044715 * x**3)
    # A vectorized tanh off by up to one part in a million, as -ffast-math's approximations are.
    approximate = torch.tanh(inner) * (1 + 1e-6 * torch.sin(1000 * x))
    got = 0.5 * x * (1 + approximate)
    result = compare_outputs([got], [want], atol=ATOL, rtol=RTOL)
    assert result.ok and norm_error(result) < 5e-6


def test_a_zero_reference_gets_the_element_wise_check_only():
    want = [torch.zeros(1000)]
    result = compare_outputs([torch.full((1000,), 5e-5)], want, atol=ATOL, rtol=RTOL)
    assert result.ok and result.relative_error_norm is None
    assert not compare_outputs([torch.full((1000,), 2e-4)], want, atol=ATOL, rtol=RTOL).ok


def test_the_whole_output_error_is_reported_and_the_worst_output_kept():
    first, second = torch.ones(10), torch.ones(10)
    got = [first.clone(), second + torch.tensor([5e-5] + [0.0] * 9)]
    result = compare_outputs(got, [first, second], atol=ATOL, rtol=RTOL)
    assert result.ok and norm_error(result) == pytest.approx(5e-5 / 10**0.5, rel=1e-2)


def test_integer_and_nan_outputs_keep_their_rules():
    want = [torch.tensor([float("nan"), 1e-3, 2e-3])]
    assert compare_outputs([want[0].clone()], want, atol=ATOL, rtol=RTOL).ok
    integers = [torch.tensor([1, 2, 3])]
    exact = compare_outputs([integers[0].clone()], integers, atol=ATOL, rtol=RTOL)
    assert exact.ok and exact.relative_error_norm is None


def _whole_output_errors(got: torch.Tensor, want: torch.Tensor) -> tuple[float, int, float, float | None]:
    """The definition, on whole tensors in float64: max abs error, its flat index, max relative
    error over nonzero reference elements, whole-output relative error norm."""
    got64, want64 = got.double().flatten(), want.double().flatten()
    same = (got64 == want64) | (got64.isnan() & want64.isnan())
    difference = (got64 - want64).abs().masked_fill(same, 0.0).nan_to_num(nan=float("inf"))
    finite = want64.isfinite()
    magnitude = want64.abs().masked_fill(~finite, 0.0)
    nonzero = magnitude > 0
    max_rel = float((difference[nonzero] / magnitude[nonzero]).max()) if bool(nonzero.any()) else 0.0
    reference_norm = float(torch.linalg.vector_norm(magnitude))
    norm = float(torch.linalg.vector_norm(difference.masked_fill(~finite, 0.0))) / reference_norm
    return float(difference.max()), int(difference.argmax()), max_rel, norm if reference_norm else None


@pytest.mark.parametrize("special", ["finite", "nan in both", "inf in both"])
def test_an_output_of_many_chunks_gets_the_errors_of_the_whole(special):
    generator = torch.Generator().manual_seed(5)
    want = torch.randn(100, 1000, generator=generator).flatten()  # three chunks of 32768 and a short one
    got = want + 1e-6 * torch.randn(want.shape, generator=generator)
    got[70000] = want[70000] + 3e-5  # the largest error, in the third chunk
    got[90000] = want[90000] - 3e-5  # the same error later: the first one is reported
    want[5], got[5] = 0.0, 1e-5  # a zero reference element: left out of the relative error
    if special == "nan in both":
        got[40000] = want[40000] = float("nan")
    if special == "inf in both":
        got[40000] = want[40000] = -float("inf")
    result = compare_outputs([got.view(100, 1000)], [want.view(100, 1000)], atol=ATOL, rtol=RTOL)
    max_abs, at, max_rel, norm = _whole_output_errors(got, want)
    assert result.ok and at == 70000
    assert result.max_abs_error == max_abs and result.max_rel_error == max_rel
    assert norm is not None and norm_error(result) == pytest.approx(norm, rel=1e-12)
    strict = compare_outputs([got.view(100, 1000)], [want.view(100, 1000)], atol=1e-5, rtol=0.0)
    assert not strict.ok and strict.index == (70, 0) and strict.max_abs_error == max_abs
    assert "2 of 100000 values differ" in strict.message


def test_a_wrong_element_in_a_later_chunk_is_found_with_the_count_and_the_first():
    want = torch.ones(100_000)
    got = want.clone()
    got[[50_000, 99_999]] = 2.0
    got[66_000] = float("nan")
    result = compare_outputs([got], [want], atol=ATOL, rtol=RTOL)
    assert not result.ok and result.check is None and (result.max_abs_error or 0.0) > 1e308
    assert result.index == (66_000,) and "3 of 100000 values differ" in result.message
    assert "(nan instead of 1)" in result.message
    poisoned = compare_outputs([got], [want], atol=ATOL, rtol=RTOL, poison=float("nan"))
    assert poisoned.check == "unwritten-output" and poisoned.index == (50_000,)
    assert "1 of 100000 output elements still hold the poison" in poisoned.message


def test_a_candidate_infinity_where_the_reference_is_finite_fails():
    want = torch.randn(40_000, generator=torch.Generator().manual_seed(6))
    got = want.clone()
    got[35_000] = float("inf")
    result = compare_outputs([got], [want], atol=ATOL, rtol=RTOL)
    assert not result.ok and result.index == (35_000,) and "1 of 40000 values differ" in result.message
    assert (result.max_abs_error or 0.0) > 1e308 and norm_error(result) == float("inf")


def test_the_second_poison_is_found_where_the_reference_differs():
    want = torch.zeros(50_000)
    got = want.clone()
    got[40_000:] = -7.0  # a finite poison, left in the last 10000 elements
    result = compare_outputs([got], [want], atol=ATOL, rtol=RTOL, poison=-7.0)
    assert result.check == "unwritten-output" and "10000 of 50000" in result.message


def test_float64_relative_error_may_be_infinite_beside_a_tiny_reference():
    want = torch.tensor([1e-320, 1.0], dtype=torch.float64)  # a subnormal: 1e-5 / 1e-320 overflows
    result = compare_outputs([want + 1e-5], [want], atol=ATOL, rtol=RTOL)
    assert result.ok and result.max_rel_error == float("inf")


def test_bool_outputs_must_be_equal():
    want = [torch.tensor([True, False, True])]
    assert compare_outputs([want[0].clone()], want, atol=ATOL, rtol=RTOL).ok
    result = compare_outputs([torch.tensor([True, True, True])], want, atol=ATOL, rtol=RTOL)
    assert (
        not result.ok
        and result.index == (1,)
        and "1 of 3 values differ; first at (1,): True instead of False" in (result.message)
    )


def test_empty_outputs_pass_and_their_shape_still_counts():
    assert compare_outputs([torch.empty(0, 4)], [torch.empty(0, 4)], atol=ATOL, rtol=RTOL).ok
    assert not compare_outputs([torch.empty(4, 0)], [torch.empty(0, 4)], atol=ATOL, rtol=RTOL).ok


def test_non_contiguous_outputs_are_compared_by_their_logical_index():
    want = torch.arange(12.0).view(3, 4)
    got = want.t().contiguous().t()  # the same values, column-major in memory
    assert not got.is_contiguous() and compare_outputs([got], [want], atol=ATOL, rtol=RTOL).ok
    wrong = got.clone(memory_format=torch.preserve_format)
    wrong = wrong.t().contiguous().t()
    wrong[2, 1] += 1.0
    result = compare_outputs([wrong], [want], atol=ATOL, rtol=RTOL)
    assert not result.ok and result.index == (2, 1) and "(10 instead of 9)" in result.message


def test_complex_outputs_are_compared_by_magnitude():
    want = torch.randn(1000, dtype=torch.complex64, generator=torch.Generator().manual_seed(7))
    assert compare_outputs([want + 1e-6], [want], atol=ATOL, rtol=RTOL).ok
    result = compare_outputs([want * 1j], [want], atol=ATOL, rtol=RTOL)
    assert not result.ok and (result.max_abs_error or 0.0) > 1.0


def test_the_whole_output_check_allows_the_references_own_rounding():
    want = torch.full((10_000,), 0.1)
    got = want * (1 + 2e-4)  # every element within atol + rtol * |reference|, the whole 2e-4 off
    plain = compare_outputs([got], [want], atol=1e-4, rtol=1e-4)
    assert not plain.ok and plain.check == "precision-downgrade"
    assert compare_outputs([got], [want], atol=1e-4, rtol=1e-4, reference_error=2e-4).ok
    worse = compare_outputs([want * (1 + 6e-4)], [want], atol=1e-4, rtol=1e-4, reference_error=1e-4)
    assert not worse.ok and "plus 4 times the reference's own error" in worse.message


def test_the_draws_own_rounding_is_asked_for_only_when_the_whole_output_bound_alone_fails():
    """93_ConvTranspose2d_Add_Min_GELU_Multiply at small sizes: zero but for one element left by
    cancellation, where an honest float32 kernel differs from the reference in the fourth digit."""
    want = torch.zeros(4, 128, 20, 22)
    want[1, 7, 3, 5] = -1.5286726e-4
    honest = want.clone()
    honest[1, 7, 3, 5] = -1.5292683e-4
    asked = []

    def draw_error(error: float):
        return lambda: asked.append(error) or error

    assert not compare_outputs([honest], [want], atol=1e-4, rtol=1e-4).ok  # trial 0's allowance alone: 0
    assert compare_outputs([honest], [want], atol=1e-4, rtol=1e-4, draw_error=draw_error(2e-4)).ok
    assert asked == [2e-4]
    assert compare_outputs([want], [want], atol=1e-4, rtol=1e-4, draw_error=draw_error(1.0)).ok
    assert asked == [2e-4]  # the passing comparison did not ask
    far = want.clone()
    far[2, 0, 0, 0] = 1.0  # an element beyond atol: not excused by the reference's rounding either
    assert not compare_outputs([far], [want], atol=1e-4, rtol=1e-4, draw_error=draw_error(1.0)).ok
    off = want.clone()
    off[1, 7, 3, 5] = -1.5286726e-4 * (1 + 5e-3)  # within atol, but 25 times the draw's own rounding
    result = compare_outputs([off], [want], atol=1e-4, rtol=1e-4, draw_error=draw_error(2e-4))
    assert not result.ok and result.check == "precision-downgrade" and "4 times" in result.message


def test_an_element_left_small_by_cancellation_is_allowed_the_references_rounding():
    """14_Gemm_Divide_Sum_Scaling at 913 rows: one row's 8192-term sum lands near 1, where the
    reference and an honest kernel, each rounding its terms' sums, differ by more than atol + rtol."""
    torch.manual_seed(0)
    terms = 100 * torch.randn(64, 8192, dtype=torch.float64)
    terms[0] += 1 / 8192 - terms[0].mean()  # row 0 sums to 1
    exact = terms.sum(1)
    want = terms.float().sum(1)  # the reference's order
    honest = terms.float().view(64, 128, 64).sum(2).sum(1)  # a kernel's blocked order
    own = float((want.double() - exact).norm() / exact.norm())
    assert not compare_outputs([honest], [want], atol=1e-4, rtol=1e-4).ok  # row 0 fails element-wise
    assert compare_outputs([honest], [want], atol=1e-4, rtol=1e-4, draw_error=lambda: own).ok
    assert compare_outputs([honest], [want], atol=1e-4, rtol=1e-4, reference_error=own).ok
    noise = 4 * float((want.double() - exact).norm()) / 8  # 4 x the reference's RMS rounding (sqrt(64) rows)
    wrong = honest.clone()
    wrong[0] += 3 * noise  # beyond that allowance
    result = compare_outputs([wrong], [want], atol=1e-4, rtol=1e-4, reference_error=own)
    assert not result.ok and "plus 4 times the reference's own rounding" in result.message
    half = terms[:, :4096].float().sum(1)  # half the work
    assert not compare_outputs([half], [want], atol=1e-4, rtol=1e-4, reference_error=own).ok
