"""The compact table of earlier attempts that the Coder sees instead of their code.

A run of fifteen attempts with a few hundred lines each would fill any context window, and the
model gains little from code that was slower or wrong. The Coder's prompt carries the code of the
best and the last attempt only, and one :class:`HistoryRow` per earlier attempt: its number,
status, speedup and a one-line summary. :func:`history_rows` keeps the newest
:data:`MAX_HISTORY_ROWS` of them, so even a long run gives a prompt of bounded size.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from ..records import Attempt, BoundClass, VerdictStatus
from .clipping import first_line

__all__ = ["MAX_HISTORY_ROWS", "HistoryRow", "history_row", "history_rows"]

MAX_HISTORY_ROWS = 20
_SUMMARY_CHARS = 140


@attrs.frozen(kw_only=True)
class HistoryRow:
    """One earlier attempt in a line: ``3 | wrong_output | - | max abs error 0.5 at (0, 17)``."""

    number: int
    status: str
    speedup: float | None = None
    summary: str = ""


def history_row(attempt: Attempt) -> HistoryRow:
    """The row of one attempt; an attempt that stopped before the verifier says so."""
    verdict = attempt.verdict
    if verdict is None:
        status = "no code" if attempt.candidate is None else "not verified"
        summary = "the reply held no Python module" if attempt.candidate is None else ""
        return HistoryRow(number=attempt.number, status=status, summary=summary)
    parts = [first_line(verdict.message, _SUMMARY_CHARS)]
    if verdict.status is VerdictStatus.REJECTED and verdict.failed_check:
        parts.insert(0, f"check {verdict.failed_check}")
    diagnosis = attempt.diagnosis
    if verdict.ok and diagnosis is not None and diagnosis.bound is not BoundClass.UNKNOWN:
        parts.append(f"{diagnosis.bound.value}-bound")
    attainment = verdict.attainment
    if attainment is not None:
        parts.append(f"{attainment:.0%} of roofline")
    summary = "; ".join(part for part in parts if part)
    return HistoryRow(
        number=attempt.number,
        status=verdict.status.value,
        speedup=verdict.speedup.value if verdict.speedup else None,
        summary=first_line(summary, _SUMMARY_CHARS),
    )


def history_rows(attempts: Sequence[Attempt], *, limit: int = MAX_HISTORY_ROWS) -> tuple[tuple[HistoryRow, ...], int]:
    """Rows of the newest ``limit`` attempts in order, and how many older ones were left out."""
    ordered = sorted(attempts, key=lambda attempt: attempt.number)
    kept = ordered[-limit:] if limit > 0 else []
    return tuple(history_row(attempt) for attempt in kept), len(ordered) - len(kept)
