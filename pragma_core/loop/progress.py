"""Where a run is, for a live display and for the record: the phases of an attempt, the listeners a
caller passes to :func:`~pragma_core.loop.optimizer.optimize`, and the clock of seconds per phase.

The loop calls a :class:`PhaseReporter` whenever it moves to another phase; the reporter hands the
caller's listener a :class:`Progress`. A :class:`PhaseClock` adds up the wall seconds each phase
took, for ``Attempt.phase_seconds`` and the baseline's event.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import attrs
from attrs import validators as v

from ..records import Attempt

__all__ = [
    "PHASES",
    "Progress",
    "AttemptListener",
    "ProgressListener",
    "PhaseReporter",
    "PhaseClock",
]

PHASES = (
    "baseline",
    "planning",
    "writing",
    "building",
    "verifying",
    "timing",
    "finishing",
    "profiling",
    "diagnosing",
    "advising",
)
"""What a run can be doing, in the order of an attempt (``baseline`` comes once, before attempt 1;
``planning``, in a tree or beam search, before the children of an attempt, which it names)."""


@attrs.frozen(kw_only=True)
class Progress:
    """Where a run is, for a live display: its folder, the attempt (0 for the baseline), one of
    :data:`PHASES`, and a detail (the profiler's name while profiling)."""

    run_dir: Path
    attempt: int
    phase: str = attrs.field(validator=v.in_(PHASES))
    detail: str = ""


AttemptListener = Callable[[Attempt, "Attempt | None"], None]
"""Called after each attempt with the attempt and the best so far (None before a correct one)."""
ProgressListener = Callable[[Progress], None]
"""Called whenever the run moves to another phase."""


@attrs.define
class PhaseReporter:
    """Passes phase changes to the caller's listener, if any."""

    listener: ProgressListener | None
    run_dir: Path = Path()

    def __call__(self, attempt: int, phase: str, detail: str = "") -> None:
        if self.listener is not None:
            self.listener(Progress(run_dir=self.run_dir, attempt=attempt, phase=phase, detail=detail))


@attrs.define
class PhaseClock:
    """Wall seconds per phase: a phase lasts until the next one starts or the clock stops, so the
    phases add up to the time between the first start and the stop. A phase started twice adds up."""

    seconds: dict[str, float] = attrs.Factory(dict)
    _phase: str | None = None
    _since: float = 0.0

    def start(self, phase: str) -> None:
        now = time.monotonic()
        self._close(now)
        self._phase, self._since = phase, now

    def stop(self) -> dict[str, float]:
        """Ends the running phase; the seconds of every phase, in the order they first started."""
        self._close(time.monotonic())
        return dict(self.seconds)

    def _close(self, now: float) -> None:
        if self._phase is not None:
            self.seconds[self._phase] = self.seconds.get(self._phase, 0.0) + (now - self._since)
            self._phase = None
