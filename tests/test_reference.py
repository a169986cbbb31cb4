"""The parent's reference side: inputs and outputs drawn from seeds, sizes recorded."""

from __future__ import annotations

import pytest
import torch

from pragma_core import VerifySettings, load_task
from pragma_core.verifier.reference import FIXED_OUTPUT, ReferenceModel, compute_references, preflight

IN_PLACE_TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, index):
        return x.mul_(2.0)  # writes into its input, as some references do


def get_inputs():
    return [torch.randn(64, 32), torch.randint(0, 32, (5,))]


def get_init_inputs():
    return []
"""


def test_inputs_and_outputs_keep_the_drawn_inputs_when_the_reference_writes_into_them(tmp_path):
    path = tmp_path / "in_place.py"
    path.write_text(IN_PLACE_TASK)
    model = ReferenceModel(load_task(path))
    inputs, outputs = model.inputs_and_outputs(1234)
    assert torch.equal(inputs[0], model.inputs(1234)[0])  # as drawn, not doubled
    assert torch.equal(outputs[0], 2 * inputs[0]) and torch.equal(outputs[0], model.outputs(1234)[0])


def test_references_record_the_size_of_each_tensor_input(tmp_path):
    path = tmp_path / "in_place.py"
    path.write_text(IN_PLACE_TASK)
    references = compute_references(load_task(path), VerifySettings(trials=2), seed=7)
    assert references.input_sizes == (64 * 32, 5)
    again = compute_references(load_task(path), VerifySettings(trials=2), seed=7)
    assert all(torch.equal(a[0], b[0]) for a, b in zip(references.trials, again.trials))


SCALE_TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(32))

    def forward(self, x):
        return torch.softmax(x.sum(dim=1, keepdim=True), dim=1) * self.scale{tail}


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return []
"""


def test_the_preflight_names_a_task_whose_output_does_not_depend_on_its_inputs(tmp_path):
    """A softmax over one element is 1: the output is the scale whatever the input (catalogue 32).
    The same task plus the input is not flagged, nor does zeros or a constant pass either."""
    settings = VerifySettings(trials=3)
    answers = {}
    for name, tail in (("flawed", ""), ("sound", " + x")):
        path = tmp_path / f"{name}.py"
        path.write_text(SCALE_TASK.format(tail=tail))
        task = load_task(path)
        answers[name] = preflight(task, compute_references(task, settings, seed=11), settings)
    assert answers == {"flawed": [FIXED_OUTPUT], "sound": []}


SUM_TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.sum(dim=1), x.argmax(dim=1)


def get_inputs():
    return [torch.rand(8, 200_000)]


def get_init_inputs():
    return []
"""


def test_the_references_own_rounding_is_measured_on_the_draw_it_is_asked_about(tmp_path):
    """A float32 sum of 200k values against the same sum in float64 on the same inputs: small but
    not zero; the outputs of another draw are far from this draw's exact result; the integer output
    adds nothing."""
    path = tmp_path / "sums.py"
    path.write_text(SUM_TASK)
    model = ReferenceModel(load_task(path))
    own = model.rounding_error(5, model.outputs(5))
    exact = model.inputs(5)[0].double().sum(dim=1)
    assert own == pytest.approx(float(torch.linalg.vector_norm(model.outputs(5)[0].double() - exact) / exact.norm()))
    assert 0 < own < 1e-5
    assert model.rounding_error(5, model.outputs(6)) > 1e-3
