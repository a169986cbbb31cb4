"""The convolution recipe: which references it claims, that its candidates compute the
reference's result by both methods (direct and implicit GEMM; checked here, in process, as the
verifier checks it; the real sandboxed verifier runs on the depthwise-separable chain with each)
and that a task's first candidate takes the method its shapes call for."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pragma_core import load_task
from pragma_core.offline.coder import write_module_reply
from pragma_core.offline.conductor import Evidence, rank_moves
from pragma_core.offline.graph import NotRecognized, trace_reference
from pragma_core.offline.knobs import defaults, starting
from pragma_core.offline.modules import read_marker
from pragma_core.offline.recipes import recognize
from pragma_core.offline.recipes.convolution import ConvolutionRecipe, conv_geometry
from pragma_core.records import ChatMessage, CompletionRequest

from .offline_support import agrees_with_reference, generated, task_file, verified_in_sandbox

RECIPE = ConvolutionRecipe()
PLAIN = defaults(RECIPE.knobs)
START = starting(RECIPE.knobs)
GEMM = {**START, "method": "gemm"}
METHODS = {"direct": START, "gemm": GEMM}

# KernelBench level-1 forward convolutions at small sizes: (file prefix, size overrides).
FILES = {
    "50": {"batch_size": 1},  # its 224 x 224 input is written into get_inputs
    "54": {"batch_size": 2, "in_channels": 3, "out_channels": 7, "depth": 6, "width": 9, "height": 11},
    "55": {"batch_size": 2, "in_channels": 5, "out_channels": 7, "height": 9, "width": 21},
    "56": {"batch_size": 2, "in_channels": 4, "out_channels": 6, "height": 12, "width": 19},
    "59": {"batch_size": 2, "in_channels": 3, "out_channels": 8, "height": 11, "width": 10, "depth": 5},
    "60": {"batch_size": 1, "in_channels": 3, "out_channels": 8, "width": 8, "height": 9, "depth": 10},
    "62": {"batch_size": 2, "in_channels": 3, "out_channels": 5, "height": 12, "width": 20},
    "63": {"batch_size": 2, "in_channels": 3, "out_channels": 9, "height": 12, "width": 20},
    "66": {"batch_size": 2, "in_channels": 3, "out_channels": 8, "depth": 6, "height": 9, "width": 11},
    "67": {"batch_size": 2, "in_channels": 4, "out_channels": 8, "length": 50},
    "76": {"batch_size": 2, "in_channels": 4, "out_channels": 8, "length": 61},
    "80": {"batch_size": 2, "in_channels": 3, "out_channels": 8, "height": 14, "width": 30},
    "82": {"batch_size": 2, "in_channels": 4, "height": 13, "width": 20},
    "83": {"batch_size": 2, "in_channels": 4, "height": 13, "width": 20},
    "84": {"batch_size": 2, "in_channels": 4, "out_channels": 4, "height_in": 13, "width_in": 21},
    "85": {"batch_size": 2, "in_channels": 4, "out_channels": 4, "height": 13, "width": 21},
    "86": {"batch_size": 2, "in_channels": 4, "out_channels": 6, "height": 13, "width": 21},
    "87": {"batch_size": 2, "in_channels": 5, "out_channels": 7, "height": 13, "width": 21},
}
PLAIN_TOO = ("56", "76", "86")  # the plain version, checked on a few


def _file(kernelbench: Path, prefix: str) -> Path:
    (path,) = (kernelbench / "level1").glob(f"{prefix}_*.py")
    return path


@pytest.mark.parametrize("method", sorted(METHODS))
@pytest.mark.parametrize("prefix", sorted(FILES))
def test_every_kernelbench_convolution_is_correct_by_both_methods(kernelbench, prefix, method):
    task, match, source = generated(RECIPE, _file(kernelbench, prefix), FILES[prefix], METHODS[method])
    assert read_marker(source) == {"family": "convolution", "knobs": METHODS[method]}
    assert recognize(trace_reference(task))[0] is not None
    agrees_with_reference(task, source)


DEPTHWISE = ("82", "83", "84", "85")
"""The files whose only layer has one output channel per group: they start with the direct kernel."""


@pytest.mark.parametrize("prefix", sorted(FILES))
def test_the_first_candidate_takes_the_method_its_shapes_call_for(kernelbench, prefix):
    """Depthwise convolutions start direct; those with 64 or more output channels per group (a
    depthwise-separable block has its pointwise layer) start with the implicit GEMM."""
    channels_kept = {name: value for name, value in FILES[prefix].items() if "channels" not in name}
    task = load_task(_file(kernelbench, prefix), channels_kept)
    request = CompletionRequest(role="coder", messages=(ChatMessage(role="user", content="a kernel"),), task=task)
    marker = read_marker(write_module_reply(request))
    match = RECIPE.match(trace_reference(task))
    assert match is not None and match.start["method"] == ("direct" if prefix in DEPTHWISE else "gemm")
    assert marker == {"family": "convolution", "knobs": {**START, **match.start}}


def test_a_few_output_channels_start_direct_unless_rows_are_short(tmp_path):
    small = task_file(
        tmp_path, "four_to_sixteen", "self.c = nn.Conv2d(4, 16, 3, padding=1)", "self.c(x)", "(2, 4, 9, 9)"
    )
    wide = task_file(tmp_path, "grouped_wide", "self.c = nn.Conv2d(64, 128, 3, groups=2)", "self.c(x)", "(1, 64, 9, 9)")
    long_rows = task_file(tmp_path, "long_rows", "self.c = nn.Conv1d(16, 32, 7)", "self.c(x)", "(2, 16, 300)")
    short_rows = task_file(tmp_path, "short_rows", "self.c = nn.Conv3d(16, 32, 3)", "self.c(x)", "(2, 16, 5, 5, 8)")
    assert generated(RECIPE, small, {}, START)[1].start["method"] == "direct"
    assert generated(RECIPE, long_rows, {}, START)[1].start["method"] == "direct"
    assert generated(RECIPE, wide, {}, START)[1].start["method"] == "gemm"
    assert generated(RECIPE, short_rows, {}, START)[1].start["method"] == "gemm"


def test_a_group_of_one_register_tile_of_channels_starts_with_whole_rows_per_work_item(tmp_path):
    """Its slab is read once, so a work item takes the row whole (the smallest block that holds
    it); with more channels per group the block stays the family's, sized for L2."""
    cases = {
        "depthwise_300": ("nn.Conv2d(8, 8, 3, groups=8)", "(1, 8, 6, 302)", 512),
        "depthwise_100": ("nn.Conv2d(8, 8, 3, groups=8)", "(1, 8, 6, 102)", 128),
        "depthwise_1d_long": ("nn.Conv1d(4, 4, 5, groups=4)", "(1, 4, 3000)", 512),
        "three_per_group": ("nn.Conv2d(8, 12, 3, groups=4)", "(1, 8, 6, 70)", 128),
        "multiplier_two_wide": ("nn.Conv2d(4, 8, 3, groups=4)", "(1, 4, 6, 250)", 256),
        "sixteen_per_group": ("nn.Conv2d(8, 16, 3)", "(1, 8, 6, 302)", None),
    }
    for name, (layer, shape, block) in cases.items():
        path = task_file(tmp_path, name, f"self.c = {layer}", "self.c(x)", shape)
        start = generated(RECIPE, path, {}, START)[1].start
        assert start.get("block") == block, (name, start)
        assert start["method"] == "direct", name


