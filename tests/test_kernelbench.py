"""KernelBench as users have it: the real task files (read beside the clone, never copied) load, and
the recipe Coder's first candidate is correct for every level-1 file a recipe recognizes.

Each file is shrunk to a small size by the profiling size rule with no FLOPs-per-byte floor (the
checks here are of correctness; a 4096-cubed matrix product is not needed to see one), and its
first candidate is checked in this process as the sandboxed verifier's correctness phase checks it;
one file with a plain-number forward argument also goes through the real sandboxed verifier.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pragma_core import Candidate, VerdictStatus, load_task
from pragma_core.offline.coder import first_knobs, recognized
from pragma_core.offline.graph import NotRecognized
from pragma_core.offline.recipe import GenerationContext
from pragma_core.records import Task
from pragma_core.sizes.shrinking import shrink_task
from pragma_core.verifier import verify

from .conftest import KERNELBENCH
from .offline_support import SANDBOXED, agrees_with_reference
from .test_cli import run

SMALL_BYTES = 64 * 1024
"""What a task is shrunk to: its inputs and outputs at least this (a few thousand elements)."""

LEVEL1 = sorted(path.name for path in (KERNELBENCH / "level1").glob("*.py")) if KERNELBENCH.is_dir() else []

RECOGNIZED_AT_LEAST = {
    *(f"{n}_" for n in (1, 2, 3, 4, 6, 7, 8, 9, 10, 13, 16, 17, 18)),  # matrix products
    *(f"{n}_" for n in (5, *range(19, 23), *range(25, 33), 88)),  # elementwise, the scalar product
    "23_",  # softmax
    "24_",  # log-softmax
    *(f"{n}_" for n in (34, *range(36, 41))),  # norms
    *(f"{n}_" for n in (47, 48, 49, 51, 52, 53)),  # reductions and arg-reductions
    *(f"{n}_" for n in range(89, 94)),  # scans, the exclusive one included
    *(f"{n}_" for n in (94, 95, 96, 98, 99, 100)),  # losses
    *(f"{n}_" for n in (33, 35, *range(41, 47))),  # batch and group norm, pooling
    *(f"{n}_" for n in (57, 58, 61, 64, 65, 68, 69, 70, 71, 72, 73, 74, 75, 77, 78, 79, 81)),  # transposed convolutions
    *(f"{n}_" for n in (50, 54, 55, 56, 59, 60, 62, 63, 66, 67, 76, 80, *range(82, 88))),  # convolutions
    *(f"{n}_" for n in (11, 12, 14, 15, 97)),  # einsum, diagonal and triangular products, attention
}
"""Problem-number prefixes the recipes claim: a file among them that stops being recognized fails."""


def small(path: Path) -> Task:
    return shrink_task(load_task(path), SMALL_BYTES, intensity_kept=0.0).task


@pytest.mark.parametrize("name", LEVEL1)
def test_the_recipe_coders_first_candidate_is_correct_for_each_recognized_level1_file(kernelbench, name):
    task = small(kernelbench / "level1" / name)
    problem = name.split("_")[0] + "_"
    try:
        recipe, match, graph = recognized(task)
    except NotRecognized:
        assert problem not in RECOGNIZED_AT_LEAST, f"{name} is no longer recognized"
        pytest.skip(f"no recipe knows {name}")
    source = recipe.generate(
        match,
        first_knobs(recipe.knobs, match, "cpu-cpp"),
        GenerationContext(graph=graph, task_source=task.source, task_key=task.key),
    )
    assert "super(Model" not in source  # ModelNew is its own class: it names no reference class
    agrees_with_reference(task, source)


def test_a_plain_number_forward_argument_goes_through_the_sandboxed_verifier(kernelbench):
    task = load_task(kernelbench / "level1" / "5_Matrix_scalar_multiplication.py", {"M": 64, "N": 48})
    assert task.analysis is not None
    assert [(spec.dtype, spec.value) for spec in task.analysis.inputs] == [("float32", None), ("float", "3.14")]
    recipe, match, graph = recognized(task)
    source = recipe.generate(
        match,
        first_knobs(recipe.knobs, match, "cpu-cpp"),
        GenerationContext(graph=graph, task_source=task.source, task_key=task.key),
    )
    verdict = verify(task, Candidate(source=source, backend="cpu-cpp"), SANDBOXED)
    assert verdict.status is VerdictStatus.CORRECT, verdict.message


def test_every_level1_file_loads_and_a_missing_package_is_named(kernelbench, tmp_path, capsys):
    code, out, err = run(capsys, "tasks", str(kernelbench / "level1"), "--json")
    assert code == 0, err
    listing = json.loads(out)
    assert len(listing["tasks"]) == len(LEVEL1) and not listing["errors"]

    # A tree with one file that needs a package not installed: that file is one line, the rest load.
    tree = tmp_path / "level3"
    tree.mkdir()
    (tree / "1_ReLU.py").write_text((kernelbench / "level1" / "19_ReLU.py").read_text())
    needs = (
        (kernelbench / "level1" / "19_ReLU.py")
        .read_text()
        .replace("import torch\n", "import torch\nimport cv2_missing_here\n", 1)
    )
    (tree / "2_Needs.py").write_text(needs)
    code, out, err = run(capsys, "tasks", str(tree), "--set", "batch_size=4", "--set", "dim=8")
    assert code == 2 and "level3/1_ReLU" in out
    assert err.strip().splitlines() == [
        f"pragma: error: {tree / '2_Needs.py'}: running the module raised ModuleNotFoundError: No module named "
        "'cv2_missing_here' (line 2); the task needs the cv2-missing-here package: pip install cv2-missing-here"
    ]


def test_a_candidate_more_exact_than_a_long_float32_reference_is_not_taken_for_lower_precision(kernelbench):
    # torch's float32 Frobenius norm of 8.4M values is 2e-4 from the exact one: a kernel that sums in
    # double differs from the reference by that much, which alone would read as an fp16 computation.
    task = load_task(
        kernelbench / "level1" / "37_FrobeniusNorm_.py", {"batch_size": 32, "features": 16, "dim1": 128, "dim2": 128}
    )
    recipe, match, graph = recognized(task)
    source = recipe.generate(
        match,
        first_knobs(recipe.knobs, match, "cpu-cpp"),
        GenerationContext(graph=graph, task_source=task.source, task_key=task.key),
    )
    agrees_with_reference(task, source)
