"""Tasks: loading KernelBench files and trees, size overrides, analysis, and every bad input."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from pragma_core import Category, load_task, load_tasks, task_namespace, task_program
from pragma_core.errors import SizeOverrideError, TaskError
from pragma_core.tasks.loading import (
    apply_sizes,
    find_task_files,
    parse_size_assignments,
    size_constants,
)

GOOD = '''\
"""Scaled ReLU."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.relu(x) * self.scale


batch_size = 16   # rows
dim: int = 32
scale = 0.5
rows_total = batch_size * 2  # derived, not a size constant


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return [scale]
'''


def write(tmp_path: Path, text: str, name: str = "1_Task.py") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


# -- the bundled examples -----------------------------------------------------------------------


def test_examples_cover_all_six_categories_with_at_least_twelve_tasks(examples):
    tasks = load_tasks(examples)
    assert len(tasks) >= 12
    assert {task.category for task in tasks} == set(Category)
    assert all(task.analysis.traced_on == "meta" for task in tasks)


@pytest.mark.parametrize(
    "key, category",
    [
        ("level1/1_GELUTanh", Category.ACTIVATION),
        ("level1/3_Softmax", Category.ACTIVATION),
        ("level1/4_LayerNorm", Category.NORMALIZATION),
        ("level1/5_RMSNorm", Category.NORMALIZATION),  # written by hand: decided by the name
        ("level1/6_L2Norm", Category.NORMALIZATION),
        ("level1/8_ArgmaxDim", Category.POOLING_REDUCTION),
        ("level1/9_MaxPool2d", Category.POOLING_REDUCTION),
        ("level1/10_Matmul", Category.MATMUL),
        ("level1/13_DepthwiseConv2d", Category.CONV),
        ("level1/14_MSELoss", Category.OTHER),
        ("level1/15_CrossEntropyLoss", Category.OTHER),
        ("level1/16_Cumsum", Category.OTHER),
        ("level2/1_LinearBiasReLU", Category.MATMUL),  # a matmul dominates what follows it
        ("level2/2_Conv2dReLUScale", Category.CONV),
    ],
)
def test_example_categories(examples, key, category):
    assert load_task(examples / f"{key}.py").category is category


def test_tree_order_level_and_problem_id_come_from_the_path(examples):
    keys = [task.key for task in load_tasks(examples)]
    assert keys[:3] == ["level1/1_GELUTanh", "level1/2_LeakyReLU", "level1/3_Softmax"]
    assert keys.index("level1/10_Matmul") > keys.index("level1/9_MaxPool2d")  # numeric, not text
    assert keys[-2:] == ["level2/1_LinearBiasReLU", "level2/2_Conv2dReLUScale"]
    matmul = load_task(examples / "level1" / "10_Matmul.py")
    assert (matmul.level, matmul.problem_id, matmul.name) == (1, 10, "10_Matmul")


def test_matmul_flops_and_minimal_bytes(examples):
    task = load_task(examples / "level1" / "10_Matmul.py", {"M": 64, "K": 32, "N": 16})
    analysis = task.analysis
    assert [spec.shape for spec in analysis.inputs] == [(64, 32), (32, 16)]
    assert analysis.outputs[0].shape == (64, 16)
    assert analysis.flops == 2 * 64 * 32 * 16
    assert analysis.min_bytes == 4 * (64 * 32 + 32 * 16 + 64 * 16)
    assert analysis.ops.get("mm") == 1


def test_parameters_count_in_minimal_bytes(examples):
    task = load_task(examples / "level1" / "4_LayerNorm.py", {"batch_size": 2, "dim": 8})
    assert task.analysis.parameter_bytes == 2 * 8 * 4  # weight and bias
    assert task.analysis.min_bytes == 4 * (2 * 8) * 2 + 2 * 8 * 4


# -- size overrides -----------------------------------------------------------------------------


def test_size_constants_are_module_level_int_and_float_literals():
    assert size_constants(GOOD) == {"batch_size": 16, "dim": 32, "scale": 0.5}


def test_size_constants_include_tuples_and_constant_arithmetic_as_kernelbench_writes_them():
    source = (
        "N = 2048 * 2\ninput_shape = (8192 * 2,)\nlayers = [1024] * 3\nflag = False\nname = 'x'\n"
        "derived = N * 2\nbias_shape = (N, 1)\nhuge = [0] * 10**9\ncall = f(3)\n"
    )
    assert size_constants(source) == {
        "N": 4096,
        "input_shape": (16384,),
        "layers": [1024, 1024, 1024],
        "flag": False,
        "name": "x",
    }


def test_set_takes_python_literals_and_keeps_the_constant_kind(tmp_path):
    path = write(
        tmp_path,
        GOOD.replace("batch_size = 16   # rows", "batch_size = 8 * 2   # rows")
        .replace("scale = 0.5", "scale = 0.5\nshape = (32,)")
        .replace("torch.rand(batch_size, dim)", "torch.rand(batch_size, *shape)"),
    )
    task = load_task(path, {"batch_size": "2 * 3", "shape": "(4,)"})
    assert task.sizes == {"batch_size": 6, "shape": (4,)}
    assert task.analysis.inputs[0].shape == (6, 4)
    assert "batch_size = 6   # rows" in task_program(task)
    # A record stores a tuple as a JSON list; the program still gets a tuple.
    assert "shape = (5,)" in apply_sizes(task.source, {"shape": [5]})
    with pytest.raises(SizeOverrideError, match=r"shape is a tuple constant; give a tuple such as shape=\(64,\)"):
        load_task(path, {"shape": "4"})


def test_plain_values_among_the_inputs_are_passed_as_they_are(tmp_path):
    source = GOOD.replace("def forward(self, x):", "def forward(self, x, k, flag, shape):").replace(
        "[torch.rand(batch_size, dim)]", "[torch.rand(batch_size, dim), 3, True, (2, 4)]"
    )
    task = load_task(write(tmp_path, source))
    assert task.analysis is not None
    plain = [(spec.dtype, spec.value, spec.nbytes, spec.is_tensor) for spec in task.analysis.inputs[1:]]
    assert plain == [("int", "3", 0, False), ("bool", "True", 0, False), ("tuple", "(2, 4)", 0, False)]
    assert task.analysis.min_bytes == 2 * 16 * 32 * 4  # the plain values move no data


def test_size_override_changes_shapes_including_derived_values(tmp_path):
    path = write(tmp_path, GOOD)
    task = load_task(path, {"batch_size": "4", "scale": 2})
    assert task.sizes == {"batch_size": 4, "scale": 2.0}
    assert isinstance(task.sizes["scale"], float)
    assert task.analysis.inputs[0].shape == (4, 32)
    program = task_program(task)
    assert "batch_size = 4   # rows" in program  # comments and layout kept
    assert "scale = 2.0" in program
    namespace = task_namespace(task)
    assert namespace["rows_total"] == 8


def test_apply_sizes_handles_negative_and_annotated_constants():
    source = "a: int = -3\nb = 1.5e3\n"
    assert apply_sizes(source, {"a": 7, "b": 2.0}) == "a: int = 7\nb = 2.0\n"


def test_one_name_of_a_chained_size_constant_can_change_alone(kernelbench):
    # 16 of KernelBench's level-2 files write `height = width = 128`
    source = "batch_size = 4\nheight = width = 128  # square\n"
    assert size_constants(source) == {"batch_size": 4, "height": 128, "width": 128}
    assert apply_sizes(source, {"height": 16}) == "batch_size = 4\nheight = 16; width = 128  # square\n"
    assert apply_sizes(source, {"batch_size": 2}) == "batch_size = 2\nheight = width = 128  # square\n"
    task = load_task(kernelbench / "level2" / "1_Conv2D_ReLU_BiasAdd.py", {"batch_size": 2, "height": 10, "width": 12})
    assert task.analysis is not None and task.analysis.inputs[0].shape == (2, 64, 10, 12)


def test_each_name_of_an_unpacked_size_tuple_is_a_size_constant(kernelbench):
    # 29 of KernelBench's level-2 files write `depth, height, width = 16, 32, 32`
    source = "depth, height, width = 16, 32, 32\n"
    assert size_constants(source) == {"depth": 16, "height": 32, "width": 32}
    assert apply_sizes(source, {"height": 8}) == "depth, height, width = 16, 8, 32\n"
    task = load_task(kernelbench / "level2" / "100_ConvTranspose3d_Clamp_Min_Divide.py", {"depth": 4, "width": 5})
    assert task.analysis is not None and task.analysis.inputs[0].shape == (16, 64, 4, 48, 5)


def test_parse_size_assignments():
    assert parse_size_assignments(["batch_size=16", " dim = 64 "]) == {"batch_size": "16", "dim": "64"}
    for bad in ("batch_size", "=3", "batch_size=", "2x=3"):
        with pytest.raises(SizeOverrideError, match="expected NAME=VALUE"):
            parse_size_assignments([bad])


def test_unknown_size_name_is_a_clear_error(tmp_path):
    path = write(tmp_path, GOOD)
    with pytest.raises(SizeOverrideError) as caught:
        load_task(path, {"rows_total": "3"})
    message = str(caught.value)
    assert str(path) in message and "rows_total" in message
    assert "its size constants are: batch_size, dim, scale" in message


@pytest.mark.parametrize(
    "name, value, expected",
    [
        ("batch_size", "abc", "batch_size is an int constant; give a number such as batch_size=16"),
        ("batch_size", "2.5", "int constant"),
        ("batch_size", 2.5, "give a whole number"),
        ("scale", "half", "scale is a float constant"),
        ("scale", True, "not a boolean"),
    ],
)
def test_bad_size_values_are_clear_errors(tmp_path, name, value, expected):
    with pytest.raises(SizeOverrideError, match=expected):
        load_task(write(tmp_path, GOOD), {name: value})


def test_tree_overrides_apply_where_the_constant_exists(examples):
    tasks = load_tasks(examples, {"M": 8})
    for task in tasks:
        if "M" in size_constants(task.source):
            assert task.sizes == {"M": 8}
        else:
            assert task.sizes == {}
    matmul = next(task for task in tasks if task.name == "10_Matmul")
    assert matmul.analysis.inputs[0].shape[0] == 8
    with pytest.raises(SizeOverrideError, match="no task there has"):
        load_tasks(examples, {"no_such_size": 1})


# -- bad task files -----------------------------------------------------------------------------


def test_missing_file(tmp_path):
    with pytest.raises(TaskError, match=r"missing\.py: no such task file"):
        load_task(tmp_path / "missing.py")


def test_missing_directory_and_empty_directory(tmp_path):
    with pytest.raises(TaskError, match="no such directory"):
        find_task_files(tmp_path / "nowhere")
    with pytest.raises(TaskError, match=r"no task files \(\*\.py\) found"):
        load_tasks(tmp_path)


def test_syntax_error_names_file_and_line(tmp_path):
    path = write(tmp_path, "import torch\n\ndef get_inputs(:\n    pass\n")
    with pytest.raises(TaskError, match=rf"{path.name}:3: syntax error"):
        load_task(path)


@pytest.mark.parametrize("missing", ["Model", "get_inputs", "get_init_inputs"])
def test_missing_definitions(tmp_path, missing):
    source = GOOD.replace(f"class {missing}(", "class Other(").replace(f"def {missing}(", "def other(")
    with pytest.raises(TaskError, match=rf"no {missing} defined; a KernelBench task defines"):
        load_task(write(tmp_path, source))


def test_model_must_be_a_module(tmp_path):
    source = GOOD.replace("class Model(nn.Module):", "class Model:").replace("super().__init__()", "pass")
    with pytest.raises(TaskError, match="Model is not a subclass of torch.nn.Module"):
        load_task(write(tmp_path, source))


def test_get_inputs_raising_names_the_error_and_line(tmp_path):
    source = GOOD.replace("    return [torch.rand(batch_size, dim)]", "    raise ValueError('no data')")
    path = write(tmp_path, source)
    line = source.splitlines().index("    raise ValueError('no data')") + 1
    with pytest.raises(TaskError, match=rf"get_inputs\(\) raised ValueError: no data \(line {line}\)"):
        load_task(path)


@pytest.mark.parametrize(
    "returned, expected",
    [
        ("[torch.rand(2, 2), {'a': 1}]", "item 1 is a dict; each input must be a torch.Tensor or a plain value"),
        ("torch.rand(2, 2)", "returned a Tensor; it must return a list of tensors"),
        ("[torch.rand(2, 2), object()]", "item 1 is a object"),
    ],
)
def test_get_inputs_must_return_tensors_or_plain_values(tmp_path, returned, expected):
    source = GOOD.replace("[torch.rand(batch_size, dim)]", returned)
    with pytest.raises(TaskError, match=expected):
        load_task(write(tmp_path, source))


def test_module_level_error_and_forward_error(tmp_path):
    with pytest.raises(TaskError, match=r"running the module raised ZeroDivisionError"):
        load_task(write(tmp_path, GOOD + "\nratio = 1 / 0\n"))
    with pytest.raises(TaskError, match=r"running the module raised SystemExit"):
        load_task(write(tmp_path, GOOD + "\nimport sys\nsys.exit(3)\n"))
    broken_forward = GOOD.replace("return torch.relu(x) * self.scale", "return x @ torch.rand(3, 3)")
    with pytest.raises(TaskError, match=r"Model.forward raised RuntimeError"):
        load_task(write(tmp_path, broken_forward))
    not_a_tensor = GOOD.replace("return torch.relu(x) * self.scale", "return 'relu'")
    with pytest.raises(TaskError, match="Model.forward returned str"):
        load_task(write(tmp_path, not_a_tensor))


def test_a_task_that_needs_real_values_is_traced_on_the_cpu(tmp_path):
    source = GOOD.replace("return torch.relu(x) * self.scale", "return torch.relu(x) * float(x.abs().max().item())")
    task = load_task(write(tmp_path, source))
    assert task.analysis.traced_on == "cpu"
    assert task.analysis.ops["relu"] == 1 and task.analysis.ops["_local_scalar_dense"] == 1


def test_task_output_does_not_reach_stdout(tmp_path, capsys):
    load_task(write(tmp_path, GOOD.replace("def get_inputs():", "print('hello')\n\ndef get_inputs():")))
    captured = capsys.readouterr()
    assert "hello" not in captured.out and "hello" in captured.err


def test_tracing_leaves_global_state_usable(examples):
    load_task(examples / "level1" / "10_Matmul.py")
    assert torch.empty(1).device.type == "cpu"  # the meta device does not leak
