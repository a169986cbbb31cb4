"""What one forward of a task's reference does: tensors, operators, FLOPs and minimal bytes.

The forward is traced under a dispatch mode that records every aten operator, and under
:class:`torch.utils.flop_counter.FlopCounterMode`. It runs on the ``meta`` device first: shapes and
operators without computing anything, so a task sized for a large GPU is analyzed in milliseconds.
A task that needs real values (``.item()``, data-dependent shapes) is run again on the CPU.
"""

from __future__ import annotations

import sys
import warnings
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from ..errors import TaskError, describe_exception
from ..records import TaskAnalysis, TensorSpec

__all__ = ["analyze_task_module", "SEED"]

SEED = 42
"""KernelBench's seed, reset before constructing a model and before drawing its inputs."""

# Operators that only describe or reshape memory; they say nothing about a task's kind of work.
_BOOKKEEPING_OPS = frozenset(
    {
        "detach",
        "view",
        "_unsafe_view",
        "alias",
        "empty",
        "empty_like",
        "empty_strided",
        "expand",
        "t",
        "transpose",
        "permute",
        "unsqueeze",
        "squeeze",
        "reshape",
        "as_strided",
        "lift_fresh",
        "_to_copy",
        "clone",
        "slice",
        "select",
        "split",
        "split_with_sizes",
        "unbind",
        "flatten",
        "contiguous",
        "_reshape_alias",
        "new_empty",
        "new_empty_strided",
    }
)


class _OperatorRecorder(TorchDispatchMode):
    """Counts the aten operators a forward dispatches."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's API
        name = func.overloadpacket.__name__
        if name not in _BOOKKEEPING_OPS:
            self.ops[name] = self.ops.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


def analyze_task_module(namespace: dict[str, Any], path: Path, *, meta_only: bool = False) -> TaskAnalysis:
    """Trace the task defined in ``namespace`` (from ``path``); errors name the file.

    ``meta_only``: no second try on the CPU. For a task known to trace on the meta device at other
    sizes, a failure there is the size's (a kernel larger than its input), and trying it on the CPU
    would allocate the task's real inputs first."""
    try:
        return _trace(namespace, path, "meta")
    except Exception:  # noqa: BLE001 - anything the meta device cannot do, the CPU may
        if meta_only:
            raise
        return _trace(namespace, path, "cpu")


def _trace(namespace: dict[str, Any], path: Path, device: str) -> TaskAnalysis:
    model_class = namespace["Model"]
    if not (isinstance(model_class, type) and issubclass(model_class, torch.nn.Module)):
        raise TaskError(f"{path}: Model is not a subclass of torch.nn.Module")

    def call(what: str, function: Any, *args: Any) -> Any:
        try:
            with redirect_stdout(sys.stderr):
                return function(*args)
        except Exception as error:
            raise TaskError(f"{path}: {what} raised {describe_exception(error, path)}") from None

    with torch.device(device), torch.no_grad(), warnings.catch_warnings(record=True) as raised:
        warnings.simplefilter("always")  # the task's own warnings: kept in its analysis, not printed
        torch.manual_seed(SEED)
        init_inputs = call("get_init_inputs()", namespace["get_init_inputs"])
        if not isinstance(init_inputs, (list, tuple)):
            raise TaskError(f"{path}: get_init_inputs() returned a {type(init_inputs).__name__}; it must return a list")
        model = call("Model(*get_init_inputs())", model_class, *init_inputs)
        torch.manual_seed(SEED)
        inputs = call("get_inputs()", namespace["get_inputs"])
        _check_inputs(path, inputs)
        recorder = _OperatorRecorder()
        flop_counter = FlopCounterMode(display=False)
        with flop_counter, recorder:
            output = call("Model.forward", model, *inputs)
    outputs = _output_tensors(path, output)
    return TaskAnalysis(
        inputs=tuple(_spec(item) if isinstance(item, torch.Tensor) else _plain_spec(item) for item in inputs),
        outputs=tuple(_spec(tensor) for tensor in outputs),
        parameter_bytes=_parameter_bytes(model),
        flops=int(flop_counter.get_total_flops()),
        ops=dict(sorted(recorder.ops.items())),
        traced_on=device,
        warnings=tuple(dict.fromkeys(f"{w.category.__name__}: {w.message}" for w in raised)),
    )


def _check_inputs(path: Path, inputs: Any) -> None:
    if not isinstance(inputs, (list, tuple)):
        raise TaskError(f"{path}: get_inputs() returned a {type(inputs).__name__}; it must return a list of tensors")
    for position, item in enumerate(inputs):
        if type(item) is not torch.Tensor and not is_plain_value(item):
            raise TaskError(
                f"{path}: get_inputs() item {position} is a {type(item).__name__}; each input must be a "
                "torch.Tensor or a plain value (a number, boolean, string, None, or a tuple or list of them)"
            )


def is_plain_value(item: Any) -> bool:
    """A forward argument passed as it is: a number, boolean, string or None, or a tuple or list of them."""
    if item is None or isinstance(item, (bool, int, float, str)):
        return True
    return isinstance(item, (tuple, list)) and all(is_plain_value(element) for element in item)


def _output_tensors(path: Path, output: Any) -> tuple[torch.Tensor, ...]:
    outputs = tuple(output) if isinstance(output, (list, tuple)) else (output,)
    if not outputs or not all(isinstance(item, torch.Tensor) for item in outputs):
        raise TaskError(
            f"{path}: Model.forward returned {type(output).__name__}; it must return a tensor or a tuple of tensors"
        )
    return outputs


def _spec(tensor: torch.Tensor) -> TensorSpec:
    return TensorSpec(
        shape=tuple(tensor.shape),
        dtype=str(tensor.dtype).removeprefix("torch."),
        nbytes=tensor.numel() * tensor.element_size(),
    )


def _plain_spec(item: Any) -> TensorSpec:
    return TensorSpec(shape=(), dtype=type(item).__name__, nbytes=0, value=repr(item))


def _parameter_bytes(model: torch.nn.Module) -> int:
    unique = {id(t): t for t in (*model.parameters(), *model.buffers())}
    return sum(t.numel() * t.element_size() for t in unique.values())
