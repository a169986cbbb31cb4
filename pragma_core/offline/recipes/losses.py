"""Losses: an elementwise loss reduced to one number, or cross entropy over class rows.

Two shapes of reference are recognized, both ending in a 0-d float32 result:

* an **elementwise loss**: ``F.mse_loss``, ``F.l1_loss``, ``F.smooth_l1_loss``, ``F.huber_loss``,
  ``F.kl_div`` (or their modules), or ``torch.mean`` / ``torch.sum`` of a chain of elementwise ops
  (``torch.mean((a - b) ** 2)``, the hinge ``torch.mean(torch.clamp(1 - p * t, min=0))``), with
  reductions ``mean``, ``sum`` and, for ``kl_div``, ``batchmean``. Inputs may broadcast when the
  broadcast splits into (rows, cols) with every input full, per row, per column or a scalar. One
  fused pass computes each element's loss and sums it: float partial sums over segments of at most
  :data:`~.loss_kernels.SEGMENT` elements, added into a double per thread.
* **cross entropy**: ``F.cross_entropy(logits, targets)`` with (N, C) float32 logits and (N,) int64
  class targets (``ignore_index`` honoured, no weights, no label smoothing), ``mean`` or ``sum``.
  Rows run in parallel; one pass over each row by blocks of :data:`~.loss_kernels.CLASS_BLOCK` logits takes
  the block's maximum, rescales the running sum when the maximum grows, then adds the block's
  ``exp(x - max)``.
* **triplet margin loss**: ``nn.TripletMarginLoss`` or ``F.triplet_margin_loss(anchor, positive,
  negative)`` on float32 inputs of one shape (rows of the last dim), any ``margin`` and ``eps``,
  ``p`` 1 or 2, with or without ``swap``, ``mean`` or ``sum``. Rows run in parallel; one pass over
  each row sums the p-th powers of ``|a - p + eps|`` and ``|a - n + eps|`` together (float over
  segments of :data:`~.loss_kernels.SEGMENT`, added in double), then ``max(margin + d(a, p) - d(a, n), 0)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from ..graph import Node, OpGraph, Ref
from ..modules import candidate_module
from ..recipe import GenerationContext, Knob, Match
from ._loss_kernels import TRIPLET_NORMS, cross_entropy_source, elementwise_loss_source, triplet_margin_source
from .elementwise import ELEMENTWISE_OPS, UNARY

__all__ = ["LossRecipe"]

_FLOAT32, _INT64 = "torch.float32", "torch.int64"
_LOSS_OPS = {"mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div"}
_LEGACY_ARGS = ("size_average", "reduce", "weight")  # must be None: the old and weighted forms


class LossRecipe:
    """Elementwise losses and cross entropy reduced to a scalar in one pass over the inputs."""

    family = "loss"
    knobs: Mapping[str, Knob] = {
        "parallel": Knob(default=False, values=(False, True), start=True),
        "simd": Knob(default=False, values=(False, True), start=True),
        "accumulators": Knob(default=1, values=(1, 2, 4, 8), start=4),
        "fast_math": Knob(default=False, values=(False, True)),
        # rows per OpenMP work item: class rows for cross entropy, segments of SEGMENT elements otherwise
        "chunk": Knob(default=0, values=(0, 4, 16, 64)),
    }

    def match(self, graph: OpGraph) -> Match | None:
        if len(graph.outputs) != 1 or not isinstance(graph.outputs[0], Ref) or graph.params:
            return None
        final = graph.tensor(graph.outputs[0])
        if final.shape != () or str(final.dtype) != _FLOAT32:
            return None
        if final.op == "cross_entropy":
            return _match_cross_entropy(graph, final)
        if final.op == "triplet_margin_loss":
            return _match_triplet_margin(graph, final)
        return _match_elementwise_loss(graph, final)

    def generate(self, match: Match, knobs: Mapping[str, Any], context: GenerationContext) -> str:
        knobs = {name: knobs.get(name, knob.default) for name, knob in self.knobs.items()}
        if match.facts["kind"] == "cross_entropy":
            cpp, forward = cross_entropy_source(match.facts, knobs)
        elif match.facts["kind"] == "triplet_margin":
            cpp, forward = triplet_margin_source(match.facts, knobs, context)
        else:
            cpp, forward = elementwise_loss_source(match.facts, knobs, context.graph)
        flags = (["-ffast-math"] if knobs["fast_math"] else []) + ([] if knobs["simd"] else ["-fno-tree-vectorize"])
        return candidate_module(match=match, knobs=knobs, context=context, cpp=cpp, forward_body=forward, flags=flags)


# -- recognizing ----------------------------------------------------------------------------------


def _match_cross_entropy(graph: OpGraph, node: Node) -> Match | None:
    logits, targets = (graph.node(a) for a in node.args[:2]) if len(node.args) >= 2 else (None, None)
    if logits is None or targets is None or logits.op != "input" or targets.op != "input":
        return None
    if len(graph.ops) != 1 or str(logits.dtype) != _FLOAT32 or str(targets.dtype) != _INT64:
        return None
    if logits.shape is None or len(logits.shape) != 2 or targets.shape != logits.shape[:1] or logits.shape[1] < 1:
        return None
    if any(node.arg(i, name) is not None for i, name in ((2, "weight"), (3, "size_average"), (5, "reduce"))):
        return None
    reduction, smoothing = node.arg(6, "reduction", "mean"), node.arg(7, "label_smoothing", 0.0)
    ignore_index = node.arg(4, "ignore_index", -100)
    if (
        reduction not in ("mean", "sum")
        or smoothing != 0
        or isinstance(ignore_index, bool)
        or not isinstance(ignore_index, int)
    ):
        return None
    return Match(
        family="loss",
        summary=f"cross entropy over class rows ({reduction})",
        facts={
            "kind": "cross_entropy",
            "logits": logits.name,
            "targets": targets.name,
            "reduction": reduction,
            "ignore_index": ignore_index,
        },
        # Every logit calls exp: without fast math a scalar libm call each (0.35x of eager at the
        # fitted size on a Zen 5; over 6x with it).
        start={"fast_math": True},
    )


def _match_triplet_margin(graph: OpGraph, node: Node) -> Match | None:
    triplet = [graph.node(a) for a in node.args[:3]]
    if len(graph.ops) != 1 or len(triplet) != 3:
        return None
    shape = triplet[0].shape if triplet[0] is not None else None
    for tensor in triplet:
        if tensor is None or tensor.op != "input" or tensor.shape != shape or str(tensor.dtype) != _FLOAT32:
            return None
    if not shape or 0 in shape:
        return None
    margin, norm, eps = node.arg(3, "margin", 1.0), node.arg(4, "p", 2), node.arg(5, "eps", 1e-6)
    swap, reduction = node.arg(6, "swap", False), node.arg(9, "reduction", "mean")
    if node.arg(7, "size_average") is not None or node.arg(8, "reduce") is not None:
        return None
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) for v in (margin, norm, eps)):
        return None
    if norm not in TRIPLET_NORMS or not isinstance(swap, bool) or reduction not in ("mean", "sum"):
        return None
    return Match(
        family="loss",
        summary=f"triplet margin loss over rows of {shape[-1]} (p={int(norm)}{', swap' if swap else ''}, {reduction})",
        facts={
            "kind": "triplet_margin",
            "inputs": [graph.inputs.index(t.name) for t in triplet if t is not None],
            "margin": float(margin),
            "p": int(norm),
            "eps": float(eps),
            "swap": swap,
            "reduction": reduction,
        },
    )


def _match_elementwise_loss(graph: OpGraph, final: Node) -> Match | None:
    loss = _loss_facts(final)
    if loss is None:
        return None
    found = [graph.node(a) for a in final.args[: loss["arity"]]]
    operands = [o for o in found if o is not None and o.shape is not None]
    if len(operands) != len(found):
        return None
    try:
        domain = tuple(torch.broadcast_shapes(*(o.dims for o in operands)))
    except RuntimeError:
        return None
    steps = []
    for node in graph.ops:
        if node is final:
            continue
        if node.op not in ELEMENTWISE_OPS or node.shape != domain or str(node.dtype) != _FLOAT32:
            return None
        if not _plain_arguments(node):
            return None
        steps.append(node.name)
    used = {ref.name for node in graph.ops for ref in node.inputs}
    inputs = [name for name in graph.inputs if name in used]
    for name in inputs:
        if str(graph[name].dtype) != _FLOAT32 or graph[name].shape is None:
            return None
    layout = _layout(domain, {name: graph[name].dims for name in inputs})
    if layout is None or (loss["op"] == "reduce" and not steps):
        return None
    facts = {
        "kind": "elementwise",
        "loss": loss,
        "domain": list(domain),
        "steps": steps,
        "operands": [o.name for o in operands],
        **layout,
    }
    if loss["reduction"] == "batchmean":
        facts["batch"] = _batch_expression(operands[0].dims, domain, layout["dims"])
        if facts["batch"] is None:
            return None
    if loss["op"] == "kl_div" and not loss["log_target"]:
        facts["kl_log_of"] = _log_argument(graph, operands[0], final)
        if facts["kl_log_of"] is not None:
            facts["steps"] = [s for s in steps if s != operands[0].name]
    name = loss["op"] if loss["op"] != "reduce" else f"{loss['reduction']} of ({', '.join(graph[s].op for s in steps)})"
    return Match(
        family="loss", summary=f"elementwise loss {name} ({loss['reduction']}) over {list(domain)}", facts=facts
    )


def _loss_facts(node: Node) -> dict[str, Any] | None:
    """What the final node reduces: the loss op and its constants, or a plain mean / sum."""
    if node.op in ("mean", "sum"):
        if len(node.args) != 1 or any(value not in (None, False) for value in node.kwargs.values()):
            return None
        return {"op": "reduce", "arity": 1, "reduction": node.op}
    if node.op not in _LOSS_OPS or len(node.args) < 2:
        return None
    if node.op == "huber_loss":
        reduction, weight = node.arg(2, "reduction", "mean"), node.arg(4, "weight")
        if weight is not None:
            return None
        facts: dict[str, Any] = {"delta": float(node.arg(3, "delta", 1.0))}
    else:
        if any(
            node.arg(index, name) is not None
            for index, name in zip((2, 3, 5), _LEGACY_ARGS)
            if not (name == "weight" and node.op in ("smooth_l1_loss", "kl_div"))
        ):
            return None
        reduction = node.arg(4, "reduction", "mean")
        facts = {}
        if node.op == "smooth_l1_loss":
            facts["beta"] = float(node.arg(5, "beta", 1.0))
        if node.op == "kl_div":
            facts["log_target"] = bool(node.arg(5, "log_target", False))
    allowed = ("mean", "sum", "batchmean") if node.op == "kl_div" else ("mean", "sum")
    if reduction not in allowed or facts.get("delta", 1.0) <= 0 or facts.get("beta", 0.0) < 0:
        return None
    return {"op": node.op, "arity": 2, "reduction": reduction, **facts}


def _plain_arguments(node: Node) -> bool:
    """Positional tensors and numbers only, no ``out=``, and a pow whose exponent is a number."""
    if node.kwargs.get("out") is not None:
        return False
    for value in node.args:
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not (isinstance(value, Ref) or value is None or number):
            return False
    if node.op == "pow" and not (
        len(node.args) == 2 and isinstance(node.args[0], Ref) and isinstance(node.args[1], (int, float))
    ):
        return False
    if node.op in UNARY and not isinstance(node.args[0] if node.args else None, Ref):
        return False
    return len(node.inputs) >= 1


def _layout(domain: tuple[int, ...], shapes: Mapping[str, tuple[int, ...]]) -> dict[str, Any] | None:
    """How the inputs cover the domain seen as (rows, cols): a split dim and each input's kind
    (``full``, ``row``: one value per row, ``col``: one per column, ``scalar``), and a Python
    expression for every domain dim's size."""
    rank = len(domain)
    padded = {}
    for name, shape in shapes.items():
        if len(shape) > rank:
            return None
        padded[name] = (1,) * (rank - len(shape)) + tuple(shape)
    dims = []
    for d, size in enumerate(domain):
        if size == 1:
            dims.append("1")
            continue
        owner = next((n for n, s in padded.items() if s[d] == size), None)
        if owner is None:
            return None
        dims.append(f"{owner}.shape[{d - (rank - len(shapes[owner]))}]")
    for split in range(rank + 1):
        kinds = {}
        for name, shape in padded.items():
            row = _coverage(shape[:split], domain[:split])
            col = _coverage(shape[split:], domain[split:])
            if row is None or col is None:
                break
            kinds[name] = {(True, True): "full", (True, False): "row", (False, True): "col", (False, False): "scalar"}[
                (row, col)
            ]
        else:
            return {"split": split, "kinds": kinds, "dims": dims}
    return None


def _coverage(shape: tuple[int, ...], domain: tuple[int, ...]) -> bool | None:
    """True when ``shape`` spans these domain dims, False when it is 1 along all of them, None
    when it is partly broadcast (a layout the (rows, cols) loop cannot walk)."""
    relevant = [s == d for s, d in zip(shape, domain) if d != 1]
    if all(relevant):
        return True
    return False if not any(relevant) else None


def _batch_expression(shape: tuple[int, ...], domain: tuple[int, ...], dims: list[str]) -> str | None:
    """``input.size(0)`` for kl_div's batchmean, as a Python expression of the inputs' shapes."""
    if not shape:
        return "1"
    if shape[0] == 1:
        return "1"
    d = len(domain) - len(shape)
    return dims[d] if domain[d] == shape[0] else None


def _log_argument(graph: OpGraph, first: Node, loss: Node) -> str | None:
    """The value whose ``log`` kl_div reads, when that log feeds nothing else (one log per element
    then suffices: ``t * log(t / p)``)."""
    if first.op != "log" or len(first.args) != 1 or not isinstance(first.args[0], Ref):
        return None
    return first.args[0].name if graph.users(first.name) == (loss,) else None
