"""The C++ of the loss recipe, one generator per kind of loss: the elementwise loss's fused pass
over a (rows, cols) domain, cross entropy's one pass over each row of logits, and the triplet margin
loss's distances; each returns the C++ source and the body of ``forward`` that calls it.

    cpp, forward = elementwise_loss_source(facts, knobs, graph)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..graph import OpGraph, Ref
from ..modules import forward_argument
from ..recipe import GenerationContext
from .elementwise import c_float, elementwise_expression

__all__ = [
    "CLASS_BLOCK",
    "SEGMENT",
    "TRIPLET_NORMS",
    "cross_entropy_source",
    "elementwise_loss_source",
    "triplet_margin_source",
]

SEGMENT = 4096
"""Elements summed in float before the partial sum joins the thread's double total."""

CLASS_BLOCK = 256
"""Logits per block of cross entropy's one pass: the block's max, then its exps, from L1."""

TRIPLET_NORMS = {1: "std::fabs(d)", 2: "d * d"}  # p: the term a distance sums


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


def elementwise_loss_source(facts: Mapping[str, Any], knobs: Mapping[str, Any], graph: OpGraph) -> tuple[str, str]:
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


def cross_entropy_source(facts: Mapping[str, Any], knobs: Mapping[str, Any]) -> tuple[str, str]:
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


def triplet_margin_source(
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

static inline float term(float d) {{ return {TRIPLET_NORMS[facts["p"]]}; }}

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
