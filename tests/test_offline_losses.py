"""The loss recipe: each loss it knows is matched, and its generated candidate computes the
reference's result at the plain default knobs and at the fast ones (checked here, in process, as the
verifier checks it; the real sandboxed verifier runs once per knob extreme); references it does not
know are left alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from pragma_core import load_task
from pragma_core.offline.graph import trace_reference
from pragma_core.offline.modules import read_marker
from pragma_core.offline.recipe import GenerationContext
from pragma_core.offline.recipes.losses import LossRecipe

from .conftest import EXAMPLES, KERNELBENCH
from .offline_support import agrees_with_reference, verified_in_sandbox

TASKS = Path(__file__).parent / "data" / "offline_tasks" / "loss"
LEVEL1 = KERNELBENCH / "level1"
FAST = {"parallel": True, "simd": True, "accumulators": 4, "fast_math": True, "chunk": 0}
# odd sizes: tails after the unrolled accumulators and after the last full segment
ROWS, COLS = {"batch_size": 37}, {"dim": 4099, "num_classes": 1001, "length": 333, "channels": 3}

# task file, what the match summary names; the first ones are also checked at the default knobs
VARIANTS = {
    "mse_manual": (EXAMPLES / "level1" / "14_MSELoss.py", "mean of (sub, pow)"),
    "mse_sum_module": (TASKS / "mse_sum_module.py", "mse_loss (sum)"),
    "smooth_l1": (TASKS / "smooth_l1.py", "smooth_l1_loss (mean)"),
    "huber_delta": (TASKS / "huber_delta.py", "huber_loss (mean)"),
    "hinge_outer": (TASKS / "hinge_outer.py", "mean of (mul, sub, clamp)"),
    "kl_div_batchmean": (TASKS / "kl_div.py", "kl_div (batchmean)"),
    "cross_entropy": (EXAMPLES / "level1" / "15_CrossEntropyLoss.py", "cross entropy over class rows (mean)"),
    "smooth_l1_sum_beta": (TASKS / "smooth_l1_sum_module.py", "smooth_l1_loss (sum)"),
    "hinge": (TASKS / "hinge.py", "mean of (mul, sub, clamp)"),
    "hinge_row_labels": (TASKS / "hinge_row_labels.py", "mean of (mul, sub, clamp)"),
    "kl_div_sum_module": (TASKS / "kl_div_sum_module.py", "kl_div (sum)"),
    "cross_entropy_sum": (TASKS / "cross_entropy_sum.py", "cross entropy over class rows (sum)"),
    "cross_entropy_ignore": (TASKS / "cross_entropy_ignore.py", "cross entropy over class rows (mean)"),
    "triplet_margin": (LEVEL1 / "99_TripletMarginLoss.py", "triplet margin loss over rows of 4099 (p=2, mean)"),
}


def small(path: Path):
    if not path.exists():
        pytest.skip(f"{path} is not here: KernelBench is read beside the clone, or from $PRAGMA_KERNELBENCH")
    source = path.read_text()
    sizes = {k: v for k, v in {**ROWS, **COLS}.items() if f"\n{k} = " in source}
    if path.name == "hinge_outer.py":
        sizes = {"batch_size": 301}
    if path.name == "99_TripletMarginLoss.py":  # rows one element longer than a segment
        sizes = {**ROWS, "input_shape": (COLS["dim"],)}
    return load_task(path, sizes)


def candidate(task, knobs):
    graph = trace_reference(task)
    recipe = LossRecipe()
    match = recipe.match(graph)
    assert match is not None
    context = GenerationContext(graph=graph, task_source=task.source, task_key=task.key)
    return match, recipe.generate(match, knobs, context)


PLAIN_TOO = [*list(VARIANTS)[:8], "triplet_margin"]
CASES = [pytest.param(v, {}, id=f"default-{v}") for v in PLAIN_TOO] + [
    pytest.param(v, FAST, id=f"fast-{v}") for v in VARIANTS
]


@pytest.mark.parametrize("variant, knobs", CASES)
def test_candidate_matches_the_reference(variant, knobs):
    path, summary = VARIANTS[variant]
    task = small(path)
    match, source = candidate(task, knobs)
    assert match.family == "loss" and summary in match.summary
    marker = read_marker(source)
    expected = {name: knob.default for name, knob in LossRecipe.knobs.items()} | knobs
    assert marker == {"family": "loss", "knobs": expected}
    agrees_with_reference(task, source)


@pytest.mark.parametrize("variant", ["hinge_outer", "cross_entropy_ignore", "triplet_margin"])
def test_other_knob_combinations_are_correct(variant):
    task = small(VARIANTS[variant][0])
    knobs = {"parallel": True, "simd": False, "accumulators": 8, "fast_math": False, "chunk": 4}
    _, source = candidate(task, knobs)
    agrees_with_reference(task, source)


@pytest.mark.parametrize(
    "variant, knobs",
    [("cross_entropy", {}), ("cross_entropy", FAST), ("triplet_margin", FAST)],
    ids=["default", "fast", "triplet-fast"],
)
def test_the_sandboxed_verifier_says_correct(variant, knobs):
    """One run of the real verifier per knob extreme, on KernelBench's cross entropy (integer
    targets, a log-sum-exp per class row, where fast-math matters), and one on its triplet margin
    loss (an nn module, three inputs); every other variant and knob setting is checked in process by
    ``test_candidate_matches_the_reference`` and ``test_other_knob_combinations_are_correct``."""
    task = small(VARIANTS[variant][0])
    verified_in_sandbox(task, candidate(task, knobs)[1])


def test_default_knobs_are_the_plain_version():
    defaults = {name: knob.default for name, knob in LossRecipe.knobs.items()}
    assert defaults == {"parallel": False, "simd": False, "accumulators": 1, "fast_math": False, "chunk": 0}
    _, source = candidate(small(TASKS / "mse_functional.py"), {})
    assert "-fno-tree-vectorize" in source and "omp" not in source.split('SOURCE = r"""')[1].split('"""')[0]


def test_kl_div_reads_one_log_per_element():
    match, source = candidate(small(TASKS / "kl_div.py"), {})
    assert match.facts["kl_log_of"] == "predictions" and source.count("std::log(") == 1


def test_broadcast_layouts():
    outer, _ = candidate(small(TASKS / "hinge_outer.py"), {})
    assert outer.facts["kinds"] == {"predictions": "row", "targets": "col"} and outer.facts["split"] == 1
    rows, _ = candidate(small(TASKS / "hinge_row_labels.py"), {})
    assert rows.facts["kinds"] == {"predictions": "full", "targets": "row"}


WRITE_TASK = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return {expression}


n = 64


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize(
    "expression, inputs",
    [
        ("torch.mean((a - b) ** 2, dim=1)", "torch.randn(n, 8), torch.randn(n, 8)"),  # per-row: not a scalar
        ("F.mse_loss(a, b, reduction='none')", "torch.randn(n, 8), torch.randn(n, 8)"),  # no reduction
        ("F.cross_entropy(a, b, label_smoothing=0.1)", "torch.randn(n, 8), torch.randint(0, 8, (n,))"),
        ("F.cross_entropy(a, b)", "torch.randn(n, 8), torch.randn(n, 8).softmax(-1)"),  # soft targets
        ("torch.mean(a) + torch.mean(b)", "torch.randn(n, 8), torch.randn(n, 8)"),
        ("torch.mean(torch.softmax(a, dim=1) * b)", "torch.randn(n, 8), torch.randn(n, 8)"),  # not elementwise
        ("F.mse_loss(a.double(), b.double()).float()", "torch.randn(n, 8), torch.randn(n, 8)"),
        ("torch.mean(a * b)", "torch.randn(n, 1, 8), torch.randn(1, n, 1)"),  # no (rows, cols) split
    ],
)
def test_other_references_are_not_claimed(tmp_path, expression, inputs):
    path = tmp_path / "task.py"
    path.write_text(WRITE_TASK.format(expression=expression, inputs=inputs))
    assert LossRecipe().match(trace_reference(load_task(path))) is None


def test_a_per_row_mean_task_is_not_claimed():
    assert LossRecipe().match(trace_reference(load_task(TASKS / "not_a_loss.py"))) is None


TRIPLET_TASK = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = nn.TripletMarginLoss(margin=0.5, p=1, eps=1e-3, swap=True, reduction="sum")

    def forward(self, anchor, positive, negative):
        return {expression}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
"""
SAME = "torch.randn(3, 11, 129), torch.randn(3, 11, 129), torch.randn(3, 11, 129)"


