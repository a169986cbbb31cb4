"""Category inference: decisive operators first, then the name, then shared operators."""

from __future__ import annotations

import pytest

from pragma_core import Category, infer_category


@pytest.mark.parametrize(
    "name, ops, expected",
    [
        ("Conv2d_ReLU_BiasAdd", {"convolution", "relu", "add"}, Category.CONV),
        ("Gemm_GroupNorm_Swish", {"addmm", "native_group_norm", "sigmoid"}, Category.MATMUL),
        ("InstanceNorm", {"native_batch_norm"}, Category.NORMALIZATION),
        ("AvgPool3d", {"avg_pool3d"}, Category.POOLING_REDUCTION),
        ("CrossEntropyLoss", {"_log_softmax", "nll_loss_forward"}, Category.OTHER),
        ("Cumsum", {"cumsum"}, Category.OTHER),
        # Shared operators only: the name decides.
        ("L1Norm", {"abs", "sum", "div"}, Category.NORMALIZATION),
        ("KLDivLoss", {"log", "xlogy", "sub", "sum", "div"}, Category.OTHER),
        ("Softmax", {"_softmax"}, Category.ACTIVATION),
        ("MinGPTNewGelu", {"tanh", "mul", "add", "pow"}, Category.ACTIVATION),
        ("Max_reduction_over_a_dimension", {"max"}, Category.POOLING_REDUCTION),
        ("TripletMarginLoss", {"norm", "clamp_min", "mean"}, Category.OTHER),
        # A name that says nothing: the shared operators decide.
        ("task", {"sum", "relu"}, Category.POOLING_REDUCTION),
        ("task", {"sigmoid", "mul"}, Category.ACTIVATION),
        ("task", {"add", "mul"}, Category.OTHER),
    ],
)
def test_infer_category(name, ops, expected):
    assert infer_category(name, ops) is expected
