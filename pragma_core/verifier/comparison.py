"""Comparing candidate outputs with reference outputs: exact shape and dtype, then values.

Element-wise, values pass when ``|c - r| <= atol + rtol * |r|`` everywhere (NaN matches NaN, an
infinity only the same infinity). Integer and boolean outputs must be equal. A candidate output
holding the poison the harness wrote into fresh memory, where the reference has a value, is reported
as unwritten elements.

Whole-output: for every floating output the norm-wise relative error ``||c - r||_2 / ||r||_2`` (in
float64, over the reference's finite elements) is computed and reported. The absolute tolerance lets
each small element be far off in relative terms (an output of values near 2.4e-4 rounded to bf16
passes ``atol=1e-4``), so for float32 and float64 outputs (and their complex kinds) the whole output
must also meet ``rtol``:

- error <= ``rtol``: passes. A correct float32 computation lands far below it whatever its order of
  operations (measured: 3e-7 for a K=4096 matmul summed in 32-element panels, 1.2e-6 summed
  sequentially, 6e-7 for a chunked sum of 16M values; 1e-4 is ~1700x float32's unit roundoff),
  while rounding the result to fp16 gives 1.8e-4 to 2.3e-4, TF32 inputs to a matmul 2.9e-4 and
  rounding to bf16 1.5e-3 to 1.9e-3.
- ``rtol`` < error <= :data:`LOWER_PRECISION_LIMIT`: the error of a computation in fewer bits
  (bf16, fp16, TF32): ``check="precision-downgrade"``.
- beyond it: a wrong output (no check), e.g. zeros on a task whose outputs are all below ``atol``.

A reference whose norm is zero (all zeros) gets the element-wise check only. float16 and bfloat16
outputs have their whole-output error reported, not judged (the reference is itself rounded to that
precision), unless ``relative_norm`` asks for the whole-output check as a wrong-output check: the
verifier sets it for tasks where a trivial output (zeros, a constant, an input copy) would pass the
element-wise check.
"""

from __future__ import annotations

import math

import attrs
import torch

__all__ = ["Comparison", "LOWER_PRECISION_LIMIT", "compare_outputs"]

LOWER_PRECISION_LIMIT = 2.0**-5
"""Whole-output relative errors above ``rtol`` and up to this (16 times bf16's unit roundoff 2^-9)
are what computing in a 16-bit or TF32 format gives; above it the output is simply wrong."""

_JUDGED_DTYPES = frozenset({torch.float32, torch.float64, torch.complex64, torch.complex128})


@attrs.frozen(kw_only=True)
class Comparison:
    """The outcome of one comparison; ``check`` names an integrity check when one failed.

    ``relative_error_norm`` is the worst whole-output relative error ``||c - r|| / ||r||`` over the
    floating outputs compared (None when there was none with a nonzero reference).
    """

    ok: bool
    message: str = ""
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    relative_error_norm: float | None = None
    index: tuple[int, ...] | None = None
    output: int | None = None
    check: str | None = None


def compare_outputs(
    candidate: list[torch.Tensor],
    reference: list[torch.Tensor],
    *,
    atol: float,
    rtol: float,
    relative_norm: bool = False,
    poison: float | None = None,
) -> Comparison:
    if len(candidate) != len(reference):
        return Comparison(
            ok=False, message=f"forward returned {len(candidate)} outputs; the reference returns {len(reference)}"
        )
    worst = Comparison(ok=True, max_abs_error=0.0, max_rel_error=0.0)
    for position, (got, want) in enumerate(zip(candidate, reference)):
        if not isinstance(got, torch.Tensor):
            return Comparison(
                ok=False, message=f"output {position} is a {type(got).__name__}, not a tensor", output=position
            )
        if tuple(got.shape) != tuple(want.shape):
            return Comparison(
                ok=False,
                output=position,
                message=f"output {position} has shape {tuple(got.shape)}; the reference has {tuple(want.shape)}",
            )
        if got.dtype != want.dtype:
            return Comparison(
                ok=False,
                output=position,
                message=f"output {position} has dtype {_name(got.dtype)}; the reference has {_name(want.dtype)}",
            )
        result = _compare_values(got, want, atol=atol, rtol=rtol, relative_norm=relative_norm, poison=poison)
        result = attrs.evolve(result, output=position)
        if not result.ok:
            return result
        worst = attrs.evolve(
            worst,
            max_abs_error=max(worst.max_abs_error or 0.0, result.max_abs_error or 0.0),
            max_rel_error=max(worst.max_rel_error or 0.0, result.max_rel_error or 0.0),
            relative_error_norm=_larger(worst.relative_error_norm, result.relative_error_norm),
        )
    return worst


