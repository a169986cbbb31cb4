"""Which of the paper's six categories a task belongs to, from its traced operators and its name.

Operators that name a category decide it (a convolution makes a task ``conv`` whatever follows it;
priority conv, matmul, normalization, pooling, then losses and scans as ``other``). Operators that
many categories share, such as a sum or an exponential, do not: an L1 norm is a sum and a division,
a softmax written by hand is an exponential, a sum and a division. For those the task's name
decides when it says (``L1Norm``, ``MSELoss``), and the shared operators only when it does not.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..records import Category

__all__ = ["infer_category"]

_DECISIVE_OPS: tuple[tuple[Category, frozenset[str]], ...] = (
    (
        Category.CONV,
        frozenset(
            {
                "convolution",
                "_convolution",
                "conv1d",
                "conv2d",
                "conv3d",
                "conv_transpose1d",
                "conv_transpose2d",
                "conv_transpose3d",
                "mkldnn_convolution",
                "_slow_conv2d_forward",
                "slow_conv3d_forward",
                "slow_conv_transpose2d",
                "slow_conv_transpose3d",
                "convolution_overrideable",
                "_depthwise_conv2d",
                "conv_depthwise3d",
            }
        ),
    ),
    (
        Category.MATMUL,
        frozenset(
            {
                "mm",
                "bmm",
                "addmm",
                "baddbmm",
                "addbmm",
                "matmul",
                "linear",
                "mv",
                "addmv",
                "dot",
                "vdot",
                "_scaled_dot_product_flash_attention_for_cpu",
                "_scaled_dot_product_attention_math",
                "_scaled_dot_product_flash_attention",
                "_scaled_dot_product_efficient_attention",
            }
        ),
    ),
    (
        Category.NORMALIZATION,
        frozenset(
            {
                "native_layer_norm",
                "native_batch_norm",
                "_native_batch_norm_legit",
                "_native_batch_norm_legit_no_training",
                "_native_batch_norm_legit_functional",
                "native_group_norm",
                "_fused_rms_norm",
                "layer_norm",
                "batch_norm",
                "group_norm",
                "instance_norm",
                "rms_norm",
            }
        ),
    ),
    (
        Category.POOLING_REDUCTION,
        frozenset(
            {
                "max_pool1d",
                "max_pool2d",
                "max_pool3d",
                "max_pool1d_with_indices",
                "max_pool2d_with_indices",
                "max_pool3d_with_indices",
                "avg_pool1d",
                "avg_pool2d",
                "avg_pool3d",
                "_adaptive_avg_pool2d",
                "_adaptive_avg_pool3d",
                "adaptive_avg_pool1d",
                "adaptive_max_pool1d",
                "adaptive_max_pool2d",
                "adaptive_max_pool3d",
                "_mkldnn_pool",
                "mkldnn_max_pool2d",
                "lp_pool2d",
            }
        ),
    ),
    (
        Category.OTHER,
        frozenset(
            {
                "mse_loss",
                "l1_loss",
                "smooth_l1_loss",
                "huber_loss",
                "nll_loss_forward",
                "nll_loss2d_forward",
                "nll_loss",
                "binary_cross_entropy",
                "binary_cross_entropy_with_logits",
                "kl_div",
                "soft_margin_loss",
                "multi_margin_loss",
                "multilabel_margin_loss_forward",
                "cumsum",
                "cumprod",
                "cummax",
                "cummin",
                "logcumsumexp",
                "_cummax_helper",
                "_cummin_helper",
            }
        ),
    ),
)

_SHARED_OPS: tuple[tuple[Category, frozenset[str]], ...] = (
    (
        Category.POOLING_REDUCTION,
        frozenset(
            {
                "sum",
                "mean",
                "amax",
                "amin",
                "max",
                "min",
                "prod",
                "argmax",
                "argmin",
                "var",
                "std",
                "var_mean",
                "std_mean",
                "logsumexp",
                "norm",
                "linalg_vector_norm",
                "any",
                "all",
                "aminmax",
                "median",
                "nansum",
                "nanmean",
            }
        ),
    ),
    (
        Category.ACTIVATION,
        frozenset(
            {
                "relu",
                "relu6",
                "gelu",
                "sigmoid",
                "tanh",
                "_softmax",
                "_log_softmax",
                "elu",
                "selu",
                "celu",
                "leaky_relu",
                "hardtanh",
                "hardsigmoid",
                "hardswish",
                "silu",
                "mish",
                "softplus",
                "threshold",
                "glu",
                "prelu",
                "_prelu_kernel",
                "rrelu_with_noise",
                "softshrink",
                "hardshrink",
                "log_sigmoid_forward",
                "_safe_softmax",
            }
        ),
    ),
)

# Checked in this order, so "Softmax" is an activation before "max" makes it a reduction, and
# "MSELoss" is a loss before anything else.
_NAME_KEYWORDS: tuple[tuple[Category, tuple[str, ...]], ...] = (
    (Category.OTHER, ("loss", "cumsum", "cumprod", "scan", "cumulative")),
    (Category.CONV, ("conv",)),
    (Category.MATMUL, ("matmul", "gemm", "gemv", "matvec", "bmm", "linear", "einsum", "matrix")),
    (Category.NORMALIZATION, ("norm",)),
    (
        Category.ACTIVATION,
        (
            "relu",
            "gelu",
            "elu",
            "sigmoid",
            "tanh",
            "softmax",
            "softplus",
            "softsign",
            "swish",
            "silu",
            "mish",
            "hardtanh",
            "activation",
            "shrink",
            "threshold",
        ),
    ),
    (
        Category.POOLING_REDUCTION,
        ("pool", "reduc", "sum", "mean", "argmax", "argmin", "max", "min", "prod"),
    ),
)


def infer_category(name: str, ops: Iterable[str]) -> Category:
    """The category of a task called ``name`` whose forward runs the aten operators ``ops``."""
    seen = set(ops)
    for category, decisive in _DECISIVE_OPS:
        if seen & decisive:
            return category
    lowered = name.lower()
    for category, keywords in _NAME_KEYWORDS:
        if any(keyword in lowered for keyword in keywords):
            return category
    for category, shared in _SHARED_OPS:
        if seen & shared:
            return category
    return Category.OTHER