def test_a_task_started_on_the_implicit_gemm_takes_long_work_items_written_channel_by_channel(kernelbench, tmp_path):
    """Each channel strip runs along all of a work item's positions, so each output row is written
    in one long run; the depthwise layer of a separable chain takes its rows whole within that block."""
    wide = task_file(tmp_path, "grouped_wide", "self.c = nn.Conv2d(64, 128, 3, groups=2)", "self.c(x)", "(1, 64, 9, 9)")
    for path, sizes in ((wide, {}), (_file(kernelbench, "86"), {})):  # 86 at its own sizes (generated, not run)
        task, match, source = generated(RECIPE, path, sizes, START)
        assert match.start["method"] == "gemm" and match.start["block"] == 1024, match.start
        assert read_marker(source)["knobs"]["order"] == "channels"


def test_under_gemm_only_layers_with_channels_to_fill_a_tile_call_it(kernelbench):
    _, _, source = generated(RECIPE, _file(kernelbench, "86"), FILES["86"], GEMM)
    depthwise, pointwise = [line for line in source.splitlines() if "lib.conv" in line]
    assert "lib.conv(" in depthwise and "lib.conv_gemm(" in pointwise
    # A depthwise task has no layer for it: gemm builds exactly the direct code (no wasted timing).
    _, _, direct = generated(RECIPE, _file(kernelbench, "82"), FILES["82"], START)
    _, _, gemm = generated(RECIPE, _file(kernelbench, "82"), FILES["82"], GEMM)
    assert [line for line in gemm.splitlines() if "pragma-recipe" not in line] == [
        line for line in direct.splitlines() if "pragma-recipe" not in line
    ]


