"""The norm recipes (per-row norms, and batch and group norm): which references they claim, and that
their candidates compute the reference's result (checked here, in process, as the verifier checks it;
the real sandboxed verifier runs once per knob extreme, and once for batch norm)."""

from __future__ import annotations

import pytest
import torch

from pragma_core import load_task
from pragma_core.offline.graph import trace_reference
from pragma_core.offline.modules import read_marker
from pragma_core.offline.recipes import recognize
from pragma_core.offline.recipes.channel_norms import ChannelNormRecipe
from pragma_core.offline.recipes.norms import NormRecipe
from pragma_core.tasks.loading import task_namespace
from pragma_core.verifier.inputs import construct, make_inputs

from .conftest import EXAMPLES, REPO
from .offline_support import agrees_with_reference, generated, task_file, verified_in_sandbox

TASKS = REPO / "tests" / "data" / "offline_tasks" / "norms"
DEFAULT = {name: knob.default for name, knob in NormRecipe.knobs.items()}
BEST = {**DEFAULT, "parallel": True, "simd": True, "accumulators": 4}
SMALL_4D = {"batch_size": 2, "features": 8, "dim1": 16, "dim2": 24}

# (task file, size overrides, expected kind): every variant the recipe generates.
VARIANTS = {
    "layer_norm": (EXAMPLES / "level1" / "4_LayerNorm.py", {"batch_size": 8, "dim": 300}, "layer_norm"),
    "rms_llama": (EXAMPLES / "level1" / "5_RMSNorm.py", {"batch_size": 8, "dim": 300}, "RMS"),
    "l2": (EXAMPLES / "level1" / "6_L2Norm.py", {"batch_size": 8, "dim": 300}, "L2"),
    "l1": (TASKS / "l1_norm.py", {"batch_size": 8, "dim": 300}, "L1"),
    "frobenius": (TASKS / "frobenius_norm.py", SMALL_4D, "Frobenius"),
    "rms_features": (TASKS / "rms_norm_features.py", SMALL_4D, "RMS"),
    "layer_norm_3d": (TASKS / "layer_norm_3d.py", SMALL_4D, "layer_norm"),
    "instance_norm": (TASKS / "instance_norm_2d.py", SMALL_4D, "instance_norm"),
}


# Variants written inline: (init statement, forward expression, input shape, expected kind).
INLINE = {
    "normalize": ("pass", "F.normalize(x, p=2.0, dim=1)", "(6, 50)", "l2"),
    "norm_p2_middle": ("pass", "x / torch.norm(x, p=2, dim=1, keepdim=True)", "(4, 6, 10, 12)", "L2"),
    "rms_rsqrt_square": (
        "pass",
        "x * torch.rsqrt((x * x).mean(dim=(2, 3), keepdim=True) + 1e-6)",
        "(4, 6, 10, 12)",
        "RMS",
    ),
    "instance_norm_affine": (
        "self.n = nn.InstanceNorm2d(6, affine=True)\n                "
        "nn.init.uniform_(self.n.weight); nn.init.uniform_(self.n.bias)",
        "self.n(x)",
        "(4, 6, 10, 12)",
        "instance_norm",
    ),
    "layer_norm_plain": (
        "self.n = nn.LayerNorm(12, elementwise_affine=False)",
        "self.n(x)",
        "(4, 6, 10, 12)",
        "layer_norm",
    ),
}

