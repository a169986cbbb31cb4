"""Elementwise and activation chains: one fused loop over every element.

Recognizes forwards made only of elementwise ops (every KernelBench level-1 activation, GELU with
erf or tanh, arithmetic with scalars and same-shape tensors) on float32 inputs of the output's
shape, and writes one loop that reads each input once and writes the output once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from ..graph import Node, OpGraph, Ref
from ..modules import candidate_module, forward_argument
from ..recipe import GenerationContext, Knob, Match, compiler_flags

__all__ = [
    "ElementwiseRecipe",
    "UNARY",
    "ELEMENTWISE_OPS",
    "TRANSCENDENTAL",
    "c_float",
    "elementwise_expression",
    "larger",
    "smaller",
]


def c_float(value: float) -> str:
    """A C float literal that keeps the value (``0.044715f``, ``INFINITY``)."""
    if math.isinf(value):
        return "INFINITY" if value > 0 else "-INFINITY"
    return f"{float(value)!r}f"


def larger(a: str, b: str) -> str:
    """``max(a, b)`` as a select, NaN in ``a`` kept as torch keeps it. ``std::fmax`` vectorizes only
    under fast math: without it GCC calls ``fmaxf`` per element (ten times the loop's time seen on a
    convolution's ReLU); a select vectorizes either way. ``b`` is read twice: a literal, or an
    expression without calls."""
    return f"({a} < {b} ? {b} : {a})"


def smaller(a: str, b: str) -> str:
    """``min(a, b)`` as a select (see :func:`larger`)."""
    return f"({a} > {b} ? {b} : {a})"


def _gelu(v: str, node: Node, fast: bool) -> str:
    if node.arg(1, "approximate", "none") == "tanh":
        inner = f"0.7978845608028654f * ({v} + 0.044715f * {v} * {v} * {v})"
        return f"({v} / (1.0f + std::exp(-2.0f * {inner})))" if fast else f"(0.5f * {v} * (1.0f + std::tanh({inner})))"
    return f"(0.5f * {v} * (1.0f + std::erf({v} * 0.7071067811865476f)))"


def _expm1(v: str, fast: bool) -> str:
    """``exp(v) - 1``: with fast math through ``exp``, which vectorizes inline (libmvec has no vector
    ``expm1``); its absolute error near 0 is a float's rounding, far inside the tolerance."""
    return f"(std::exp({v}) - 1.0f)" if fast else f"std::expm1({v})"


def _mish(v: str, fast: bool) -> str:
    """``v * tanh(softplus(v))``; with fast math one inline ``exp`` and a division
    (:mod:`~pragma_core.offline.fast_functions`) where libm's form calls ``exp``, ``log1p`` and
    ``tanh``."""
    return f"fast_mish({v})" if fast else f"({v} * std::tanh({v} > 20.0f ? {v} : std::log1p(std::exp({v}))))"


def _softplus(v: str, node: Node, fast: bool) -> str:
    beta, threshold = float(node.arg(1, "beta", 1.0)), float(node.arg(2, "threshold", 20.0))
    bv = f"({c_float(beta)} * {v})"
    return f"({bv} > {c_float(threshold)} ? {v} : std::log1p(std::exp({bv})) / {c_float(beta)})"


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772, 1.0507009873554805

# op -> C expression of the input expression ``v`` (a float), the node, and whether fast_math is on.
UNARY: dict[str, Callable[[str, Node, bool], str]] = {
    "relu": lambda v, n, f: larger(v, "0.0f"),
    "relu6": lambda v, n, f: smaller(larger(v, "0.0f"), "6.0f"),
    "leaky_relu": lambda v, n, f: (lambda s: f"({v} > 0.0f ? {v} : {s} * {v})")(
        c_float(n.arg(1, "negative_slope", 0.01))
    ),
    "gelu": _gelu,
    "sigmoid": lambda v, n, f: f"(1.0f / (1.0f + std::exp(-{v})))",
    "tanh": lambda v, n, f: f"std::tanh({v})",
    "silu": lambda v, n, f: f"({v} / (1.0f + std::exp(-{v})))",
    "mish": lambda v, n, f: _mish(v, f),
    "softplus": _softplus,
    "softsign": lambda v, n, f: f"({v} / (1.0f + std::fabs({v})))",
    "elu": lambda v, n, f: (lambda a: f"({v} > 0.0f ? {v} : {a} * {_expm1(v, f)})")(c_float(n.arg(1, "alpha", 1.0))),
    "selu": lambda v, n, f: f"({c_float(_SELU_SCALE)} * ({v} > 0.0f ? {v} : {c_float(_SELU_ALPHA)} * {_expm1(v, f)}))",
    "celu": lambda v, n, f: (lambda a: f"({larger(v, '0.0f')} + std::fmin(0.0f, {a} * {_expm1(f'{v} / {a}', f)}))")(
        c_float(n.arg(1, "alpha", 1.0))
    ),
    "hardtanh": lambda v, n, f: smaller(
        larger(v, c_float(n.arg(1, "min_val", -1.0))), c_float(n.arg(2, "max_val", 1.0))
    ),
    "hardsigmoid": lambda v, n, f: smaller(larger(f"({v} / 6.0f + 0.5f)", "0.0f"), "1.0f"),
    "hardswish": lambda v, n, f: f"({v} * {smaller(larger(f'({v} + 3.0f)', '0.0f'), '6.0f')} / 6.0f)",
    "tanhshrink": lambda v, n, f: f"({v} - std::tanh({v}))",
    "softshrink": lambda v, n, f: (lambda lam: f"({v} > {lam} ? {v} - {lam} : ({v} < -{lam} ? {v} + {lam} : 0.0f))")(
        c_float(n.arg(1, "lambd", 0.5))
    ),
    "hardshrink": lambda v, n, f: (lambda lam: f"(std::fabs({v}) > {lam} ? {v} : 0.0f)")(
        c_float(n.arg(1, "lambd", 0.5))
    ),
    "logsigmoid": lambda v, n, f: f"({smaller(v, '0.0f')} - std::log1p(std::exp(-std::fabs({v}))))",
    "exp": lambda v, n, f: f"std::exp({v})",
    "expm1": lambda v, n, f: _expm1(v, f),
    "log": lambda v, n, f: f"std::log({v})",
    "log1p": lambda v, n, f: f"std::log1p({v})",
    "abs": lambda v, n, f: f"std::fabs({v})",
    "sqrt": lambda v, n, f: f"std::sqrt({v})",
    "rsqrt": lambda v, n, f: f"(1.0f / std::sqrt({v}))",
    "sin": lambda v, n, f: f"std::sin({v})",
    "cos": lambda v, n, f: f"std::cos({v})",
    "erf": lambda v, n, f: f"std::erf({v})",
    "neg": lambda v, n, f: f"(-{v})",
    "square": lambda v, n, f: f"({v} * {v})",
    "reciprocal": lambda v, n, f: f"(1.0f / {v})",
    "clamp": lambda v, n, f: _clamp(v, n.arg(1, "min"), n.arg(2, "max")),
    "identity": lambda v, n, f: v,
    "contiguous": lambda v, n, f: v,
}


def _clamp(v: str, low: Any, high: Any) -> str:
    expression = v
    if low is not None:
        expression = larger(expression, c_float(low))
    if high is not None:
        expression = smaller(expression, c_float(high))
    return expression


def _pow(base: str, exponent: Any) -> str:
    if exponent == 2:
        return f"({base} * {base})"
    if exponent == 3:
        return f"({base} * {base} * {base})"
    if exponent == 0.5:
        return f"std::sqrt({base})"
    return f"std::pow({base}, {c_float(exponent)})"


TRANSCENDENTAL = frozenset(
    "gelu sigmoid tanh silu mish softplus elu selu celu logsigmoid exp expm1 log log1p sin cos erf tanhshrink pow".split()
)
"""Ops whose C calls libm (exp, tanh, erf, log...): scalar calls per element unless fast math
vectorizes them (inline or through libmvec)."""

_BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_REVERSED = {"radd": "+", "rsub": "-", "rdiv": "/"}
ELEMENTWISE_OPS = frozenset(UNARY) | set(_BINARY) | set(_REVERSED) | {"pow", "maximum", "minimum"}
"""Every op :func:`elementwise_expression` writes."""


def elementwise_expression(node: Node, operands: list[str], fast: bool) -> str | None:
    """The C expression of one elementwise node given its operands' expressions (a tensor operand
    is its value expression, a scalar its literal); None when the node is not elementwise."""
    op = node.op
    if op in UNARY:
        return UNARY[op](operands[0], node, fast)
    if op in _BINARY and len(operands) >= 2:
        alpha = node.kwargs.get("alpha")
        right = operands[1] if alpha in (None, 1) else f"({c_float(alpha)} * {operands[1]})"
        return f"({operands[0]} {_BINARY[op]} {right})"
    if op in _REVERSED and len(operands) >= 2:
        return f"({operands[1]} {_REVERSED[op]} {operands[0]})"
    if op == "pow" and len(operands) >= 2 and isinstance(node.args[1], (int, float)):
        return _pow(operands[0], node.args[1])
    if op in ("maximum", "minimum") and len(operands) >= 2:
        return (larger if op == "maximum" else smaller)(operands[0], operands[1])
    return None


class ElementwiseRecipe:
    """A chain of elementwise ops fused into one pass."""

    family = "elementwise"
    knobs: Mapping[str, Knob] = {
        "parallel": Knob(default=False, values=(False, True), start=True),
        "simd": Knob(default=False, values=(False, True), start=True),
        "fast_math": Knob(default=False, values=(False, True)),
        "vector_width": Knob(default=256, values=(256, 512)),
        "unroll": Knob(default=1, values=(1, 2, 4)),
    }

    def match(self, graph: OpGraph) -> Match | None:
        if len(graph.outputs) != 1 or not isinstance(graph.outputs[0], Ref) or graph.params:
            return None
        out = graph.tensor(graph.outputs[0])
        if out.shape is None or str(out.dtype) != "torch.float32" or not graph.ops:
            return None
        tensors = 0
        for name in graph.inputs:
            node = graph[name]
            if _scalar_input(node):
                continue
            if node.shape != out.shape or str(node.dtype) != "torch.float32":
                return None
            tensors += 1
        if not tensors:
            return None
        steps: list[dict[str, Any]] = []
        for node in graph.ops:
            if node.op not in ELEMENTWISE_OPS or node.shape != out.shape:
                return None
            operands: list[Any] = []
            for argument in node.args:
                if isinstance(argument, Ref):
                    operands.append({"ref": argument.name})
                elif isinstance(argument, bool) or not isinstance(argument, (int, float)):
                    if argument is not None:
                        return None
                else:
                    operands.append({"const": float(argument)})
            if node.op in UNARY:
                operands = operands[:1]
            steps.append({"name": node.name, "op": node.op, "operands": operands})
        ops = ", ".join(step["op"] for step in steps)
        return Match(
            family=self.family,
            summary=f"elementwise chain ({ops})",
            facts={"inputs": list(graph.inputs), "output": out.name, "steps": steps},
        )

    def generate(self, match: Match, knobs: Mapping[str, Any], context: GenerationContext) -> str:
        graph = context.graph
        fast = bool(knobs["fast_math"])
        names = {name: f"in{i}" for i, name in enumerate(graph.inputs)}
        scalars = {name for name in graph.inputs if _scalar_input(graph[name])}
        body = [
            f"const float v_{name} = {parameter};" if name in scalars else f"const float v_{name} = {parameter}[i];"
            for name, parameter in names.items()
        ]
        for node in graph.ops:
            operands = [
                f"v_{a.name}" if isinstance(a, Ref) else c_float(a)
                for a in node.args
                if isinstance(a, Ref) or (isinstance(a, (int, float)) and not isinstance(a, bool))
            ]
            expression = elementwise_expression(node, operands, fast)
            if expression is None:
                raise ValueError(f"{node.op} is not elementwise")
            body.append(f"const float v_{node.name} = {expression};")
        body.append(f"out[i] = v_{match.facts['output']};")
        pragma = {
            (True, True): "#pragma omp parallel for simd schedule(static)",
            (True, False): "#pragma omp parallel for schedule(static)",
            (False, True): "#pragma omp simd",
            (False, False): "",
        }[(bool(knobs["parallel"]), bool(knobs["simd"]))]
        parameters = ", ".join(
            [f"float {p}" if name in scalars else f"const float* __restrict__ {p}" for name, p in names.items()]
            + ["float* __restrict__ out", "int64_t n"]
        )
        loop_body = "\n".join("        " + line for line in body)
        cpp = f"""
#include <cmath>
#include <cstdint>

extern "C" void elementwise({parameters}) {{
    {pragma}
    for (int64_t i = 0; i < n; ++i) {{
{loop_body}
    }}
}}
"""
        flags = compiler_flags(knobs)
        arguments = [forward_argument(context, i) for i in range(len(graph.inputs))]
        tensors = [a for a, name in zip(arguments, graph.inputs) if name not in scalars]
        passed = [f"float({a})" if name in scalars else a for a, name in zip(arguments, graph.inputs)]
        forward = "\n".join(
            [
                *[f"{a} = {a}.contiguous()" for a in tensors],
                f"out = torch.empty_like({tensors[0]})",
                f"lib.elementwise({', '.join(passed)}, out, out.numel())",
                "return out",
            ]
        )
        return candidate_module(match=match, knobs=knobs, context=context, cpp=cpp, forward_body=forward, flags=flags)


def _scalar_input(node: Node) -> bool:
    """A forward argument the task passes as a plain number (a matrix-scalar product's ``s``)."""
    value = node.kwargs.get("value")
    return node.op == "input" and isinstance(value, (int, float)) and not isinstance(value, bool)
