"""Whether a task's best holds up when measured again: the rule that says two speedups agree, and
the figure a bench reports from the loop's best and its confirmations.

The loop's best is the largest of several noisy figures; the bench confirms it with one fresh
verification (``confirmation.json`` in the run folder) and reports that. When the two disagree
(:func:`speedups_agree`), or the confirmation was timed in a disturbed window (its
:attr:`~pragma_core.records.Verdict.noisy`: the machine load, the compute calibration or the
memory probe moved while it timed), one more figure cannot say which of them is the kernel's: the
bench times the best again later, up to :data:`EXTRA_CONFIRMATIONS` times
(``confirmation-2.json``, ``confirmation-3.json``), and reports the median of the measurements with
their spread, flagged (:func:`confirmed`). Everything here reads records; nothing times.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import attrs

from ..records import Speedup, Verdict
from ..serialization import read_record

__all__ = [
    "AGREEMENT",
    "EXTRA_CONFIRMATIONS",
    "RETIME_AFTER_S",
    "DISAGREED",
    "DISTURBED",
    "UNSETTLED",
    "Measurement",
    "Confirmed",
    "within",
    "speedups_agree",
    "lands",
    "confirmation_file",
    "stored_confirmations",
    "confirmed",
]

AGREEMENT = 0.10
"""Two speedups of one kernel agree when their values are within this share of each other (the
larger at most 1.10 times the smaller), even where their intervals do not overlap: an interval is
2-4% wide and covers the noise inside one timing, not the drift between two processes minutes
apart, which moved the same kernel by up to 10% on a quiet VM (and the issue's target for a best
re-verified in a fresh process is "inside its interval or within 10%")."""

EXTRA_CONFIRMATIONS = 2
"""At most this many confirmations after the first. With the loop's best and the first
confirmation apart, a second confirmation usually sides with one of them (two of three agree, and
the median is the figure they share); a third is timed only when the second was disturbed as well
or agreed with neither. More would mostly measure a machine that stays disturbed: the row is then
reported as the median, flagged ``unsettled``."""

RETIME_AFTER_S = 60.0
"""A task's best is timed again no sooner than this after its previous confirmation: a disturbance
that halved a memory-bound kernel's speed on a VM lasted about a minute (a neighbour's burst), and
a second figure from inside the same window would only repeat the first. In a bench of several
tasks the re-timing runs after every task ended, so the wait has usually passed already
(``pragma bench --retime-after`` sets it)."""

DISAGREED = "disagreed"
"""Flag: the loop's best and its first confirmation disagreed (:func:`speedups_agree`)."""

DISTURBED = "disturbed"
"""Flag: a confirmation was timed in a disturbed window (its verdict is noisy)."""

UNSETTLED = "unsettled"
"""Flag: after every extra confirmation, no undisturbed one agreed with an earlier measurement."""


def within(first: float, second: float, share: float = AGREEMENT) -> bool:
    """True when the larger value is at most ``1 + share`` times the smaller."""
    return max(first, second) <= (1.0 + share) * min(first, second)


def speedups_agree(first: Speedup, second: Speedup) -> bool:
    """Two speedups of the same kernel agree when their intervals overlap or their values are within
    :data:`AGREEMENT` of each other."""
    overlap = first.low <= second.high and second.low <= first.high
    return overlap or within(first.value, second.value)


def lands(value: float, reported: Speedup) -> bool:
    """A speedup measured again lands on a reported one when it lies inside the reported interval
    or within :data:`AGREEMENT` of its value."""
    return reported.low <= value <= reported.high or within(value, reported.value)


def confirmation_file(number: int) -> str:
    """The file of a run's ``number``-th confirmation: ``confirmation.json``, then
    ``confirmation-2.json``, ``confirmation-3.json``..."""
    return "confirmation.json" if number == 1 else f"confirmation-{number}.json"


def stored_confirmations(run_dir: Path) -> list[Verdict]:
    """The confirmations kept in a run folder, in the order they were timed."""
    found: list[Verdict] = []
    while (run_dir / confirmation_file(len(found) + 1)).is_file():
        found.append(read_record(run_dir / confirmation_file(len(found) + 1), Verdict))
    return found


@attrs.frozen(kw_only=True)
class Measurement:
    """One figure of a task's best: the loop's own (``source`` ``loop``) or a confirmation's (its
    file name)."""

    source: str
    verdict: Verdict

    def speedup(self, baseline: str) -> Speedup | None:
        return self.verdict.speedup if baseline == "eager" else self.verdict.speedup_vs_compiled


