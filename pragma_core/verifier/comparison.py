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

Both are computed a chunk of :data:`_CHUNK` elements at a time, each chunk widened to float64 (or
complex128) in buffers reused from chunk to chunk: the arithmetic is that of the whole output in
float64, the memory a few small buffers whatever the output's size, and 32 MB of float32 take a few
tens of milliseconds, not the better part of a second that whole-tensor float64 copies took.

The reference is itself float32: where the output is ill-conditioned (most of it zero, the rest
small values left by cancellation, as after a clamp), its own rounding is already a sizeable part
of ``||r||``. The bound is then ``rtol`` plus :data:`ROUNDING_FACTOR` times the reference's own
whole-output error against the same program in float64: once for the task (trial 0's inputs), and,
when only this bound fails, again on the draw being compared (``draw_error``, computed only then).
The same holds element by element: a float32 element that cancellation leaves small (a sum of
thousands of terms landing near 1) carries the rounding of its terms, so an honest kernel can be
3e-4 from the reference there (measured on ``14_Gemm_Divide_Sum_Scaling``, 913 rows of 8192-term
sums: the reference's own rounding 1.1e-4 RMS, the kernel 1.2e-4 from it). When elements fail
``atol + rtol * |r|``, the reference's own error on the draw is measured and the elements are judged
again with ``atol`` raised by :data:`ROUNDING_FACTOR` times that error's RMS over the output
(``own * ||r|| / sqrt(n)``); skipped or low-precision work is off by far more.

A reference whose norm is zero (all zeros) gets the element-wise check only. float16 and bfloat16
outputs have their whole-output error reported, not judged (the reference is itself rounded to that
precision), unless ``relative_norm`` asks for the whole-output check as a wrong-output check: the
verifier sets it for tasks where a trivial output (zeros, a constant, an input copy) would pass the
element-wise check.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import attrs
import torch

__all__ = ["Comparison", "LOWER_PRECISION_LIMIT", "ROUNDING_FACTOR", "compare_outputs"]

LOWER_PRECISION_LIMIT = 2.0**-5
"""Whole-output relative errors above ``rtol`` and up to this (16 times bf16's unit roundoff 2^-9)
are what computing in a 16-bit or TF32 format gives; above it the output is simply wrong."""

ROUNDING_FACTOR = 4.0
"""How many times the reference's own float32 error (against float64) the whole-output bound adds to
``rtol``. An honest float32 kernel rounds differently from the reference, by about as much, so it can
be up to twice that error from it, more where its sums are ordered worse; 4 covers that, and stays
three orders of magnitude below what bf16, fp16 or TF32 arithmetic gives on the same inputs (their
unit roundoffs are 2^13 to 2^15 times float32's)."""

_JUDGED_DTYPES = frozenset({torch.float32, torch.float64, torch.complex64, torch.complex128})
_CHUNK = 1 << 15
"""Elements compared per pass: 256 KiB in float64, so the buffers stay in cache. Measured on 32 MB
of float32 on two busy cores: 2^15 took 43 ms, 2^14 52 ms (Python's cost per chunk), 2^16 and 2^17
55-62 ms (each operation split over both threads, which wait for each other)."""


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
    reference_error: float = 0.0,
    draw_error: Callable[[], float] | None = None,
) -> Comparison:
    """Compare outputs as the module docstring says. ``reference_error``: the reference's own
    whole-output relative error against the same program in float64 (a float32 sum of millions of
    values can be 2e-4 off); the whole-output check allows ``rtol`` plus :data:`ROUNDING_FACTOR`
    times that. ``draw_error``: that error on the inputs of this comparison, asked for only when the
    whole-output check alone fails (it runs the reference in float64)."""
    if len(candidate) != len(reference):
        return Comparison(
            ok=False, message=f"forward returned {len(candidate)} outputs; the reference returns {len(reference)}"
        )
    worst = Comparison(ok=True, max_abs_error=0.0, max_rel_error=0.0)
    on_draw = functools.cache(draw_error) if draw_error is not None else None  # one float64 run at most
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
        result = _compare_values(
            got,
            want,
            atol=atol,
            rtol=rtol,
            relative_norm=relative_norm,
            poison=poison,
            allowance=reference_error,
            draw_allowance=on_draw,
        )
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
    got: torch.Tensor,
    want: torch.Tensor,
    *,
    atol: float,
    rtol: float,
    relative_norm: bool,
    poison: float | None,
    allowance: float = 0.0,
    draw_allowance: Callable[[], float] | None = None,
) -> Comparison:
    if got.numel() == 0:
        return Comparison(ok=True, max_abs_error=0.0, max_rel_error=0.0)
    if not (want.is_floating_point() or want.is_complex()):
        if torch.equal(got, want):
            return Comparison(ok=True, max_abs_error=0.0, max_rel_error=0.0)
        mismatched = got != want
        index = _unravel(int(mismatched.flatten().nonzero()[0]), want.shape)
        return Comparison(
            ok=False,
            index=index,
            max_abs_error=float((got.double() - want.double()).abs().max()),
            message=f"{int(mismatched.sum())} of {want.numel()} values differ; first at {index}: "
            f"{got[index].item()} instead of {want[index].item()}",
        )

    got_flat, want_flat = got.reshape(-1), want.reshape(-1)
    errors = _Errors.counted(got_flat, want_flat, atol=atol, rtol=rtol)
    max_abs, max_rel = errors.max_abs, errors.max_rel
    norm_error = errors.relative_error_norm()
    largest_at = errors.max_abs_at
    index = _unravel(largest_at, want.shape)
    measured = attrs.evolve(
        Comparison(ok=False), max_abs_error=max_abs, max_rel_error=max_rel, relative_error_norm=norm_error, index=index
    )
    if errors.failing:
        first = _unravel(errors.first_failing, want.shape)
        unwritten = _poisoned(got_flat, want_flat, errors.wide, poison)
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
        noise = 0.0
        if want.dtype == torch.float32 and (allowance or draw_allowance is not None):
            # Elements left small by cancellation: the reference's own rounding there is that of
            # the terms, not of the result. Allow for it at its typical size over the output.
            if draw_allowance is not None:
                allowance = max(allowance, draw_allowance())
            noise = ROUNDING_FACTOR * allowance * errors.reference_norm() / math.sqrt(want.numel())
        if not noise or _Errors.counted(got_flat, want_flat, atol=atol + noise, rtol=rtol).failing:
            shown_got, shown_want = got_flat[largest_at].to(errors.wide), want_flat[largest_at].to(errors.wide)
            widened = f" plus {ROUNDING_FACTOR:g} times the reference's own rounding ({noise:.2g})" if noise else ""
            return attrs.evolve(
                measured,
                message=f"{errors.failing} of {want.numel()} values differ beyond atol={atol:g}, rtol={rtol:g}"
                f"{widened}; max abs error {max_abs:.3g} at {index} ({_shown(shown_got)} instead of "
                f"{_shown(shown_want)})",
            )
    judged = want.dtype in _JUDGED_DTYPES or relative_norm
    bound = rtol + ROUNDING_FACTOR * allowance
    if judged and rtol > 0 and norm_error is not None and norm_error > bound and draw_allowance is not None:
        allowance = max(allowance, draw_allowance())  # the reference's own rounding on this draw
        bound = rtol + ROUNDING_FACTOR * allowance
    if judged and rtol > 0 and norm_error is not None and norm_error > bound:
        allowed = (
            f"rtol={rtol:g}"
            if not allowance
            else f"rtol={rtol:g} plus {ROUNDING_FACTOR:g} times the reference's own error {allowance:.2g}"
        )
        if want.dtype in _JUDGED_DTYPES and norm_error <= LOWER_PRECISION_LIMIT:
            return attrs.evolve(
                measured,
                check="precision-downgrade",
                message=f"whole-output relative error {norm_error:.3g} exceeds {allowed}, "
                f"though every element is within atol + rtol * |reference|: an error of this size comes from computing "
                f"in bf16, fp16 or TF32 (a {_name(want.dtype)} computation stays far below rtol)",
            )
        return attrs.evolve(
            measured,
            message=f"whole-output relative error {norm_error:.3g} exceeds {allowed}, though every "
            "element is within atol + rtol * |reference|: the output is wrong where its values are small",
        )
    return attrs.evolve(measured, ok=True)


