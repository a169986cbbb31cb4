"""Elementwise chains in Triton: one kernel reads each input once and writes the output once.

Every op of the C++ recipe's :data:`~pragma_core.offline.recipes.elementwise.UNARY` table, and its
binary ops, is written with ``triton.language`` functions the interpreter runs too: ``tl.exp``,
``tl.log``, ``tl.sqrt``, ``tl.rsqrt``, ``tl.math.erf``, ``tl.sigmoid``, ``tl.sin``, ``tl.cos``,
``tl.where``, ``tl.maximum``, ``tl.minimum``, ``tl.abs``. Triton has no portable ``tanh``,
``log1p`` or ``expm1`` (``libdevice`` is CUDA/HIP only, the interpreter has none): ``tanh`` comes
from ``exp`` in a helper kernel, ``log1p(x)`` is ``log(1 + x)`` and ``expm1(x)`` is ``exp(x) - 1``,
whose absolute errors (a float's rounding near 1) are far inside the verifier's tolerance.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..graph import Node, NotRecognized, Ref
from ..modules import forward_argument
from ..recipe import GenerationContext, Knob, Match
from ._module import WARPS, launch_constants, tl_float, triton_module

__all__ = ["KNOBS", "TL_UNARY", "HELPERS", "tl_expression", "helpers_used", "generate"]

KNOBS: Mapping[str, Knob] = {
    "block": Knob(default=1024, values=(256, 512, 1024, 2048, 4096), start=1024),
    "num_warps": WARPS,
}

HELPERS = {
    "_tanh": '''
@triton.jit
def _tanh(x):
    """tanh from exp (no tanh in triton.language the interpreter runs): exp(-2|x|) never overflows."""
    t = tl.exp(-2.0 * tl.abs(x))
    y = (1.0 - t) / (1.0 + t)
    return tl.where(x < 0.0, -y, y)
''',
}
"""Helper ``@triton.jit`` functions an expression may call, by name."""


def _gelu(v: str, node: Node) -> str:
    if node.arg(1, "approximate", "none") == "tanh":
        return f"(0.5 * {v} * (1.0 + _tanh(0.7978845608028654 * ({v} + 0.044715 * {v} * {v} * {v}))))"
    return f"(0.5 * {v} * (1.0 + tl.math.erf({v} * 0.7071067811865476)))"


def _softplus(v: str, node: Node) -> str:
    beta, threshold = float(node.arg(1, "beta", 1.0)), float(node.arg(2, "threshold", 20.0))
    bv = f"({tl_float(beta)} * {v})"
    return f"tl.where({bv} > {tl_float(threshold)}, {v}, tl.log(1.0 + tl.exp({bv})) / {tl_float(beta)})"


def _clamp(v: str, low: Any, high: Any) -> str:
    expression = v
    if low is not None:
        expression = f"tl.maximum({expression}, {tl_float(low)})"
    if high is not None:
        expression = f"tl.minimum({expression}, {tl_float(high)})"
    return expression


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772, 1.0507009873554805

# op -> tl expression of the operand variable ``v`` (a float32 block) and the node.
TL_UNARY: dict[str, Callable[[str, Node], str]] = {
    "relu": lambda v, n: f"tl.maximum({v}, 0.0)",
    "relu6": lambda v, n: f"tl.minimum(tl.maximum({v}, 0.0), 6.0)",
    "leaky_relu": lambda v, n: f"tl.where({v} > 0.0, {v}, {tl_float(n.arg(1, 'negative_slope', 0.01))} * {v})",
    "gelu": _gelu,
    "sigmoid": lambda v, n: f"tl.sigmoid({v})",
    "tanh": lambda v, n: f"_tanh({v})",
    "silu": lambda v, n: f"({v} * tl.sigmoid({v}))",
    "mish": lambda v, n: f"({v} * _tanh(tl.where({v} > 20.0, {v}, tl.log(1.0 + tl.exp({v})))))",
    "softplus": _softplus,
    "softsign": lambda v, n: f"({v} / (1.0 + tl.abs({v})))",
    "elu": lambda v, n: f"tl.where({v} > 0.0, {v}, {tl_float(n.arg(1, 'alpha', 1.0))} * (tl.exp({v}) - 1.0))",
    "selu": lambda v, n: (
        f"({tl_float(_SELU_SCALE)} * tl.where({v} > 0.0, {v}, {tl_float(_SELU_ALPHA)} * (tl.exp({v}) - 1.0)))"
    ),
    "celu": lambda v, n: (lambda a: f"(tl.maximum({v}, 0.0) + tl.minimum({a} * (tl.exp({v} / {a}) - 1.0), 0.0))")(
        tl_float(n.arg(1, "alpha", 1.0))
    ),
    "hardtanh": lambda v, n: _clamp(v, n.arg(1, "min_val", -1.0), n.arg(2, "max_val", 1.0)),
    "hardsigmoid": lambda v, n: f"tl.minimum(tl.maximum({v} / 6.0 + 0.5, 0.0), 1.0)",
    "hardswish": lambda v, n: f"({v} * tl.minimum(tl.maximum({v} + 3.0, 0.0), 6.0) / 6.0)",
    "tanhshrink": lambda v, n: f"({v} - _tanh({v}))",
    "softshrink": lambda v, n: (
        lambda lam: f"tl.where({v} > {lam}, {v} - {lam}, tl.where({v} < -{lam}, {v} + {lam}, 0.0))"
    )(tl_float(n.arg(1, "lambd", 0.5))),
    "hardshrink": lambda v, n: f"tl.where(tl.abs({v}) > {tl_float(n.arg(1, 'lambd', 0.5))}, {v}, 0.0)",
    "logsigmoid": lambda v, n: f"(tl.minimum({v}, 0.0) - tl.log(1.0 + tl.exp(-tl.abs({v}))))",
    "exp": lambda v, n: f"tl.exp({v})",
    "expm1": lambda v, n: f"(tl.exp({v}) - 1.0)",
    "log": lambda v, n: f"tl.log({v})",
    "log1p": lambda v, n: f"tl.log(1.0 + {v})",
    "abs": lambda v, n: f"tl.abs({v})",
    "sqrt": lambda v, n: f"tl.sqrt({v})",
    "rsqrt": lambda v, n: f"tl.rsqrt({v})",
    "sin": lambda v, n: f"tl.sin({v})",
    "cos": lambda v, n: f"tl.cos({v})",
    "erf": lambda v, n: f"tl.math.erf({v})",
    "neg": lambda v, n: f"(-{v})",
    "square": lambda v, n: f"({v} * {v})",
    "reciprocal": lambda v, n: f"(1.0 / {v})",
    "clamp": lambda v, n: _clamp(v, n.arg(1, "min"), n.arg(2, "max")),
    "identity": lambda v, n: v,
    "contiguous": lambda v, n: v,
}

_BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_REVERSED = {"radd": "+", "rsub": "-", "rdiv": "/"}


def _pow(base: str, exponent: float) -> str:
    if exponent == 0:
        return f"({base} * 0.0 + 1.0)"
    if exponent == 0.5:
        return f"tl.sqrt({base})"
    if not exponent.is_integer():
        return f"tl.exp({tl_float(exponent)} * tl.log({base}))"  # NaN for a negative base, as in torch
    if abs(exponent) <= 4:
        product = "(" + " * ".join([base] * int(abs(exponent))) + ")"
        return product if exponent > 0 else f"(1.0 / {product})"
    # A larger integer power from |x|, with the sign an odd power keeps.
    magnitude = f"tl.exp({tl_float(exponent)} * tl.log(tl.abs({base})))"
    return f"tl.where({base} < 0.0, -{magnitude}, {magnitude})" if int(exponent) % 2 else magnitude


def tl_expression(node: Node, operands: list[str]) -> str | None:
    """The tl expression of one elementwise node given its operands (a tensor operand is its
    variable, a scalar its literal); None when the node is not an op this module writes."""
    op = node.op
    if op in TL_UNARY:
        return TL_UNARY[op](operands[0], node)
    if op in _BINARY and len(operands) >= 2:
        alpha = node.kwargs.get("alpha")
        right = operands[1] if alpha in (None, 1) else f"({tl_float(alpha)} * {operands[1]})"
        return f"({operands[0]} {_BINARY[op]} {right})"
    if op in _REVERSED and len(operands) >= 2:
        return f"({operands[1]} {_REVERSED[op]} {operands[0]})"
    if op == "pow" and len(node.args) >= 2 and isinstance(node.args[1], (int, float)):
        if isinstance(node.args[1], bool):
            return None
        return _pow(operands[0], float(node.args[1]))
    if op in ("maximum", "minimum") and len(operands) >= 2:
        return f"tl.{op}({operands[0]}, {operands[1]})"
    return None


def helpers_used(code: str) -> list[str]:
    """The helper functions ``code`` calls (and the helpers they call), as source."""
    used: list[str] = []
    text = code
    changed = True
    while changed:
        changed = False
        for name, source in HELPERS.items():
            if source not in used and f"{name}(" in text:
                used.append(source)
                text += source
                changed = True
    return used


def _operand(argument: Any) -> str | None:
    if isinstance(argument, Ref):
        return f"v_{argument.name}"
    if isinstance(argument, (int, float)) and not isinstance(argument, bool):
        return tl_float(argument)
    return None


def _scalar_input(node: Node) -> bool:
    """A forward argument the task passes as a plain number (a matrix-scalar product's ``s``)."""
    value = node.kwargs.get("value")
    return node.op == "input" and isinstance(value, (int, float)) and not isinstance(value, bool)


def generate(match: Match, knobs: Mapping[str, Any], context: GenerationContext) -> str:
    graph = context.graph
    names = {name: f"in{i}" for i, name in enumerate(graph.inputs)}
    scalars = {name for name in graph.inputs if _scalar_input(graph[name])}
    body = [
        f"v_{name} = {parameter}" if name in scalars else f"v_{name} = tl.load({parameter} + offsets, mask=mask)"
        for name, parameter in names.items()
    ]
    for node in graph.ops:
        operands = [text for text in map(_operand, node.args) if text is not None]
        expression = tl_expression(node, operands) if operands else None
        if expression is None:
            raise NotRecognized(f"{context.task_key}: the triton backend writes no elementwise {node.op!r}")
        body.append(f"v_{node.name} = {expression}")
    body.append(f"tl.store(out + offsets, v_{match.facts['output']}, mask=mask)")
    lines = "\n".join("    " + line for line in body)
    kernel = f'''
@triton.jit
def elementwise_kernel({", ".join(names.values())}, out, n, BLOCK: tl.constexpr):
    """{match.summary}, BLOCK elements per program."""
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
{lines}
'''
    arguments = [forward_argument(context, i) for i in range(len(graph.inputs))]
    tensors = [a for a, name in zip(arguments, graph.inputs) if name not in scalars]
    passed = [f"float({a})" if name in scalars else a for a, name in zip(arguments, graph.inputs)]
    forward = "\n".join(
        [
            *[f"{a} = {a}.contiguous()" for a in tensors],
            f"out = torch.empty_like({tensors[0]})",
            "n = out.numel()",
            f"elementwise_kernel[(triton.cdiv(n, BLOCK),)]({', '.join(passed)}, out, n, BLOCK=BLOCK, "
            "num_warps=NUM_WARPS)",
            "return out",
        ]
    )
    return triton_module(
        match=match,
        knobs=knobs,
        context=context,
        kernels=[*helpers_used(kernel), kernel],
        constants=launch_constants(knobs),
        forward_body=forward,
    )
