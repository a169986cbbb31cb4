"""The fused recipe (KernelBench level 2, a GEMM and its chain): the fusion planner's plan of every
GEMM-based file, the Coder's first candidate agreeing with the reference at a small size, the plain
``passes`` version too, and the one clear line for what the planner does not place."""

from __future__ import annotations

import pytest

from pragma_core import load_task
from pragma_core.offline.coder import first_knobs, recognized
from pragma_core.offline.graph import NotRecognized, trace_reference
from pragma_core.offline.recipe import GenerationContext
from pragma_core.offline.recipes.fused import FusedRecipe
from pragma_core.offline.recipes.fusion import plan_fusion
from pragma_core.offline.recipes.matmul import MatmulRecipe
from pragma_core.records import Task
from pragma_core.sizes.shrinking import shrink_task

from .conftest import KERNELBENCH
from .offline_support import agrees_with_reference, verified_in_sandbox

SMALL_BYTES = 64 * 1024
"""What a task is shrunk to (as tests/test_kernelbench.py does): a few thousand elements."""

LEVEL2 = KERNELBENCH / "level2"
GEMM_FILES = sorted(p.name for p in LEVEL2.glob("*.py") if "conv" not in p.name.lower()) if LEVEL2.is_dir() else []

NOT_COVERED = {
    "45_Gemm_Sigmoid_LogSumExp.py": "second matrix product",
    "51_Gemm_Subtract_GlobalAvgPool_LogSumExp_GELU_ResidualAdd.py": "add .add. that broadcasts",
    "66_Matmul_Dropout_Softmax.py": "nn.Dropout",  # training mode: random, no match to draw
    "75_Gemm_GroupNorm_Min_BiasAdd.py": "add .add. that broadcasts",
}
"""Files the planner does not place, and the words its one line names the operator with."""


def small(name: str) -> Task:
    return shrink_task(load_task(LEVEL2 / name), SMALL_BYTES, intensity_kept=0.0).task


def _module(task: Task, knobs: dict | None = None) -> str:
    recipe, match, graph = recognized(task)
    chosen = first_knobs(recipe.knobs, match, "cpu-cpp") if knobs is None else knobs
    return recipe.generate(match, chosen, GenerationContext(graph=graph, task_source=task.source, task_key=task.key))


@pytest.mark.parametrize("name", GEMM_FILES)
def test_each_gemm_level2_files_first_candidate_agrees_or_is_named_not_covered(kernelbench, name):
    task = small(name)
    if name in NOT_COVERED:
        with pytest.raises(NotRecognized, match=NOT_COVERED[name]):
            plan_fusion(trace_reference(task))
        return
    recipe, _match, graph = recognized(task)
    # a plain chain after the product stays the matmul recipe's (its epilogue); the rest is fused_gemm's
    assert recipe.family == ("matmul" if MatmulRecipe().match(graph) is not None else "fused_gemm")
    agrees_with_reference(task, _module(task))


@pytest.mark.parametrize(
    "name",
    [
        "22_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish.py",  # DAG epilogue, a reduction with a tail
        "33_Gemm_Scale_BatchNorm.py",  # batch norm in training mode
        "80_Gemm_Max_Subtract_GELU.py",  # a tail reading its stage's input
        "98_Matmul_AvgPool_GELU_Scale_Max.py",  # a pool over rows
    ],
)
def test_the_plain_passes_version_agrees_too(kernelbench, name):
    task = small(name)
    recipe, match, _graph = recognized(task)
    knobs = first_knobs(recipe.knobs, match, "cpu-cpp") | {"fusion": "passes"}
    agrees_with_reference(task, _module(task, knobs))


def test_batch_norm_updates_its_running_statistics_like_torch(kernelbench):
    import torch

    from pragma_core.tasks.loading import task_namespace
    from pragma_core.verifier.inputs import construct, make_inputs

    task = small("33_Gemm_Scale_BatchNorm.py")
    namespace, candidate = task_namespace(task), {"__name__": "candidate"}
    exec(compile(_module(task), "candidate.py", "exec"), candidate)
    reference, model = construct(namespace, namespace["Model"]), construct(namespace, candidate["ModelNew"])
    with torch.no_grad():
        for seed in (0, 1):
            inputs = make_inputs(namespace, seed)
            reference(*inputs), model(*inputs)
    assert torch.allclose(model.bn.running_mean, reference.bn.running_mean, atol=1e-5)
    assert torch.allclose(model.bn.running_var, reference.bn.running_var, atol=1e-4)
    assert int(model.bn.num_batches_tracked) == 2


def test_a_fused_candidate_passes_the_sandboxed_verifier(kernelbench):
    task = small("84_Gemm_BatchNorm_Scaling_Softmax.py")
    verified_in_sandbox(task, _module(task))


def test_a_level1_file_keeps_its_own_family_and_a_convolution_is_named(kernelbench):
    recipe, _match, _graph = recognized(
        shrink_task(load_task(KERNELBENCH / "level1" / "23_Softmax.py"), SMALL_BYTES, intensity_kept=0.0).task
    )
    assert recipe.family == "softmax"
    conv = next(p.name for p in sorted(LEVEL2.glob("*Conv2d*.py")))
    graph = trace_reference(small(conv))
    assert FusedRecipe().match(graph) is None
    with pytest.raises(NotRecognized, match=r"convolution \(conv2d\)"):
        plan_fusion(graph)
