"""The reference's forward as a small graph of named operations, for the recipes to recognize.

    graph = trace_reference(task)
    [node.op for node in graph.nodes]      # ['input', 'gelu', 'output'] for 1_GELUTanh

The task's ``Model`` is built with its init inputs and traced with ``torch.fx``; shapes and dtypes
come from running the traced graph once on the task's inputs, on the meta device where it can.
Operator spellings are made one: ``torch.relu(x)``, ``F.relu(x)``, ``x.relu()`` and ``nn.ReLU()``
are all op ``relu``; ``a + b`` is ``add``, ``a / b`` is ``div``. Modules become their functional op
with their parameters as ``param`` nodes (``nn.LayerNorm`` -> ``layer_norm`` with ``weight`` and
``bias``). A reference fx cannot trace (data-dependent control flow) raises :class:`NotRecognized`.
An input the task passes as a plain value (``s = 3.14``) is an ``input`` node without a shape whose
``kwargs["value"]`` is that value.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from typing import Any

import attrs
import torch

from ..errors import PragmaError
from ..machine.timing_slot import busy_slot
from ..records import Task
from ..tasks.loading import task_namespace
from ..verifier.inputs import construct, make_inputs

__all__ = ["NotRecognized", "Ref", "Node", "OpGraph", "trace_reference"]


class NotRecognized(PragmaError):
    """No recipe knows the task: a language model is needed."""


@attrs.frozen
class Ref:
    """A reference to another node's value, among an op's arguments."""

    name: str


@attrs.frozen(kw_only=True)
class Node:
    """One operation: ``op`` is the canonical name, ``args`` and ``kwargs`` as called (a
    :class:`Ref` for each tensor argument), ``shape`` and ``dtype`` of its result (None when it
    is not one tensor)."""

    name: str
    op: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = attrs.field(factory=dict)
    shape: tuple[int, ...] | None = None
    dtype: torch.dtype | None = None

    @property
    def dims(self) -> tuple[int, ...]:
        """The result's shape, for a node the caller has found to be one tensor (an input, a
        parameter, or an op whose dtype or shape it checked); raises ValueError for any other."""
        if self.shape is None:
            raise ValueError(f"{self.name} ({self.op}) is not one tensor: it has no shape")
        return self.shape

    def arg(self, index: int, name: str, default: Any = None) -> Any:
        """The argument passed as ``name=`` or at position ``index`` of ``args`` (the first
        argument, usually the input tensor, is position 0), else ``default``."""
        if name in self.kwargs:
            return self.kwargs[name]
        return self.args[index] if index < len(self.args) else default

    @property
    def inputs(self) -> tuple[Ref, ...]:
        """The tensor values this node reads, in argument order."""
        return tuple(_refs([*self.args, *self.kwargs.values()]))


@attrs.frozen(kw_only=True)
class OpGraph:
    """The traced forward: ``inputs`` are the forward's arguments (``input`` nodes), ``params``
    maps ``param`` node names to attribute paths on the model (``norm.weight``), ``outputs`` are
    the returned values."""

    nodes: tuple[Node, ...]
    inputs: tuple[str, ...]
    params: dict[str, str]
    outputs: tuple[Any, ...]

    def __getitem__(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def node(self, ref: Any) -> Node | None:
        """The node a :class:`Ref` names; None for a constant."""
        return self[ref.name] if isinstance(ref, Ref) else None

    def tensor(self, ref: Any) -> Node:
        """The node behind an argument the caller has found to be a :class:`Ref` (any of a node's
        ``inputs``); raises ValueError for a constant and KeyError for a name not in the graph."""
        if not isinstance(ref, Ref):
            raise ValueError(f"{ref!r} is a constant, not a reference to a node")
        return self[ref.name]

    @property
    def ops(self) -> tuple[Node, ...]:
        """The computing nodes: neither inputs, parameters nor the output."""
        return tuple(node for node in self.nodes if node.op not in ("input", "param", "output"))

    def users(self, name: str) -> tuple[Node, ...]:
        return tuple(node for node in self.nodes if Ref(name) in node.inputs)

    def input_node(self, index: int) -> Node:
        return self[self.inputs[index]]

    def describe(self) -> str:
        """One line per op, e.g. ``relu_1 = relu(x)  [1024, 8192] float32``."""
        lines = []
        for node in self.ops:
            args = ", ".join(_show(a) for a in node.args)
            kwargs = ", ".join(f"{k}={_show(v)}" for k, v in node.kwargs.items())
            shape = (
                f"  [{', '.join(map(str, node.shape))}] {str(node.dtype).replace('torch.', '')}"
                if node.shape is not None
                else ""
            )
            lines.append(f"{node.name} = {node.op}({', '.join(p for p in (args, kwargs) if p)}){shape}")
        return "\n".join(lines)


_OPERATORS = {
    operator.add: "add",
    operator.sub: "sub",
    operator.mul: "mul",
    operator.truediv: "div",
    operator.neg: "neg",
    operator.pow: "pow",
    operator.matmul: "matmul",
    operator.getitem: "getitem",
    operator.gt: "gt",
    operator.lt: "lt",
    operator.ge: "ge",
    operator.le: "le",
    operator.abs: "abs",
    operator.floordiv: "floordiv",
    operator.eq: "eq",
    operator.ne: "ne",
    operator.and_: "and",
    operator.or_: "or",
}
_ALIASES = {
    "true_divide": "div",
    "divide": "div",
    "multiply": "mul",
    "subtract": "sub",
    "clip": "clamp",
    "absolute": "abs",
    "negative": "neg",
    "special_expit": "sigmoid",
    "expit": "sigmoid",
    "arctan": "atan",
    "__add__": "add",
    "__radd__": "radd",
    "__sub__": "sub",
    "__rsub__": "rsub",
    "__mul__": "mul",
    "__rmul__": "mul",
    "__truediv__": "div",
    "__rtruediv__": "rdiv",
    "__neg__": "neg",
    "__pow__": "pow",
    "__matmul__": "matmul",
    "linalg_norm": "norm",
    "linalg_vector_norm": "vector_norm",
    "_C._nn.gelu": "gelu",
    "rsub": "rsub",
    "square": "square",
}
_CONV_TRANSPOSE_ATTRIBUTES = ("stride", "padding", "output_padding", "groups", "dilation", "padding_mode")
# Modules and the functional op they run: (op, attributes read as kwargs, parameters).
_MODULES: dict[type, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    torch.nn.ReLU: ("relu", (), ()),
    torch.nn.ReLU6: ("relu6", (), ()),
    torch.nn.GELU: ("gelu", ("approximate",), ()),
    torch.nn.SiLU: ("silu", (), ()),
    torch.nn.Sigmoid: ("sigmoid", (), ()),
    torch.nn.Tanh: ("tanh", (), ()),
    torch.nn.LeakyReLU: ("leaky_relu", ("negative_slope",), ()),
    torch.nn.ELU: ("elu", ("alpha",), ()),
    torch.nn.SELU: ("selu", (), ()),
    torch.nn.CELU: ("celu", ("alpha",), ()),
    torch.nn.Softplus: ("softplus", ("beta", "threshold"), ()),
    torch.nn.Softsign: ("softsign", (), ()),
    torch.nn.Hardtanh: ("hardtanh", ("min_val", "max_val"), ()),
    torch.nn.Hardsigmoid: ("hardsigmoid", (), ()),
    torch.nn.Hardswish: ("hardswish", (), ()),
    torch.nn.Mish: ("mish", (), ()),
    torch.nn.Tanhshrink: ("tanhshrink", (), ()),
    torch.nn.Softshrink: ("softshrink", ("lambd",), ()),
    torch.nn.Hardshrink: ("hardshrink", ("lambd",), ()),
    torch.nn.LogSigmoid: ("logsigmoid", (), ()),
    torch.nn.Softmax: ("softmax", ("dim",), ()),
    torch.nn.LogSoftmax: ("log_softmax", ("dim",), ()),
    torch.nn.LayerNorm: ("layer_norm", ("normalized_shape", "eps"), ("weight", "bias")),
    torch.nn.InstanceNorm1d: ("instance_norm", ("eps", "affine"), ("weight", "bias")),
    torch.nn.InstanceNorm2d: ("instance_norm", ("eps", "affine"), ("weight", "bias")),
    torch.nn.InstanceNorm3d: ("instance_norm", ("eps", "affine"), ("weight", "bias")),
    torch.nn.GroupNorm: ("group_norm", ("num_groups", "eps", "affine"), ("weight", "bias")),
    torch.nn.BatchNorm1d: ("batch_norm", ("eps",), ("weight", "bias", "running_mean", "running_var")),
    torch.nn.BatchNorm2d: ("batch_norm", ("eps",), ("weight", "bias", "running_mean", "running_var")),
    torch.nn.BatchNorm3d: ("batch_norm", ("eps",), ("weight", "bias", "running_mean", "running_var")),
    **{
        module: (
            f"max_pool{rank}d",
            ("kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"),
            (),
        )
        for rank, module in enumerate((torch.nn.MaxPool1d, torch.nn.MaxPool2d, torch.nn.MaxPool3d), start=1)
    },
    **{
        module: (
            f"avg_pool{rank}d",
            ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"),
            (),
        )
        for rank, module in enumerate((torch.nn.AvgPool1d, torch.nn.AvgPool2d, torch.nn.AvgPool3d), start=1)
    },
    torch.nn.Linear: ("linear", (), ("weight", "bias")),
    torch.nn.ConvTranspose1d: ("conv_transpose1d", _CONV_TRANSPOSE_ATTRIBUTES, ("weight", "bias")),
    torch.nn.ConvTranspose2d: ("conv_transpose2d", _CONV_TRANSPOSE_ATTRIBUTES, ("weight", "bias")),
    torch.nn.ConvTranspose3d: ("conv_transpose3d", _CONV_TRANSPOSE_ATTRIBUTES, ("weight", "bias")),
    torch.nn.Conv1d: ("conv1d", ("stride", "padding", "dilation", "groups", "padding_mode"), ("weight", "bias")),
    torch.nn.Conv2d: ("conv2d", ("stride", "padding", "dilation", "groups", "padding_mode"), ("weight", "bias")),
    torch.nn.Conv3d: ("conv3d", ("stride", "padding", "dilation", "groups", "padding_mode"), ("weight", "bias")),
    torch.nn.MSELoss: ("mse_loss", ("reduction",), ()),
    torch.nn.SmoothL1Loss: ("smooth_l1_loss", ("reduction", "beta"), ()),
    torch.nn.HuberLoss: ("huber_loss", ("reduction", "delta"), ()),
    torch.nn.KLDivLoss: ("kl_div", ("reduction", "log_target"), ()),
    torch.nn.CrossEntropyLoss: ("cross_entropy", ("reduction",), ()),
    torch.nn.TripletMarginLoss: ("triplet_margin_loss", ("margin", "p", "eps", "swap", "reduction"), ()),
    **{
        module: (f"adaptive_avg_pool{rank}d", ("output_size",), ())
        for rank, module in enumerate(
            (torch.nn.AdaptiveAvgPool1d, torch.nn.AdaptiveAvgPool2d, torch.nn.AdaptiveAvgPool3d), start=1
        )
    },
    torch.nn.Dropout: ("dropout", ("p", "training"), ()),
    torch.nn.Identity: ("identity", (), ()),
    torch.nn.Flatten: ("flatten", ("start_dim", "end_dim"), ()),
}


def trace_reference(task: Task, *, seed: int = 0) -> OpGraph:
    """The task's forward as an :class:`OpGraph`, shapes taken from one run on its inputs: on the
    meta device (no data, no time: a KernelBench task at its own sizes may take gigabytes and
    seconds), else on the CPU, sharing the machine's timing slot as other busy work does."""
    namespace = task_namespace(task)
    try:
        with torch.device("meta"):
            return _graph(namespace, seed)
    except NotRecognized as error:
        if not isinstance(error, _DidNotRun):
            raise  # untraceable, or an unknown module, on any device
    except Exception:  # noqa: BLE001 - what the meta device cannot build or draw, the CPU may
        pass
    with busy_slot():
        return _graph(namespace, seed)


