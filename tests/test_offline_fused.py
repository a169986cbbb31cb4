"""The fused recipes (KernelBench level 2: a GEMM, a convolution or a transposed convolution and its
chain): the fusion planner's plan, every level-2 file's first candidate agreeing with the reference
at two sizes (one module serves both: every size is read at run time), the plain ``passes`` version
too, batch norm's running statistics, the sandboxed verifier, and the one clear line for what the
planner does not place."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
import torch

from pragma_core import Candidate, VerdictStatus, load_task
from pragma_core.errors import TaskError
from pragma_core.offline.coder import first_knobs, recognized
from pragma_core.offline.graph import NotRecognized, trace_reference
from pragma_core.offline.recipe import GenerationContext
from pragma_core.offline.recipes.fusion import plan_fusion
from pragma_core.offline.recipes.matmul import MatmulRecipe
from pragma_core.records import Task
from pragma_core.sizes.shrinking import shrink_task
from pragma_core.tasks.loading import size_constants, task_namespace
from pragma_core.verifier import verify
from pragma_core.verifier.inputs import construct, make_inputs

from .conftest import KERNELBENCH
from .offline_support import SANDBOXED, agrees_with_reference, task_file, verified_in_sandbox

LEVEL2 = KERNELBENCH / "level2"
FILES = sorted(p.name for p in LEVEL2.glob("*.py")) if LEVEL2.is_dir() else []

NOT_COVERED = {
    "66_Matmul_Dropout_Softmax.py": r"dropout \(dropout\) in training mode, which is random",
    "83_Conv3d_GroupNorm_Min_Clamp_Dropout.py": r"dropout \(dropout\) in training mode, which is random",
}
"""Files no kernel can match (a model built for the verifier is in training mode: its dropout draws
a random mask), and the words their one line says it with."""

_SPATIAL = ("height", "width", "depth", "H", "W", "D", "length", "seq_len", "in_features", "input_size")


def sizes(path: Path, second: bool = False) -> dict[str, int]:
    """Small sizes for a level-2 file: a batch of 4 (5 for the second set: batch statistics over 2
    rows are ill-conditioned, +-d/sqrt(d^2+eps), and amplify the product's rounding), its spatial
    constants 4 to 12 and its feature counts about 40 (others for the second set), channels as
    written."""
    names = set(size_constants(path.read_text()))
    chosen = {"batch_size": 5 if second else 4}
    for offset, name in enumerate(_SPATIAL):
        if name in names:
            base = 4 if name in ("depth", "D") else 40 if "features" in name or "size" in name else 9
            chosen[name] = base + (2 if second else 0) + offset % 2
    return chosen


def small(name: str, second: bool = False) -> Task:
    """The file at :func:`sizes`; where its forward needs a size as written (a LayerNorm over the
    last dim, sized to the channels), that size is left as written."""
    chosen = sizes(LEVEL2 / name, second)
    for kept in [None, *reversed(chosen)]:
        try:
            return load_task(LEVEL2 / name, {k: v for k, v in chosen.items() if k != kept})
        except TaskError:
            continue
    raise AssertionError(f"{name}: no small sizes its forward accepts")


def _module(task: Task, knobs: dict | None = None) -> str:
    recipe, match, graph = recognized(task)
    chosen = first_knobs(recipe.knobs, match, "cpu-cpp") if knobs is None else knobs
    return recipe.generate(match, chosen, GenerationContext(graph=graph, task_source=task.source, task_key=task.key))


def _family(name: str, graph) -> str:
    if MatmulRecipe().match(graph) is not None:
        return "matmul"  # a plain chain after the product stays the matmul recipe's epilogue
    lower = name.lower()
    return "fused_conv_transposed" if "convtranspose" in lower else "fused_conv" if "conv" in lower else "fused_gemm"


@pytest.mark.parametrize("name", FILES)
def test_each_level2_files_first_candidate_agrees_at_two_sizes_or_is_named_not_covered(kernelbench, name):
    task = small(name)
    if name in NOT_COVERED:
        with pytest.raises(NotRecognized, match=NOT_COVERED[name]):
            recognized(task)
        return
    recipe, _match, graph = recognized(task)
    assert recipe.family == _family(name, graph)
    source = _module(task)
    agrees_with_reference(task, source)
    agrees_with_reference(small(name, second=True), source)  # the same module at other sizes


@pytest.mark.parametrize(
    "name",
    [
        "22_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish.py",  # a DAG epilogue, a reduction with a tail
        "33_Gemm_Scale_BatchNorm.py",  # batch norm of rows in training mode
        "80_Gemm_Max_Subtract_GELU.py",  # a tail reading its stage's input
        "98_Matmul_AvgPool_GELU_Scale_Max.py",  # a pool over rows
        "15_ConvTranspose3d_BatchNorm_Subtract.py",  # a mean broadcast back over its input: a pass of its own
        "38_ConvTranspose3d_AvgPool_Clamp_Softmax_Multiply.py",  # a pool first, reshapes around a softmax
        "92_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp.py",  # a residual read across stages
    ],
)
def test_the_plain_passes_version_agrees_too(kernelbench, name):
    task = small(name)
    recipe, match, _graph = recognized(task)
    knobs = first_knobs(recipe.knobs, match, "cpu-cpp") | {"fusion": "passes"}
    agrees_with_reference(task, _module(task, knobs))


def test_the_plan_puts_each_chain_where_its_kernel_stores(kernelbench):
    graph = trace_reference(small("92_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp.py"))
    conv, norm, logsumexp = plan_fusion(graph).stages
    assert (conv.kind, norm.kind, logsumexp.kind) == ("convolution", "channel_norm", "reduction")
    assert [step["op"] for step in norm.tail.steps] == ["tanh", "hardswish", "add"]
    assert norm.tail.extras[0]["source"] == {"stage": 0} and norm.tail.extras[0]["broadcast"] == "full"
    assert logsumexp.facts == {"op": "logsumexp", "dims": [1, 2], "keepdim": True}

    first = plan_fusion(trace_reference(small("1_Conv2D_ReLU_BiasAdd.py")))
    (stage,) = first.stages  # ReLU and the per-channel bias in the convolution's store
    assert [step["op"] for step in stage.tail.steps] == ["relu", "add"]
    assert stage.tail.extras[0]["broadcast"] == "span" and stage.tail.extras[0]["span"] == [1, 2]

    passes = plan_fusion(trace_reference(small("1_Conv2D_ReLU_BiasAdd.py")), fuse=False)
    assert [stage.kind for stage in passes.stages] == ["convolution", "pointwise"]
    assert not passes.stages[0].tail.steps


def test_batch_norm_updates_its_running_statistics_like_torch(kernelbench):
    for name, module in (("33_Gemm_Scale_BatchNorm.py", "bn"), ("73_Conv2d_BatchNorm_Scaling.py", "bn")):
        task = small(name)
        namespace, candidate = task_namespace(task), {"__name__": "candidate"}
        exec(compile(_module(task), "candidate.py", "exec"), candidate)
        reference, model = construct(namespace, namespace["Model"]), construct(namespace, candidate["ModelNew"])
        with torch.no_grad():
            for seed in (0, 1):
                inputs = make_inputs(namespace, seed)
                reference(*inputs), model(*inputs)
        ours, theirs = getattr(model, module), getattr(reference, module)
        assert torch.allclose(ours.running_mean, theirs.running_mean, atol=1e-5), name
        assert torch.allclose(ours.running_var, theirs.running_var, atol=1e-4), name
        assert int(ours.num_batches_tracked) == 2


@pytest.mark.parametrize(
    "name", ["84_Gemm_BatchNorm_Scaling_Softmax.py", "13_ConvTranspose3d_Mean_Add_Softmax_Tanh_Scaling.py"]
)
def test_a_fused_candidate_passes_the_sandboxed_verifier(kernelbench, name):
    task = small(name)
    verified_in_sandbox(task, _module(task))


def test_an_output_left_by_cancellation_on_some_draws_does_not_fail_an_honest_kernel(kernelbench):
    """93's output at small sizes is zero but for an element or two on some draws (its minimum with
    0 after adding 0.5), values of 1e-4 whose fourth digit is the conv's rounding. Seed 8 draws
    such a value in trial 4 and none in trial 0: the kernel's whole-output error there was 1.2e-4 on
    an AVX2 EPYC, over rtol, so only the reference's own error on that draw tells the honest kernel
    from one computing in fewer bits."""
    task = small("93_ConvTranspose2d_Add_Min_GELU_Multiply.py")
    verdict = verify(task, Candidate(source=_module(task), backend="cpu-cpp"), attrs.evolve(SANDBOXED, seed=8))
    assert verdict.status is VerdictStatus.CORRECT, verdict.message


def test_a_level1_file_keeps_its_own_family_and_what_the_planner_cannot_place_is_named(kernelbench, tmp_path):
    level1 = shrink_task(load_task(KERNELBENCH / "level1" / "23_Softmax.py"), 64 * 1024, intensity_kept=0.0).task
    assert recognized(level1)[0].family == "softmax"
    cumulative = task_file(
        tmp_path,
        "conv_then_cumsum",
        "self.conv = nn.Conv2d(3, 8, 3)",
        "torch.cumsum(self.conv(x), dim=1)",
        "(2, 3, 12, 12)",
    )
    with pytest.raises(NotRecognized, match=r"it computes cumsum \(cumsum\), which the fusion planner does not know"):
        recognized(load_task(cumulative))