def test_d1_misses_in_the_direct_loops_ask_for_the_implicit_gemm_first():
    base = {**START, "method": "direct"}
    missing = Evidence(d1_miss_rate=9.0, kernel_instructions=0.5)
    (first, reason), *_ = rank_moves(RECIPE.knobs, base, [base], missing, attainment=0.3, profiled=True)
    assert first == {"method": "gemm"} and "D1 miss rate 9.0%" in reason
    few = Evidence(d1_miss_rate=0.5, kernel_instructions=0.5)
    (first, reason), *_ = rank_moves(RECIPE.knobs, base, [base], few, attainment=0.3, profiled=True)
    assert first == {"method": "gemm"} and "D1" not in reason  # still the next move in the fixed order
    # From gemm, direct loops are a step back, ranked after the forward moves.
    moves = [
        changes for changes, _ in rank_moves(RECIPE.knobs, GEMM, [GEMM], Evidence(), attainment=0.3, profiled=False)
    ]
    assert {"method": "direct"} in moves and moves.index({"method": "direct"}) > moves.index({"accumulators": 8})


@pytest.mark.parametrize("prefix", PLAIN_TOO)
def test_the_plain_version_is_correct(kernelbench, prefix):
    task, _, source = generated(RECIPE, _file(kernelbench, prefix), FILES[prefix], PLAIN)
    agrees_with_reference(task, source)


def test_the_scalar_implicit_gemm_is_correct(kernelbench):
    task, _, source = generated(RECIPE, _file(kernelbench, "56"), FILES["56"], {**PLAIN, "method": "gemm"})
    agrees_with_reference(task, source)


def test_the_kinds_are_named(kernelbench):
    summaries = {p: generated(RECIPE, _file(kernelbench, p), FILES[p], START)[1].summary for p in ("82", "86", "87")}
    assert summaries["82"].startswith("depthwise 2D convolution")
    assert summaries["86"].startswith("depthwise 2D") and " then pointwise 2D" in summaries["86"]
    assert summaries["87"].startswith("pointwise 2D convolution")


