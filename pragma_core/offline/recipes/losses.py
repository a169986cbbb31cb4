"""Losses: an elementwise loss reduced to one number, or cross entropy over class rows.

Two shapes of reference are recognized, both ending in a 0-d float32 result:

* an **elementwise loss**: ``F.mse_loss``, ``F.l1_loss``, ``F.smooth_l1_loss``, ``F.huber_loss``,
  ``F.kl_div`` (or their modules), or ``torch.mean`` / ``torch.sum`` of a chain of elementwise ops
  (``torch.mean((a - b) ** 2)``, the hinge ``torch.mean(torch.clamp(1 - p * t, min=0))``), with
  reductions ``mean``, ``sum`` and, for ``kl_div``, ``batchmean``. Inputs may broadcast when the
  broadcast splits into (rows, cols) with every input full, per row, per column or a scalar. One
  fused pass computes each element's loss and sums it: float partial sums over segments of at most
  :data:`SEGMENT` elements, added into a double per thread.
* **cross entropy**: ``F.cross_entropy(logits, targets)`` with (N, C) float32 logits and (N,) int64
  class targets (``ignore_index`` honoured, no weights, no label smoothing), ``mean`` or ``sum``.
  Rows run in parallel; one pass over each row by blocks of :data:`CLASS_BLOCK` logits takes
  the block's maximum, rescales the running sum when the maximum grows, then adds the block's
  ``exp(x - max)``.
* **triplet margin loss**: ``nn.TripletMarginLoss`` or ``F.triplet_margin_loss(anchor, positive,
  negative)`` on float32 inputs of one shape (rows of the last dim), any ``margin`` and ``eps``,
  ``p`` 1 or 2, with or without ``swap``, ``mean`` or ``sum``. Rows run in parallel; one pass over
  each row sums the p-th powers of ``|a - p + eps|`` and ``|a - n + eps|`` together (float over
  segments of :data:`SEGMENT`, added in double), then ``max(margin + d(a, p) - d(a, n), 0)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from ..graph import Node, OpGraph, Ref
from ..modules import candidate_module, forward_argument
from ..recipe import GenerationContext, Knob, Match
from .elementwise import ELEMENTWISE_OPS, UNARY, c_float, elementwise_expression

__all__ = ["LossRecipe", "SEGMENT", "CLASS_BLOCK"]

SEGMENT = 4096
"""Elements summed in float before the partial sum joins the thread's double total."""

CLASS_BLOCK = 256
"""Logits per block of cross entropy's one pass: the block's max, then its exps, from L1."""

_FLOAT32, _INT64 = "torch.float32", "torch.int64"
_LOSS_OPS = {"mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div"}
_LEGACY_ARGS = ("size_average", "reduce", "weight")  # must be None: the old and weighted forms
_TRIPLET_NORMS = {1: "std::fabs(d)", 2: "d * d"}  # p: the term a distance sums


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
            cpp, forward = _cross_entropy_source(match.facts, knobs)
        elif match.facts["kind"] == "triplet_margin":
            cpp, forward = _triplet_margin_source(match.facts, knobs, context)
        else:
            cpp, forward = _elementwise_loss_source(match.facts, knobs, context.graph)
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
    if norm not in _TRIPLET_NORMS or not isinstance(swap, bool) or reduction not in ("mean", "sum"):
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


# -- generating: elementwise losses ---------------------------------------------------------------


def _element_loss(facts: Mapping[str, Any], values: list[str]) -> list[str]:
    """C statements setting ``loss`` from the operands' values (one for a plain mean or sum)."""
    loss = facts["loss"]
    op = loss["op"]
    if op == "reduce":
        return [f"const float loss = {values[0]};"]
    a, b = values
    if op == "kl_div":
        if loss["log_target"]:
            return [f"const float loss = std::exp({b}) * ({b} - {a});"]
        if facts.get("kl_log_of") is not None:
            # xlogy(t, t) - t * log(p) with one log: t * log(t / p); t == 0 adds nothing when p > 0
            return [
                f"const float loss = {b} > 0.0f ? {b} * std::log({b} / {a}) : ({b} == 0.0f && {a} > 0.0f ? 0.0f : NAN);"
            ]
        return [f"const float loss = ({b} == 0.0f ? 0.0f : {b} * std::log({b})) - {b} * {a};"]
    lines = [f"const float d = {a} - {b};"]
    if op == "mse_loss":
        lines.append("const float loss = d * d;")
    elif op == "l1_loss" or (op == "smooth_l1_loss" and loss["beta"] == 0):
        lines.append("const float loss = std::fabs(d);")
    elif op == "smooth_l1_loss":
        beta, half = c_float(loss["beta"]), c_float(0.5 * loss["beta"])
        lines += [
            "const float ad = std::fabs(d);",
            f"const float loss = ad < {beta} ? 0.5f * d * d / {beta} : ad - {half};",
        ]
    elif op == "huber_loss":
        delta, half = c_float(loss["delta"]), c_float(0.5 * loss["delta"])
        lines += [
            "const float ad = std::fabs(d);",
            f"const float loss = ad < {delta} ? 0.5f * d * d : {delta} * (ad - {half});",
        ]
    return lines