class _Errors:
    """The element-wise errors of one flat output, gathered a chunk at a time.

    Each chunk is widened to float64 (complex128) in buffers reused from chunk to chunk, so the
    arithmetic is the same as on the whole output widened at once, while the temporaries stay
    small, in cache and free of page faults. A chunk whose values are all finite on both sides (the
    common case) takes the short way: with no NaN or infinity there is nothing to mask. The
    whole-output norms are combined from the chunks' norms.
    """

    def __init__(self, got: torch.Tensor, want: torch.Tensor) -> None:
        self.got, self.want = got, want
        self.wide = torch.complex128 if want.is_complex() else torch.float64
        # From float32 or narrower values a quotient of two differences cannot overflow float64.
        self._narrow = want.dtype in (torch.float32, torch.float16, torch.bfloat16)
        size = min(_CHUNK, want.numel())
        self._got = torch.empty(size, dtype=self.wide)
        self._want = torch.empty(size, dtype=self.wide)
        self._difference = torch.empty(size, dtype=torch.float64)
        self._magnitude = torch.empty(size, dtype=torch.float64)
        self._scratch = torch.empty(size, dtype=torch.float64)
        self.max_abs = 0.0
        self.max_rel = 0.0
        self.failing = 0  # elements beyond atol + rtol * |reference|
        self.first_failing = 0
        self._largest_start: int | None = None  # the first chunk holding the largest error
        self._error_norms: list[float] = []
        self._reference_norms: list[float] = []

    @classmethod
    def counted(cls, got: torch.Tensor, want: torch.Tensor, *, atol: float, rtol: float) -> _Errors:
        """The errors of the flat ``got`` against ``want``, every chunk added."""
        errors = cls(got, want)
        for start in range(0, want.numel(), _CHUNK):
            errors.add(start, atol=atol, rtol=rtol)
        return errors

    def add(self, start: int, *, atol: float, rtol: float) -> None:
        """Add the chunk that starts at flat index ``start``."""
        got, want, difference, magnitude, finite = self._widen(start)
        error_norm = float(torch.linalg.vector_norm(difference))
        if finite:
            torch.abs(want, out=magnitude)
        else:
            # Where the reference is infinite or NaN only the same value passes: no tolerance
            # there, and no part in the whole-output norms.
            not_finite = ~want.isfinite()
            torch.abs(want, out=magnitude).masked_fill_(not_finite, 0.0)
            error_norm = float(torch.linalg.vector_norm(difference.masked_fill(not_finite, 0.0)))
        self._error_norms.append(error_norm)
        self._reference_norms.append(float(torch.linalg.vector_norm(magnitude)))
        allowed = torch.mul(magnitude, rtol, out=self._scratch[: len(want)]).add_(atol)  # atol + rtol * |r|
        if finite:
            # allowed - difference < 0 exactly where difference > allowed (the difference of two
            # finite values is zero only when they are equal; an infinite allowance stays positive):
            # one reduction instead of a boolean tensor and a pass over it.
            failing = difference > allowed if float(torch.sub(allowed, difference).min()) < 0 else None
        else:
            failing = difference > allowed
        if failing is not None and bool(failing.any()):
            if not self.failing:
                self.first_failing = start + int(failing.nonzero()[0])
            self.failing += int(failing.sum())
        largest = float(difference.max())
        if self._largest_start is None or largest > self.max_abs:
            self.max_abs, self._largest_start = largest, start
        relative = torch.div(difference, magnitude, out=self._scratch[: len(want)])
        if finite and self._narrow:
            # No overflow: an infinity here is x / 0 and a NaN 0 / 0, both where the reference
            # is zero, which the maximum leaves out.
            relative.nan_to_num_(nan=0.0, posinf=0.0)
        else:
            relative.masked_fill_(magnitude == 0, 0.0)
        self.max_rel = max(self.max_rel, float(relative.max()))

    def _widen(self, start: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, bool]:
        """The chunk at ``start`` widened, ``|got - want|`` with NaN and infinities settled, the
        magnitude buffer, and whether every value of the chunk was finite on both sides."""
        got_chunk, want_chunk = self.got[start : start + _CHUNK], self.want[start : start + _CHUNK]
        length = len(want_chunk)
        got, want = self._got[:length].copy_(got_chunk), self._want[:length].copy_(want_chunk)
        difference = self._difference[:length]
        if got.is_complex():
            torch.abs(got - want, out=difference)
        else:
            torch.sub(got, want, out=difference).abs_()
        finite = math.isfinite(float(difference.sum()))  # NaN and infinities propagate into the sum
        if not finite:
            # Equal values (infinities included) and NaN against NaN are no difference; any other
            # pair with a NaN is an infinite one.
            same = (got == want) | (got.isnan() & want.isnan())
            difference.masked_fill_(same, 0.0).nan_to_num_(nan=math.inf)
        return got, want, difference, self._magnitude[:length], finite

    @property
    def max_abs_at(self) -> int:
        """The flat index of the first largest error (argmax is slow: it runs on that chunk only)."""
        if self._largest_start is None:
            return 0
        difference = self._widen(self._largest_start)[2]
        return self._largest_start + int(difference.argmax())

    def reference_norm(self) -> float:
        """``||r||`` over the reference's finite elements."""
        return float(torch.linalg.vector_norm(torch.tensor(self._reference_norms, dtype=torch.float64)))

    def relative_error_norm(self) -> float | None:
        """``||c - r|| / ||r||`` over the reference's finite elements; None when ``||r||`` is zero."""
        reference_norm = self.reference_norm()
        if reference_norm == 0.0:
            return None
        return float(torch.linalg.vector_norm(torch.tensor(self._error_norms, dtype=torch.float64))) / reference_norm


