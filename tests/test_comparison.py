"""Output comparison: shapes, dtypes, tolerances, NaN, poison and the whole-output check."""

from __future__ import annotations

import torch

from pragma_core.verifier.comparison import compare_outputs
from pragma_core.verifier.static_checks import read_candidate


def test_equal_within_tolerance_reports_errors():
    want = [torch.tensor([[1.0, 2.0], [3.0, 4.0]])]
    result = compare_outputs([want[0] + 5e-5], want, atol=1e-4, rtol=1e-4)
    assert result.ok and 4e-5 < result.max_abs_error < 6e-5


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


def test_whole_output_relative_check_for_small_outputs():
    want = [torch.full((100,), 1e-6)]
    zeros = [torch.zeros(100)]
    assert compare_outputs(zeros, want, atol=1e-4, rtol=1e-4).ok
    tightened = compare_outputs(zeros, want, atol=1e-4, rtol=1e-4, relative_norm=True)
    assert not tightened.ok and "whole-output" in tightened.message


def test_static_reading_of_candidates():
    assert read_candidate("def (:").syntax_error.startswith("candidate.py:1: syntax error")
    assert read_candidate("x = 1\n").missing_model_new
    inherits = read_candidate("class ModelNew(Model):\n    pass\n")
    assert inherits.reference_reuse == "ModelNew inherits from the reference Model"
    calls = read_candidate(
        "import torch.nn as nn\nclass ModelNew(nn.Module):\n"
        "    def forward(self, x):\n        return Model.forward(self, x)\n"
    )
    assert calls.reference_reuse.startswith("line 4 uses the reference Model")
    flagged = read_candidate(
        "import torch\nclass ModelNew:\n    def forward(self, x):\n"
        "        y = torch.empty_like(x)\n        return torch.relu(x)\n"
    )
    assert flagged.flagged_calls == ("torch.relu (line 5)",)