def _elementwise_loss_source(facts: Mapping[str, Any], knobs: Mapping[str, Any], graph: OpGraph) -> tuple[str, str]:
    inputs = list(facts["kinds"])
    fast = bool(knobs["fast_math"])
    body = []
    for name in facts["steps"]:
        node = graph[name]
        operands = [
            f"v_{a.name}" if isinstance(a, Ref) else c_float(a)
            for a in node.args
            if isinstance(a, Ref) or (isinstance(a, (int, float)) and not isinstance(a, bool))
        ]
        expression = elementwise_expression(node, operands, fast)
        if expression is None:
            raise ValueError(f"{node.op} is not elementwise")
        body.append(f"const float v_{name} = {expression};")
    operands = list(facts["operands"])
    if facts.get("kl_log_of") is not None:
        operands[0] = facts["kl_log_of"]
    body += _element_loss(facts, [f"v_{o}" for o in operands])
    body.append("return loss;")
    element = "\n".join("    " + line for line in body)

    # per-row setup: a row pointer for inputs that vary along the row, a value for the others
    setup, arguments = [], []
    for name in inputs:
        kind = facts["kinds"][name]
        if kind == "full":
            setup.append(f"const float* __restrict__ p_{name} = {name} + r * cols;")
        elif kind == "col":
            setup.append(f"const float* __restrict__ p_{name} = {name};")
        else:
            setup.append(f"const float v_{name} = {name}[{'r' if kind == 'row' else '0'}];")
        arguments.append(f"p_{name}[j]" if kind in ("full", "col") else f"v_{name}")
    parameters = ", ".join(f"float v_{name}" for name in inputs)
    pointers = ", ".join(
        [f"const float* __restrict__ {name}" for name in inputs]
        + ["float* __restrict__ out", "int64_t rows", "int64_t cols", "double divisor", "int64_t chunk"]
    )
    sum_loop = _reduction(
        result="partial",
        begin="begin",
        end="end",
        init="0.0f",
        combine="+",
        element=lambda j: f"element_loss({', '.join(a.replace('[j]', f'[{j}]') for a in arguments)})",
        knobs=knobs,
    )
    segment_body = "\n".join("        " + line for line in [*setup, *sum_loop, "total += (double)partial;"])
    parallel = _omp_for(knobs, "reduction(+:total)")
    cpp = f"""
#include <algorithm>
#include <cmath>
#include <cstdint>

// The loss of one element, from each input's value there.
static inline float element_loss({parameters}) {{
{element}
}}

// Sum of the loss over a (rows, cols) domain: segments of up to {SEGMENT} elements summed in float,
// each added into a double total; out[0] = total / divisor.
extern "C" void loss_reduce({pointers}) {{
    const int64_t segment = std::min<int64_t>({SEGMENT}, std::max<int64_t>(cols, 1));
    const int64_t per_row = (cols + segment - 1) / segment;
    const int64_t segments = rows * per_row;
    (void)chunk;
    double total = 0.0;
    {parallel}
    for (int64_t s = 0; s < segments; ++s) {{
        const int64_t r = s / per_row;
        const int64_t begin = (s % per_row) * segment;
        const int64_t end = std::min(begin + segment, cols);
{segment_body}
    }}
    out[0] = (float)(total / divisor);
}}
"""
    dims, split = facts["dims"], facts["split"]
    rows = " * ".join(dims[:split]) or "1"
    cols = " * ".join(dims[split:]) or "1"
    divisor = {"sum": "1.0", "mean": "float(rows * cols)", "batchmean": f"float({facts.get('batch')})"}[
        facts["loss"]["reduction"]
    ]
    forward = "\n".join(
        [
            *[f"{name} = {name}.contiguous()" for name in inputs],
            f"rows = {rows}",
            f"cols = {cols}",
            "out = torch.empty((), dtype=torch.float32)",
            f"lib.loss_reduce({', '.join(inputs)}, out, rows, cols, {divisor}, {int(knobs['chunk'])})",
            "return out",
        ]
    )
    return cpp, forward


# -- generating: cross entropy --------------------------------------------------------------------


