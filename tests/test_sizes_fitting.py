"""Fitting a task's sizes to a target time: which constants scale, that they scale together, that
the sizes are recorded, and the errors. Times are not asserted (the machine is shared): only that a
ten times longer target never gives smaller sizes."""

from __future__ import annotations

import json

import pytest

from pragma_core import load_task
from pragma_core.errors import TaskError
from pragma_core.sizes.fitting import fit_task, scaling_constants
from pragma_core.tasks.loading import task_program

from .test_cli import run
from .test_tasks import write


def test_constants_scale_by_one_factor_keeping_their_ratio(kernelbench):
    task = load_task(kernelbench / "level1" / "19_ReLU.py")  # batch_size 4096, dim 393216
    shorter, longer = fit_task(task, 0.5, threads=1), fit_task(task, 5, threads=1)
    for fitted in (shorter, longer):
        sizes = fitted.task.sizes
        assert set(sizes) == {"batch_size", "dim"} and fitted.sizes == sizes
        assert sizes["dim"] / sizes["batch_size"] == pytest.approx(393216 / 4096, rel=0.1)
        assert f"batch_size = {sizes['batch_size']}" in task_program(fitted.task)
        assert fitted.ms > 0 and fitted.target_ms in (0.5, 5) and "target" in fitted.note
    assert longer.sizes["batch_size"] >= shorter.sizes["batch_size"]


def test_constants_that_only_change_together_scale_together(kernelbench):
    # HingeLoss broadcasts its (batch,) targets against (batch, *input_shape): either alone breaks it.
    task = load_task(kernelbench / "level1" / "100_HingeLoss.py")
    assert {constant.label for constant in scaling_constants(task)} == {"batch_size", "input_shape[0]"}
    fitted = fit_task(task, 1, threads=1)
    assert fitted.sizes["input_shape"] == (fitted.sizes["batch_size"],)
    assert fitted.sizes["batch_size"] < 32768


def test_a_task_without_size_constants_runs_at_its_own_size(tmp_path):
    source = (
        "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
        "        return x * 2\n\ndef get_inputs():\n    return [torch.rand(16, 32)]\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    fitted = fit_task(load_task(write(tmp_path, source)), 10, threads=1)
    assert fitted.sizes == {} and "runs at its own sizes" in fitted.note


@pytest.mark.parametrize("target", [0, -3, float("nan")])
def test_a_target_that_is_not_a_positive_time_is_refused(kernelbench, target):
    with pytest.raises(TaskError, match="give a positive number of milliseconds"):
        fit_task(load_task(kernelbench / "level1" / "19_ReLU.py"), target)


def test_the_cli_fits_and_shows_the_sizes(kernelbench, capsys):
    code, out, err = run(capsys, "tasks", str(kernelbench / "level1" / "23_Softmax.py"), "--fit-ms", "1", "--json")
    assert code == 0, err
    (task,) = json.loads(out)["tasks"]
    assert set(task["sizes"]) == {"batch_size", "dim"} and task["sizes"]["dim"] < 393216
    assert "pragma: fitted 23_Softmax.py (1/1, " in err  # off a terminal, a line per fitted file, not silence
    code, _out, err = run(capsys, "tasks", str(kernelbench / "level1" / "23_Softmax.py"), "--fit-ms", "0")
    assert code == 2 and "--fit-ms" in err


def test_sizes_that_round_onto_ones_timed_are_split_between_the_two_that_bracket_the_target():
    # A 3-D convolution's five constants, each on a multiple of 8, at 0.25 and 0.5 of their own ran
    # 7 ms and 218 ms: the step toward 20 ms rounded back onto 0.25's sizes and the fit stopped there.
    from pragma_core.sizes.fitting import _between

    tried = [(0.25, None, 7.0), (0.5, None, 218.0), (1.0, None, 1700.0)]
    assert _between(tried, 20.0) == pytest.approx(0.25**0.5 * 0.5**0.5)
    assert _between(tried[:1], 20.0) is None  # nothing timed over the target yet: no bracket
