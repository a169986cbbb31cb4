"""The pooling recipe: KernelBench's max and average pooling files and the variants users bring
(ceil mode, tuple windows, dilation, count_include_pad, divisor_override, no batch dim, the F. forms)
are claimed and their candidates compute the reference's result (checked in process as the verifier
checks it; the real sandboxed verifier runs once); other references are not claimed."""

from __future__ import annotations

import pytest

from pragma_core import load_task
from pragma_core.offline.graph import trace_reference
from pragma_core.offline.modules import read_marker
from pragma_core.offline.recipes import recognize
from pragma_core.offline.recipes.pooling import PoolingRecipe

from .conftest import KERNELBENCH
from .offline_support import agrees_with_reference, generated, task_file, verified_in_sandbox

LEVEL1 = KERNELBENCH / "level1"
DEFAULT = {name: knob.default for name, knob in PoolingRecipe.knobs.items()}
START = {name: knob.starting for name, knob in PoolingRecipe.knobs.items()}
SMALL_TILES = {**START, "block": 64}

# KernelBench's pooling files at small sizes (odd lengths, so no tile or vector divides them).
KERNELBENCH_FILES = {
    "41_Max_Pooling_1D.py": {"batch_size": 2, "features": 3, "sequence_length": 301},
    "42_Max_Pooling_2D.py": {"batch_size": 2, "channels": 3, "height": 19, "width": 23},
    "43_Max_Pooling_3D.py": {"batch_size": 2, "channels": 2, "dim1": 11, "dim2": 13, "dim3": 17},
    "44_Average_Pooling_1D.py": {"batch_size": 2, "in_channels": 3, "input_length": 301},
    "45_Average_Pooling_2D.py": {"batch_size": 2, "channels": 3, "height": 37, "width": 41},
    "46_Average_Pooling_3D.py": {"batch_size": 2, "channels": 2, "depth": 9, "height": 11, "width": 21},
}


# Variants the files do not cover: (init statement, forward expression, input shape, summary start).
VARIANTS = {
    "max2d_ceil_tuple_dilated": (
        "self.p = nn.MaxPool2d((3, 2), stride=(2, 1), padding=(1, 0), dilation=(2, 1), ceil_mode=True)",
        "self.p(x)",
        "(2, 3, 17, 150)",
        "max pooling 2D",
    ),
    "avg2d_exclude_pad_ceil": (
        "self.p = nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)",
        "self.p(x)",
        "(2, 3, 16, 131)",
        "avg pooling 2D",
    ),
    "avg2d_divisor_override": (
        "self.p = nn.AvgPool2d((2, 3), stride=(1, 2), padding=(1, 1), divisor_override=4)",
        "self.p(x)",
        "(2, 2, 9, 70)",
        "avg pooling 2D",
    ),
    "max1d_functional_unbatched": ("pass", "F.max_pool1d(x, 5, 3, 2, 2, ceil_mode=True)", "(4, 200)", "max pooling 1D"),
    "avg3d_functional_tuple": ("pass", "F.avg_pool3d(x, (2, 3, 3), padding=(1, 1, 0))", "(2, 2, 7, 9, 80)", "avg"),
    "avg1d_ceil_exclude_pad": (
        "self.p = nn.AvgPool1d(4, stride=3, padding=2, ceil_mode=True, count_include_pad=False)",
        "self.p(x)",
        "(3, 5, 97)",
        "avg pooling 1D",
    ),
    "max3d_ceil_dilated_unbatched": (
        "self.p = nn.MaxPool3d(2, stride=2, padding=1, dilation=2, ceil_mode=True)",
        "self.p(x)",
        "(3, 8, 9, 75)",
        "max pooling 3D",
    ),
}

# References the recipe must leave alone.
NOT_POOLING = {
    "return_indices": ("self.p = nn.MaxPool2d(2, return_indices=True)", "self.p(x)[0]", "(2, 3, 8, 8)"),
    "pool_then_relu": ("self.p = nn.MaxPool2d(2)", "torch.relu(self.p(x))", "(2, 3, 8, 8)"),
    "adaptive": ("pass", "F.adaptive_avg_pool2d(x, 3)", "(2, 3, 8, 8)"),
    "lp_pool": ("pass", "F.lp_pool2d(x, 2, 2)", "(2, 3, 8, 8)"),
    "double": ("pass", "F.max_pool2d(x.double(), 2)", "(2, 3, 8, 8)"),
}


@pytest.mark.parametrize("name", sorted(KERNELBENCH_FILES))
def test_kernelbench_files_start_correct(kernelbench, name):
    task, match, source = generated(PoolingRecipe(), LEVEL1 / name, KERNELBENCH_FILES[name], START)
    assert read_marker(source) == {"family": "pool", "knobs": START}
    assert match.facts["op"] == ("max" if "Max" in name else "avg")
    agrees_with_reference(task, source)


@pytest.mark.parametrize("name", ["43_Max_Pooling_3D.py", "45_Average_Pooling_2D.py"])
def test_the_plain_version_is_correct(kernelbench, name):
    task, _, source = generated(PoolingRecipe(), LEVEL1 / name, KERNELBENCH_FILES[name], DEFAULT)
    agrees_with_reference(task, source)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variants_are_claimed_and_correct_over_several_tiles(tmp_path, name):
    init, forward, shape, summary = VARIANTS[name]
    task, match, source = generated(PoolingRecipe(), task_file(tmp_path, name, init, forward, shape), {}, SMALL_TILES)
    assert match.summary.startswith(summary)
    agrees_with_reference(task, source)


def test_plain_version_of_a_ceil_mode_average_excluding_padding(tmp_path):
    init, forward, shape, _ = VARIANTS["avg2d_exclude_pad_ceil"]
    task, _, source = generated(PoolingRecipe(), task_file(tmp_path, "plain", init, forward, shape), {}, DEFAULT)
    agrees_with_reference(task, source)


def test_the_sandboxed_verifier_says_correct(kernelbench):
    """The real verifier once, on KernelBench's dilated, padded 3-D max pool at the starting knobs."""
    task, _, source = generated(
        PoolingRecipe(), LEVEL1 / "43_Max_Pooling_3D.py", KERNELBENCH_FILES["43_Max_Pooling_3D.py"], START
    )
    verified_in_sandbox(task, source)


def test_the_coder_finds_the_pooling_recipe_first(kernelbench):
    for name, sizes in KERNELBENCH_FILES.items():
        recipe, _ = recognize(trace_reference(load_task(LEVEL1 / name, sizes)))
        assert recipe.family == "pool", name


@pytest.mark.parametrize("name", sorted(NOT_POOLING))
def test_other_references_are_not_claimed(tmp_path, name):
    init, forward, shape = NOT_POOLING[name]
    graph = trace_reference(load_task(task_file(tmp_path, name, init, forward, shape)))
    assert PoolingRecipe().match(graph) is None


def test_knob_defaults_are_the_plain_version():
    assert DEFAULT == {"parallel": False, "simd": False, "block": 0}