def _compare_values(
    got: torch.Tensor, want: torch.Tensor, *, atol: float, rtol: float, relative_norm: bool, poison: float | None
) -> Comparison:
    if got.numel() == 0:
        return Comparison(ok=True, max_abs_error=0.0, max_rel_error=0.0)
    if not (want.is_floating_point() or want.is_complex()):
        mismatched = got != want
        if bool(mismatched.any()):
            index = _unravel(int(mismatched.flatten().nonzero()[0]), want.shape)
            return Comparison(
                ok=False,
                index=index,
                max_abs_error=float((got.double() - want.double()).abs().max()),
                message=f"{int(mismatched.sum())} of {want.numel()} values differ; first at {index}: "
                f"{got[index].item()} instead of {want[index].item()}",
            )
        return Comparison(ok=True, max_abs_error=0.0, max_rel_error=0.0)

    wide = torch.complex128 if want.is_complex() else torch.float64
    got64, want64 = got.to(wide), want.to(wide)
    # Equal values (infinities included) and NaN against NaN are no difference; any other pair
    # with a NaN is an infinite one.
    same = (got64 == want64) | (got64.isnan() & want64.isnan())
    difference = (got64 - want64).abs().masked_fill(same, 0.0).nan_to_num(nan=math.inf)
    finite_reference = want64.isfinite()
    # Where the reference is infinite or NaN only the same value passes: no tolerance there.
    magnitude = want64.abs().masked_fill(~finite_reference, 0.0)
    allowed = atol + rtol * magnitude
    failing = difference > allowed
    flat = int(difference.flatten().argmax())
    max_abs = float(difference.flatten()[flat])
    nonzero = magnitude > 0
    relative = (difference[nonzero] / magnitude[nonzero]) if bool(nonzero.any()) else difference.new_zeros(1)
    max_rel = float(relative.max()) if relative.numel() else 0.0
    norm_error = _relative_error_norm(difference, magnitude, finite_reference)
    index = _unravel(flat, want.shape)
    measured = attrs.evolve(
        Comparison(ok=False), max_abs_error=max_abs, max_rel_error=max_rel, relative_error_norm=norm_error, index=index
    )
    if bool(failing.any()):
        first = _unravel(int(failing.flatten().nonzero()[0]), want.shape)
        unwritten = _poisoned(got64, want64, poison)
        if unwritten:
            return Comparison(
                ok=False,
                check="unwritten-output",
                index=first,
                max_abs_error=max_abs,
                relative_error_norm=norm_error,
                message=f"{unwritten} of {want.numel()} output elements still hold the poison written into "
                "fresh memory: the kernel leaves them unwritten",
            )
        return attrs.evolve(
            measured,
            message=f"{int(failing.sum())} of {want.numel()} values differ beyond atol={atol:g}, rtol={rtol:g}; "
            f"max abs error {max_abs:.3g} at {index} ({_shown(got64[index])} instead of {_shown(want64[index])})",
        )
    judged = want.dtype in _JUDGED_DTYPES or relative_norm
    if judged and rtol > 0 and norm_error is not None and norm_error > rtol:
        if want.dtype in _JUDGED_DTYPES and norm_error <= LOWER_PRECISION_LIMIT:
            return attrs.evolve(
                measured,
                check="precision-downgrade",
                message=f"whole-output relative error {norm_error:.3g} exceeds rtol={rtol:g}, "
                f"though every element is within atol + rtol * |reference|: an error of this size comes from computing "
                f"in bf16, fp16 or TF32 (a {_name(want.dtype)} computation stays far below rtol)",
            )
        return attrs.evolve(
            measured,
            message=f"whole-output relative error {norm_error:.3g} exceeds rtol={rtol:g}, though every "
            "element is within atol + rtol * |reference|: the output is wrong where its values are small",
        )
    return attrs.evolve(measured, ok=True)


def _relative_error_norm(difference: torch.Tensor, magnitude: torch.Tensor, finite: torch.Tensor) -> float | None:
    """``||c - r|| / ||r||`` over the reference's finite elements; None when ``||r||`` is zero."""
    reference_norm = float(torch.linalg.vector_norm(magnitude))
    if reference_norm == 0.0:
        return None
    error_norm = float(torch.linalg.vector_norm(difference.masked_fill(~finite, 0.0)))
    return error_norm / reference_norm


def _larger(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def _poisoned(got: torch.Tensor, want: torch.Tensor, poison: float | None) -> int:
    if poison is None:
        return 0
    if math.isnan(poison):
        marked = got.isnan() & ~want.isnan()
    else:
        marked = (got == torch.tensor(poison, dtype=torch.float32).double()) & (want != got)
    return int(marked.sum())


def _shown(value: torch.Tensor) -> str:
    number = value.item()
    return f"{number:.6g}" if isinstance(number, float) else str(number)


def _unravel(flat: int, shape: torch.Size) -> tuple[int, ...]:
    index = []
    for size in reversed(tuple(shape)):
        index.append(flat % size)
        flat //= size
    return tuple(reversed(index))


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