@attrs.frozen(kw_only=True)
class Confirmed:
    """What a bench reports of a task's best.

    ``verdict`` is the confirmation the row's status and message come from (the first that was not
    correct, else the last). ``speedups`` are the reported figures per baseline: the first
    confirmation's when it agreed with the loop's best and was undisturbed; otherwise the median
    measurement's (value and interval) over the latest three measurements (the loop's best counts
    as the earliest), the lower middle one of an even number. ``spread`` is the lowest and highest
    value over every measurement, per baseline. ``flags`` say why it was measured again
    (:data:`DISAGREED`, :data:`DISTURBED`) and whether that settled it (:data:`UNSETTLED`); ``due``
    is True while another confirmation should be timed."""

    verdict: Verdict
    measurements: tuple[Measurement, ...]
    speedups: dict[str, Speedup | None]
    spread: dict[str, tuple[float, float]]
    flags: tuple[str, ...]
    due: bool

    @property
    def correct(self) -> bool:
        return self.verdict.ok


def confirmed(loop_best: Verdict | None, confirmations: Sequence[Verdict], baselines: Sequence[str]) -> Confirmed:
    """The reported figures of a best whose loop verdict is ``loop_best`` and whose confirmations
    (at least one) are ``confirmations``, in the order they were timed."""
    if not confirmations:
        raise ValueError("a best is reported from at least one confirmation")
    measurements = tuple(
        ([Measurement(source="loop", verdict=loop_best)] if loop_best is not None and loop_best.ok else [])
        + [Measurement(source=confirmation_file(n), verdict=v) for n, v in enumerate(confirmations, start=1)]
    )
    failed = next((verdict for verdict in confirmations if not verdict.ok), None)
    spread = _spread(measurements, baselines)
    if failed is not None:  # a best that fails any check is not correct, whatever it did before
        return Confirmed(verdict=failed, measurements=measurements, speedups={}, spread={}, flags=(), due=False)
    first = confirmations[0]
    flags = []
    if loop_best is not None and loop_best.speedup is not None and first.speedup is not None:
        if not speedups_agree(loop_best.speedup, first.speedup):
            flags.append(DISAGREED)
    if any(verdict.noisy for verdict in confirmations):
        flags.append(DISTURBED)
    if not flags or first.speedup is None:
        speedups = {baseline: Measurement(source="", verdict=first).speedup(baseline) for baseline in baselines}
        return Confirmed(
            verdict=confirmations[-1], measurements=measurements, speedups=speedups, spread=spread, flags=(), due=False
        )
    settled = _settled(measurements)
    due = not settled and len(confirmations) < 1 + EXTRA_CONFIRMATIONS
    if not settled and not due:
        flags.append(UNSETTLED)
    return Confirmed(
        verdict=confirmations[-1],
        measurements=measurements,
        speedups={baseline: _median(measurements, baseline) for baseline in baselines},
        spread=spread,
        flags=tuple(flags),
        due=due,
    )


def _settled(measurements: tuple[Measurement, ...]) -> bool:
    """True when the latest confirmation (after the first) was undisturbed and agrees with an
    earlier measurement: two figures of the kernel, minutes apart, say the same."""
    latest = measurements[-1]
    if latest.source in ("loop", confirmation_file(1)) or latest.verdict.noisy or latest.verdict.speedup is None:
        return False
    return any(
        earlier.verdict.speedup is not None and speedups_agree(earlier.verdict.speedup, latest.verdict.speedup)
        for earlier in measurements[:-1]
    )


def _median(measurements: tuple[Measurement, ...], baseline: str) -> Speedup | None:
    """The middle one (the lower middle of an even number) of the latest three measurements that
    have a speedup over ``baseline``: a real measurement, with its own interval."""
    figures = [speedup for m in measurements if (speedup := m.speedup(baseline)) is not None][-3:]
    if not figures:
        return None
    return sorted(figures, key=lambda speedup: speedup.value)[(len(figures) - 1) // 2]


def _spread(measurements: tuple[Measurement, ...], baselines: Sequence[str]) -> dict[str, tuple[float, float]]:
    spread = {}
    for baseline in baselines:
        values = [speedup.value for m in measurements if (speedup := m.speedup(baseline)) is not None]
        if values:
            spread[baseline] = (min(values), max(values))
    return spread
