"""Level-2 fusion: a main operator (a GEMM, a convolution, a transposed convolution) and the chain of
operators after it, written as one ``cpu-cpp`` module from the fusion planner's plan
(:mod:`~pragma_core.offline.recipes.fusion`).

Every stage is its level-1 family's kernel, built into the module's one library in a namespace of
its own (``s0``, ``s1``...), its entry points prefixed the same way (``s0_conv``). With ``fusion``
``epilogue`` (the start) each stage's tail runs where its kernel stores (:mod:`._tails`; a matrix
product's in its epilogue), while the run it just wrote is in cache; with ``passes`` every stage
stores plain and each elementwise chain is a pass of its own, the simple version a measured move can
return to. Every size is read from the tensors at run time, so one module serves every size of the
task. The family is named by the main operator: ``fused_gemm``, ``fused_conv`` and
``fused_conv_transposed``, each with its main operator's knobs, ``fast_math`` and ``fusion``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from ..graph import NotRecognized, OpGraph, Ref
from ..knobs import starting
from ..modules import candidate_module, forward_argument, param_expr
from ..recipe import GenerationContext, Knob, Match, compiler_flags
from ._channel_norm_kernels import channel_norm_source
from ._conv_kernels import conv_kernel_source
from ._matmul_kernels import register_rows_start
from ._norm_kernels import norm_kernel_source
from ._pooling_kernels import pooling_kernel_source
from ._tails import Tail, tail_source
from .channel_norms import ChannelNormRecipe, channel_norm_lines
from .conv_transposed import ConvTransposedRecipe, describe_transposed, transposed_kernel, transposed_lines
from .convolution import ConvolutionRecipe, calls_gemm, conv_start, describe_layer, layer_lines
from .elementwise import TRANSCENDENTAL
from .fusion import FusionPlan, Stage, plan_fusion
from .matmul import MatmulRecipe, product_shape, product_sizes, product_source
from .norms import NormRecipe, norm_lines
from .pooling import POOLED_SIZE_SOURCE, PoolingRecipe, pool_lines
from .reduction import ReductionRecipe, reduction_source
from .softmax import SoftmaxRecipe, softmax_source

__all__ = ["FusedRecipe", "FUSED_RECIPES"]

_FUSION = Knob(default="passes", values=("passes", "epilogue"), start="epilogue")
_FAST_MATH = Knob(default=False, values=(False, True))
_FAMILY_KNOBS: dict[str, Mapping[str, Knob]] = {
    "matmul": MatmulRecipe.knobs,
    "convolution": ConvolutionRecipe.knobs,
    "conv_transposed": ConvTransposedRecipe.knobs,
    "pool": PoolingRecipe.knobs,
    "reduction": ReductionRecipe.knobs,
    "softmax": SoftmaxRecipe.knobs,
    "norm": NormRecipe.knobs,
    "channel_norm": ChannelNormRecipe.knobs,
}
_POINTWISE_CHUNK = 4096
"""Elements a pointwise pass copies and finishes per work item: 16 KiB, in L1 for its tail."""
_SPAN_OF = '''def span_of(t, shape, lo, hi):
    """t read over dims [lo, hi) of a tensor of ``shape`` (both aligned on the right): its values
    made contiguous over those dims, the size of the dims after them, and of the span."""
    rank = len(shape)
    aligned = t.reshape((1,) * (rank - t.dim()) + tuple(t.shape))
    covered = aligned.expand(*(shape[d] if lo <= d < hi else 1 for d in range(rank))).contiguous()
    return covered, shape[hi:].numel(), shape[lo:hi].numel()
'''


class FusedRecipe:
    """A main operator of kind ``main`` and its chain (KernelBench level 2)."""

    def __init__(self, family: str, main: str) -> None:
        self.family = family
        self.main = main
        self.knobs: Mapping[str, Knob] = {
            **_FAMILY_KNOBS[main],
            **({} if "fast_math" in _FAMILY_KNOBS[main] else {"fast_math": _FAST_MATH}),
            "fusion": _FUSION,
        }

    def match(self, graph: OpGraph) -> Match | None:
        try:
            plan = plan_fusion(graph)
        except NotRecognized:
            return None
        main = plan.main
        if main is None or main.kind != self.main:
            return None
        start: dict[str, Any] = conv_start([main.facts]) if main.kind == "convolution" else {}
        start.update(register_rows_start())  # the main operator's register tile
        if _transcendental(plan):
            start["fast_math"] = True
        return Match(
            family=self.family,
            summary=f"fused {_describe_main(main)} ({plan.describe()})",
            facts={"plan": plan.describe()},
            start=start,
        )

    def generate(self, match: Match, knobs: Mapping[str, Any], context: GenerationContext) -> str:
        graph = context.graph
        plan = plan_fusion(graph, fuse=knobs["fusion"] == "epilogue")
        writer = _Writer(plan, graph, [forward_argument(context, i) for i in range(len(graph.inputs))])
        main = plan.main
        parts = [
            writer.stage(index, knobs if stage is main else _stage_knobs(stage.kind, knobs))
            for index, stage in enumerate(plan.stages)
        ]
        module = candidate_module(
            match=match,
            knobs=knobs,
            context=context,
            cpp=_one_library(parts),
            forward_body="\n".join([*writer.prologue(), *writer.lines, f"return h{len(plan.stages) - 1}"]),
            flags=compiler_flags(knobs),
        )
        helpers = [source for source, used in ((POOLED_SIZE_SOURCE, writer.pools), (_SPAN_OF, writer.spans)) if used]
        if not helpers:
            return module
        return module.replace("\n\nclass ModelNew", "\n\n" + "\n\n".join(helpers) + "\n\nclass ModelNew", 1)


FUSED_RECIPES = (
    FusedRecipe("fused_gemm", "matmul"),
    FusedRecipe("fused_conv", "convolution"),
    FusedRecipe("fused_conv_transposed", "conv_transposed"),
)
"""The level-2 families, one per main operator."""


def _transcendental(plan: FusionPlan) -> bool:
    """Whether the chain calls libm per element: a transcendental op in a tail, a softmax or a
    logsumexp. Such a chain starts with ``fast_math`` (measured on ``92_Conv2d_GroupNorm_Tanh_
    HardSwish_ResidualAdd_LogSumExp``: 1500 instructions per element in scalar libm calls, and 5.6
    times faster with fast math, at attempt 2 of the profiled loop)."""
    for stage in plan.stages:
        if stage.kind == "softmax" or stage.facts.get("op") == "logsumexp":
            return True
        if any(step["op"] in TRANSCENDENTAL for step in stage.tail.steps):
            return True
    return False


def _describe_main(stage: Stage) -> str:
    if stage.kind == "convolution":
        return describe_layer(stage.facts)
    if stage.kind == "conv_transposed":
        return describe_transposed(stage.facts)
    return f"GEMM ({stage.op})"


def _stage_knobs(kind: str, knobs: Mapping[str, Any]) -> dict[str, Any]:
    """A stage other than the main one: its family's starting knobs, with the shared switches
    (``parallel``, ``simd``, ``fast_math``, ``vector_width``) as the task's knobs set them."""
    shared = {name: knobs[name] for name in ("parallel", "simd", "fast_math", "vector_width") if name in knobs}
    return {**starting(_FAMILY_KNOBS.get(kind, {})), **shared}