class _DidNotRun(NotRecognized):
    """The traced forward failed on its inputs (on the meta device, data-dependent code may)."""


def _graph(namespace: dict[str, Any], seed: int) -> OpGraph:
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp

    with torch.no_grad():
        model = construct(namespace, namespace["Model"])
        try:
            traced = torch.fx.symbolic_trace(model, concrete_args=None)
        except Exception as error:  # fx raises many kinds for untraceable code
            raise NotRecognized(
                f"the forward cannot be traced: {type(error).__name__}: "
                f"{str(error).splitlines()[0] if str(error) else ''}"
            ) from None
        inputs = make_inputs(namespace, seed)
        try:
            ShapeProp(traced).propagate(*inputs)
        except Exception as error:
            raise _DidNotRun(f"the traced forward did not run: {type(error).__name__}") from None
    modules = dict(traced.named_modules())
    nodes, params = [], {}
    inputs_: list[str] = []
    outputs: tuple[Any, ...] = ()
    for fx_node in traced.graph.nodes:
        shape, dtype = _shape(fx_node)
        args, kwargs = _convert(fx_node.args), {k: _convert_one(v) for k, v in fx_node.kwargs.items()}
        if fx_node.op == "placeholder":
            given = inputs[len(inputs_)] if len(inputs_) < len(inputs) else None
            plain = {} if isinstance(given, torch.Tensor) else {"value": given}
            nodes.append(Node(name=fx_node.name, op="input", kwargs=plain, shape=shape, dtype=dtype))
            inputs_.append(fx_node.name)
        elif fx_node.op == "get_attr" and _is_traced_constant(traced, fx_node.target):
            # torch.tensor(0.5) in forward: fx keeps it on the traced module, not on the task's model
            value = float(getattr(traced, fx_node.target).item())
            nodes.append(Node(name=fx_node.name, op="tensor", args=(value,), shape=shape, dtype=dtype))
        elif fx_node.op == "get_attr":
            nodes.append(Node(name=fx_node.name, op="param", kwargs={"path": fx_node.target}, shape=shape, dtype=dtype))
            params[fx_node.name] = fx_node.target
        elif fx_node.op == "output":
            result = fx_node.args[0]
            outputs = tuple(_convert(result)) if isinstance(result, (tuple, list)) else (_convert_one(result),)
            nodes.append(Node(name=fx_node.name, op="output", args=outputs))
        elif fx_node.op == "call_module":
            module = modules[fx_node.target]
            nodes.extend(_module_nodes(fx_node, module, args, kwargs, shape, dtype, params))
        else:
            nodes.append(
                Node(
                    name=fx_node.name, op=_canonical(fx_node.target), args=args, kwargs=kwargs, shape=shape, dtype=dtype
                )
            )
    return OpGraph(nodes=tuple(nodes), inputs=tuple(inputs_), params=params, outputs=outputs)