def _cross_entropy_source(facts: Mapping[str, Any], knobs: Mapping[str, Any]) -> tuple[str, str]:
    maximum = _reduction(
        result="block_max", begin="b", end="e", init="x[b]", combine="max", element=lambda j: f"x[{j}]", knobs=knobs
    )
    exp_sum = _reduction(
        result="block_sum",
        begin="b",
        end="e",
        init="0.0f",
        combine="+",
        element=lambda j: f"std::exp(x[{j}] - row_max)",
        knobs=knobs,
    )
    block = [
        "const int64_t e = b + CLASS_BLOCK < classes ? b + CLASS_BLOCK : classes;",
        "// the block's maximum, read while the block stays in L1",
        *maximum,
        "if (block_max > row_max) {  // rescale the sum so far to the new maximum",
        "    exp_sum *= std::exp(row_max - block_max);",
        "    row_max = block_max;",
        "}",
        "// the block's sum of exp(x - max)",
        *exp_sum,
        "exp_sum += block_sum;",
    ]
    row = "\n".join(
        "        " + line
        for line in [
            "// one pass over the row: log-sum-exp by blocks with a running maximum",
            "float row_max = x[0], exp_sum = 0.0f;",
            "for (int64_t b = 0; b < classes; b += CLASS_BLOCK) {",
            *("    " + line for line in block),
            "}",
            "const float log_sum_exp = row_max + std::log(exp_sum);",
            "const float picked = (target >= 0 && target < classes) ? x[target] : NAN;",
            "total += (double)(log_sum_exp - picked);",
            "counted += 1;",
        ]
    )
    parallel = _omp_for(knobs, "reduction(+:total, counted)")
    mean = facts["reduction"] == "mean"
    cpp = f"""
#include <cmath>
#include <cstdint>

// Cross entropy of (rows, classes) logits against class targets: per row log-sum-exp minus the
// target's logit; rows whose target is {facts["ignore_index"]} are skipped.
extern "C" void cross_entropy(const float* __restrict__ logits, const int64_t* __restrict__ targets,
                              float* __restrict__ out, int64_t rows, int64_t classes, int64_t chunk) {{
    const int64_t CLASS_BLOCK = {CLASS_BLOCK};
    (void)chunk;
    double total = 0.0;
    int64_t counted = 0;
    {parallel}
    for (int64_t r = 0; r < rows; ++r) {{
        const int64_t target = targets[r];
        if (target == {facts["ignore_index"]}LL) continue;
        const float* __restrict__ x = logits + r * classes;
{row}
    }}
    out[0] = (float)({"total / (double)counted" if mean else "total"});
}}
"""
    logits, targets = facts["logits"], facts["targets"]
    forward = "\n".join(
        [
            f"{logits} = {logits}.contiguous()",
            f"{targets} = {targets}.contiguous()",
            "out = torch.empty((), dtype=torch.float32)",
            f"lib.cross_entropy({logits}, {targets}, out, {logits}.shape[0], {logits}.shape[1], {int(knobs['chunk'])})",
            "return out",
        ]
    )
    return cpp, forward


# -- generating: triplet margin loss --------------------------------------------------------------


def _triplet_margin_source(
    facts: Mapping[str, Any], knobs: Mapping[str, Any], context: GenerationContext
) -> tuple[str, str]:
    pairs = [("to_positive", "a", "pos"), ("to_negative", "a", "neg")]
    if facts["swap"]:
        pairs.append(("positive_to_negative", "pos", "neg"))

    def term(x: str, y: str) -> Callable[[str], str]:
        return lambda j: f"term({x}[{j}] - {y}[{j}] + EPS)"

    sums = _reductions(
        folds=[(f"{name}_part", term(x, y)) for name, x, y in pairs],
        begin="b",
        end="e",
        init="0.0f",
        combine="+",
        knobs=knobs,
    )
    distance = "std::sqrt({})" if facts["p"] == 2 else "{}"
    row = [
        "const float* __restrict__ a = anchor + r * cols;",
        "const float* __restrict__ pos = positive + r * cols;",
        "const float* __restrict__ neg = negative + r * cols;",
        f"double {', '.join(f'{name} = 0.0' for name, _, _ in pairs)};",
        "for (int64_t b = 0; b < cols; b += SEGMENT) {",
        "    const int64_t e = b + SEGMENT < cols ? b + SEGMENT : cols;",
        *("    " + line for line in sums),
        *(f"    {name} += (double){name}_part;" for name, _, _ in pairs),
        "}",
        f"const double near = {distance.format('to_positive')};",
        f"double far = {distance.format('to_negative')};",
        *(
            [
                f"const double swapped = {distance.format('positive_to_negative')};",
                "far = swapped < far ? swapped : far;",
            ]
            if facts["swap"]
            else []
        ),
        "const double loss = MARGIN + near - far;",
        "total += loss > 0.0 ? loss : 0.0;",
    ]
    body = "\n".join("        " + line for line in row)
    cpp = f"""
#include <cmath>
#include <cstdint>

static inline float term(float d) {{ return {_TRIPLET_NORMS[facts["p"]]}; }}

// Triplet margin loss of (rows, cols) anchors, positives and negatives: per row the p-norm distances
// of a - pos + eps and a - neg + eps (segments of SEGMENT elements summed in float, added in double),
// then max(margin + d(a, pos) - d(a, neg), 0); out[0] = the sum over rows / divisor.
extern "C" void triplet_margin_loss(const float* __restrict__ anchor, const float* __restrict__ positive,
                                    const float* __restrict__ negative, float* __restrict__ out, int64_t rows,
                                    int64_t cols, double divisor, int64_t chunk) {{
    const int64_t SEGMENT = {SEGMENT};
    const float EPS = {c_float(facts["eps"])};
    const double MARGIN = {facts["margin"]!r};
    (void)chunk;
    double total = 0.0;
    {_omp_for(knobs, "reduction(+:total)")}
    for (int64_t r = 0; r < rows; ++r) {{
{body}
    }}
    out[0] = (float)(total / divisor);
}}
"""
    names = [forward_argument(context, index) for index in facts["inputs"]]
    anchor = names[0]
    forward = "\n".join(
        [
            *[f"{name} = {name}.contiguous()" for name in dict.fromkeys(names)],
            f"cols = {anchor}.shape[-1]",
            f"rows = {anchor}.shape[:-1].numel()",
            "out = torch.empty((), dtype=torch.float32)",
            f"lib.triplet_margin_loss({', '.join(names)}, out, rows, cols, "
            f"{'float(rows)' if facts['reduction'] == 'mean' else '1.0'}, {int(knobs['chunk'])})",
            "return out",
        ]
    )
    return cpp, forward