def _one_library(parts: list[str]) -> str:
    """The stages' C++ as one source: their ``#include`` lines once, at the top, and each stage's
    code in its own namespace (``s0``, ``s1``...), so their helpers and constants never collide."""
    includes: list[str] = []
    bodies = []
    for index, part in enumerate(parts):
        body: list[str] = []
        for line in part.splitlines():
            if line.startswith("#include"):
                includes.append(line.strip())
            else:
                body.append(line)
        bodies.append(f"namespace s{index} {{\n" + "\n".join(body).strip("\n") + f"\n}}  // namespace s{index}")
    return "\n".join(dict.fromkeys(includes)) + "\n\n" + "\n\n".join(bodies)


class _Writer:
    """The forward's lines and each stage's C++, stage by stage: stage ``k``'s output is ``h{k}``."""

    def __init__(self, plan: FusionPlan, graph: OpGraph, arguments: list[str]) -> None:
        self.plan = plan
        self.graph = graph
        self.arguments = arguments
        self.lines: list[str] = []
        self.inputs: set[int] = set()  # forward arguments a stage reads whole: made contiguous first
        self.pools = False
        self.spans = False

    def prologue(self) -> list[str]:
        return [f"{self.arguments[i]} = {self.arguments[i]}.contiguous()" for i in sorted(self.inputs)]

    def source(self, source: Mapping[str, Any]) -> str:
        if "stage" in source:
            return f"h{source['stage']}"
        if "param" in source:
            return param_expr(source["param"])
        self.inputs.add(source["input"])
        return self.arguments[source["input"]]

    def stage(self, index: int, knobs: Mapping[str, Any]) -> str:
        """Stage ``index``'s C++ (its forward lines appended to :attr:`lines`)."""
        stage = self.plan.stages[index]
        prefix, target = f"s{index}_", f"h{index}"
        fast = bool(knobs.get("fast_math"))
        if stage.kind == "matmul":
            return self._matmul(index, stage, knobs, prefix, target, fast)
        if stage.kind == "view":
            self.lines.append(f"{target} = {self.source(stage.source)}.{_view_call(stage, self)}")
            return ""
        tail = tail_source(stage.tail.steps, stage.tail.extras, self.graph, fast)
        arguments = self._tail_arguments(index, stage)
        x = self.source(stage.source)
        cpp, lines = _KERNELS[stage.kind](_StageCall(self, stage, knobs, prefix, tail, x, target, arguments))
        at = next(i for i, line in enumerate(lines) if line.startswith(f"{target} = ")) + 1
        self.lines += [*lines[:at], *self._extra_lines(index, stage), *lines[at:]]
        return cpp

    # -- the tail's tensors -------------------------------------------------------------------

    def _extra(self, extra: Mapping[str, Any]) -> str:
        expression = self.source(extra["source"])
        if extra.get("view"):
            expression = f"{expression}.{_view_call(self.graph[extra['view']], self)}"
        return expression

    def _extra_lines(self, index: int, stage: Stage) -> list[str]:
        lines = []
        for i, extra in enumerate(stage.tail.extras):
            name = f"t{index}_{i}"
            if extra["broadcast"] == "span":
                self.spans = True
                lo, hi = extra["span"]
                lines.append(
                    f"{name}, a{index}_{i}, b{index}_{i} = span_of({self._extra(extra)}, h{index}.shape, {lo}, {hi})"
                )
            else:
                lines.append(f"{name} = {self._extra(extra)}.contiguous()")
        return lines

    def _tail_arguments(self, index: int, stage: Stage) -> str:
        names = []
        for i, extra in enumerate(stage.tail.extras):
            names.append(f"t{index}_{i}")
            if extra["broadcast"] == "span":
                names += [f"a{index}_{i}", f"b{index}_{i}"]
        return "".join(f", {name}" for name in names) if stage.tail.steps else ""

    # -- the matrix product, whose tail is its epilogue -----------------------------------------

    def _matmul(self, index: int, stage: Stage, knobs: Mapping[str, Any], prefix: str, target: str, fast: bool) -> str:
        facts = stage.facts
        # Its operands index the forward's arguments, then the chain's value it reads, then the stages.
        arguments = [*self.arguments, self.source(stage.source), *(f"h{k}" for k in range(len(self.plan.stages)))]
        epilogue = []
        for extra in stage.tail.extras:
            source = extra["source"]
            operand = {"input": len(self.arguments) + 1 + source["stage"]} if "stage" in source else dict(source)
            epilogue.append({**operand, "broadcast": "scalar" if extra["broadcast"] == "scalar" else "column"})
        bias = [{**facts["bias"], "broadcast": "column"}] if facts["bias"] else []
        extras = bias + epilogue
        cpp = product_source(
            dict(facts, steps=list(stage.tail.steps), extras=[], triangle=None),
            extras,
            self.graph,
            fast=fast,
            parallel=bool(knobs["parallel"]),
            simd=bool(knobs["simd"]),
            accumulators=int(knobs["accumulators"]),
            block=int(knobs["block"]),
            prefix=prefix,
        )
        self.lines += product_sizes(facts, extras, arguments)
        self.lines += [
            f"{target} = torch.empty({product_shape(facts)}, dtype=torch.float32)",
            f"lib.{prefix}matmul(a_, b_, {target}{''.join(f', e{i}_' for i in range(len(extras)))}, batch, M, N, K)",
        ]
        return cpp