def _larger(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def _poisoned(got: torch.Tensor, want: torch.Tensor, wide: torch.dtype, poison: float | None) -> int:
    """How many elements of the flat ``got`` hold ``poison`` where ``want`` holds another value."""
    if poison is None:
        return 0
    marked = 0
    for start in range(0, want.numel(), _CHUNK):
        got_chunk, want_chunk = got[start : start + _CHUNK].to(wide), want[start : start + _CHUNK].to(wide)
        if math.isnan(poison):
            hits = got_chunk.isnan() & ~want_chunk.isnan()
        else:
            hits = (got_chunk == torch.tensor(poison, dtype=torch.float32).double()) & (want_chunk != got_chunk)
        marked += int(hits.sum())
    return marked


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


def output_difference(got: Any, expected: Any) -> str:
    """Why ``got`` is not ``expected`` (tensors, or tuples and lists of them), '' when it is. The
    tolerance is a hundred times the verifier's: this catches outputs of the wrong size or made
    of the wrong elements, not rounding, which the verifier judged at the task's sizes."""
    import torch

    from .settings import VerifySettings

    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return f"{type(got).__name__} where the reference returns {len(expected)} outputs"
        return next((why for g, e in zip(got, expected) if (why := output_difference(g, e))), "")
    if not isinstance(expected, torch.Tensor):
        return ""
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        shape = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
        return f"shape {shape} where the reference's is {tuple(expected.shape)}"
    settings = VerifySettings()
    got, expected = got.detach().double(), expected.detach().double()
    if torch.allclose(got, expected, atol=100 * settings.atol, rtol=100 * settings.rtol, equal_nan=True):
        return ""
    error = (got - expected).abs().nan_to_num(nan=float("inf"))
    return f"max abs error {error.max().item():.3g}"
