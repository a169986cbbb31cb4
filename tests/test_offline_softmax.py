"""The softmax recipe: softmax and log-softmax over the last or a middle dimension compute torch's
result at the plain default knobs and at the fast ones (checked here, in process, as the verifier
checks it), the example task verifies correct in the real sandbox at both knob extremes, and other
references are left alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from pragma_core import load_task
from pragma_core.offline.graph import trace_reference
from pragma_core.offline.recipes.softmax import SoftmaxRecipe

from .conftest import EXAMPLES
from .offline_support import agrees_with_reference, generated, verified_in_sandbox

TASKS = Path(__file__).parent / "data" / "offline_tasks" / "softmax"
DEFAULT = {name: knob.default for name, knob in SoftmaxRecipe.knobs.items()}
FAST = {"parallel": True, "simd": True, "accumulators": 4, "fast_math": True}

# task, small sizes, the op and normalized dim the match must report
CASES = [
    (EXAMPLES / "level1" / "3_Softmax.py", {"batch_size": 7, "dim": 1031}, "softmax", 1),
    (TASKS / "log_softmax.py", {"batch_size": 5, "dim": 2050}, "log_softmax", 1),
    (TASKS / "softmax_middle.py", {"batch_size": 3, "channels": 17, "length": 600}, "softmax", 1),
    (TASKS / "log_softmax_module.py", {"batch_size": 2, "heads": 3, "length": 129}, "log_softmax", 2),
]


def _generate(path: Path, sizes: dict, knobs: dict) -> tuple:
    return generated(SoftmaxRecipe(), path, sizes, knobs)


@pytest.mark.parametrize(
    "knobs",
    [DEFAULT, FAST, {**FAST, "fast_math": False, "accumulators": 2}],
    ids=["default", "fast", "simd-without-fast-math"],
)
@pytest.mark.parametrize(("path", "sizes", "op", "dim"), CASES, ids=lambda v: v.stem if isinstance(v, Path) else None)
def test_softmax_candidate_matches_the_reference(path, sizes, op, dim, knobs):
    task, match, source = _generate(path, sizes, knobs)
    assert (match.family, match.facts["op"], match.facts["dim"]) == ("softmax", op, dim)
    agrees_with_reference(task, source)


@pytest.mark.parametrize("knobs", [DEFAULT, FAST], ids=["default", "fast"])
def test_the_sandboxed_verifier_says_correct(knobs):
    """One run of the real verifier per knob extreme, on KernelBench's softmax over the last
    dimension; every other variant and knob setting (the middle-dimension softmax, verified in the
    sandbox before, among them) is checked in process by ``test_softmax_candidate_matches_the_reference``."""
    path, sizes, _, _ = CASES[0]
    task, _, source = _generate(path, sizes, knobs)
    verified_in_sandbox(task, source)


@pytest.mark.parametrize(
    "path",
    [TASKS / "softmax_float64.py", EXAMPLES / "level1" / "7_SumReduction.py", EXAMPLES / "level1" / "1_GELUTanh.py"],
    ids=lambda p: p.stem,
)
def test_other_references_are_not_claimed(path):
    assert SoftmaxRecipe().match(trace_reference(load_task(path))) is None
