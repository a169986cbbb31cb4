"""The transposed-convolution recipe: it claims every KernelBench level-1 transposed convolution and
the variants users write (functional form, odd sizes, strides, paddings, output paddings, dilations,
groups, bias on and off), its candidates compute the reference's result (in process, as the verifier
checks it; the real sandboxed verifier runs once), and it leaves alone what it does not compute."""

from __future__ import annotations

import random
import re
import textwrap
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from pragma_core import load_task
from pragma_core.native import load_library
from pragma_core.offline.graph import trace_reference
from pragma_core.offline.knobs import defaults, starting
from pragma_core.offline.recipe import compiler_flags
from pragma_core.offline.recipes import recognize
from pragma_core.offline.recipes.conv_transposed import ConvTransposedRecipe, transposed_kernel

from .offline_support import agrees_with_reference, generated, task_file, verified_in_sandbox

RECIPE = ConvTransposedRecipe()
START = starting(RECIPE.knobs)
PLAIN = defaults(RECIPE.knobs)
FILES = ("57", "58", "61", "64", "65", "68", "69", "70", "71", "72", "73", "74", "75", "77", "78", "79", "81")

# Small sizes for every size name the files use; widths long enough for whole register tiles.
SMALL = {
    "batch_size": 2,
    "in_channels": 8,
    "out_channels": 12,
    "length": 83,
    "depth": 4,
    "depth_in": 4,
    "height": 6,
    "height_in": 6,
    "width": 41,
    "width_in": 41,
}


def _kernelbench_file(kernelbench: Path, number: str) -> tuple[Path, dict]:
    path = next((kernelbench / "level1").glob(f"{number}_*.py"))
    names = set(re.findall(r"^(\w+) = ", path.read_text(), re.MULTILINE))
    return path, {name: value for name, value in SMALL.items() if name in names}


@pytest.mark.parametrize("number", FILES)
def test_every_kernelbench_transposed_convolution_gets_a_correct_first_candidate(kernelbench, number):
    path, sizes = _kernelbench_file(kernelbench, number)
    task, match, source = generated(RECIPE, path, sizes, START)
    assert match.summary.startswith("transposed ")
    graph = trace_reference(task)
    assert recognize(graph)[0].family == "conv_transposed"
    agrees_with_reference(task, source)


@pytest.mark.parametrize("number", ["64", "72", "81"])
def test_the_plain_candidate_agrees_too(kernelbench, number):
    path, sizes = _kernelbench_file(kernelbench, number)
    task, _, source = generated(RECIPE, path, sizes, PLAIN)
    agrees_with_reference(task, source)


