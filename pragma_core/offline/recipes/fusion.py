"""The fusion planner: a level-2 forward as a chain of stages, each one level-1 family's kernel, with
the elementwise ops that follow a stage applied where that kernel stores (the stage's tail).

    plan = plan_fusion(graph)
    [stage.kind for stage in plan.stages]   # ['convolution', 'channel_norm', 'reduction'] for 92_...
    plan.stages[1].tail.steps               # tanh, hardswish, the residual add of the convolution's output

A stage's ``kind`` is the family whose kernel computes it: ``matmul``, ``convolution`` and
``conv_transposed`` (the main operators), ``pool``, ``reduction`` (over a contiguous range of dims,
logsumexp included; a global average pool is a mean), ``softmax``, ``norm`` (layer and instance
norm), ``channel_norm`` (batch and group norm); ``pointwise`` (elementwise ops no kernel before them
can take: the first ops on an input, ops after a reshape, or a result that broadcasts to a larger
shape) and ``view`` (a reshape, no kernel). Each stage reads a ``source``: a forward argument or an
earlier stage's output.

A tail (:class:`Segment`) is a DAG of elementwise ops on the stage's output, same shape. Its steps'
operands are ``"v"`` (the previous step, or the stage's output for the first), ``{"step": k}`` (an
earlier step; -1 the stage's output), ``{"const": x}`` and ``{"extra": i}``: a tensor read beside
it, a parameter, a forward argument or an earlier stage's output, broadcast ``scalar`` (one
element), ``full`` (the output's shape) or over a ``span`` of the output's dims (a per-channel bias
covers ``[1, 2)`` of an ``(N, C, H, W)`` output). A matrix product's tail is its epilogue and takes
what that epilogue indexes: one element and one value per column.

With ``fuse`` False (the ``fusion=passes`` knob) no stage keeps a tail: every elementwise chain is
its own ``pointwise`` pass, the simple plan a measured move can return to. A value that a later
stage reads from inside a tail ends that tail there (the plan is made again with it kept), so every
value read across stages is some stage's whole output. Anything the planner cannot place raises
:class:`NotRecognized` naming the operator.
"""

from __future__ import annotations

from typing import Any

import attrs

from ..graph import Node, NotRecognized, OpGraph, Ref
from .channel_norms import channel_norm_facts
from .conv_transposed import transposed_facts
from .convolution import convolution_layer
from .elementwise import elementwise_expression
from .matmul import product_facts
from .norms import norm_facts
from .pooling import pool_facts
from .reduction import VALUE_REDUCTIONS

__all__ = ["FusionPlan", "Segment", "Stage", "plan_fusion", "MAIN_KINDS", "MAIN_OPS", "GEMM_OPS"]

GEMM_OPS = ("linear", "matmul", "mm", "bmm")
"""The ops a GEMM main operator is traced as."""
MAIN_KINDS = ("matmul", "convolution", "conv_transposed")
"""The stage kinds that are a main operator: the first of them names the task's fused family."""

