"""Forward convolutions: ``nn.Conv1d``/``Conv2d``/``Conv3d`` and ``F.conv1d``/``conv2d``/``conv3d``,
one or several chained (a depthwise-separable block is a depthwise convolution then a pointwise one).

Recognizes convolutions of float32 tensors with any kernel size, stride, padding (ints, tuples,
``'valid'``, ``'same'``), dilation and groups (standard, grouped, depthwise with any channel
multiplier, pointwise), with or without bias, batched or not, ``padding_mode='zeros'`` only; the
weight and bias are the task's own parameters (or forward arguments). Every convolution is run as a
3D one with size-1 dims by kernels whose sizes are arguments, so a chain's convolutions share one
build. A pointwise convolution at stride 1 without padding reads its spatial dims as one long row.
Transposed convolutions are another family's.

The ``method`` knob picks the algorithm: ``direct`` (:mod:`._conv_kernels`: register tiles of output
channels by columns over an input slab per output row) or ``gemm`` (:mod:`._conv_gemm_kernels`: an
implicit GEMM on packed patches, output positions flattened across rows and batch, on the matmul
recipe's micro-kernel); under ``gemm`` a layer whose groups have fewer than
:data:`_GEMM_MIN_GROUP_OUTPUTS` output channels (depthwise) still runs direct. A task starts with
``gemm`` when one of its layers has at least :data:`_GEMM_START_GROUP_OUTPUTS` output channels per
group, or a few less over short rows (:data:`_GEMM_START_SHORT_ROWS`), else ``direct``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..graph import Node, OpGraph, Ref
from ..modules import candidate_module, forward_argument, param_expr
from ..recipe import GenerationContext, Knob, Match, compiler_flags
from ._conv_gemm_kernels import TILE_ORDERS
from ._conv_kernels import conv_kernel_source
from ._matmul_kernels import register_rows_start

__all__ = [
    "ConvolutionRecipe",
    "conv_geometry",
    "convolution_layer",
    "describe_layer",
    "layer_lines",
    "gemm_first",
    "calls_gemm",
    "conv_start",
]

_CONVOLUTIONS = {"conv1d": 1, "conv2d": 2, "conv3d": 3}
_FLOAT32 = "torch.float32"
_MAX_CHAIN = 4
"""Chained convolutions one candidate runs (a depthwise-separable block has two)."""
_GEMM_MIN_GROUP_OUTPUTS = 4
"""Output channels per group below which a layer runs direct even under ``method=gemm``: a GEMM of
fewer rows leaves most of every register tile idle (depthwise convolutions have one)."""
_GEMM_START_GROUP_OUTPUTS = 64
"""Output channels per group from which a task starts with ``method=gemm``. Measured side by side (CPU
time, a busy 2-core AVX2 machine, noise up to 8%, two runs) on every KernelBench level-1 forward
convolution and on variants: from 64 output channels per group on, the implicit GEMM was 1.06-1.8x
the direct kernel on most (128 channels, 1D, short rows, strides, pointwise), 0.84-0.97x on five
(an 11x11 kernel at stride 4, two 3x5x7 3D kernels and two 5x9 kernels, all over 3 or 32 input
channels: long rows the direct kernel already runs well); with fewer, 0.65-1.05x (grouped with 4
or 16 per group, 3 or 4 input channels, 1D at 32)."""
_GEMM_START_SHORT_ROWS = (32, 24)
"""(output channels per group, output row length): a task with at least this many channels whose
rows are shorter also starts with ``gemm``; the direct kernel's vector tiles are then mostly tail
(measured: 1.49x on 32 channels of rows of 6, a 3D convolution)."""


def _tuple(value: Any, spatial: int) -> tuple[int, ...] | None:
    """An int or a tuple of ``spatial`` ints as a tuple; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return (value,) * spatial
    if isinstance(value, tuple) and len(value) == 1 and isinstance(value[0], int) and spatial > 1:
        return (value[0],) * spatial
    if isinstance(value, tuple) and len(value) == spatial and all(isinstance(v, int) for v in value):
        return tuple(value)
    return None


