"""The scan recipe: each cumsum/cumprod variant is matched and its generated candidate computes the
reference's result at the plain default knobs and at the fast ones (checked here, in process, as the
verifier checks it; the real sandboxed verifier runs once per knob extreme); other references are not
claimed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pragma_core import load_task
from pragma_core.offline.graph import trace_reference
from pragma_core.offline.recipe import GenerationContext
from pragma_core.offline.recipes.scans import ScanRecipe

from .conftest import EXAMPLES, KERNELBENCH
from .offline_support import agrees_with_reference, verified_in_sandbox

TASKS = Path(__file__).parent / "data" / "offline_tasks" / "scans"
LEVEL1 = KERNELBENCH / "level1"
DEFAULT = {name: knob.default for name, knob in ScanRecipe.knobs.items()}
FAST = {"parallel": True, "simd": True, "accumulators": 4, "block": 64}
ODD = {"parallel": True, "simd": False, "accumulators": 8, "block": 32}
ODD_TOO = {"middle", "kernelbench_exclusive", "kernelbench_exclusive_first_dim"}  # also checked at ODD

# task, small sizes, what the match must say
CASES: dict[str, tuple[Path, dict[str, int], dict[str, Any]]] = {
    "cumsum": (
        EXAMPLES / "level1" / "16_Cumsum.py",
        {"batch_size": 16, "dim": 1003},
        {"op": "sum", "dim": 1, "reverse": False, "exclusive": False, "mask": None},
    ),
    "cumprod": (
        TASKS / "cumprod.py",
        {"batch_size": 8, "length": 999},
        {"op": "prod", "dim": 1, "reverse": False, "exclusive": False},
    ),
    "cumprod_randn": (TASKS / "cumprod_randn.py", {"batch_size": 8, "length": 700}, {"op": "prod"}),
    "reverse": (
        TASKS / "cumsum_reverse.py",
        {"batch_size": 8, "length": 1001},
        {"op": "sum", "reverse": True, "exclusive": False},
    ),
    "exclusive": (
        TASKS / "cumsum_exclusive.py",
        {"batch_size": 9, "length": 1001},
        {"exclusive": True, "slices": [[None, -1], [None, None]]},
    ),
    "exclusive_last": (
        TASKS / "cumsum_exclusive_last.py",
        {"batch_size": 3, "channels": 5, "length": 301},
        {"dim": 2, "exclusive": True},
    ),
    "kernelbench_exclusive": (  # the scan of x.narrow(dim, 0, n - 1), a zero column concatenated in front
        LEVEL1 / "92_cumsum_exclusive.py",
        {"batch_size": 9, "input_shape": (1001,)},
        {"op": "sum", "dim": 1, "exclusive": True, "slices": [[None, None], [None, -1]]},
    ),
    "kernelbench_exclusive_first_dim": (
        LEVEL1 / "92_cumsum_exclusive.py",
        {"batch_size": 50, "input_shape": (3, 77), "dim": 0},
        {"dim": 0, "exclusive": True, "slices": [[None, -1], [None, None], [None, None]]},
    ),
    "masked": (TASKS / "cumsum_masked.py", {"batch_size": 8, "length": 1001}, {"mask": "mask"}),
    "middle": (TASKS / "cumsum_middle.py", {"batch_size": 3, "steps": 50, "features": 77}, {"dim": 1}),
    "masked_reverse_rows": (
        TASKS / "cumsum_masked_reverse_rows.py",
        {"rows": 60, "cols": 70},
        {"dim": 0, "reverse": True, "mask": "mask"},
    ),
}


def _matched(path: Path, sizes: dict):
    if not path.exists():
        pytest.skip(f"{path} is not here: KernelBench is read beside the clone, or from $PRAGMA_KERNELBENCH")
    task = load_task(path, sizes)
    graph = trace_reference(task)
    return task, graph, ScanRecipe().match(graph)


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_variant_is_matched_and_agrees_at_default_and_fast_knobs(case):
    path, sizes, expected = CASES[case]
    task, graph, match = _matched(path, sizes)
    assert match is not None and match.family == "scan"
    assert {key: match.facts[key] for key in expected} == expected
    context = GenerationContext(graph=graph, task_source=task.source, task_key=task.key)
    for knobs in (DEFAULT, FAST, *([ODD] if case in ODD_TOO else [])):
        agrees_with_reference(task, ScanRecipe().generate(match, knobs, context))


@pytest.mark.parametrize(
    "case, knobs",
    [("cumsum", DEFAULT), ("cumsum", FAST), ("kernelbench_exclusive", FAST)],
    ids=["default", "fast", "exclusive-fast"],
)
def test_the_sandboxed_verifier_says_correct(case, knobs):
    """One run of the real verifier per knob extreme, on KernelBench's cumsum, and one on its
    exclusive cumsum; every other variant and knob setting is checked in process by
    ``test_each_variant_is_matched_and_agrees_at_default_and_fast_knobs``."""
    task, graph, match = _matched(*CASES[case][:2])
    assert match is not None
    context = GenerationContext(graph=graph, task_source=task.source, task_key=task.key)
    verified_in_sandbox(task, ScanRecipe().generate(match, knobs, context))


def test_defaults_are_the_plain_version():
    assert DEFAULT == {"parallel": False, "simd": False, "accumulators": 1, "block": 0}


def test_other_references_are_not_claimed():
    assert _matched(TASKS / "not_a_scan.py", {})[2] is None
    assert _matched(EXAMPLES / "level1" / "1_GELUTanh.py", {"batch_size": 4, "dim": 64})[2] is None


WRITE_TASK = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x{mask}):
        return {expression}


def get_inputs():
    return [torch.randn(5, 7, 203){mask_input}]


def get_init_inputs():
    return []
"""


