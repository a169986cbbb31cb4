"""The matmul recipe: each product variant (mm, bmm, batched matmul, transposed operands,
matrix-vector, Linear with an epilogue) is matched and its generated candidate computes the
reference's result at the plain default knobs and at the fast knobs, on small sizes (checked here, in
process, as the verifier checks it; the real sandboxed verifier runs once per knob extreme); other
references are not claimed."""

from __future__ import annotations

from pathlib import Path

import pytest

from pragma_core import load_task
from pragma_core.offline.graph import trace_reference
from pragma_core.offline.modules import read_marker
from pragma_core.offline.recipe import GenerationContext
from pragma_core.offline.recipes.matmul import MatmulRecipe

from .conftest import EXAMPLES
from .offline_support import agrees_with_reference, verified_in_sandbox

TASKS = Path(__file__).parent / "data" / "offline_tasks" / "matmul"
RECIPE = MatmulRecipe()
DEFAULT = {name: knob.default for name, knob in RECIPE.knobs.items()}
FAST = {**DEFAULT, "parallel": True, "simd": True, "accumulators": 8, "block": 256}

# task, small sizes, words the match summary must contain
VARIANTS = [
    (EXAMPLES / "level1" / "10_Matmul.py", {"M": 96, "K": 80, "N": 112}, ("matrix product", "matmul")),
    (EXAMPLES / "level1" / "11_BatchedMatmul.py", {"batch_size": 3, "M": 40, "K": 72, "N": 56}, ("batched", "bmm")),
    (
        EXAMPLES / "level2" / "1_LinearBiasReLU.py",
        {"batch_size": 48, "in_features": 96, "out_features": 80},
        ("linear", "relu"),
    ),
    (TASKS / "matmul_transposed_a.py", {"M": 72, "K": 64, "N": 88}, ("A transposed",)),
    (TASKS / "matmul_transposed_b.py", {"M": 72, "K": 64, "N": 88}, ("B transposed",)),
    (TASKS / "matvec.py", {"M": 100, "K": 300}, ("matrix-vector",)),
    (TASKS / "matmul_odd_sizes.py", {"M": 67, "K": 301, "N": 45}, ("mm",)),
    (TASKS / "linear_gelu.py", {"batch_size": 37, "in_features": 64, "out_features": 70}, ("gelu",)),
    (
        TASKS / "gemm_bias_scale_sigmoid.py",
        {"batch_size": 33, "in_features": 48, "out_features": 40},
        ("add", "sigmoid"),
    ),
    (  # one output tile and a long K: at the fast knobs the threads split K and add their copies of C
        TASKS / "gemm_bias_scale_sigmoid.py",
        {"batch_size": 20, "in_features": 1100, "out_features": 24},
        ("add", "sigmoid"),
    ),
    (TASKS / "batched_matmul_4d.py", {"batch_size": 2, "heads": 3, "M": 24, "N": 40, "K": 16}, ("batched",)),
]


def generate(task, knobs) -> str:
    graph = trace_reference(task)
    match = RECIPE.match(graph)
    assert match is not None
    return RECIPE.generate(match, knobs, GenerationContext(graph=graph, task_source=task.source, task_key=task.key))


@pytest.mark.parametrize(
    "path, sizes, words",
    VARIANTS,
    ids=[f"{path.stem}-{'-'.join(map(str, sizes.values()))}" for path, sizes, _ in VARIANTS],
)
def test_variant_matches_and_agrees_at_default_and_fast_knobs(path, sizes, words):
    task = load_task(path, sizes)
    match = RECIPE.match(trace_reference(task))
    assert match is not None and match.family == "matmul"
    assert all(word in match.summary for word in words), match.summary
    for knobs in (DEFAULT, FAST):
        source = generate(task, knobs)
        assert read_marker(source) == {"family": "matmul", "knobs": knobs}
        agrees_with_reference(task, source)


@pytest.mark.parametrize("knobs", [DEFAULT, FAST], ids=["default", "fast"])
def test_the_sandboxed_verifier_says_correct(knobs):
    """One run of the real verifier per knob extreme, on the most general product: an affine layer
    written by hand (weight read transposed, bias and per-feature scale parameters) with a fused
    epilogue ending in a sigmoid, at sizes that leave ragged tiles; every other variant and knob
    setting is checked in process by ``test_variant_matches_and_agrees_at_default_and_fast_knobs``
    and ``test_other_knob_combinations_stay_correct_on_ragged_tiles``."""
    path, sizes, _ = next(variant for variant in VARIANTS if variant[0].stem == "gemm_bias_scale_sigmoid")
    task = load_task(path, sizes)
    verified_in_sandbox(task, generate(task, knobs))


@pytest.mark.parametrize(
    "knobs",
    [
        {"block": 32, "accumulators": 2},
        {"block": 128, "accumulators": 1, "simd": True, "parallel": True, "fast_math": True},
    ],
    ids=lambda knobs: "-".join(f"{k}={v}" for k, v in knobs.items()),
)
def test_other_knob_combinations_stay_correct_on_ragged_tiles(knobs):
    task = load_task(TASKS / "linear_gelu.py", {"batch_size": 37, "in_features": 300, "out_features": 70})
    agrees_with_reference(task, generate(task, {**DEFAULT, **knobs}))


def test_transposes_are_read_in_place_not_copied():
    source = generate(load_task(TASKS / "matmul_transposed_a.py", {"M": 8, "K": 4, "N": 8}), FAST)
    forward_body = source.split("def forward")[1].split("\n", 1)[1]
    assert "a[k * M + i]" in source and ".T" not in forward_body and "transpose" not in forward_body


@pytest.mark.parametrize(
    "path",
    [
        EXAMPLES / "level1" / "7_SumReduction.py",
        EXAMPLES / "level1" / "1_GELUTanh.py",
        EXAMPLES / "level1" / "3_Softmax.py",
    ],
)
def test_other_references_are_not_claimed(path):
    assert RECIPE.match(trace_reference(load_task(path))) is None


def test_a_product_whose_result_is_reduced_is_not_claimed(tmp_path):
    task_file = tmp_path / "matmul_sum.py"
    task_file.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n\n"
        "    def forward(self, a, b):\n        return (a @ b).sum(dim=1)\n\n\n"
        "def get_inputs():\n    return [torch.randn(8, 4), torch.randn(4, 6)]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    assert RECIPE.match(trace_reference(load_task(task_file))) is None
