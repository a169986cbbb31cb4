"""The verdict table says what the verdict rests on first, and explains figures that would alarm."""

from __future__ import annotations

from rich.console import Console

from pragma_core import load_task
from pragma_core.present.tables import verdict_table
from pragma_core.records import Speedup, Timing, Verdict, VerdictStatus

from .conftest import EXAMPLES


def _text(verdict: Verdict) -> str:
    console = Console(record=True, width=300)
    console.print(verdict_table(load_task(EXAMPLES / "level1" / "2_LeakyReLU.py"), "candidate.py", verdict))
    return console.export_text()


def test_a_correct_verdicts_errors_lead_with_the_whole_output_and_explain_the_relative_one():
    verdict = Verdict(
        status=VerdictStatus.CORRECT,
        message="correct in 5 trials",
        max_abs_error=2e-7,
        max_rel_error=0.365,  # near-zero reference values
        relative_error_norm=6e-8,
        reference=Timing(median_ms=4.0, iqr_ms=0.1),
        candidate=Timing(median_ms=2.0, iqr_ms=0.1),
        speedup=Speedup(value=2.0, low=1.9, high=2.1),
        floor_ms=1.0,
        library_floor_ms=1.6,
    )
    text = _text(verdict)
    assert text.index("whole-output error") < text.index("max abs error") < text.index("max rel error")
    assert "largest where the reference is near zero" in text
    # both floors, each with the candidate's time over it
    assert "1 ms at this machine's peaks; the candidate takes 2.00x it (50%)" in text
    assert "1.6 ms at torch's sgemm and copy; the candidate takes 1.25x it (80%)" in text


def test_a_wrong_verdict_shows_its_relative_error_bare():
    verdict = Verdict(status=VerdictStatus.WRONG_OUTPUT, message="wrong", max_abs_error=0.5, max_rel_error=0.5)
    assert "near zero" not in _text(verdict)