def _is_traced_constant(traced: Any, target: str) -> bool:
    """Whether a ``get_attr`` target is a one-element tensor fx made from a constant in forward."""
    value = getattr(traced, target, None) if target.startswith("_tensor_constant") else None
    return isinstance(value, torch.Tensor) and value.numel() == 1 and value.is_floating_point()


def _module_nodes(
    fx_node: Any, module: torch.nn.Module, args: tuple, kwargs: dict, shape: Any, dtype: Any, params: dict[str, str]
) -> Iterator[Node]:
    kind = _MODULES.get(type(module))
    if kind is None:
        raise NotRecognized(f"it uses an nn.{type(module).__name__} ({fx_node.target}), which no recipe covers")
    op, attributes, parameters = kind
    extra: dict[str, Any] = {name: _convert_one(getattr(module, name)) for name in attributes if hasattr(module, name)}
    for parameter in parameters:
        value = getattr(module, parameter, None)
        if isinstance(value, torch.Tensor):
            name = f"{fx_node.name}_{parameter}"
            path = f"{fx_node.target}.{parameter}"
            params[name] = path
            yield Node(name=name, op="param", kwargs={"path": path}, shape=tuple(value.shape), dtype=value.dtype)
            extra[parameter] = Ref(name)
        else:
            extra[parameter] = None
    yield Node(name=fx_node.name, op=op, args=args, kwargs={**kwargs, **extra}, shape=shape, dtype=dtype)