@pytest.mark.parametrize(
    "expression, summary",
    [
        ("self.loss(anchor, positive, negative)", "triplet margin loss over rows of 129 (p=1, swap, sum)"),
        ("F.triplet_margin_loss(anchor, positive, negative, 2.0)", "triplet margin loss over rows of 129 (p=2, mean)"),
    ],
    ids=["module-p1-swap-sum", "functional-margin-2"],
)
def test_triplet_margin_loss_with_other_settings_and_rank_3(tmp_path, expression, summary):
    path = tmp_path / "task.py"
    path.write_text(TRIPLET_TASK.format(expression=expression, inputs=SAME))
    task = load_task(path)
    for knobs in ({}, FAST):
        match, source = candidate(task, knobs)
        assert match.summary == summary
        agrees_with_reference(task, source)


@pytest.mark.parametrize(
    "expression, inputs",
    [
        ("F.triplet_margin_loss(anchor, positive, negative, reduction='none')", SAME),  # per row
        ("F.triplet_margin_loss(anchor, positive, negative, p=3)", SAME),
        ("F.triplet_margin_loss(anchor * 2, positive, negative)", SAME),  # an input computed first
        (
            "F.triplet_margin_loss(anchor, positive, negative)",
            "torch.randn(3, 129), torch.randn(1, 129), torch.randn(3, 129)",
        ),
    ],
    ids=["no-reduction", "p-3", "computed-anchor", "broadcast"],
)
def test_triplet_margin_near_misses_are_not_claimed(tmp_path, expression, inputs):
    path = tmp_path / "task.py"
    path.write_text(TRIPLET_TASK.format(expression=expression, inputs=inputs))
    assert LossRecipe().match(trace_reference(load_task(path))) is None