# Variants the files do not cover: (init statement, forward expression, input shape).
INLINE = {
    "functional_tuple_stride_padding_bias": (
        "self.w = nn.Parameter(torch.randn(6, 4, 3, 2)); self.b = nn.Parameter(torch.randn(6))",
        "F.conv2d(x, self.w, self.b, stride=(2, 1), padding=(1, 0))",
        "(3, 4, 11, 9)",
    ),
    "grouped_3d_strided_dilated_bias": (
        "self.c = nn.Conv3d(6, 9, (2, 3, 3), stride=(1, 2, 3), padding=(1, 0, 2), dilation=(2, 1, 2), groups=3)",
        "self.c(x)",
        "(2, 6, 5, 8, 23)",
    ),
    "same_padding_even_kernel_1d": (
        "self.c = nn.Conv1d(3, 5, 4, padding='same', dilation=3)",
        "self.c(x)",
        "(2, 3, 37)",
    ),
    "valid_padding_unbatched_1d": ("self.c = nn.Conv1d(3, 5, 3, padding='valid', bias=False)", "self.c(x)", "(3, 29)"),
    "depthwise_channel_multiplier_strided": (
        "self.c = nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=4)",
        "self.c(x)",
        "(2, 4, 15, 33)",
    ),
    "odd_everything_2d": (
        "self.c = nn.Conv2d(6, 9, (3, 5), stride=3, padding=2, dilation=2, groups=3, bias=True)",
        "self.c(x)",
        "(3, 6, 17, 41)",
    ),
    "input_smaller_than_a_vector": ("self.c = nn.Conv2d(2, 3, 3, padding=1)", "self.c(x)", "(1, 2, 3, 3)"),
    "pointwise_strided_no_bias": (
        "self.c = nn.Conv2d(8, 13, 1, stride=2, bias=False)",
        "self.c(x)",
        "(3, 8, 11, 17)",
    ),
    "rows_shorter_than_a_tile_3d": (
        "self.c = nn.Conv3d(5, 11, 3, padding=1, dilation=(1, 2, 1))",
        "self.c(x)",
        "(2, 5, 4, 7, 3)",
    ),
    "long_reduction_odd_channels": ("self.c = nn.Conv2d(37, 9, (5, 3), padding=(2, 1))", "self.c(x)", "(1, 37, 7, 19)"),
    "long_rows_strided_padded_dilated": (  # rows of 35: the GEMM packs them by runs
        "self.c = nn.Conv2d(3, 8, 3, stride=2, padding=2, dilation=2)",
        "self.c(x)",
        "(2, 3, 7, 70)",
    ),
    "grouped_by_the_gemm_2d": (  # 5 output channels per group: a GEMM per group under method=gemm
        "self.c = nn.Conv2d(6, 10, (3, 2), stride=2, padding=(1, 2), dilation=2, groups=2)",
        "self.c(x)",
        "(3, 6, 13, 17)",
    ),
    "grouped_by_the_gemm_3d_long_rows": (
        "self.c = nn.Conv3d(4, 8, 3, stride=(2, 1, 1), padding=1, groups=2, bias=False)",
        "self.c(x)",
        "(2, 4, 6, 7, 30)",
    ),
    "depthwise_rows_in_ragged_blocks": (  # 4096 outputs of a group per item: 32 rows of 128, 70 rows in 3 blocks
        "self.c = nn.Conv2d(3, 3, 3, groups=3, bias=True)",
        "self.c(x)",
        "(2, 3, 72, 202)",
    ),
    "grouped_multiplier_rows_in_blocks": (  # 4 channels per group over rows of 64: 16 rows per item
        "self.c = nn.Conv2d(4, 8, (3, 2), padding=(1, 0), dilation=(2, 1), groups=2)",
        "self.c(x)",
        "(1, 4, 37, 65)",
    ),
    "three_chained": (
        "self.a = nn.Conv2d(3, 8, 3, padding=1); self.b = nn.Conv2d(8, 8, 3, groups=8); self.c = nn.Conv2d(8, 5, 1)",
        "self.c(self.b(self.a(x)))",
        "(2, 3, 12, 26)",
    ),
}


@pytest.mark.parametrize("method", sorted(METHODS))
@pytest.mark.parametrize("name", sorted(INLINE))
def test_variants_users_bring_are_claimed_and_correct(tmp_path, name, method):
    task, _, source = generated(RECIPE, task_file(tmp_path, name, *INLINE[name]), {}, METHODS[method])
    agrees_with_reference(task, source)


def test_weight_and_bias_passed_to_forward(tmp_path):
    path = tmp_path / "functional_inputs.py"
    path.write_text(
        textwrap.dedent("""\
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Model(nn.Module):
            def forward(self, x, w, b):
                return F.conv1d(x, w, b, stride=2, padding=3, dilation=2, groups=2)


        def get_inputs():
            return [torch.randn(3, 4, 45), torch.randn(6, 2, 4), torch.randn(6)]


        def get_init_inputs():
            return []
        """)
    )
    task, match, source = generated(RECIPE, path, {}, START)
    assert match.facts["layers"][0]["weight"] == {"input": 1}
    agrees_with_reference(task, source)


