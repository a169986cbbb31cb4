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
from pragma_core.offline.recipes._matmul_streamed import skinny
from pragma_core.offline.recipes.diagonal import DiagonalRecipe
from pragma_core.offline.recipes.matmul import MatmulRecipe

from .conftest import EXAMPLES, KERNELBENCH
from .offline_support import agrees_with_reference, generated, verified_in_sandbox

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
    # Three column tiles cut to one width, dealt unevenly to two threads: each thread takes a share
    # of the rows; then six column tiles that deal evenly: each work item is all of M.
    (TASKS / "matmul_odd_sizes.py", {"M": 37, "K": 45, "N": 1100}, ("mm",)),
    (EXAMPLES / "level1" / "11_BatchedMatmul.py", {"batch_size": 3, "M": 20, "K": 24, "N": 600}, ("bmm",)),
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


# -- issue 40: einsum products, triangular results, diagonal scaling -----------------------------

LEVEL1 = KERNELBENCH / "level1"
PRODUCT_FILES = [
    ("11_4D_tensor_matrix_multiplication.py", {"b": 2, "i": 3, "j": 17, "l": 33, "k": 41}, "einsum"),
    ("14_Matmul_for_upper_triangular_matrices.py", {"N": 300}, "upper triangle"),
    ("15_Matmul_for_lower_triangular_matrices.py", {"M": 300}, "lower triangle"),
]
START = {name: knob.starting for name, knob in RECIPE.knobs.items()}


def _product_task(tmp_path: Path, body: str, shapes: tuple[tuple[int, ...], ...], inputs: str = "") -> Path:
    """A task whose forward of a, b returns ``body``; ``inputs`` replaces the plain random draws."""
    path = tmp_path / "product_task.py"
    draws = inputs or "[" + ", ".join(f"torch.randn{shape}" for shape in shapes) + "]"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n\n"
        f"    def forward(self, a, b):\n        return {body}\n\n\n"
        f"def get_inputs():\n    return {draws}\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    return path


@pytest.mark.skipif(not LEVEL1.exists(), reason="KernelBench files not found")
@pytest.mark.parametrize("name, sizes, words", PRODUCT_FILES, ids=[name.split("_")[0] for name, _, _ in PRODUCT_FILES])
def test_kernelbench_products_agree_at_start_and_plain_knobs(name, sizes, words):
    task = load_task(LEVEL1 / name, sizes)
    match = RECIPE.match(trace_reference(task))
    assert match is not None and words in match.summary, match
    for knobs in (START, DEFAULT):
        agrees_with_reference(task, generate(task, knobs))


@pytest.mark.parametrize(
    "body, shapes, inputs",
    [
        ('torch.einsum("bkm,bkn->bmn", a, b)', ((3, 20, 33), (3, 20, 41)), ""),
        ('torch.einsum("ik,jk->ij", a, b)', ((45, 70), (38, 70)), ""),
        # a triangle off the diagonal of a rectangular product, factors not triangular: full sums
        ("torch.triu(a @ b, diagonal=1)", ((67, 150), (150, 300)), ""),
        # triangular factors with a batch: the sums skip the zero factors
        (
            "torch.tril(torch.bmm(a, b))",
            (),
            "[torch.tril(torch.rand(2, 290, 290)), torch.tril(torch.rand(2, 290, 290))]",
        ),
    ],
    ids=["einsum-batched-transposed-a", "einsum-transposed-b", "triu-offset-rectangular", "tril-batched"],
)
def test_product_variants_agree_at_start_and_small_tiles(tmp_path, body, shapes, inputs):
    task = load_task(_product_task(tmp_path, body, shapes, inputs))
    for knobs in (START, {**START, "block": 32, "accumulators": 4}):
        agrees_with_reference(task, generate(task, knobs))


@pytest.mark.skipif(not LEVEL1.exists(), reason="KernelBench files not found")
def test_a_triangle_of_triangular_factors_passes_the_sandboxed_verifier():
    task = load_task(LEVEL1 / PRODUCT_FILES[1][0], {"N": 200})
    verified_in_sandbox(task, generate(task, START))


@pytest.mark.parametrize(
    "body",
    ['torch.einsum("ij,jk->ki", a, b)', 'torch.einsum("ij,jk->i", a, b)', "torch.triu(a @ b) + 1"],
    ids=["permuted-output", "summed-output", "after-the-triangle"],
)
def test_other_einsums_and_triangles_are_not_claimed(tmp_path, body):
    task = load_task(_product_task(tmp_path, body, ((8, 4), (4, 8))))
    assert RECIPE.match(trace_reference(task)) is None


DIAGONAL = DiagonalRecipe()