# References the recipe must leave alone.
NOT_NORMS = {
    "softmax": ("pass", "torch.softmax(x, dim=1)", "(6, 50)"),
    "sum_only": ("pass", "torch.sum(x * x, dim=1, keepdim=True)", "(6, 50)"),
    "divide_by_max": ("pass", "x / torch.amax(x, dim=1, keepdim=True)", "(6, 50)"),
    "spectral_norm": ("pass", "x / torch.linalg.norm(x, 2)", "(6, 50)"),
    "no_keepdim_rows": ("pass", "x / torch.norm(x, p=2, dim=1)", "(50, 50)"),
    "gapped_dims": ("pass", "x / x.abs().sum(dim=(1, 3), keepdim=True)", "(4, 6, 10, 12)"),
    "reciprocal_order": ("pass", "torch.norm(x, p=2, dim=1, keepdim=True) / x", "(6, 50)"),
    "mean_of_cubes": ("pass", "x / torch.sqrt((x ** 3).mean(dim=1, keepdim=True))", "(6, 50)"),
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_variant_is_correct_at_best_knobs(name):
    path, sizes, kind = VARIANTS[name]
    task, match, source = generated(NormRecipe(), path, sizes, BEST)
    assert match.facts["kind"] == kind and read_marker(source) == {"family": "norm", "knobs": BEST}
    agrees_with_reference(task, source)


@pytest.mark.parametrize("name", ["layer_norm", "rms_features", "instance_norm"])
def test_the_plain_version_is_correct(name):
    task, _, source = generated(NormRecipe(), *VARIANTS[name][:2], DEFAULT)
    agrees_with_reference(task, source)


@pytest.mark.parametrize("name", sorted(INLINE))
def test_inline_variants_are_claimed_and_correct(tmp_path, name):
    init, forward, shape, kind = INLINE[name]
    task, match, source = generated(NormRecipe(), task_file(tmp_path, name, init, forward, shape), {}, BEST)
    assert match.facts["kind"] == kind
    agrees_with_reference(task, source)


@pytest.mark.parametrize("knobs", [DEFAULT, BEST], ids=["default", "best"])
def test_the_sandboxed_verifier_says_correct(knobs):
    """One run of the real verifier per knob extreme, on KernelBench's LayerNorm (mean and variance
    of each row, weight and bias parameters); every other variant and knob setting is checked in
    process by ``test_every_variant_is_correct_at_best_knobs``, ``test_the_plain_version_is_correct``
    and ``test_inline_variants_are_claimed_and_correct``."""
    task, _, source = generated(NormRecipe(), *VARIANTS["layer_norm"][:2], knobs)
    verified_in_sandbox(task, source)


def test_middle_dim_reduction_walks_inner_dims_in_tiles():
    _, match, source = generated(NormRecipe(), *VARIANTS["rms_features"][:2], BEST)
    assert match.facts["layout"] == "columns" and "norm_columns" in source


@pytest.mark.parametrize("name", sorted(NOT_NORMS))
def test_other_references_are_not_claimed(tmp_path, name):
    init, forward, shape = NOT_NORMS[name]
    graph = trace_reference(load_task(task_file(tmp_path, name, init, forward, shape)))
    assert NormRecipe().match(graph) is None


def test_other_examples_are_not_claimed():
    for name in ("1_GELUTanh", "3_Softmax", "7_SumReduction", "14_MSELoss"):
        assert NormRecipe().match(trace_reference(load_task(EXAMPLES / "level1" / f"{name}.py"))) is None, name


def test_knob_defaults_are_the_plain_version():
    assert DEFAULT == {"parallel": False, "simd": False, "accumulators": 1, "fast_math": False, "chunk": 0}


# -- batch norm and group norm (the channel_norm recipe) ---------------------------------------------

CHANNEL_DEFAULT = {name: knob.default for name, knob in ChannelNormRecipe.knobs.items()}
CHANNEL_START = {name: knob.starting for name, knob in ChannelNormRecipe.knobs.items()}
CHANNEL_FILES = {
    "33_BatchNorm.py": ({"batch_size": 3, "features": 5, "dim1": 17, "dim2": 19}, "batch_norm"),
    "35_GroupNorm_.py": ({"batch_size": 3, "features": 8, "num_groups": 4, "dim1": 17, "dim2": 19}, "group_norm"),
}

# Variants the files do not cover: (init statement, forward expression, input shape, kind).
CHANNEL_VARIANTS = {
    "batch_norm_1d_features": ("self.n = nn.BatchNorm1d(7)", "self.n(x)", "(9, 7)", "batch_norm"),
    "batch_norm_1d_sequence_plain": (
        "self.n = nn.BatchNorm1d(6, affine=False, track_running_stats=False)",
        "self.n(x)",
        "(4, 6, 33)",
        "batch_norm",
    ),
    "batch_norm_3d_cumulative": (
        "self.n = nn.BatchNorm3d(3, momentum=None)",
        "self.n(x)",
        "(2, 3, 5, 6, 7)",
        "batch_norm",
    ),
    "group_norm_one_group_one_sample": ("self.n = nn.GroupNorm(1, 6)", "self.n(x)", "(1, 6, 40, 41)", "group_norm"),
    "group_norm_per_channel_1d": ("self.n = nn.GroupNorm(6, 6, affine=False)", "self.n(x)", "(5, 6, 37)", "group_norm"),
    "group_norm_functional": (
        "self.w = nn.Parameter(torch.rand(8)); self.b = nn.Parameter(torch.randn(8))",
        "F.group_norm(x, 2, self.w, self.b, 1e-3)",
        "(3, 8, 9, 11)",
        "group_norm",
    ),
}

NOT_CHANNEL_NORMS = {
    "functional_batch_norm": ("pass", "F.batch_norm(x, None, None, training=True)", "(4, 6, 10, 12)"),
    "group_norm_then_relu": ("self.n = nn.GroupNorm(2, 6)", "torch.relu(self.n(x))", "(4, 6, 10, 12)"),
    "layer_norm": ("self.n = nn.LayerNorm(12)", "self.n(x)", "(4, 6, 10, 12)"),
}


@pytest.mark.parametrize("name", sorted(CHANNEL_FILES))
@pytest.mark.parametrize("knobs", [CHANNEL_START, CHANNEL_DEFAULT], ids=["start", "plain"])
def test_kernelbench_batch_and_group_norm_are_correct(kernelbench, name, knobs):
    sizes, kind = CHANNEL_FILES[name]
    task, match, source = generated(ChannelNormRecipe(), kernelbench / "level1" / name, sizes, knobs)
    assert match.facts["kind"] == kind and read_marker(source) == {"family": "channel_norm", "knobs": knobs}
    agrees_with_reference(task, source)


@pytest.mark.parametrize("name", sorted(CHANNEL_VARIANTS))
def test_batch_and_group_norm_variants_are_claimed_and_correct(tmp_path, name):
    init, forward, shape, kind = CHANNEL_VARIANTS[name]
    path = task_file(tmp_path, name, init, forward, shape)
    task, match, source = generated(ChannelNormRecipe(), path, {}, CHANNEL_START)
    assert match.facts["kind"] == kind
    agrees_with_reference(task, source)


@pytest.mark.parametrize("momentum", ["0.3", "None"])
def test_batch_norm_keeps_running_statistics_like_torch_and_uses_them_in_eval_mode(tmp_path, momentum):
    """Training-mode forwards update running_mean, running_var (unbiased) and num_batches_tracked as
    torch does; after model.eval() the running statistics normalize."""
    init = f"self.n = nn.BatchNorm2d(4, momentum={momentum})"
    path = task_file(tmp_path, "running", init, "self.n(x)", "(3, 4, 6, 7)")
    task, _, source = generated(ChannelNormRecipe(), path, {}, CHANNEL_START)
    namespace: dict = {"__name__": "candidate"}
    exec(compile(source, "candidate.py", "exec"), namespace)
    task_ns = task_namespace(task)
    reference, candidate = construct(task_ns, task_ns["Model"]), construct(task_ns, namespace["ModelNew"])
    with torch.no_grad():
        for seed in (1, 2):
            x = make_inputs(task_ns, seed)[0] * 3 + 1
            torch.testing.assert_close(candidate(x), reference(x), atol=1e-4, rtol=1e-4)
        for buffer in ("running_mean", "running_var", "num_batches_tracked"):
            torch.testing.assert_close(getattr(candidate.n, buffer), getattr(reference.n, buffer))
        reference.eval()
        candidate.eval()
        x = make_inputs(task_ns, 3)[0]
        torch.testing.assert_close(candidate(x), reference(x), atol=1e-5, rtol=1e-5)


def test_the_sandboxed_verifier_says_batch_norm_is_correct(kernelbench):
    """The real verifier once, on KernelBench's batch norm as it runs it (training mode, batch statistics)."""
    sizes, _ = CHANNEL_FILES["33_BatchNorm.py"]
    task, _, source = generated(ChannelNormRecipe(), kernelbench / "level1" / "33_BatchNorm.py", sizes, CHANNEL_START)
    verified_in_sandbox(task, source)


@pytest.mark.parametrize("name", sorted(NOT_CHANNEL_NORMS))
def test_other_references_are_not_claimed_as_batch_or_group_norm(tmp_path, name):
    init, forward, shape = NOT_CHANNEL_NORMS[name]
    graph = trace_reference(load_task(task_file(tmp_path, name, init, forward, shape)))
    assert ChannelNormRecipe().match(graph) is None


def test_the_coder_finds_batch_and_group_norm(kernelbench):
    for name, (sizes, _) in CHANNEL_FILES.items():
        recipe, _ = recognize(trace_reference(load_task(kernelbench / "level1" / name, sizes)))
        assert recipe.family == "channel_norm", name
