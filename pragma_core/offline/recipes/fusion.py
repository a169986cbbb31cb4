"""The fusion planner: a level-2 task split into its main operator, the epilogue applied where the
main operator stores, and the stages after it.

    plan = plan_fusion(graph)
    plan.main.kind          # 'gemm'
    plan.epilogue.steps     # elementwise ops applied to each element of the product as it is stored
    [s.kind for s in plan.stages]   # e.g. ['row_norm', 'row_reduce']

Every value after the main operator is seen as rows of its last dim (``rows x n``, contiguous as the
product writes them). An **epilogue** (and each stage's **tail**) is a DAG of elementwise ops on one
such value: its operands are the segment's input, earlier steps, constants and extra tensors (one
element, one per column, or, in a tail, one per element); a tail may also read the value its stage
started from when the shapes agree (``x - x.mean(dim=1, keepdim=True)``). A **stage** reduces or
reshapes: a reduction over the last dim (sum, mean, max, min, amax, amin, logsumexp), a row-wise
normalization (softmax, log_softmax, layer norm, group norm, an instance norm over one row), batch
norm over the column dim (training with running-stat updates, or evaluation), or a 1-d max/avg pool
over the last dim. Copies and views (``clone``, ``detach``, ``unsqueeze``, ``squeeze``) are the same
value. Anything else raises :class:`NotRecognized` naming the operator.

Only a GEMM main operator (``nn.Linear``, ``matmul``, ``mm``, ``bmm``) is planned today; a
convolution names itself in the error, and a convolution family plugs in by returning a
:class:`MainOp` of its kind.
"""

from __future__ import annotations

from typing import Any

import attrs

from ..graph import Node, NotRecognized, OpGraph, Ref
from .elementwise import elementwise_expression
from .matmul import MatmulRecipe

__all__ = ["FusionPlan", "MainOp", "Segment", "Stage", "plan_fusion", "GEMM_OPS"]

GEMM_OPS = ("linear", "matmul", "mm", "bmm")
"""The ops a GEMM main operator is traced as."""

_CONVOLUTIONS = ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
_ALIASES = ("clone", "detach", "contiguous", "identity", "unsqueeze", "squeeze")
_ROW_REDUCTIONS = ("sum", "mean", "max", "min", "amax", "amin", "logsumexp")
_ROW_NORMS = ("softmax", "log_softmax", "layer_norm", "group_norm", "instance_norm")
_POOLS = ("max_pool1d", "avg_pool1d")
_TWO_TENSOR_FORMS = {"max": "maximum", "min": "minimum"}
"""``torch.max(a, b)`` is elementwise; ``torch.max(a, dim)`` is a reduction."""
_FLOAT32 = "torch.float32"


@attrs.frozen(kw_only=True)
class MainOp:
    """The main operator: its ``kind`` (``gemm``), its node and the facts its family generates from
    (for a GEMM, the matmul recipe's product facts: operands, bias, layout, m, n, k)."""

    kind: str
    node: str
    facts: dict[str, Any]


@attrs.frozen(kw_only=True)
class Segment:
    """Elementwise ops on one value, in order: each step is ``{"name", "op", "operands"}`` with
    operands ``"v"`` (the previous step's result, or the segment's input for the first step),
    ``{"step": k}`` (step ``k``'s result; -1 the segment's input), ``{"const": x}``, ``{"extra": i}``
    (``extras[i]``: an input or parameter, ``broadcast`` ``scalar``, ``column`` or ``full``) and
    ``"u"`` (a tail's stage input)."""

    steps: tuple[dict[str, Any], ...] = ()
    extras: tuple[dict[str, Any], ...] = ()


@attrs.frozen(kw_only=True)
class Stage:
    """One pass over a value of ``rows x n_in`` writing ``rows x n_out``: ``kind`` is
    ``row_reduce``, ``row_norm``, ``column_norm`` or ``row_pool``; ``op`` the traced op; ``options``
    its constants and parameter paths; ``tail`` the elementwise ops on its result."""

    kind: str
    op: str
    node: str
    rows: int
    n_in: int
    n_out: int
    options: dict[str, Any]
    tail: Segment