@pytest.mark.parametrize(
    "body, shapes",
    [("a[:, None] * b", ((37,), (37, 29))), ("b * a", ((29,), (37, 29)))],
    ids=["rows-by-index", "columns"],
)
def test_diagonal_products_agree(tmp_path, body, shapes):
    path = _product_task(tmp_path, body, shapes)
    for knobs in ({"parallel": True, "simd": True}, {"parallel": False, "simd": False}):
        task, match, source = generated(DIAGONAL, path, {}, knobs)
        assert match.family == "diagonal" and ("rows" if "None" in body else "columns") in match.summary
        agrees_with_reference(task, source)


@pytest.mark.skipif(not LEVEL1.exists(), reason="KernelBench files not found")
def test_kernelbench_diagonal_product_agrees_at_start_knobs():
    start = {name: knob.starting for name, knob in DIAGONAL.knobs.items()}
    task, _, source = generated(DIAGONAL, LEVEL1 / "12_Matmul_with_diagonal_matrices_.py", {"M": 67, "N": 45}, start)
    agrees_with_reference(task, source)


def test_a_diagonal_matrix_made_with_diag_is_not_claimed(tmp_path):
    task = load_task(_product_task(tmp_path, "torch.diag(a) @ b", ((8,), (8, 5))))
    assert DIAGONAL.match(trace_reference(task)) is None


def test_a_product_whose_epilogue_calls_libm_starts_with_fast_math(tmp_path):
    """Per element a scalar ``tanh`` or ``exp`` costs more than the product does (a GEMM with two
    Mish after it ran at 0.31x of eager without fast math), so such a product starts with it."""
    calling = load_task(_product_task(tmp_path, "torch.tanh(a @ b)", ((8, 16), (16, 8))))
    plain = load_task(_product_task(tmp_path, "torch.relu(a @ b)", ((8, 16), (16, 8))))
    fast, plain_match = RECIPE.match(trace_reference(calling)), RECIPE.match(trace_reference(plain))
    assert fast is not None and plain_match is not None
    assert fast.start.get("fast_math") is True and "fast_math" not in plain_match.start


@pytest.mark.parametrize(
    "rows, inputs, outputs", [(1, 300, 70), (3, 300, 71), (6, 2100, 70), (13, 300, 71), (16, 1030, 9)]
)
def test_a_layer_on_a_few_rows_takes_the_dot_product_path_and_agrees(rows, inputs, outputs):
    """A batch of up to SKINNY_TRANSPOSED_ROWS rows through an ``nn.Linear`` (its weight is B
    transposed) runs as blocks of dot products over the weight's rows, the threads sharing the
    output features: the bias and the GELU after it included, with rows and columns left over from
    whole blocks and K over several panels, at the start and at the plain knobs."""
    task = load_task(TASKS / "linear_gelu.py", {"batch_size": rows, "in_features": inputs, "out_features": outputs})
    match = RECIPE.match(trace_reference(task))
    assert match is not None and skinny(match.facts)
    for knobs in (START, DEFAULT):
        agrees_with_reference(task, generate(task, knobs))


@pytest.mark.parametrize(
    "body, shapes",
    [
        ("torch.relu(a @ b)", ((3, 300), (300, 70))),
        ("torch.bmm(a, b)", ((2, 5, 131), (2, 131, 70))),
        ("a.T @ b", ((302, 8), (302, 45))),
        ("a @ b", ((1, 7), (7, 33))),
    ],
    ids=["epilogue", "batched", "transposed-a", "k-below-a-block"],
)
def test_a_few_rows_against_b_stored_by_rows_stream_b_and_agree(tmp_path, body, shapes):
    """Up to SKINNY_ROWS rows of A against B stored by rows: each thread adds whole rows of B (four
    at a time, then the rest) into its own sums over a range of K, and the sums are added after."""
    task = load_task(_product_task(tmp_path, body, shapes))
    match = RECIPE.match(trace_reference(task))
    assert match is not None and skinny(match.facts) and not match.facts["b"]["transposed"]
    for knobs in (START, DEFAULT):
        agrees_with_reference(task, generate(task, knobs))


def test_a_few_rows_against_a_batched_transposed_b_take_the_dot_products_and_agree(tmp_path):
    """Each batch entry's few rows against its own B stored transposed: the column blocks are shared
    over batch entries too, each entry reading its own B."""
    task = load_task(_product_task(tmp_path, "torch.bmm(a, b.transpose(1, 2))", ((3, 5, 131), (3, 70, 131))))
    match = RECIPE.match(trace_reference(task))
    assert match is not None and skinny(match.facts) and match.facts["b"]["transposed"] and match.facts["b_batched"]
    for knobs in (START, DEFAULT):
        agrees_with_reference(task, generate(task, knobs))