def conv_geometry(
    kernel: tuple[int, ...], stride: Any, padding: Any, dilation: Any, groups: Any
) -> dict[str, Any] | None:
    """Stride, padding before and after, dilation (each one int per spatial dim) and groups of a
    convolution with this kernel, from the values a module or a functional call carries (ints,
    tuples, ``'valid'``, ``'same'``); None where PyTorch would refuse them or they are not plain."""
    spatial = len(kernel)
    strides, dilations = _tuple(stride, spatial), _tuple(dilation, spatial)
    if strides is None or dilations is None or not isinstance(groups, int) or isinstance(groups, bool):
        return None
    if min(strides) < 1 or min(dilations) < 1 or groups < 1:
        return None
    if padding == "valid":
        before = after = (0,) * spatial
    elif padding == "same":
        if any(s != 1 for s in strides):
            return None
        totals = [d * (k - 1) for d, k in zip(dilations, kernel)]
        before = tuple(t // 2 for t in totals)
        after = tuple(t - b for t, b in zip(totals, before))
    else:
        pads = _tuple(padding, spatial)
        if pads is None or min(pads) < 0:
            return None
        before = after = pads
    return {"stride": strides, "before": before, "after": after, "dilation": dilations, "groups": groups}


def _operand(graph: OpGraph, node: Node) -> dict[str, Any]:
    if node.op == "param":
        return {"param": graph.params[node.name]}
    return {"input": graph.inputs.index(node.name)}


def _is_float32_tensor(node: Node | None) -> bool:
    return node is not None and node.op in ("param", "input") and node.shape is not None and str(node.dtype) == _FLOAT32


class ConvolutionRecipe:
    """Forward convolutions, alone or chained, by a register-tiled direct N-d kernel or an implicit GEMM."""

    family = "convolution"
    knobs: Mapping[str, Knob] = {
        "parallel": Knob(default=False, values=(False, True), start=True),
        "simd": Knob(default=False, values=(False, True), start=True),
        # Output channels per register tile: 6 x 2 AVX2 vectors of columns fill 12 of 16 registers
        # (8 to start with AVX-512's 32: register_rows_start).
        "accumulators": Knob(default=1, values=(1, 2, 4, 6, 8), start=6),
        # Output columns per work item: the input slab they read stays in L2 for every channel block
        # (under method=gemm, flattened output positions; 1024 to start: conv_start).
        "block": Knob(default=128, values=(32, 64, 128, 256, 512, 1024, 2048), start=128, cache="L2"),
        # The implicit GEMM's loop over a work item's register tiles (_conv_gemm_kernels.TILE_ORDERS).
        "order": Knob(default="columns", values=TILE_ORDERS, start="channels"),
        "vector_width": Knob(default=256, values=(256, 512), start=512),
        # The algorithm; each task's match starts it from its shapes (see _GEMM_START_GROUP_OUTPUTS).
        "method": Knob(default="direct", values=("direct", "gemm"), start="direct"),
    }

    # -- recognizing --------------------------------------------------------------------------

    def match(self, graph: OpGraph) -> Match | None:
        if len(graph.outputs) != 1 or not isinstance(graph.outputs[0], Ref):
            return None
        ops = graph.ops
        if not ops or len(ops) > _MAX_CHAIN or any(node.op not in _CONVOLUTIONS for node in ops):
            return None
        if graph.outputs[0] != Ref(ops[-1].name):
            return None
        layers = []
        previous: Node | None = None
        for node in ops:
            layer = self._layer(graph, node, previous)
            if layer is None:
                return None
            layers.append(layer)
            previous = node
        if any(len(graph.users(node.name)) != 1 for node in ops[:-1]):
            return None
        source = graph.node(ops[0].arg(0, "input"))
        assert source is not None  # checked by _layer
        summary = " then ".join(self._describe(layer) for layer in layers)
        return Match(
            family=self.family,
            summary=summary,
            facts={"input": graph.inputs.index(source.name), "layers": layers},
            start=conv_start(layers),
        )

    def _layer(self, graph: OpGraph, node: Node, previous: Node | None) -> dict[str, Any] | None:
        """One convolution of the chain: it reads the task's input (the first) or the convolution
        before it; None when the recipe does not generate it."""
        source = graph.node(node.arg(0, "input"))
        if source is None or (previous is None and source.op != "input"):
            return None
        if previous is not None and source.name != previous.name:
            return None
        return convolution_layer(graph, node)

    @staticmethod
    def _describe(layer: Mapping[str, Any]) -> str:
        return describe_layer(layer)

    # -- generating ---------------------------------------------------------------------------

    def generate(self, match: Match, knobs: Mapping[str, Any], context: GenerationContext) -> str:
        cpp = conv_kernel_source(
            parallel=bool(knobs["parallel"]),
            simd=bool(knobs["simd"]),
            channels=int(knobs["accumulators"]),
            block=int(knobs["block"]),
            order=str(knobs["order"]),
            vector_bits=int(knobs["vector_width"]),
            gemm=calls_gemm(match.facts["layers"], knobs["method"]),
        )
        arguments = [forward_argument(context, i) for i in range(len(context.graph.inputs))]
        return candidate_module(
            match=match,
            knobs=knobs,
            context=context,
            cpp=cpp,
            forward_body=_forward(match.facts, arguments, gemm=calls_gemm(match.facts["layers"], knobs["method"])),
            flags=compiler_flags(knobs),
        )


def convolution_layer(graph: OpGraph, node: Node) -> dict[str, Any] | None:
    """One convolution's facts (its weight and bias operands and geometry) whatever it reads; None
    when the recipe's kernels do not compute it."""
    spatial = _CONVOLUTIONS.get(node.op)
    source = graph.node(node.arg(0, "input"))
    if spatial is None or source is None or str(source.dtype) != _FLOAT32 or source.shape is None:
        return None
    if node.kwargs.get("padding_mode", "zeros") != "zeros" or str(node.dtype) != _FLOAT32 or node.shape is None:
        return None
    batched = len(source.dims) == spatial + 2
    if not batched and len(source.dims) != spatial + 1:
        return None
    weight, bias = graph.node(node.arg(1, "weight")), node.arg(2, "bias")
    bias_node = graph.node(bias)
    if not _is_float32_tensor(weight) or (bias is not None and not _is_float32_tensor(bias_node)):
        return None
    assert weight is not None
    if len(weight.dims) != spatial + 2:
        return None
    out_channels, group_channels, *kernel = weight.dims
    geometry = conv_geometry(
        tuple(kernel),
        node.arg(3, "stride", 1),
        node.arg(4, "padding", 0),
        node.arg(5, "dilation", 1),
        node.arg(6, "groups", 1),
    )
    if geometry is None:
        return None
    channels = source.dims[1 if batched else 0]
    groups = geometry["groups"]
    if channels != group_channels * groups or out_channels % groups or min(source.dims) < 1:
        return None
    if bias_node is not None and bias_node.dims != (out_channels,):
        return None
    if min(node.dims) < 1:
        return None
    return {
        "spatial": spatial,
        "batched": batched,
        "in_channels": channels,
        "out_channels": out_channels,
        "out_width": node.dims[-1],
        "kernel": list(kernel),
        "weight": _operand(graph, weight),
        "bias": _operand(graph, bias_node) if bias_node is not None else None,
        **{key: list(value) if isinstance(value, tuple) else value for key, value in geometry.items()},
    }


def describe_layer(layer: Mapping[str, Any]) -> str:
    """One line for people and prompts: the kind of convolution and its geometry."""
    groups, channels = layer["groups"], layer["in_channels"]
    kind = (
        "depthwise"
        if groups == channels and groups > 1
        else "grouped"
        if groups > 1
        else "pointwise"
        if set(layer["kernel"]) == {1}
        else "standard"
    )
    details = [f"{channels} -> {layer['out_channels']} channels", "kernel " + "x".join(map(str, layer["kernel"]))]
    for name in ("stride", "dilation"):
        if set(layer[name]) != {1}:
            details.append(f"{name} {'x'.join(map(str, layer[name]))}")
    if set(layer["before"]) | set(layer["after"]) != {0}:
        details.append(f"padding {'x'.join(map(str, layer['before']))}")
    if groups > 1:
        details.append(f"groups {groups}")
    if layer["bias"] is not None:
        details.append("bias")
    return f"{kind} {layer['spatial']}D convolution ({', '.join(details)})"


def _group_outputs(layer: Mapping[str, Any]) -> int:
    """Output channels per group: the rows of the layer's GEMM."""
    return int(layer["out_channels"]) // int(layer["groups"])


def gemm_first(layer: Mapping[str, Any]) -> bool:
    """Whether the layer's shapes call for the implicit GEMM first (at the task's own sizes)."""
    channels, width = _GEMM_START_SHORT_ROWS
    outputs = _group_outputs(layer)
    return outputs >= _GEMM_START_GROUP_OUTPUTS or (outputs >= channels and int(layer["out_width"]) < width)


_GEMM_START_BLOCK = 1024
"""Output positions per implicit-GEMM work item to start from (fewer at run time where the item's K
panel of patches would not fit half of L2). With its tiles in ``channels`` order, each output row
is written in runs of the item's positions: on a 2-core AVX-512 Xeon at fitted sizes, 1024 against
the family's 128 took ``87_conv_pointwise_2D`` from 22.4 to 7.8 ms, ``67_conv_standard_1D`` from
36.6 to 13.9, ``54_conv_standard_3D`` from 28.7 to 16.8, ``56`` from 25.8 to 23.7 (2048: within
5% of 1024 either way, ahead on 7 of 12 forward files)."""

_WHOLE_ROWS_AT_MOST = 512
"""The widest direct-loop row that :func:`conv_start` gives one work item whole (measured on rows up
to 512)."""


def conv_start(layers: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The knob values a task of these layers starts from (at its own sizes): the method
    (:func:`gemm_first`), the register tile's rows, :data:`_GEMM_START_BLOCK` positions per work item
    where a layer runs the implicit GEMM, else whole rows per work item where every layer run
    direct has one register tile of output channels per group (depthwise, or a few channels per
    group). Such a layer reads its slab once, so a block of columns saves nothing in L2, and half
    rows read the input in strided runs: 82_conv_depthwise_2D at 4 x 32 x 256 x 256 on a 2-core AVX2
    EPYC took 13.9 ms with 128-column items and 6.5 ms with whole rows (eager: 10.4 ms). A direct
    layer beside a GEMM one takes whole rows up to the GEMM's block."""
    wide = any(gemm_first(layer) for layer in layers)
    start: dict[str, Any] = {"method": "gemm" if wide else "direct", **register_rows_start()}
    rows = int(start.get("accumulators", ConvolutionRecipe.knobs["accumulators"].starting))
    direct = [layer for layer in layers if not _runs_gemm(layer, wide)]
    if wide:
        start["block"] = _GEMM_START_BLOCK
    elif direct and all(_group_outputs(layer) <= rows for layer in direct):
        width = max(int(layer["out_width"]) for layer in direct)
        values = [value for value in ConvolutionRecipe.knobs["block"].values if value <= _WHOLE_ROWS_AT_MOST]
        start["block"] = next((value for value in values if value >= width), values[-1])
    return start


def _runs_gemm(layer: Mapping[str, Any], gemm: bool) -> bool:
    """Whether the layer runs as an implicit GEMM: under ``method=gemm``, with the channels for it."""
    return gemm and _group_outputs(layer) >= _GEMM_MIN_GROUP_OUTPUTS


def calls_gemm(layers: Sequence[Mapping[str, Any]], method: str) -> bool:
    """Whether any layer runs as an implicit GEMM under ``method`` (else the GEMM is not built: a
    depthwise task's ``method=gemm`` builds the same machine code as ``direct``, which the verifier
    reports)."""
    return any(_runs_gemm(layer, method == "gemm") for layer in layers)


def _expression(operand: Mapping[str, Any], arguments: list[str]) -> str:
    return param_expr(operand["param"]) if "param" in operand else arguments[operand["input"]]


def _output_size(dim: str, grown: int, stride: int) -> str:
    """The line computing output size ``O{dim}`` from input size ``{dim}``: the input padded and
    shrunk by the dilated kernel's reach (``grown`` in all), then strided."""

    def plus(value: int) -> str:
        return f"{dim} + {value}" if value > 0 else f"{dim} - {-value}" if value < 0 else dim

    return f"O{dim} = {plus(grown)}" if stride == 1 else f"O{dim} = ({plus(grown - 1)}) // {stride} + 1"


def _forward(facts: Mapping[str, Any], arguments: list[str], *, gemm: bool) -> str:
    """``forward``: per convolution, its sizes read from the input's shape, the output allocated
    and ``lib.conv`` (or, with ``gemm``, ``lib.conv_gemm`` where the layer has the channels for it)
    called; the last result returned."""
    lines = [f"y0 = {arguments[facts['input']]}.contiguous()"]
    for index, layer in enumerate(facts["layers"]):
        lines += layer_lines(layer, f"y{index}", f"y{index + 1}", arguments, gemm=gemm)
    lines.append(f"return y{len(facts['layers'])}")
    return "\n".join(lines)


def layer_lines(
    layer: Mapping[str, Any],
    source: str,
    target: str,
    arguments: list[str],
    *,
    gemm: bool,
    prefix: str = "",
    tail_arguments: str = "",
) -> list[str]:
    """The lines of ``forward`` running one convolution of the contiguous tensor ``source`` into a
    new ``target``: its sizes read from ``source``'s shape, then ``lib.{prefix}conv`` (or
    ``conv_gemm`` where the layer runs as an implicit GEMM) with ``tail_arguments`` after its own."""
    spatial = layer["spatial"]
    pad3 = [0] * (3 - spatial)
    one3 = [1] * (3 - spatial)
    kernel, stride = one3 + layer["kernel"], one3 + layer["stride"]
    before, after, dilation = pad3 + layer["before"], pad3 + layer["after"], one3 + layer["dilation"]
    weight = f"{_expression(layer['weight'], arguments)}.contiguous()"
    bias = f"{_expression(layer['bias'], arguments)}.contiguous()" if layer["bias"] is not None else "w"
    batch = f"N = {source}.shape[0]" if layer["batched"] else "N = 1"
    dims = f"{source}.shape[{2 if layer['batched'] else 1}:]"
    lines = [
        f"w = {weight}",
        f"b = {bias}",
        batch,
        f"D, H, W = {tuple(one3)} + tuple({dims})" if spatial < 3 else f"D, H, W = {dims}",
        *(
            _output_size(dim, b + a - d * (k - 1), s)
            for dim, b, a, d, k, s in zip("DHW", before, after, dilation, kernel, stride)
        ),
        f"C, O = {source}.shape[{1 if layer['batched'] else 0}], w.shape[0]",
        f"{target} = torch.empty(({'N, ' if layer['batched'] else ''}O, "
        f"{', '.join(['OD', 'OH', 'OW'][3 - spatial :])}), dtype=torch.float32)",
    ]
    flat = set(kernel) == {1} and set(stride) == {1} and set(before) | set(after) == {0}
    geometry = [*kernel, *stride, *before, *dilation, layer["groups"]]
    sizes = (
        "N, C, 1, 1, D * H * W, O, 1, 1, OD * OH * OW"
        if flat  # a pointwise convolution: the spatial dims are one long row
        else "N, C, D, H, W, O, OD, OH, OW"
    )
    entry = f"{prefix}conv_gemm" if _runs_gemm(layer, gemm) else f"{prefix}conv"
    lines.append(
        f"lib.{entry}({source}, w, b, {target}, {int(layer['bias'] is not None)}, {sizes}, "
        + ", ".join(map(str, geometry))
        + f"{tail_arguments})"
    )
    return lines