# -- shared C pieces ------------------------------------------------------------------------------


def _omp_for(knobs: Mapping[str, Any], reduction: str) -> str:
    """The OpenMP line of the outer loop (empty when serial)."""
    if not knobs["parallel"]:
        return ""
    schedule = "schedule(static, chunk)" if knobs["chunk"] else "schedule(static)"
    return f"#pragma omp parallel for {reduction} {schedule}"


def _reduction(
    *,
    result: str,
    begin: str,
    end: str,
    init: str,
    combine: str,
    element: Callable[[str], str],
    knobs: Mapping[str, Any],
) -> list[str]:
    """C lines folding ``element(j)`` for j in [begin, end) into ``result`` (a float) with ``+`` or
    ``max``, over ``accumulators`` independent partial results; the main loop has no branches."""
    return _reductions(folds=[(result, element)], begin=begin, end=end, init=init, combine=combine, knobs=knobs)


def _reductions(
    *,
    folds: Sequence[tuple[str, Callable[[str], str]]],
    begin: str,
    end: str,
    init: str,
    combine: str,
    knobs: Mapping[str, Any],
) -> list[str]:
    """:func:`_reduction` of several results in one loop: each ``(result, element)`` of ``folds``
    folds its own ``element(j)`` into its own ``result``, so the elements are read once for all."""
    count = int(knobs["accumulators"])
    partials = {result: [f"{result}_{k}" for k in range(count)] for result, _ in folds}

    def fold(into: str, value: str) -> str:
        if combine == "+":
            return f"{into} += {value};"
        return f"{{ const float value = {value}; {into} = value > {into} ? value : {into}; }}"

    lines = [f"float {', '.join(f'{p} = {init}' for p in names)};" for names in partials.values()]
    main_end = end if count == 1 else f"{folds[0][0]}_main_end"
    if count > 1:
        lines.append(f"const int64_t {main_end} = {begin} + ({end} - {begin}) / {count} * {count};")
    if knobs["simd"]:
        every = ", ".join(p for names in partials.values() for p in names)
        lines.append(f"#pragma omp simd reduction({'+' if combine == '+' else 'max'}:{every})")
    lines.append(f"for (int64_t j = {begin}; j < {main_end}; j += {count}) {{")
    lines += [
        f"    {fold(partials[result][k], element('j' if k == 0 else f'j + {k}'))}"
        for k in range(count)
        for result, element in folds
    ]
    lines.append("}")
    if count > 1:
        tail = " ".join(fold(partials[result][0], element("j")) for result, element in folds)
        lines.append(f"for (int64_t j = {main_end}; j < {end}; ++j) {tail if len(folds) == 1 else f'{{ {tail} }}'}")
    for result, names in partials.items():
        if combine == "+":
            lines.append(f"const float {result} = {' + '.join(names)};")
        else:
            lines.append(f"float {result} = {names[0]};")
            lines += [f"{result} = {p} > {result} ? {p} : {result};" for p in names[1:]]
    return lines
