"""Comparing candidate outputs with reference outputs: exact shape and dtype, then values.

Values pass when ``|c - r| <= atol + rtol * |r|`` everywhere (NaN matches NaN). Integer and boolean
outputs must be equal. For tasks where a zeros, constant or input-copy output would pass (the
preflight found the outputs too small for the absolute tolerance), ``relative_norm`` also requires
``||c - r|| <= rtol * ||r||``. A candidate output holding the poison the harness wrote into fresh
memory, where the reference has a value, is reported as unwritten elements.
"""

from __future__ import annotations

import math

import attrs
import torch

__all__ = ["Comparison", "compare_outputs"]


@attrs.frozen(kw_only=True)
class Comparison:
    """The outcome of one comparison; ``check`` names an integrity check when one failed."""

    ok: bool
    message: str = ""
    max_abs_error: float | None = None
    max_rel_error: float | None = None
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

    got64, want64 = got.double(), want.double()
    both_nan = got64.isnan() & want64.isnan()
    difference = (got64 - want64).abs().masked_fill(both_nan, 0.0).nan_to_num(nan=math.inf)
    allowed = atol + rtol * want64.abs().nan_to_num(nan=0.0)
    failing = difference > allowed
    flat = int(difference.flatten().argmax())
    max_abs = float(difference.flatten()[flat])
    nonzero = want64.abs() > 0
    relative = (difference[nonzero] / want64.abs()[nonzero]) if bool(nonzero.any()) else difference.new_zeros(1)
    max_rel = float(relative.max()) if relative.numel() else 0.0
    index = _unravel(flat, want.shape)
    if bool(failing.any()):
        first = _unravel(int(failing.flatten().nonzero()[0]), want.shape)
        unwritten = _poisoned(got64, want64, poison)
        if unwritten:
            return Comparison(
                ok=False,
                check="unwritten-output",
                index=first,
                max_abs_error=max_abs,
                message=f"{unwritten} of {want.numel()} output elements still hold the poison written into "
                "fresh memory: the kernel leaves them unwritten",
            )
        return Comparison(
            ok=False,
            index=index,
            max_abs_error=max_abs,
            max_rel_error=max_rel,
            message=f"{int(failing.sum())} of {want.numel()} values differ beyond atol={atol:g}, rtol={rtol:g}; "
            f"max abs error {max_abs:.3g} at {index} ({got64[index].item():.6g} instead of {want64[index].item():.6g})",
        )
    if relative_norm:
        reference_norm = float(torch.linalg.vector_norm(want64.nan_to_num(nan=0.0)))
        error_norm = float(torch.linalg.vector_norm(difference.nan_to_num(posinf=0.0)))
        if error_norm > rtol * reference_norm:
            return Comparison(
                ok=False,
                index=index,
                max_abs_error=max_abs,
                max_rel_error=max_rel,
                message=f"relative error of the whole output {error_norm / max(reference_norm, 1e-300):.3g} "
                f"exceeds rtol={rtol:g} (this task's outputs are small, so the whole-output check applies)",
            )
    return Comparison(ok=True, max_abs_error=max_abs, max_rel_error=max_rel, index=index)


def _poisoned(got: torch.Tensor, want: torch.Tensor, poison: float | None) -> int:
    if poison is None:
        return 0
    if math.isnan(poison):
        marked = got.isnan() & ~want.isnan()
    else:
        marked = (got == torch.tensor(poison, dtype=torch.float32).double()) & (want != got)
    return int(marked.sum())


def _unravel(flat: int, shape: torch.Size) -> tuple[int, ...]:
    index = []
    for size in reversed(tuple(shape)):
        index.append(flat % size)
        flat //= size
    return tuple(reversed(index))


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