# -- each family's kernel and forward lines --------------------------------------------------------


@attrs.frozen
class _StageCall:
    """What a family's kernel writer is given for one stage: the module's writer, the stage and its
    knobs, its entry points' prefix, its tail (None: it stores plain), the tensor ``x`` it reads,
    the name ``target`` of its output, and the tail's arguments to the kernel call."""

    writer: _Writer
    stage: Stage
    knobs: Mapping[str, Any]
    prefix: str
    tail: Tail | None
    x: str
    target: str
    arguments: str


_Kernel = Callable[[_StageCall], tuple[str, list[str]]]
"""A family's kernel for a stage, ``(C++, forward lines)``: the lines allocate ``call.target`` in one
line starting ``{target} = ``, after which the tail's tensors are prepared."""


def _convolution(call: _StageCall) -> tuple[str, list[str]]:
    layer = call.stage.facts
    gemm = calls_gemm([layer], call.knobs["method"])
    cpp = conv_kernel_source(
        parallel=bool(call.knobs["parallel"]),
        simd=bool(call.knobs["simd"]),
        channels=int(call.knobs["accumulators"]),
        block=int(call.knobs["block"]),
        order=str(call.knobs["order"]),
        vector_bits=int(call.knobs["vector_width"]),
        gemm=gemm,
        prefix=call.prefix,
        tail=call.tail,
    )
    return cpp, layer_lines(
        layer, call.x, call.target, call.writer.arguments, gemm=gemm, prefix=call.prefix, tail_arguments=call.arguments
    )


