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

from .conftest import EXAMPLES
from .offline_support import agrees_with_reference, verified_in_sandbox

TASKS = Path(__file__).parent / "data" / "offline_tasks" / "scans"
DEFAULT = {name: knob.default for name, knob in ScanRecipe.knobs.items()}
FAST = {"parallel": True, "simd": True, "accumulators": 4, "block": 64}
ODD = {"parallel": True, "simd": False, "accumulators": 8, "block": 32}
ODD_TOO = {"middle"}  # also checked at ODD

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
    "masked": (TASKS / "cumsum_masked.py", {"batch_size": 8, "length": 1001}, {"mask": "mask"}),
    "middle": (TASKS / "cumsum_middle.py", {"batch_size": 3, "steps": 50, "features": 77}, {"dim": 1}),
    "masked_reverse_rows": (
        TASKS / "cumsum_masked_reverse_rows.py",
        {"rows": 60, "cols": 70},
        {"dim": 0, "reverse": True, "mask": "mask"},
    ),
}


def _matched(path: Path, sizes: dict):
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


@pytest.mark.parametrize("knobs", [DEFAULT, FAST], ids=["default", "fast"])
def test_the_sandboxed_verifier_says_correct(knobs):
    """One run of the real verifier per knob extreme, on KernelBench's cumsum; every other variant
    and knob setting is checked in process by
    ``test_each_variant_is_matched_and_agrees_at_default_and_fast_knobs``."""
    task, graph, match = _matched(*CASES["cumsum"][:2])
    assert match is not None
    context = GenerationContext(graph=graph, task_source=task.source, task_key=task.key)
    verified_in_sandbox(task, ScanRecipe().generate(match, knobs, context))


def test_defaults_are_the_plain_version():
    assert DEFAULT == {"parallel": False, "simd": False, "accumulators": 1, "block": 0}


def test_other_references_are_not_claimed():
    assert _matched(TASKS / "not_a_scan.py", {})[2] is None
    assert _matched(EXAMPLES / "level1" / "1_GELUTanh.py", {"batch_size": 4, "dim": 64})[2] is None