@attrs.frozen(kw_only=True)
class FusionPlan:
    """The main operator, its epilogue, the stages after it and the returned shape."""

    main: MainOp
    epilogue: Segment
    stages: tuple[Stage, ...]
    out_shape: tuple[int, ...]

    def describe(self) -> str:
        parts = [self.main.kind]
        if self.epilogue.steps:
            parts.append("epilogue " + ", ".join(step["op"] for step in self.epilogue.steps))
        for stage in self.stages:
            tail = ", ".join(step["op"] for step in stage.tail.steps)
            parts.append(stage.op + (f" then {tail}" if tail else ""))
        return "; ".join(parts)


def plan_fusion(graph: OpGraph) -> FusionPlan:
    """The plan of a task whose forward is one GEMM followed by elementwise ops and stages; raises
    :class:`NotRecognized` naming the first operator it cannot place."""
    if len(graph.outputs) != 1 or not isinstance(graph.outputs[0], Ref):
        raise NotRecognized("it returns more than one value, which the fusion planner does not place")
    convolutions = [node for node in graph.ops if node.op in _CONVOLUTIONS]
    if convolutions:
        raise NotRecognized(
            f"its main operator is a convolution ({convolutions[0].op}), which the fusion planner does not plan yet"
        )
    products = [node for node in graph.ops if node.op in GEMM_OPS]
    if not products:
        raise NotRecognized("it has no GEMM or convolution main operator, which the fusion planner needs")
    product = products[0]
    if len(products) > 1:
        raise NotRecognized(
            f"it computes a second matrix product ({products[1].name}) after the GEMM, "
            "which the fusion planner does not know"
        )
    facts = MatmulRecipe()._product_facts(graph, product)  # noqa: SLF001 - the one reader of products
    if facts is None or facts["n"] == 1 or str(product.dtype) != _FLOAT32:
        raise NotRecognized(f"its GEMM ({product.name}) has operands the matmul kernel does not read")
    crossed = set(facts.pop("crossed"))
    return _Planner(graph, product, crossed).plan(MainOp(kind="gemm", node=product.name, facts=facts))