def _conv_transposed(call: _StageCall) -> tuple[str, list[str]]:
    cpp = transposed_kernel(call.knobs, prefix=call.prefix, tail=call.tail)
    return cpp, transposed_lines(
        call.stage.facts, call.x, call.target, call.writer.arguments, prefix=call.prefix, tail_arguments=call.arguments
    )


def _pool(call: _StageCall) -> tuple[str, list[str]]:
    call.writer.pools = True
    facts = {**call.stage.facts, "tile": int(call.knobs["block"])}
    cpp = pooling_kernel_source(facts, call.knobs, prefix=call.prefix, tail=call.tail)
    return cpp, pool_lines(facts, call.x, call.target, prefix=call.prefix, tail_arguments=call.arguments)


def _reduction(call: _StageCall) -> tuple[str, list[str]]:
    facts = call.stage.facts
    first, last = facts["dims"]
    cpp = reduction_source(
        facts["op"],
        simd=bool(call.knobs["simd"]),
        parallel=bool(call.knobs["parallel"]),
        accumulators=int(call.knobs["accumulators"]),
        prefix=call.prefix,
        tail=call.tail,
    )
    kept = f" + (1,) * {last - first}" if facts["keepdim"] else ""
    return cpp, [
        f"shape = {call.x}.shape",
        f"{call.target} = torch.empty(shape[:{first}]{kept} + shape[{last}:], dtype=torch.float32)",
        f"lib.{call.prefix}reduce({call.target}, {call.x}, shape[:{first}].numel(), shape[{first}:{last}].numel(), "
        f"shape[{last}:].numel(){call.arguments})",
    ]


