"""When a run ends: the stop rules the loop checks after each attempt (:func:`reason_to_stop`)."""

from __future__ import annotations

from ..records import Attempt
from ..verifier.judgement import ABOVE_FLOOR_LIMIT
from .settings import OptimizeSettings

__all__ = ["reason_to_stop"]


def reason_to_stop(
    attempts: list[Attempt],
    best: Attempt | None,
    settings: OptimizeSettings,
    *,
    untimed: str = "",
    planned: bool = False,
) -> str:
    """Why the run ends after its last attempt, or "" to go on. In a tree or beam search the
    Conductor's ``done`` speaks for one node only: the run ends when no plan has an instruction left."""
    if untimed and best is not None and best.verdict is not None and best.verdict.ok:
        return "correct; no later attempt could be told faster here (not timed)"
    guidance = attempts[-1].guidance
    if guidance is not None and guidance.done and not planned:
        return "the Conductor saw no change left worth an attempt"
    if best is not None and best.verdict is not None:
        attainment = best.verdict.attainment
        if attainment is not None and settings.target_attainment <= attainment <= ABOVE_FLOOR_LIMIT:
            return f"roofline attainment {attainment:.0%} reached the target {settings.target_attainment:.0%}"
    last_improvement = best.number if best else 0
    if attempts[-1].number - last_improvement >= settings.patience:
        return f"{settings.patience} attempts without a better candidate"
    return ""