class _Planner:
    """The walk over the ops after the main one, in traced order."""

    def __init__(self, graph: OpGraph, product: Node, crossed: set[str]) -> None:
        self.graph = graph
        self.product = product
        self.crossed = crossed
        self.alias: dict[str, str] = {product.name: product.name}
        self.shapes: dict[str, tuple[int, ...]] = {product.name: product.dims}
        self.value = product.name  # the current segment's input
        self.before: str | None = None  # the current stage's input (a tail's "u")
        self.names: list[str] = []  # step names of the current segment
        self.steps: list[dict[str, Any]] = []
        self.extras: list[dict[str, Any]] = []
        self.stages: list[Stage] = []
        self.pending: dict[str, Any] | None = None  # the stage whose tail is being collected
        self.epilogue: Segment | None = None

    def plan(self, main: MainOp) -> FusionPlan:
        graph = self.graph
        for node in graph.ops:
            if node.name in self.crossed or node.name == self.product.name:
                continue
            if any(self._known(ref) for ref in node.inputs):
                self._place(node)
            # else it reads no value of the product's: a use of it after the GEMM is named there
        last = self._resolve(graph.outputs[0])
        if last != self._latest():
            raise NotRecognized(
                "it returns a value from before its last stage, which the fusion planner does not place"
            )
        self._close()
        assert self.epilogue is not None
        out = graph.tensor(graph.outputs[0])
        return FusionPlan(main=main, epilogue=self.epilogue, stages=tuple(self.stages), out_shape=out.dims)

    def _known(self, ref: Ref) -> bool:
        return ref.name in self.alias

    def _resolve(self, ref: Any) -> str | None:
        return self.alias.get(ref.name) if isinstance(ref, Ref) else None

    def _latest(self) -> str:
        return self.names[-1] if self.names else self.value

    def _place(self, node: Node) -> None:
        if node.op in _ALIASES or (node.op == "getattr" and node.args[1:] == ("values",)):
            self._alias(node)
        elif node.op == "getitem" and node.args[1:] == (0,) and self._is_stage_result(node):
            self.alias[node.name] = self.value  # torch.max(x, dim)[0]: the values
        elif node.op == "dropout" or node.op == "feature_dropout":
            raise NotRecognized(f"it computes dropout ({node.name}) in training mode, which is random")
        elif self._elementwise(node):
            self._step(node)
        else:
            self._stage(node)

    def _is_stage_result(self, node: Node) -> bool:
        return bool(self.stages or self.pending) and self._resolve(node.args[0]) == self.value

    def _alias(self, node: Node) -> None:
        source = self._resolve(node.args[0]) if node.args else None
        if source is None:
            raise NotRecognized(f"it computes {node.op} ({node.name}) on a value the fusion planner did not place")
        self.alias[node.name] = source

    def _elementwise(self, node: Node) -> bool:
        op = _TWO_TENSOR_FORMS.get(node.op, node.op) if _tensor_count(node) == 2 else node.op
        probe = attrs.evolve(node, op=op)
        return node.shape is not None and elementwise_expression(probe, ["a", "b", "c"], False) is not None

    def _step(self, node: Node) -> None:
        if any(isinstance(v, Ref) for v in node.kwargs.values()) or str(node.dtype) != _FLOAT32:
            raise NotRecognized(
                f"it computes {node.op} ({node.name}) with tensor keywords, which the fusion planner does not place"
            )
        shape = self.shapes[self.value]
        if node.shape is None or _numel(node.dims) != _numel(shape) or node.dims[-1:] != shape[-1:]:
            raise NotRecognized(
                f"it computes {node.op} ({node.name}) that broadcasts to {list(node.dims)}, which the fusion planner does not place"
            )
        operands: list[Any] = []
        for argument in node.args:
            if isinstance(argument, Ref):
                operands.append(self._operand(node, argument, shape))
            elif isinstance(argument, (int, float)) and not isinstance(argument, bool):
                operands.append({"const": float(argument)})
            elif argument is not None and not isinstance(argument, str):
                raise NotRecognized(
                    f"it computes {node.op} ({node.name}) with an argument the fusion planner does not read"
                )
        op = _TWO_TENSOR_FORMS.get(node.op, node.op) if _tensor_count(node) == 2 else node.op
        self.steps.append({"name": node.name, "op": op, "operands": operands})
        self.names.append(node.name)
        self.alias[node.name] = node.name
        self.shapes[node.name] = shape

    def _operand(self, node: Node, ref: Ref, shape: tuple[int, ...]) -> Any:
        source = self._resolve(ref)
        if source is not None:
            if source == self._latest():
                return "v"
            if source == self.value:
                return {"step": -1}
            if source in self.names:
                return {"step": self.names.index(source)}
            if source == self.before and _numel(self.shapes[source]) == _numel(shape):
                return "u"
            raise NotRecognized(
                f"it computes {node.op} ({node.name}) on a value from before its last stage, which the fusion planner does not place"
            )
        extra = self.graph.tensor(ref)
        if extra.op not in ("input", "param") or str(extra.dtype) != _FLOAT32 or extra.shape is None:
            raise NotRecognized(
                f"it computes {node.op} ({node.name}) on {extra.op} ({extra.name}), which the fusion planner does not place"
            )
        n = shape[-1] if shape else 1
        if _numel(extra.dims) == 1:
            broadcast = "scalar"
        elif extra.dims[-1:] == (n,) and _numel(extra.dims) == n and len(extra.dims) <= len(shape):
            broadcast = "column"
        elif _numel(extra.dims) == _numel(shape) and extra.dims[-1:] == shape[-1:] and self.pending:
            broadcast = "full"
        else:
            raise NotRecognized(
                f"it computes {node.op} ({node.name}) with {extra.name} of shape {list(extra.dims)} broadcast "
                f"against {list(shape)}, which the fusion planner does not place"
            )
        where = (
            {"param": self.graph.params[extra.name]}
            if extra.op == "param"
            else {"input": self.graph.inputs.index(extra.name)}
        )
        self.extras.append({**where, "broadcast": broadcast})
        return {"extra": len(self.extras) - 1}

    def _close(self) -> None:
        segment = Segment(steps=tuple(self.steps), extras=tuple(self.extras))
        if self.pending is None:
            self.epilogue = segment
        else:
            self.stages.append(Stage(**self.pending, tail=segment))
        self.steps, self.extras, self.names, self.pending = [], [], [], None

    def _stage(self, node: Node) -> None:
        source = self._resolve(node.args[0]) if node.args else None
        if source is None or source != self._latest():
            raise NotRecognized(
                f"it computes {node.op} ({node.name}) after the GEMM, which the fusion planner does not know"
            )
        direct = self.graph.tensor(node.args[0])
        shape_in = direct.dims if direct.shape is not None else self.shapes[source]
        rows, n_in = _numel(shape_in[:-1]), shape_in[-1]
        kind, options, n_out = _stage_kind(self.graph, node, shape_in)
        self._close()
        self.pending = {
            "kind": kind,
            "op": node.op,
            "node": node.name,
            "rows": rows,
            "n_in": n_in,
            "n_out": n_out,
            "options": options,
        }
        self.before, self.value = source, node.name
        self.alias[node.name] = node.name
        if node.shape is not None:
            self.shapes[node.name] = node.dims
        else:  # torch.max(x, dim) returns (values, indices): the values are read
            keep = node.arg(2, "keepdim", False)
            self.shapes[node.name] = (*shape_in[:-1], 1) if keep else shape_in[:-1]