def _written(tmp_path: Path, expression: str):
    path = tmp_path / "task.py"
    masked = "mask" in expression
    path.write_text(
        WRITE_TASK.format(
            expression=expression,
            mask=", mask" if masked else "",
            mask_input=", torch.rand(5, 7, 203) > 0.5" if masked else "",
        )
    )
    task = load_task(path)
    graph = trace_reference(task)
    return task, graph, ScanRecipe().match(graph)


@pytest.mark.parametrize(
    "expression, expected",
    [
        # the identity padded after the scan, the scan's result sliced
        ("torch.cat([x.new_zeros(5, 7, 1), torch.cumsum(x, -1)[..., :-1]], dim=-1)", {"dim": 2}),
        ("F.pad(torch.cumsum(x, 1)[:, :-1], (0, 0, 1, 0))", {"dim": 1}),
        # the identity padded before the scan
        ("torch.cumsum(F.pad(x, (1, 0))[..., :-1], dim=2)", {"dim": 2}),
        ("torch.cumsum(x * mask, dim=2) - x * mask", {"mask": "mask"}),
        # a product, the pad its identity; two positions dropped
        (
            "torch.cat((torch.ones_like(x[:, :, :1]), torch.cumprod(x.narrow(2, 0, x.size(2) - 2), 2)), 2)",
            {"op": "prod", "slices": [[None, None], [None, None], [None, -2]]},
        ),
    ],
    ids=["cat-new-zeros-sliced-after", "pad-middle-dim", "pad-before", "minus-x-masked", "cumprod-narrow-by-two"],
)
def test_other_spellings_of_an_exclusive_scan_are_matched_and_agree(tmp_path, expression, expected):
    task, graph, match = _written(tmp_path, expression)
    assert match is not None, graph.describe()
    assert match.facts["exclusive"] and {key: match.facts[key] for key in expected} == expected
    context = GenerationContext(graph=graph, task_source=task.source, task_key=task.key)
    for knobs in (DEFAULT, FAST):
        agrees_with_reference(task, ScanRecipe().generate(match, knobs, context))


@pytest.mark.parametrize(
    "expression",
    [
        "F.pad(torch.cumprod(x, 2)[..., :-1], (1, 0))",  # a product padded with zero
        "F.pad(torch.cumsum(x, 2)[..., :-1], (0, 1))",  # padded at the back
        "torch.cat((torch.zeros_like(x[:1]), torch.cumsum(x[:-1], dim=2)), dim=0)",  # padded along another dim
        "torch.cat((torch.zeros_like(x[..., :1] * 2), torch.cumsum(x[..., :-1], 2)), 2)",  # the pad computes
        "torch.cat((torch.ones_like(x[..., :1]), torch.cumsum(x[..., :-1], 2)), 2)",  # not the sum's identity
        "torch.cumsum(x, 2) - x.flip(2)",
        "torch.cumprod(x, 2) - x",
        "torch.cat((torch.zeros_like(x[..., :1]), torch.cumsum(x.narrow(2, 1, x.size(2) - 1), 2)), 2)",
        "torch.cat((torch.zeros_like(x[..., :1]), torch.cumsum(x[..., :-1], 2)[..., :-1]), 2)",  # sliced twice
    ],
)
def test_near_misses_of_an_exclusive_scan_are_not_claimed(tmp_path, expression):
    assert _written(tmp_path, expression)[2] is None


def test_a_masked_product_is_zero_after_the_first_masked_value(tmp_path):
    """``cumprod(x * mask)`` multiplies by 0 where the flag is false, as the reference does (not by
    the product's identity, which would skip the value)."""
    task, graph, match = _written(tmp_path, "torch.cumprod(x * mask, dim=2)")
    assert match is not None and match.facts["op"] == "prod" and match.facts["mask"] == "mask"
    context = GenerationContext(graph=graph, task_source=task.source, task_key=task.key)
    for knobs in (DEFAULT, FAST):
        agrees_with_reference(task, ScanRecipe().generate(match, knobs, context))


NON_FINITE_TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, mask):
        return torch.cumsum(x * mask, dim=1)


def get_inputs():
    x, mask = torch.randn(6, 300), torch.rand(6, 300) > 0.5
    x[1, 40], mask[1, 40] = float("inf"), False  # inf * 0 is NaN in the reference, from there on
    x[2, 70], mask[2, 70] = float("inf"), True
    x[3, 10], mask[3, 10] = float("nan"), False
    return [x, mask]


def get_init_inputs():
    return []
"""


def test_a_masked_sum_keeps_the_references_nan_for_a_non_finite_value_under_a_false_flag(tmp_path):
    path = tmp_path / "task.py"
    path.write_text(NON_FINITE_TASK)
    task = load_task(path)
    graph = trace_reference(task)
    match = ScanRecipe().match(graph)
    assert match is not None and match.facts["mask"] == "mask"
    context = GenerationContext(graph=graph, task_source=task.source, task_key=task.key)
    for knobs in (DEFAULT, FAST):
        agrees_with_reference(task, ScanRecipe().generate(match, knobs, context))
