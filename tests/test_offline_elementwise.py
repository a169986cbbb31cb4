"""The elementwise recipe: every activation of KernelBench level 1 (and chains of them) is
recognized, and the module it writes computes the reference's result, plain and fully tuned (checked
here, in process, as the verifier checks it; the real sandboxed verifier runs once per knob extreme)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pragma_core import load_task
from pragma_core.offline.coder import recognized
from pragma_core.offline.graph import NotRecognized, trace_reference
from pragma_core.offline.recipe import GenerationContext
from pragma_core.offline.recipes.elementwise import ElementwiseRecipe

from .conftest import EXAMPLES
from .offline_support import agrees_with_reference, unknown_chain, verified_in_sandbox

TASKS = sorted((Path(__file__).parent / "data" / "offline_tasks" / "elementwise").glob("*.py"))
TUNED = {"parallel": True, "simd": True, "fast_math": True, "vector_width": 512, "unroll": 4}
PLAIN = {"parallel": False, "simd": False, "fast_math": False, "vector_width": 256, "unroll": 1}
# Checked in process at two sizes (the module is the same for any size): whole unrolled 512-bit
# vectors, as the task files' own 16 x 16384 but 16 times smaller (the check costs ~1 s at the own
# size, mostly comparing), and a ragged size that leaves a tail after the vectors.
WHOLE, RAGGED = {"batch_size": 16, "dim": 1024}, {"batch_size": 3, "dim": 1001}


def generated(task, knobs) -> str:
    recipe, match, graph = recognized(task)
    assert recipe.family == "elementwise", match.summary
    return recipe.generate(match, knobs, GenerationContext(graph=graph, task_source=task.source, task_key=task.key))


def agrees_at_whole_and_ragged_sizes(path: Path, knobs: dict) -> None:
    for sizes in (WHOLE, RAGGED):
        task = load_task(path, sizes)
        agrees_with_reference(task, generated(task, knobs))


@pytest.mark.parametrize("path", TASKS, ids=[p.stem for p in TASKS])
def test_tuned_module_is_correct(path):
    agrees_at_whole_and_ragged_sizes(path, TUNED)


@pytest.mark.parametrize("name", ["gelu_erf", "mingpt_gelu"])
def test_plain_module_is_correct(name):
    agrees_at_whole_and_ragged_sizes(TASKS[0].parent / f"{name}.py", PLAIN)


@pytest.mark.parametrize("knobs", [PLAIN, TUNED], ids=["plain", "tuned"])
def test_the_sandboxed_verifier_says_correct(knobs):
    """One run of the real verifier per knob extreme, on minGPT's GELU (a chain with tanh, where
    fast-math matters) at the task file's own size; every task and knob setting is checked in
    process by ``test_tuned_module_is_correct`` and ``test_plain_module_is_correct``."""
    task = load_task(TASKS[0].parent / "mingpt_gelu.py")
    verified_in_sandbox(task, generated(task, knobs))


def test_plain_is_the_default():
    assert PLAIN == {name: knob.default for name, knob in ElementwiseRecipe.knobs.items()}


def test_examples_gelu_and_leaky_relu_are_elementwise():
    for name in ("1_GELUTanh", "2_LeakyReLU"):
        recipe, match, _ = recognized(load_task(EXAMPLES / "level1" / f"{name}.py", {"batch_size": 4}))
        assert recipe.family == "elementwise" and match.facts["inputs"] == ["x"]


def test_knobs_change_the_code_as_named():
    task = load_task(TASKS[0].parent / "mingpt_gelu.py")
    plain, tuned = generated(task, PLAIN), generated(task, TUNED)
    assert "-fno-tree-vectorize" in plain and "omp parallel" not in plain and "std::tanh" in plain
    assert "#pragma omp parallel for simd" in tuned and "-ffast-math" in tuned and "-mprefer-vector-width=512" in tuned
    assert "--param=max-unroll-times=4" in tuned and "unroll" not in plain.split('SOURCE = r"""')[1]


def test_a_reduction_or_a_convolution_is_not_elementwise(tmp_path):
    softmax = trace_reference(load_task(EXAMPLES / "level1" / "3_Softmax.py", {"batch_size": 4}))
    assert ElementwiseRecipe().match(softmax) is None
    convolution = trace_reference(load_task(EXAMPLES / "level1" / "12_Conv2d.py"))
    assert ElementwiseRecipe().match(convolution) is None
    with pytest.raises(NotRecognized, match="no offline recipe knows this task .*a language model is needed"):
        recognized(load_task(unknown_chain(tmp_path)))
