"""The elementwise recipe: every activation of KernelBench level 1 (and chains of them) is
recognized, and the module it writes is correct under the real verifier, plain and fully tuned."""

from __future__ import annotations

from pathlib import Path

import pytest

from pragma_core import Candidate, VerdictStatus, load_task
from pragma_core.offline.coder import recognized
from pragma_core.offline.graph import NotRecognized, trace_reference
from pragma_core.offline.recipe import GenerationContext
from pragma_core.offline.recipes.elementwise import ElementwiseRecipe
from pragma_core.verifier import VerifySettings, verify

from .conftest import EXAMPLES

TASKS = sorted((Path(__file__).parent / "data" / "offline_tasks" / "elementwise").glob("*.py"))
TUNED = {"parallel": True, "simd": True, "fast_math": True, "vector_width": 512, "unroll": 4}
PLAIN = {"parallel": False, "simd": False, "fast_math": False, "vector_width": 256, "unroll": 1}
QUICK = VerifySettings(reps=5, warmup=1)


def generated(task, knobs) -> Candidate:
    recipe, match, graph = recognized(task)
    assert recipe.family == "elementwise", match.summary
    source = recipe.generate(match, knobs, GenerationContext(graph=graph, task_source=task.source, task_key=task.key))
    return Candidate(source=source, backend="cpu-cpp", attempt=1)


@pytest.mark.parametrize("path", TASKS, ids=[p.stem for p in TASKS])
def test_tuned_module_is_correct(path):
    task = load_task(path)
    verdict = verify(task, generated(task, TUNED), QUICK)
    assert verdict.status is VerdictStatus.CORRECT, verdict.message


@pytest.mark.parametrize("name", ["gelu_erf", "mingpt_gelu"])
def test_plain_module_is_correct(name):
    task = load_task(TASKS[0].parent / f"{name}.py")
    verdict = verify(task, generated(task, PLAIN), QUICK)
    assert verdict.status is VerdictStatus.CORRECT, verdict.message


def test_examples_gelu_and_leaky_relu_are_elementwise():
    for name in ("1_GELUTanh", "2_LeakyReLU"):
        recipe, match, _ = recognized(load_task(EXAMPLES / "level1" / f"{name}.py", {"batch_size": 4}))
        assert recipe.family == "elementwise" and match.facts["inputs"] == ["x"]


def test_knobs_change_the_code_as_named():
    task = load_task(TASKS[0].parent / "mingpt_gelu.py")
    plain, tuned = generated(task, PLAIN).source, generated(task, TUNED).source
    assert "-fno-tree-vectorize" in plain and "omp parallel" not in plain and "std::tanh" in plain
    assert "#pragma omp parallel for simd" in tuned and "-ffast-math" in tuned and "-mprefer-vector-width=512" in tuned
    assert "--param=max-unroll-times=4" in tuned and "unroll" not in plain.split('SOURCE = r"""')[1]


def test_a_reduction_or_a_convolution_is_not_elementwise():
    softmax = trace_reference(load_task(EXAMPLES / "level1" / "3_Softmax.py", {"batch_size": 4}))
    assert ElementwiseRecipe().match(softmax) is None
    with pytest.raises(NotRecognized, match="--model"):
        recognized(load_task(EXAMPLES / "level1" / "12_Conv2d.py"))
