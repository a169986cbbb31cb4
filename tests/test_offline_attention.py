"""The attention recipe: KernelBench's scaled dot-product attention and the variants users bring
(other query and key lengths, value widths, no head dim, an explicit scale) are matched, and the
generated candidate agrees with the reference at the starting knobs, the plain knobs and small tiles
with ragged edges; the sandboxed verifier runs once; masked, causal or dropout attention is not claimed."""

from __future__ import annotations

from pathlib import Path

import pytest

from pragma_core import load_task
from pragma_core.offline.graph import trace_reference
from pragma_core.offline.recipes.attention import AttentionRecipe

from .conftest import KERNELBENCH
from .offline_support import agrees_with_reference, generated, verified_in_sandbox

RECIPE = AttentionRecipe()
DEFAULT = {name: knob.default for name, knob in RECIPE.knobs.items()}
START = {name: knob.starting for name, knob in RECIPE.knobs.items()}
SMALL_TILES = {**START, "block": 16, "key_tile": 32, "accumulators": 4}
SDPA_FILE = KERNELBENCH / "level1" / "97_ScaledDotProductAttention.py"
SDPA_SIZES = {"batch_size": 2, "num_heads": 3, "sequence_length": 77, "embedding_dimension": 40}

needs_kernelbench = pytest.mark.skipif(not SDPA_FILE.exists(), reason="KernelBench files not found")


def _task_file(tmp_path: Path, call: str, shapes: tuple[tuple[int, ...], ...]) -> Path:
    """A task whose forward returns ``call`` of q, k, v drawn in ``shapes``."""
    path = tmp_path / "attention_task.py"
    draws = ", ".join(f"torch.randn{shape}" for shape in shapes)
    path.write_text(
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
        f"    def forward(self, q, k, v):\n        return {call}\n\n\n"
        f"def get_inputs():\n    return [{draws}]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    return path


@needs_kernelbench
@pytest.mark.parametrize("knobs", [START, DEFAULT], ids=["start", "default"])
def test_kernelbench_attention_agrees(knobs):
    task, match, source = generated(RECIPE, SDPA_FILE, SDPA_SIZES, knobs)
    assert match.family == "attention" and "L=77" in match.summary
    agrees_with_reference(task, source)


@pytest.mark.parametrize(
    "call, shapes",
    [
        # more keys than queries, values wider than keys, ragged against every tile
        ("F.scaled_dot_product_attention(q, k, v)", ((2, 2, 37, 24), (2, 2, 101, 24), (2, 2, 101, 40))),
        # no head dim, an explicit scale, one query row
        ("F.scaled_dot_product_attention(q, k, v, scale=0.3)", ((3, 1, 16), (3, 45, 16), (3, 45, 5))),
    ],
    ids=["uneven-lengths", "3d-scale-one-query"],
)
def test_variants_agree_on_small_tiles(tmp_path, call, shapes):
    task, _, source = generated(RECIPE, _task_file(tmp_path, call, shapes), {}, SMALL_TILES)
    agrees_with_reference(task, source)


@needs_kernelbench
def test_the_sandboxed_verifier_says_correct():
    task, _, source = generated(RECIPE, SDPA_FILE, {**SDPA_SIZES, "sequence_length": 150}, START)
    verified_in_sandbox(task, source)


@pytest.mark.parametrize(
    "call",
    [
        "F.scaled_dot_product_attention(q, k, v, is_causal=True)",
        "F.scaled_dot_product_attention(q, k, v, attn_mask=q[..., :1] > 0)",
        "F.scaled_dot_product_attention(q, k, v, dropout_p=0.1)",
        "F.scaled_dot_product_attention(q, k, v) + 1",
    ],
    ids=["causal", "mask", "dropout", "epilogue"],
)
def test_other_attention_is_not_claimed(tmp_path, call):
    path = _task_file(tmp_path, call, ((2, 8, 4), (2, 8, 4), (2, 8, 4)))
    assert RECIPE.match(trace_reference(load_task(path))) is None