def _softmax(call: _StageCall) -> tuple[str, list[str]]:
    dim = call.stage.facts["dims"][0]
    cpp = softmax_source(
        log=call.stage.facts["op"] == "log_softmax",
        simd=bool(call.knobs["simd"]),
        parallel=bool(call.knobs["parallel"]),
        accumulators=int(call.knobs["accumulators"]),
        prefix=call.prefix,
        tail=call.tail,
    )
    return cpp, [
        f"shape = {call.x}.shape",
        f"{call.target} = torch.empty_like({call.x})",
        f"lib.{call.prefix}softmax({call.target}, {call.x}, shape[:{dim}].numel(), shape[{dim}], shape[{dim + 1}:].numel(){call.arguments})",
    ]


def _norm(call: _StageCall) -> tuple[str, list[str]]:
    cpp = norm_kernel_source(call.stage.facts, call.knobs, prefix=call.prefix, tail=call.tail)
    return cpp, norm_lines(
        call.stage.facts, call.x, call.target, len(call.stage.shape), prefix=call.prefix, tail_arguments=call.arguments
    )


def _channel_norm(call: _StageCall) -> tuple[str, list[str]]:
    cpp = channel_norm_source(call.stage.facts, call.knobs, prefix=call.prefix, tail=call.tail)
    return cpp, channel_norm_lines(
        call.stage.facts, call.x, call.target, prefix=call.prefix, tail_arguments=call.arguments
    )


def _pointwise(call: _StageCall) -> tuple[str, list[str]]:
    """An elementwise chain as a pass of its own: the source read (broadcast where it is smaller)
    into the output in chunks, the chain applied to each chunk in place while it is in L1."""
    writer, stage, knobs, prefix, tail = call.writer, call.stage, call.knobs, call.prefix, call.tail
    x, target, arguments = call.x, call.target, call.arguments  # the names its C++ template reads
    assert tail is not None  # a pointwise stage starts with its first step
    parallel = "#pragma omp parallel for schedule(static)" if knobs["parallel"] else ""
    broadcast = stage.facts["broadcast"]
    source = x
    if stage.facts.get("view"):
        source = f"{x}.{_view_call(writer.graph[stage.facts['view']], writer)}"
    extras = [writer._extra(extra) for extra in stage.tail.extras]  # noqa: SLF001 - the writer's own reader
    cpp = f"""#include <algorithm>
#include <cmath>
#include <cstdint>
{tail.definition}
// The source read into out (element (x / sa) % sb of it: itself, or broadcast), then the tail.
extern "C" void {prefix}pointwise(const float* __restrict__ src, float* __restrict__ out, int64_t total, int64_t sa,
                                  int64_t sb{tail.parameters}) {{
    {parallel}
    for (int64_t x0 = 0; x0 < total; x0 += {_POINTWISE_CHUNK}) {{
        const int64_t count = std::min<int64_t>({_POINTWISE_CHUNK}, total - x0);
        float* __restrict__ o = out + x0;
        if (sa == 1 && sb == total) {{
            #pragma omp simd
            for (int64_t p = 0; p < count; ++p) o[p] = src[x0 + p];
        }} else {{
            for (int64_t p = 0; p < count; ++p) o[p] = src[(x0 + p) / sa % sb];
        }}
        {tail.call("o", "x0", "count")}
    }}
}}
"""
    shape = (
        f"{source}.shape"
        if broadcast["broadcast"] == "full"
        else "torch.broadcast_shapes(" + ", ".join(f"({e}).shape" for e in [source, *extras]) + ")"
    )
    lines = [f"{target} = torch.empty({shape}, dtype=torch.float32)"]
    read = f"u_{target}"
    if broadcast["broadcast"] == "span":
        writer.spans = True
        lo, hi = broadcast["span"]
        lines.append(f"{read}, a_{target}, b_{target} = span_of({source}, {target}.shape, {lo}, {hi})")
        sizes = f"a_{target}, b_{target}"
    else:
        lines.append(f"{read} = ({source}).contiguous()")
        sizes = f"1, {target}.numel()" if broadcast["broadcast"] == "full" else f"{target}.numel(), 1"
    lines.append(f"lib.{prefix}pointwise({read}, {target}, {target}.numel(), {sizes}{arguments})")
    return cpp, lines