_CONVOLUTIONS = ("conv1d", "conv2d", "conv3d")
_TRANSPOSED = ("conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
MAIN_OPS = (*GEMM_OPS, *_CONVOLUTIONS, *_TRANSPOSED)
"""The traced ops of a main operator."""
_POOLS = tuple(f"{kind}_pool{rank}d" for kind in ("max", "avg") for rank in (1, 2, 3))
_ADAPTIVE = ("adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d")
_ALIASES = ("clone", "detach", "contiguous", "identity")
_VIEWS = ("view", "reshape", "flatten", "squeeze", "unsqueeze")
_REDUCTIONS = {"sum": "sum", "mean": "mean", "prod": "prod", "amax": "max", "amin": "min", "logsumexp": "logsumexp"}
_TUPLE_REDUCTIONS = ("max", "min")  # torch.max(x, dim) gives (values, indices)
_TWO_TENSOR_FORMS = {"max": "maximum", "min": "minimum"}
"""``torch.max(a, b)`` is elementwise; ``torch.max(a, dim)`` is a reduction."""
_SIZE_OPS = ("getattr", "getitem", "size")
_FLOAT32 = "torch.float32"


@attrs.frozen(kw_only=True)
class Segment:
    """Elementwise ops on one stage's output, in order (see the module docstring)."""

    steps: tuple[dict[str, Any], ...] = ()
    extras: tuple[dict[str, Any], ...] = ()


@attrs.frozen(kw_only=True)
class Stage:
    """One kernel of the chain: its ``kind`` (a family), the traced ``op`` and ``node`` it computes,
    the ``source`` it reads (``{"input": i}`` or ``{"stage": k}``), its output's traced ``shape``,
    the family's ``facts`` and its ``tail``."""

    kind: str
    op: str
    node: str
    source: dict[str, Any]
    shape: tuple[int, ...]
    facts: dict[str, Any]
    tail: Segment


@attrs.frozen(kw_only=True)
class FusionPlan:
    """The stages in order; the forward returns the last one's output."""

    stages: tuple[Stage, ...]

    @property
    def main(self) -> Stage | None:
        """The first main-operator stage (:data:`MAIN_KINDS`)."""
        return next((stage for stage in self.stages if stage.kind in MAIN_KINDS), None)

    def describe(self) -> str:
        parts = []
        for stage in self.stages:
            tail = ", ".join(step["op"] for step in stage.tail.steps)
            head = stage.op if stage.kind != "pointwise" else "pass"
            parts.append(f"{head} then {tail}" if tail else head)
        return "; ".join(parts)


def plan_fusion(graph: OpGraph, *, fuse: bool = True) -> FusionPlan:
    """The plan of a forward that is a chain of stages and elementwise ops; raises
    :class:`NotRecognized` naming the first operator it cannot place."""
    if len(graph.outputs) != 1 or not isinstance(graph.outputs[0], Ref):
        raise NotRecognized("it returns more than one value, which the fusion planner does not place")
    kept: set[str] = set()
    for _ in range(len(graph.nodes) + 1):
        try:
            return _Planner(graph, kept, fuse).plan()
        except _Keep as keep:
            if keep.name in kept:
                break
            kept.add(keep.name)
    raise NotRecognized("its values cross between stages in a way the fusion planner does not place")


class _Keep(Exception):  # noqa: N818 - a signal to plan again, not an error
    """A value read across stages from inside a tail: plan again with that value a stage's output."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


@attrs.define
class _Open:
    """A stage being planned: what :class:`Stage` holds, its tail still growing."""

    kind: str
    op: str
    node: str
    source: dict[str, Any]
    shape: tuple[int, ...]
    facts: dict[str, Any]
    sealed: bool = False  # takes no more tail steps
    steps: list[dict[str, Any]] = attrs.field(factory=list)
    extras: list[dict[str, Any]] = attrs.field(factory=list)
    names: list[str] = attrs.field(factory=list)  # the node each step computes

    def last(self) -> str:
        return self.names[-1] if self.names else self.node

    def close(self) -> Stage:
        return Stage(
            kind=self.kind,
            op=self.op,
            node=self.node,
            source=self.source,
            shape=self.shape,
            facts=self.facts,
            tail=Segment(steps=tuple(self.steps), extras=tuple(self.extras)),
        )


class _Planner:
    """One walk over the traced ops, in order."""

    def __init__(self, graph: OpGraph, kept: set[str], fuse: bool) -> None:
        self.graph = graph
        self.kept = kept
        self.fuse = fuse
        self.stages: list[_Open] = []
        self.where: dict[str, tuple[int, int]] = {}  # node -> (stage, step); step -1: the stage's own result
        self.leaves: dict[str, dict[str, Any]] = {}  # node -> a parameter or input it is (a view of)
        self.constants: dict[str, float] = {}
        self.unused: dict[str, Node] = {}  # nodes on parameters and inputs only, read later if at all

    def plan(self) -> FusionPlan:
        graph = self.graph
        for index, name in enumerate(graph.inputs):
            self.leaves[name] = {"input": index, "shape": graph[name].shape}
        for name, path in graph.params.items():
            self.leaves[name] = {"param": path, "shape": graph[name].shape}
        for node in graph.ops:
            self._place(node)
        output = graph.outputs[0]
        assert isinstance(output, Ref)
        if output.name not in self.where:
            raise NotRecognized("it returns one of its inputs or parameters, which the fusion planner does not place")
        stage, step = self.where[output.name]
        if stage != len(self.stages) - 1 or self._name(stage, step) != self.stages[stage].last():
            raise NotRecognized(
                "it returns a value from before its last stage, which the fusion planner does not place"
            )
        return FusionPlan(stages=tuple(open_.close() for open_ in self.stages))

    # -- where a value is ---------------------------------------------------------------------

    def _name(self, stage: int, step: int) -> str:
        return self.stages[stage].node if step < 0 else self.stages[stage].names[step]

    def _chain_value(self, ref: Any) -> tuple[int, int] | None:
        return self.where.get(ref.name) if isinstance(ref, Ref) else None

    def _reads_chain(self, node: Node) -> bool:
        return any(ref.name in self.where for ref in node.inputs)

    def _whole(self, ref: Ref) -> dict[str, Any]:
        """The source of a value read whole (by a stage, or as an extra): a forward argument, a
        parameter, or a stage's whole output; a value inside a tail is kept and planned again."""
        if ref.name in self.leaves:
            return self.leaves[ref.name]
        if ref.name in self.unused:
            return self._leaf_view(self.unused[ref.name])
        place = self.where.get(ref.name)
        if place is None:
            raise NotRecognized(f"it reads {ref.name}, which the fusion planner did not place")
        stage, step = place
        if self._name(stage, step) != self.stages[stage].last():
            raise _Keep(self._name(stage, step))
        self.stages[stage].sealed = True  # read whole: its tail ends here
        return {"stage": stage, "shape": self.stages[stage].shape}

    def _leaf_view(self, node: Node) -> dict[str, Any]:
        """A view of a parameter or input (``bias.view(1, -1, 1, 1)``): the leaf with the view's shape."""
        source = node.args[0] if node.args else None
        if node.op not in (*_VIEWS, *_ALIASES) or not isinstance(source, Ref) or node.shape is None:
            raise NotRecognized(
                f"it computes {node.op} ({node.name}) on a parameter, which the fusion planner does not place"
            )
        base = self._whole(source)
        if "stage" in base:
            raise NotRecognized(f"it computes {node.op} ({node.name}), which the fusion planner does not place")
        return {**base, "shape": node.shape, "view": node.name}

    # -- placing one op -----------------------------------------------------------------------

    def _place(self, node: Node) -> None:
        op = node.op
        if op == "tensor" and len(node.args) == 1 and isinstance(node.args[0], (int, float)):
            self.constants[node.name] = float(node.args[0])
            return
        if op in _SIZE_OPS and node.shape is None and not self._is_values(node):
            return  # sizes and devices: read by the views that use them
        if not self._reads_chain(node) and not self._is_stage_op(node) and not self._elementwise(node):
            self.unused[node.name] = node  # on parameters and inputs only: a view, or a GEMM's transposed weight
            return
        if op in _ALIASES or (op in ("dropout", "feature_dropout") and self._dropout_is_identity(node)):
            self._alias(node)
        elif op in ("dropout", "feature_dropout"):
            raise NotRecognized(f"it computes dropout ({node.name}) in training mode, which is random")
        elif self._is_values(node):
            self._alias(node)
        elif op == "getitem":
            raise NotRecognized(
                f"it reads {node.name} of a reduction's result, which the fusion planner does not place"
            )
        elif self._elementwise(node):
            self._step(node)
        elif op in _VIEWS:
            self._view(node)
        else:
            self._stage(node)

    def _is_values(self, node: Node) -> bool:
        """``torch.max(x, dim)[0]`` or ``.values``: the values of a (values, indices) reduction."""
        if not node.args or not isinstance(node.args[0], Ref) or node.args[0].name not in self.where:
            return False
        source = self.graph[node.args[0].name]
        if source.op not in _TUPLE_REDUCTIONS or source.shape is not None:
            return False
        return (node.op == "getitem" and node.args[1:] == (0,)) or (
            node.op == "getattr" and node.args[1:] == ("values",)
        )

    @staticmethod
    def _dropout_is_identity(node: Node) -> bool:
        p = node.arg(1, "p", 0.5)
        return p == 0 or node.kwargs.get("training") is False

    def _alias(self, node: Node) -> None:
        source = node.args[0] if node.args else None
        if not isinstance(source, Ref) or source.name not in self.where:
            raise NotRecognized(f"it computes {node.op} ({node.name}) on a value the fusion planner did not place")
        self.where[node.name] = self.where[source.name]

    def _is_stage_op(self, node: Node) -> bool:
        return node.op in (*GEMM_OPS, *_CONVOLUTIONS, *_TRANSPOSED, *_POOLS, *_ADAPTIVE) or node.op in (
            "batch_norm",
            "group_norm",
            "layer_norm",
            "instance_norm",
            "softmax",
            "log_softmax",
            *_REDUCTIONS,
            *_TUPLE_REDUCTIONS,
        )

    # -- elementwise ops ----------------------------------------------------------------------

    def _elementwise(self, node: Node) -> bool:
        if node.shape is None:
            return False
        op = _TWO_TENSOR_FORMS.get(node.op, node.op) if _tensor_count(node) == 2 else node.op
        probe = attrs.evolve(node, op=op)
        return elementwise_expression(probe, ["a", "b", "c"], False) is not None

    def _step(self, node: Node) -> None:
        if any(isinstance(v, Ref) for v in node.kwargs.values()) or str(node.dtype) != _FLOAT32:
            raise NotRecognized(
                f"it computes {node.op} ({node.name}) with tensor keywords, which the fusion planner does not place"
            )
        shape = node.dims
        open_ = self.stages[-1] if self.stages else None
        places = [self._chain_value(ref) for ref in node.inputs]
        inside = [place for place in places if place is not None and place[0] == len(self.stages) - 1]
        if open_ is not None and inside and not open_.sealed and open_.shape == shape and self._accepts(open_, node):
            self._append(open_, node)
            return
        # A pass of its own, over the operand with the result's shape (the latest value first).
        candidates = [ref for ref in node.inputs if self._shape_of(ref) == shape]
        candidates.sort(key=lambda ref: self._chain_value(ref) or (-1, -1), reverse=True)
        base = candidates[0] if candidates else next(iter(node.inputs), None)
        if base is None:
            raise NotRecognized(f"it computes {node.op} ({node.name}) on constants only")
        source = self._whole(base)
        broadcast = _broadcast(source["shape"], shape)
        if broadcast is None:
            raise NotRecognized(
                f"it computes {node.op} ({node.name}) that broadcasts {base.name} of shape "
                f"{list(source['shape'] or ())} to {list(shape)}, which the fusion planner does not place"
            )
        stage = _Open(
            kind="pointwise",
            op=node.op,
            node=f"{node.name}__in",
            source=_bare(source),
            shape=shape,
            facts={"broadcast": broadcast, "view": source.get("view")},
        )
        self.stages.append(stage)
        index = len(self.stages) - 1
        self.where[stage.node] = (index, -1)
        self._append(stage, node, base=base)

    def _accepts(self, stage: _Open, node: Node) -> bool:
        """Whether the stage's store can take this step: a matrix product's epilogue reads one
        element or one value per column besides the product."""
        if stage.kind != "matmul":
            return True
        for ref in node.inputs:
            place = self._chain_value(ref)
            if place is not None and place[0] == len(self.stages) - 1:
                continue
            shape = self._shape_of(ref)
            broadcast = _broadcast(shape, stage.shape) if shape is not None else None
            if broadcast is None or broadcast["broadcast"] == "full":
                return False
            if broadcast["broadcast"] == "span" and (
                broadcast["span"] != [len(stage.shape) - 1, len(stage.shape)] or broadcast["expand"]
            ):
                return False
        return True

    def _shape_of(self, ref: Ref) -> tuple[int, ...] | None:
        if ref.name in self.constants:
            return ()
        if ref.name in self.leaves:
            return self.leaves[ref.name]["shape"]
        node = self.graph[ref.name]
        return node.shape

    def _append(self, stage: _Open, node: Node, base: Ref | None = None) -> None:
        """``node`` as the next step of ``stage``'s tail."""
        index = len(self.stages) - 1
        operands: list[Any] = []
        for argument in node.args:
            if isinstance(argument, Ref):
                operands.append(self._operand(stage, index, argument, base))
            elif isinstance(argument, (int, float)) and not isinstance(argument, bool):
                operands.append({"const": float(argument)})
            elif argument is not None and not isinstance(argument, str):
                raise NotRecognized(
                    f"it computes {node.op} ({node.name}) with an argument the fusion planner does not read"
                )
        op = _TWO_TENSOR_FORMS.get(node.op, node.op) if _tensor_count(node) == 2 else node.op
        stage.steps.append({"name": node.name, "op": op, "operands": operands})
        stage.names.append(node.name)
        self.where[node.name] = (index, len(stage.steps) - 1)
        if node.name in self.kept or not self.fuse and stage.kind != "pointwise":
            stage.sealed = True

    def _operand(self, stage: _Open, index: int, ref: Ref, base: Ref | None) -> Any:
        if ref.name in self.constants:
            return {"const": self.constants[ref.name]}
        place = self._chain_value(ref)
        if base is not None and ref.name == base.name:
            return {"step": -1} if stage.steps else "v"
        if place is not None and place[0] == index:
            step = place[1]
            if step == len(stage.steps) - 1 or (step < 0 and not stage.steps):
                return "v"
            return {"step": step}
        source = self._whole(ref)
        broadcast = _broadcast(source["shape"], stage.shape)
        if broadcast is None:
            raise NotRecognized(
                f"it computes {self.graph[stage.names[-1] if stage.names else stage.node].op} with {ref.name} of shape "
                f"{list(source['shape'] or ())} broadcast against {list(stage.shape)}, which the fusion planner does not place"
            )
        stage.extras.append({"source": _bare(source), "view": source.get("view"), **broadcast})
        return {"extra": len(stage.extras) - 1}

    # -- stages -------------------------------------------------------------------------------

    def _view(self, node: Node) -> None:
        source = self._whole(node.args[0])
        if node.shape is None:
            raise NotRecognized(f"it computes {node.op} ({node.name}), which the fusion planner does not place")
        self._open(
            "view", node, source, {"op": node.op, "args": list(node.args[1:]), "kwargs": dict(node.kwargs)}, sealed=True
        )

    def _stage(self, node: Node) -> None:
        graph, op = self.graph, node.op
        unknown = NotRecognized(f"it computes {op} ({node.name}), which the fusion planner does not know")
        if op in GEMM_OPS:
            self._gemm(node)
            return
        first = node.args[0] if node.args else node.kwargs.get("input")
        if not isinstance(first, Ref):
            raise unknown
        x = graph[first.name]
        facts: dict[str, Any] | None
        if op in _CONVOLUTIONS:
            kind, facts = "convolution", convolution_layer(graph, node)
        elif op in _TRANSPOSED:
            kind, facts = "conv_transposed", transposed_facts(graph, node)
        elif op in _POOLS:
            kind, facts = "pool", pool_facts(node, x)
        elif op in _ADAPTIVE:
            kind, facts = "reduction", _global_average(node, x)
        elif op in ("batch_norm", "group_norm"):
            kind, facts = "channel_norm", channel_norm_facts(graph, x, node)
        elif op in ("layer_norm", "instance_norm"):
            kind, facts = "norm", norm_facts(graph, x, node)
        elif op in ("softmax", "log_softmax"):
            kind, facts = "softmax", _softmax(node, x)
        elif op in _REDUCTIONS or op in _TUPLE_REDUCTIONS:
            kind, facts = "reduction", _reduction(node, x)
        else:
            raise unknown
        if facts is None or x.shape is None:
            raise unknown
        shape = node.shape if node.shape is not None else _reduced_shape(x.dims, facts)
        self._open(kind, node, self._whole(first), facts, shape=shape)

    def _gemm(self, node: Node) -> None:
        """A matrix product: its operands read through the matmul recipe's reader, the chain's value
        it multiplies seen as one more forward argument (after the task's own)."""
        graph = self.graph
        reads = [ref for ref in node.inputs if ref.name in self.where]
        if len(reads) > 1:
            raise NotRecognized(
                f"it multiplies two computed values ({node.name}), which the fusion planner does not place"
            )
        seen = graph
        if reads:
            source = self._whole(reads[0])
            value = graph[reads[0].name]
            as_input = Node(name=value.name, op="input", shape=value.shape, dtype=value.dtype)
            seen = attrs.evolve(
                graph,
                nodes=tuple(as_input if n.name == value.name else n for n in graph.nodes),
                inputs=(*graph.inputs, value.name),
            )
        facts = product_facts(seen, node)
        if facts is None or facts["n"] == 1 or str(node.dtype) != _FLOAT32:
            raise NotRecognized(f"its GEMM ({node.name}) has operands the matmul kernel does not read")
        if not reads:
            a = facts["a"]
            source = {"input": a["input"]} if "input" in a else {"param": a["param"]}
        facts.pop("crossed")
        self._open("matmul", node, source, facts)

    def _open(
        self,
        kind: str,
        node: Node,
        source: dict[str, Any],
        facts: dict[str, Any],
        *,
        shape: tuple[int, ...] | None = None,
        sealed: bool = False,
    ) -> None:
        if "stage" not in source and "input" not in source:
            raise NotRecognized(
                f"it computes {node.op} ({node.name}) of a parameter, which the fusion planner does not place"
            )
        if source.get("view"):
            raise NotRecognized(
                f"it computes {node.op} ({node.name}) of a reshaped input, which the fusion planner does not place"
            )
        dims = shape if shape is not None else node.dims
        sealed = sealed or node.name in self.kept or not self.fuse
        stage = _Open(
            kind=kind, op=node.op, node=node.name, source=_bare(source), shape=tuple(dims), facts=facts, sealed=sealed
        )
        self.stages.append(stage)
        self.where[node.name] = (len(self.stages) - 1, -1)


# -- the facts of the small stages ------------------------------------------------------------------


def _dims(dim: Any, rank: int) -> list[int] | None:
    """``dim`` (an int, a tuple, or None for every dim) as a contiguous ``[first, last)`` range of
    dims; None for dims that are not one contiguous range."""
    if dim is None or dim == ():
        return [0, rank] if rank else None
    values = dim if isinstance(dim, (tuple, list)) else (dim,)
    if not all(isinstance(d, int) and not isinstance(d, bool) and -rank <= d < rank for d in values):
        return None
    ordered = sorted({d % rank for d in values})
    if ordered != list(range(ordered[0], ordered[-1] + 1)):
        return None
    return [ordered[0], ordered[-1] + 1]


def _reduction(node: Node, x: Node) -> dict[str, Any] | None:
    if x.shape is None or str(x.dtype) != _FLOAT32 or node.kwargs.get("dtype") is not None:
        return None
    op = _REDUCTIONS.get(node.op, node.op)
    if op not in VALUE_REDUCTIONS:
        return None
    if any(isinstance(argument, Ref) for argument in node.args[1:]):
        return None
    dims = _dims(node.arg(1, "dim"), len(x.dims))
    keepdim = node.arg(2, "keepdim", False)
    if dims is None or not isinstance(keepdim, bool):
        return None
    if node.op in _TUPLE_REDUCTIONS and node.shape is None and (node.arg(1, "dim") is None or dims[1] - dims[0] != 1):
        return None  # (values, indices) over one dim, or the whole tensor's extreme
    return {"op": op, "dims": dims, "keepdim": keepdim}


def _global_average(node: Node, x: Node) -> dict[str, Any] | None:
    """``AdaptiveAvgPoolNd`` to size 1: the mean over the last N dims, kept."""
    rank = int(node.op[len("adaptive_avg_pool")])
    size = node.arg(1, "output_size")
    sizes = size if isinstance(size, (tuple, list)) else (size,) * rank
    if x.shape is None or len(sizes) != rank or any(s != 1 for s in sizes) or len(x.dims) < rank + 1:
        return None
    return {"op": "mean", "dims": [len(x.dims) - rank, len(x.dims)], "keepdim": True}


def _softmax(node: Node, x: Node) -> dict[str, Any] | None:
    if x.shape is None or str(x.dtype) != _FLOAT32 or node.kwargs.get("dtype") is not None:
        return None
    dims = _dims(node.arg(1, "dim"), len(x.dims))
    if node.arg(1, "dim") is None or dims is None or dims[1] - dims[0] != 1:
        return None
    return {"op": node.op, "dims": dims}


def _reduced_shape(shape: tuple[int, ...], facts: dict[str, Any]) -> tuple[int, ...]:
    first, last = facts["dims"]
    middle = (1,) * (last - first) if facts["keepdim"] else ()
    return (*shape[:first], *middle, *shape[last:])


# -- broadcasting -----------------------------------------------------------------------------------


def _broadcast(shape: tuple[int, ...] | None, target: tuple[int, ...]) -> dict[str, Any] | None:
    """How a tensor of ``shape`` is read at each element of a ``target``-shaped value: ``scalar``,
    ``full``, or over a ``span`` ``[lo, hi)`` of ``target``'s dims (``expand`` where it has size 1
    inside the span); None when it does not broadcast to ``target``."""
    if shape is None:
        return None
    if _numel(shape) == 1:
        return {"broadcast": "scalar"}
    if len(shape) > len(target):
        return None
    aligned = (1,) * (len(target) - len(shape)) + tuple(shape)
    if any(size != 1 and size != want for size, want in zip(aligned, target)):
        return None
    covered = [d for d, size in enumerate(aligned) if size != 1]
    lo, hi = covered[0], covered[-1] + 1
    expand = any(aligned[d] != target[d] for d in range(lo, hi))
    if [lo, hi] == [0, len(target)] and not expand:
        return {"broadcast": "full"}
    return {"broadcast": "span", "span": [lo, hi], "expand": expand}


def _bare(source: dict[str, Any]) -> dict[str, Any]:
    """A source without its bookkeeping: ``{"input": i}``, ``{"param": path}`` or ``{"stage": k}``."""
    return {key: value for key, value in source.items() if key in ("input", "param", "stage")}


def _numel(shape: tuple[int, ...]) -> int:
    total = 1
    for size in shape:
        total *= size
    return total


def _tensor_count(node: Node) -> int:
    return sum(isinstance(a, Ref) for a in node.args)