@pytest.mark.parametrize(
    "knobs",
    [
        {**START, "accumulators": 8, "block": 32, "vector_width": 256},
        {**START, "accumulators": 2, "block": 512},
        {**GEMM, "accumulators": 8, "block": 32},
        {**GEMM, "accumulators": 1, "block": 512, "parallel": False},
        {**GEMM, "accumulators": 4, "block": 64, "order": "columns"},
        {**GEMM, "accumulators": 6, "block": 2048, "order": "columns", "parallel": False},
    ],
    ids=[
        "tall_tile_narrow_blocks",
        "short_tile_long_blocks",
        "gemm_narrow_blocks",
        "gemm_one_row_serial",
        "gemm_column_strips_outer",
        "gemm_column_strips_outer_long_blocks_serial",
    ],
)
def test_other_tile_shapes_are_correct(tmp_path, knobs):
    for name in ("odd_everything_2d", "grouped_3d_strided_dilated_bias", "same_padding_even_kernel_1d"):
        task, _, source = generated(RECIPE, task_file(tmp_path, name, *INLINE[name]), {}, knobs)
        agrees_with_reference(task, source)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_the_sandboxed_verifier_says_correct(kernelbench, method):
    """The real verifier on the depthwise-separable chain (two kernel calls, an intermediate; under
    gemm its pointwise layer is the implicit GEMM); every other file and variant is checked in
    process above."""
    task, _, source = generated(RECIPE, _file(kernelbench, "86"), FILES["86"], METHODS[method])
    verified_in_sandbox(task, source)


# References the recipe must leave alone: (init statement, forward expression, input shape).
NOT_CONVOLUTIONS = {
    "reflect_padding": ("self.c = nn.Conv2d(3, 4, 3, padding=1, padding_mode='reflect')", "self.c(x)", "(2, 3, 9, 9)"),
    "conv_then_relu": ("self.c = nn.Conv2d(3, 4, 3)", "torch.relu(self.c(x))", "(2, 3, 9, 9)"),
    "double_precision": ("self.c = nn.Conv2d(3, 4, 3).double()", "self.c(x.double())", "(2, 3, 9, 9)"),
    "two_branches": ("self.c = nn.Conv2d(3, 3, 3, padding=1)", "self.c(x) + self.c(self.c(x))", "(2, 3, 9, 9)"),
}


@pytest.mark.parametrize("name", sorted(NOT_CONVOLUTIONS))
def test_other_references_are_not_claimed(tmp_path, name):
    graph = trace_reference(load_task(task_file(tmp_path, name, *NOT_CONVOLUTIONS[name])))
    assert RECIPE.match(graph) is None


def test_transposed_convolutions_are_not_claimed(tmp_path):
    path = task_file(tmp_path, "transposed", "self.c = nn.ConvTranspose2d(3, 4, 3)", "self.c(x)", "(2, 3, 9, 9)")
    try:
        graph = trace_reference(load_task(path))
    except NotRecognized:
        return  # no family reads the module at all
    assert RECIPE.match(graph) is None


def test_geometry_reads_every_spelling():
    assert conv_geometry((3, 3), 2, 1, 1, 1) == {
        "stride": (2, 2),
        "before": (1, 1),
        "after": (1, 1),
        "dilation": (1, 1),
        "groups": 1,
    }
    same = conv_geometry((4,), 1, "same", 3, 1)
    assert same is not None and (same["before"], same["after"]) == ((4,), (5,))
    assert conv_geometry((3, 3), 2, "same", 1, 1) is None  # PyTorch refuses 'same' with a stride
    assert conv_geometry((3, 5), (1, 2, 3), 0, 1, 1) is None


def test_knob_defaults_are_the_plain_version():
    assert PLAIN == {
        "parallel": False,
        "simd": False,
        "accumulators": 1,
        "block": 128,
        "order": "columns",
        "vector_width": 256,
        "method": "direct",
    }