def _stage_kind(graph: OpGraph, node: Node, shape_in: tuple[int, ...]) -> tuple[str, dict[str, Any], int]:
    """The stage ``node`` is on an input of ``shape_in`` (kind, options, columns out); raises
    :class:`NotRecognized` for an operator (or a dim) the planner does not know."""
    op, ndim, n = node.op, len(shape_in), shape_in[-1]
    unknown = NotRecognized(f"it computes {op} ({node.name}) after the GEMM, which the fusion planner does not know")

    def last_dim(dim: Any) -> bool:
        if isinstance(dim, (tuple, list)) and len(dim) == 1:
            dim = dim[0]
        return isinstance(dim, int) and dim % ndim == ndim - 1

    if op in _ROW_REDUCTIONS:
        dim = node.arg(1, "dim")
        if not last_dim(dim) or any(isinstance(v, Ref) for v in node.args[1:]) or node.kwargs.get("dtype") is not None:
            raise unknown
        return "row_reduce", {}, 1
    if op in ("softmax", "log_softmax"):
        if not last_dim(node.arg(1, "dim")):
            raise unknown
        return "row_norm", {"eps": 0.0, "groups": 1}, n
    if op == "layer_norm":
        shape = node.arg(1, "normalized_shape")
        if tuple(shape) != (n,):
            raise unknown
        return "row_norm", _affine(graph, node, 1), n
    if op == "instance_norm":  # over one row: (rows, 1, 1, n) or (rows, 1, n), one channel
        if ndim < 3 or _numel(shape_in[1:-1]) != 1 or node.kwargs.get("affine"):
            raise unknown
        return "row_norm", _affine(graph, node, 1), n
    if op == "group_norm":
        groups = node.arg(1, "num_groups")
        if ndim != 2 or not isinstance(groups, int) or n % groups:
            raise unknown
        return "row_norm", _affine(graph, node, groups), n
    if op == "batch_norm":
        if ndim != 2:
            raise unknown
        options = _affine(graph, node, 1)
        for stat in ("running_mean", "running_var"):
            ref = node.kwargs.get(stat)
            options[stat] = graph.params[ref.name] if isinstance(ref, Ref) else None
        if options["running_mean"] is None:
            raise unknown
        options["module"] = options["running_mean"].rsplit(".", 1)[0]
        return "column_norm", options, n
    if op in _POOLS:
        if ndim != 3 or shape_in[1] != 1 or node.shape is None:
            raise unknown
        kernel, stride = _single(node.arg(1, "kernel_size")), _single(node.arg(2, "stride"))
        stride = stride or kernel
        if (
            _single(node.arg(3, "padding", 0))
            or node.kwargs.get("ceil_mode")
            or _single(node.kwargs.get("dilation", 1)) != 1
        ):
            raise unknown
        if node.kwargs.get("return_indices"):
            raise unknown
        return "row_pool", {"kernel": kernel, "stride": stride}, node.dims[-1]
    raise unknown


def _single(value: Any) -> Any:
    return value[0] if isinstance(value, (tuple, list)) and len(value) == 1 else value


def _affine(graph: OpGraph, node: Node, groups: int) -> dict[str, Any]:
    """A norm's epsilon, groups and affine parameter paths (None without them)."""
    eps = node.kwargs.get("eps", 1e-5)
    paths = {}
    for name in ("weight", "bias"):
        ref = node.kwargs.get(name)
        paths[name] = graph.params[ref.name] if isinstance(ref, Ref) and ref.name in graph.params else None
        if isinstance(ref, Ref) and ref.name not in graph.params:
            raise NotRecognized(
                f"it computes {node.op} ({node.name}) with a computed {name}, which the fusion planner does not place"
            )
    return {"eps": float(eps), "groups": groups, **paths}


def _numel(shape: tuple[int, ...]) -> int:
    total = 1
    for size in shape:
        total *= size
    return total


def _tensor_count(node: Node) -> int:
    return sum(isinstance(a, Ref) for a in node.args)