_KERNELS: dict[str, _Kernel] = {
    "convolution": _convolution,
    "conv_transposed": _conv_transposed,
    "pool": _pool,
    "reduction": _reduction,
    "softmax": _softmax,
    "norm": _norm,
    "channel_norm": _channel_norm,
    "pointwise": _pointwise,
}


# -- reshapes ---------------------------------------------------------------------------------------


def _view_call(node_or_stage: Any, writer: _Writer) -> str:
    """The method call that reshapes as the traced view does (``view(h0.shape[0], h0.shape[1], -1)``),
    its sizes read from the tensors at run time."""
    if isinstance(node_or_stage, Stage):
        op, args, kwargs = node_or_stage.facts["op"], node_or_stage.facts["args"], node_or_stage.facts["kwargs"]
    else:
        op, args, kwargs = node_or_stage.op, list(node_or_stage.args[1:]), dict(node_or_stage.kwargs)
    rendered = [_size_expression(arg, writer) for arg in args]
    rendered += [f"{key}={_size_expression(value, writer)}" for key, value in kwargs.items()]
    return f"{'reshape' if op == 'view' else op}({', '.join(rendered)})"


def _size_expression(value: Any, writer: _Writer) -> str:
    """A view's argument in Python: a number or tuple as written, a size read from the traced
    value's tensor (``x.shape[1]``), or arithmetic on sizes."""
    if isinstance(value, tuple):
        inner = ", ".join(_size_expression(v, writer) for v in value)
        return f"({inner}{',' if len(value) == 1 else ''})"
    if not isinstance(value, Ref):
        return repr(value)
    node = writer.graph[value.name]
    if node.op == "getattr" and node.args[1:] == ("shape",):
        return f"{_tensor_of(node.args[0], writer)}.shape"
    if node.op == "getitem" and len(node.args) == 2 and isinstance(node.args[1], int):
        return f"{_size_expression(node.args[0], writer)}[{node.args[1]}]"
    if node.op == "size":
        dim = node.arg(1, "dim")
        return f"{_tensor_of(node.args[0], writer)}.shape" + (f"[{dim}]" if dim is not None else "")
    symbols = {"mul": "*", "add": "+", "sub": "-", "floordiv": "//"}
    if node.op in symbols and len(node.args) == 2:
        left, right = (_size_expression(v, writer) for v in node.args)
        return f"({left} {symbols[node.op]} {right})"
    raise NotRecognized(f"it reshapes with {node.op} ({node.name}), which the fusion planner does not read")


def _tensor_of(ref: Any, writer: _Writer) -> str:
    """A Python name of a tensor with the traced value's shape: its stage's output (a tail keeps
    the shape), or the forward argument or parameter itself."""
    graph = writer.graph
    if not isinstance(ref, Ref):
        raise NotRecognized("it reads the size of a constant, which the fusion planner does not place")
    if ref.name in graph.inputs:
        return writer.arguments[graph.inputs.index(ref.name)]
    if ref.name in graph.params:
        return param_expr(graph.params[ref.name])
    for index, stage in enumerate(writer.plan.stages):
        names = {stage.node, *(step["name"] for step in stage.tail.steps)}
        if ref.name in names:
            return f"h{index}"
    node = graph[ref.name]
    if node.args and isinstance(node.args[0], Ref) and node.shape is not None:
        return _tensor_of(node.args[0], writer)  # an alias of a value (clone, detach)
    raise NotRecognized(f"it reads the size of {ref.name}, which the fusion planner did not place")