# Variants the files do not cover: (init statement, forward expression, input shape).
VARIANTS = {
    "module_2d_bias_output_padding_odd": (
        "self.c = nn.ConvTranspose2d(5, 7, (4, 3), stride=(3, 2), padding=(2, 1), output_padding=(1, 1), bias=True)",
        "self.c(x)",
        (3, 5, 7, 37),
    ),
    "module_3d_grouped_dilated_bias": (
        "self.c = nn.ConvTranspose3d(6, 9, (2, 3, 4), stride=(1, 2, 3), padding=(0, 1, 2), dilation=(2, 1, 2),"
        " groups=3, bias=True)",
        "self.c(x)",
        (1, 6, 3, 4, 29),
    ),
    "module_1d_depthwise_output_padding": (
        "self.c = nn.ConvTranspose1d(4, 4, 5, stride=4, padding=3, output_padding=2, groups=4)",
        "self.c(x)",
        (2, 4, 61),
    ),
    "module_2d_kernel_1_tiny_width": (
        "self.c = nn.ConvTranspose2d(3, 2, 1, bias=True)",
        "self.c(x)",
        (2, 3, 2, 3),
    ),
    "module_2d_padding_wider_than_input": (
        "self.c = nn.ConvTranspose2d(2, 3, 7, stride=1, padding=5, dilation=2)",
        "self.c(x)",
        (1, 2, 3, 5),
    ),
    "functional_2d_params_and_bias": (
        "self.weight = nn.Parameter(torch.randn(6, 4, 3, 3))\n                self.bias = nn.Parameter(torch.randn(8))",
        "F.conv_transpose2d(x, self.weight, self.bias, stride=2, padding=1, groups=2, dilation=(1, 2))",
        (2, 6, 9, 40),
    ),
    "functional_1d_positional": (
        "self.weight = nn.Parameter(torch.randn(3, 5, 4))",
        "F.conv_transpose1d(x, self.weight, None, 3, 2, 1)",
        (2, 3, 50),
    ),
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variants_users_bring_agree_with_the_reference(tmp_path, name):
    init, forward, shape = VARIANTS[name]
    task, _, source = generated(RECIPE, task_file(tmp_path, name, init, forward, shape), {}, START)
    agrees_with_reference(task, source)


def test_other_knob_corners_agree(tmp_path):
    init, forward, shape = VARIANTS["module_3d_grouped_dilated_bias"]
    path = task_file(tmp_path, "corners", init, forward, shape)
    for knobs in ({**START, "accumulators": 8, "block": 64, "vector_width": 256}, {**PLAIN, "parallel": True}):
        task, _, source = generated(RECIPE, path, {}, knobs)
        agrees_with_reference(task, source)


def test_a_weight_and_bias_given_as_forward_arguments(tmp_path):
    path = tmp_path / "weight_argument.py"
    path.write_text(
        textwrap.dedent("""\
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Model(nn.Module):
            def forward(self, x, w, b):
                return F.conv_transpose3d(x, w, bias=b, stride=(2, 1, 2), padding=1, output_padding=(1, 0, 1))


        def get_inputs():
            return [torch.randn(2, 4, 3, 4, 21), torch.randn(4, 5, 3, 2, 3), torch.randn(5)]


        def get_init_inputs():
            return []
        """)
    )
    task, match, source = generated(RECIPE, path, {}, START)
    assert match.facts["weight"] == {"input": 1} and match.facts["bias"] == {"input": 2}
    agrees_with_reference(task, source)


_FUNCTIONAL = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


@pytest.mark.parametrize(
    "knobs",
    [START, {**START, "accumulators": 1, "block": 64}, {**START, "layout": "rows"}],
    ids=["start", "narrow", "rows"],
)
def test_the_kernel_matches_torch_on_random_geometries(knobs):
    """One build, many geometries: every rank, stride, padding, output padding, dilation, group count
    and size mix, including widths shorter than a register tile and paddings that cut off every tap;
    half of them with stride 1 along rows and columns, which the plane layout flattens."""
    cpp = transposed_kernel(knobs)
    lib = load_library(cpp, flags=compiler_flags(knobs))  # the candidates' own build
    rng = random.Random(40)
    checked = 0
    while checked < 80:
        rank, groups = rng.choice((1, 2, 3)), rng.choice((1, 1, 2, 3))
        c_in, c_out, n = groups * rng.randint(1, 4), groups * rng.randint(1, 9), rng.randint(1, 2)
        kernel = [rng.randint(1, 5) for _ in range(rank)]
        stride = [rng.randint(1, 4) for _ in range(rank)]
        if rng.random() < 0.5:
            stride[-2:] = [1] * len(stride[-2:])
        dilation = [rng.randint(1, 3) for _ in range(rank)]
        padding = [rng.randint(0, (k - 1) * d) for k, d in zip(kernel, dilation)]
        output_padding = [rng.randint(0, max(s, d) - 1) for s, d in zip(stride, dilation)]
        size = [rng.randint(1, 5 if rng.random() < 0.7 else 40) for _ in range(rank - 1)] + [rng.randint(1, 80)]
        outputs = [
            (i - 1) * s - 2 * p + d * (k - 1) + o + 1
            for i, s, p, d, k, o in zip(size, stride, padding, dilation, kernel, output_padding)
        ]
        if min(outputs) < 1:
            continue  # torch refuses these
        x, w = torch.randn(n, c_in, *size), torch.randn(c_in, c_out // groups, *kernel)
        bias = torch.randn(c_out) if rng.random() < 0.5 else None
        want = _FUNCTIONAL[rank](x, w, bias, stride, padding, output_padding, groups, dilation)
        out = torch.full_like(want, float("nan"))
        pad = 3 - rank
        lib.conv_transpose(
            x, w, w if bias is None else bias, out, int(bias is not None), n, c_in, c_out, groups,
            *([1] * pad + size), *([1] * pad + list(want.shape[2:])), *([1] * pad + kernel),
            *([1] * pad + stride), *([0] * pad + padding), *([1] * pad + dilation),
        )  # fmt: skip
        torch.testing.assert_close(out, want, atol=1e-4, rtol=1e-4)
        checked += 1


@pytest.mark.parametrize("number,knobs", [("75", START), ("79", PLAIN)], ids=["75-start", "79-plain"])
def test_the_sandboxed_verifier_accepts_the_candidates(kernelbench, number, knobs):
    path, sizes = _kernelbench_file(kernelbench, number)
    task, _, source = generated(RECIPE, path, sizes, knobs)
    verified_in_sandbox(task, source)


NOT_CLAIMED = {
    "forward_convolution": ("self.c = nn.Conv2d(3, 4, 3)", "self.c(x)", (1, 3, 8, 8)),
    "followed_by_relu": ("self.c = nn.ConvTranspose2d(3, 4, 3)", "torch.relu(self.c(x))", (1, 3, 8, 8)),
    "output_size_argument": ("self.c = nn.ConvTranspose2d(3, 4, 3, stride=2)", "self.c(x, [17, 17])", (1, 3, 8, 8)),
    "unbatched_input": ("self.c = nn.ConvTranspose1d(3, 4, 3)", "self.c(x)", (3, 20)),
    "double_precision": ("self.c = nn.ConvTranspose1d(3, 4, 3).double()", "self.c(x.double())", (1, 3, 20)),
}


@pytest.mark.parametrize("name", sorted(NOT_CLAIMED))
def test_what_it_does_not_compute_is_not_claimed(tmp_path, name):
    init, forward, shape = NOT_CLAIMED[name]
    graph = trace_reference(load_task(task_file(tmp_path, name, init, forward, shape)))
    assert RECIPE.match(graph) is None
