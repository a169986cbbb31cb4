"""The norm recipe: which references it claims, and that its candidates compute the reference's
result (checked here, in process, as the verifier checks it; the real sandboxed verifier runs once
per knob extreme)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pragma_core import load_task
from pragma_core.offline.graph import trace_reference
from pragma_core.offline.modules import read_marker
from pragma_core.offline.recipes.norms import NormRecipe

from .conftest import EXAMPLES, REPO
from .offline_support import agrees_with_reference, generated, verified_in_sandbox

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


def _task_file(tmp_path: Path, name: str, init: str, forward: str, shape: str = "(4, 6, 10, 12)") -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(
        textwrap.dedent(f"""\
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                {init}

            def forward(self, x):
                return {forward}


        def get_inputs():
            return [torch.randn{shape}]


        def get_init_inputs():
            return []
        """)
    )
    return path


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
    task, match, source = generated(NormRecipe(), _task_file(tmp_path, name, init, forward, shape), {}, BEST)
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
    graph = trace_reference(load_task(_task_file(tmp_path, name, init, forward, shape)))
    assert NormRecipe().match(graph) is None


def test_other_examples_are_not_claimed():
    for name in ("1_GELUTanh", "3_Softmax", "7_SumReduction", "14_MSELoss"):
        assert NormRecipe().match(trace_reference(load_task(EXAMPLES / "level1" / f"{name}.py"))) is None, name


def test_knob_defaults_are_the_plain_version():
    assert DEFAULT == {"parallel": False, "simd": False, "accumulators": 1, "fast_math": False, "chunk": 0}
