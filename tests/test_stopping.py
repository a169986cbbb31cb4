"""When a run ends by the roofline: at the target share of the physical floor, never above it."""

from __future__ import annotations

import pytest

from pragma_core.loop._stopping import reason_to_stop
from pragma_core.loop.settings import OptimizeSettings
from pragma_core.records import Attempt, Speedup, Timing, Verdict, VerdictStatus
from pragma_core.verifier.judgement import ABOVE_FLOOR_LIMIT


def _attempt(number: int, candidate_ms: float, floor_ms: float = 1.0) -> Attempt:
    verdict = Verdict(
        status=VerdictStatus.CORRECT,
        message="correct",
        reference=Timing(median_ms=4.0, iqr_ms=0.1),
        candidate=Timing(median_ms=candidate_ms, iqr_ms=0.01),
        speedup=Speedup(value=4.0 / candidate_ms, low=3.9 / candidate_ms, high=4.1 / candidate_ms),
        floor_ms=floor_ms,
    )
    return Attempt(number=number, verdict=verdict)


@pytest.mark.parametrize(
    ("candidate_ms", "stops"),
    [
        (1.2, False),  # 83% of the floor: below the 90% target, the run goes on
        (1.05, True),  # 95%: the target is reached
        (1.0, True),  # at the floor
        (1.0 / ABOVE_FLOOR_LIMIT, True),  # within a timing's error of it
        (0.8, False),  # 125%: under the physical floor is a measurement problem, never an end
        (0.55, False),
    ],
)
def test_the_roofline_ends_a_run_only_at_an_attainment_the_machine_allows(candidate_ms, stops):
    attempt = _attempt(1, candidate_ms)
    settings = OptimizeSettings(max_attempts=10, patience=5)
    reason = reason_to_stop([attempt], attempt, settings)
    assert ("roofline attainment" in reason) is stops, reason