def _canonical(target: Any) -> str:
    if isinstance(target, str):
        name = target
    elif target in _OPERATORS:
        return _OPERATORS[target]
    else:
        name = getattr(target, "__name__", str(target))
    name = _ALIASES.get(name, name)
    return name.rstrip("_") if name.endswith("_") and not name.startswith("_") else name


def _shape(fx_node: Any) -> tuple[tuple[int, ...] | None, torch.dtype | None]:
    meta = fx_node.meta.get("tensor_meta")
    if meta is None or not hasattr(meta, "shape"):
        return None, None
    return tuple(int(s) for s in meta.shape), meta.dtype


def _convert(values: Any) -> tuple[Any, ...]:
    return tuple(_convert_one(value) for value in values)


def _convert_one(value: Any) -> Any:
    import torch.fx

    if isinstance(value, torch.fx.Node):
        return Ref(value.name)
    if isinstance(value, (tuple, list)):
        return tuple(_convert_one(v) for v in value)
    if isinstance(value, torch.Size):
        return tuple(int(v) for v in value)
    return value


def _refs(values: Any) -> Iterator[Ref]:
    for value in values:
        if isinstance(value, Ref):
            yield value
        elif isinstance(value, tuple):
            yield from _refs(value)


def _show(value: Any) -> str:
    return value.name if isinstance(value, Ref) else repr(value)
