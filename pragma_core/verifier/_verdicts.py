"""The verdicts the Verifier gives, built in one place: a rejection by an integrity check, wrong
outputs, a candidate refused by its source alone, a child that ended early, and a correct
candidate's message.

A conversation with the child (:mod:`.verification`, :mod:`.timing`) leaves early by raising
:class:`Rejected` (carrying its verdict) or :class:`Ended` (the child stopped answering); the
verification turns the latter into a verdict with :func:`ended_early`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..errors import PragmaError
from ..records import Task, Verdict, VerdictStatus
from ..sandbox.process import SandboxOutcome
from .checks import describe_check
from .comparison import Comparison
from .settings import FORWARD_LIMIT_FACTOR, VerifySettings
from .static_checks import StaticFindings

__all__ = [
    "Ended",
    "Rejected",
    "correct_message",
    "ended_early",
    "mismatch",
    "one_line",
    "refused_before_running",
    "rejected",
    "trial_errors",
]


class Ended(Exception):
    """The child stopped answering: it ended, timed out, reported an error or broke the protocol."""

    def __init__(self, error: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.error = error


class Rejected(Exception):
    def __init__(self, verdict: Verdict) -> None:
        super().__init__()
        self.verdict = verdict


def refused_before_running(task: Task, findings: StaticFindings) -> Verdict | None:
    """The verdict of a candidate whose source alone decides it (:func:`read_candidate`'s
    ``findings``): it does not parse, defines no ``ModelNew``, reuses the reference, or a static
    rule rejects it. None when it must be run to be judged."""
    if findings.syntax_error:
        return Verdict(status=VerdictStatus.COMPILE_ERROR, message=findings.syntax_error)
    if findings.missing_model_new:
        return Verdict(
            status=VerdictStatus.COMPILE_ERROR,
            message="the candidate defines no class ModelNew(nn.Module): found before running anything",
        )
    if findings.reference_reuse:
        return rejected("reference-reuse", findings.reference_reuse)
    rejection = findings.rejection(float32_task=_float32_task(task))
    return rejected(*rejection) if rejection is not None else None


def _float32_task(task: Task) -> bool:
    analysis = task.analysis
    if analysis is None:
        return False
    dtypes = {str(spec.dtype) for spec in (*analysis.inputs, *analysis.outputs) if spec.is_tensor}
    return (
        bool(dtypes)
        and all("float32" in dtype or "int" in dtype or "bool" in dtype for dtype in dtypes)
        and any("float32" in dtype for dtype in dtypes)
    )


def rejected(check: str, message: str, *, notes: list[str] | tuple[str, ...] = ()) -> Verdict:
    return Verdict(
        status=VerdictStatus.REJECTED,
        failed_check=check,
        message=f"rejected by {check}: {message}",
        notes=(*notes, describe_check(check)),
    )


def mismatch(result: Comparison, trial: int) -> Verdict:
    if result.check:
        return rejected(result.check, f"trial {trial}: {result.message}")
    return Verdict(
        status=VerdictStatus.WRONG_OUTPUT,
        message=f"trial {trial}: {result.message}",
        max_abs_error=_finite_or_none(result.max_abs_error),
        max_rel_error=_finite_or_none(result.max_rel_error),
        error_index=result.index,
        failing_trial=trial,
    )


def trial_errors(results: Sequence[Comparison]) -> dict[str, Any]:
    """Worst absolute and relative error over the trials' ``results``, where, and the whole-output
    error: the fields of the verdict that report them."""
    if not results:
        return {}
    worst = max(results, key=lambda result: result.max_abs_error or 0.0)
    norms = [
        result.relative_error_norm
        for result in results
        if result.relative_error_norm is not None and math.isfinite(result.relative_error_norm)
    ]
    return {
        "max_abs_error": worst.max_abs_error,
        "max_rel_error": worst.max_rel_error,
        "error_index": worst.index,
        "relative_error_norm": max(norms) if norms else None,
    }


def correct_message(settings: VerifySettings, speedup, speedup_vs_compiled=None, noise=()) -> str:  # noqa: ANN001
    text = f"correct in {settings.trials} trials"
    if speedup is not None and noise:
        text += f"; about {speedup.value:.2f}x the reference, but the timing was noisy: {'; '.join(noise)}"
        return text
    if speedup is not None:
        text += f"; {speedup.value:.2f}x the reference (95% CI {speedup.low:.2f}-{speedup.high:.2f})"
    if speedup_vs_compiled is not None:
        text += f", {speedup_vs_compiled.value:.2f}x torch.compile"
    return text


def ended_early(
    outcome: SandboxOutcome,
    error: dict[str, Any] | None,
    protocol: str | None,
    *,
    where: str,
    notes: list[str],
    settings: VerifySettings,
    missed_limit_s: float | None,
    reference_ms: float,
) -> Verdict:
    """The verdict on a child that stopped answering ``where`` it was: it broke the ``protocol``,
    timed out (``missed_limit_s``: the per-forward limit it missed, None when it was the whole
    verification's), reported an ``error``, crashed or exited. An error of the sandbox itself is
    the machine's, not the candidate's: no verdict, :class:`PragmaError`."""
    notes = notes + list(outcome.notes)
    if protocol is not None:
        return rejected("harness-patched", f"the child's report channel was tampered with: {protocol}", notes=notes)
    if outcome.timed_out:
        if missed_limit_s is not None:
            message = (
                f"no answer within {missed_limit_s:.3g} s (while {where}), {FORWARD_LIMIT_FACTOR:g} times "
                f"the reference's {reference_ms:.3g} ms: the candidate hangs or is far too slow"
            )
        else:
            message = (
                f"no result within {settings.wall_limit_s:g} s (while {where}): the candidate hangs or is far too slow"
            )
        return Verdict(status=VerdictStatus.TIMEOUT, notes=notes, message=message)
    if error is not None:
        kind = str(error.get("kind"))
        if kind == "sandbox":  # the machine, not the candidate: no verdict can be given
            raise PragmaError(f"cannot verify here: {error.get('message')}")
        status = {"compile": VerdictStatus.COMPILE_ERROR, "out_of_memory": VerdictStatus.OUT_OF_MEMORY}.get(
            kind, VerdictStatus.RUNTIME_ERROR
        )
        diagnostics = tuple(str(d) for d in (error.get("diagnostics"), error.get("traceback")) if d)
        message = str(error.get("message", "failed"))
        if status is VerdictStatus.RUNTIME_ERROR and where != "building the candidate":
            message = f"{where}: {message}"
        if status is VerdictStatus.OUT_OF_MEMORY:
            message += f" (limit {settings.memory_gb:g} GiB of address space)"
        return Verdict(status=status, message=one_line(message), diagnostics=diagnostics, notes=notes)
    if outcome.signal:
        return Verdict(
            status=VerdictStatus.CRASHED,
            notes=notes,
            diagnostics=_logs(outcome),
            message=f"the candidate crashed with {outcome.signal} while {where}",
        )
    return Verdict(
        status=VerdictStatus.CRASHED,
        notes=notes,
        diagnostics=_logs(outcome),
        message=f"the sandbox child exited with code {outcome.returncode} while {where} without a result",
    )


def one_line(text: str) -> str:
    return " ".join(text.split())


def _finite_or_none(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _logs(outcome: SandboxOutcome) -> tuple[str, ...]:
    return tuple(text for text in (outcome.stderr.strip(), outcome.stdout.strip()) if text)
