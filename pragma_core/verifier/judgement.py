"""Judging a correct candidate's timing: the verdict :func:`judge_timing` gives on what
:mod:`.timing` measured.

A forged clock and a median under the roofline floor reject; otherwise the verdict is correct, with
the bootstrap speedup over the reference (and over ``torch.compile`` when it was timed), the
machine's conditions around the timing and whether they made it noisy, and notes on the floor.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import attrs

from ..machine.load import (
    best_calibration,
    best_memory_probe,
    block_drift,
    frequency_mhz,
    noise_reasons,
    usage_between,
)
from ..records import Task, TimingConditions, Verdict, VerdictStatus
from ._verdicts import correct_message, rejected, trial_errors
from .comparison import Comparison
from .settings import VerifySettings, all_cpus
from .timing import Timings
from .timing_statistics import bootstrap_speedup, summarize

__all__ = ["ABOVE_FLOOR_LIMIT", "ROOFLINE_MARGIN", "Floors", "judge_timing"]

ABOVE_FLOOR_LIMIT = 1.05
"""An attainment above this (a median more than 5% under the physical roofline floor, which the
machine's own FMA and streaming peaks set) is a measurement problem, not a result: the timing or
the peaks are off. The verdict says so, and it never ends a run. Up to it, a kernel at the floor
with a timing's ordinary error."""

ROOFLINE_MARGIN = 0.5
"""A median under this share of the physical roofline floor is rejected: the floor is set by the
machine's own peaks (FMA throughput at its widest vector width, streaming bandwidth with
non-temporal stores), which no honest kernel beats by much; a kernel that skips its work lands far
below. Between this and the floor, the time is a measurement problem (the timing or the peaks are
off), said in a note, never a result to stop on."""


@attrs.frozen
class Floors:
    """A task's roofline floors here, in ms (None when unknown): the physical one (the machine's
    own peaks), the one at the library's rates (torch's sgemm and copy, shown beside it), and
    whether the physical one is set by memory (then a slowed memory disturbs the figure)."""

    physical_ms: float | None = None
    library_ms: float | None = None
    memory_bound: bool = True


def judge_timing(
    timings: Timings,
    *,
    task: Task,
    settings: VerifySettings,
    floors: Floors,
    notes: list[str],
    trial_results: Sequence[Comparison],
) -> Verdict:
    """The verdict on a candidate found correct by its trials (``trial_results``) and timed
    (``timings``), against the task's physical roofline floor, with the floor at the library's own
    rates recorded beside it (``floors``); notes are added to ``notes``."""
    floor = floors.physical_ms
    samples = timings.samples
    if timings.forged:
        return rejected("forged-timing", timings.forged, notes=notes)
    reference, candidate = summarize(samples["reference"]), summarize(samples["candidate"])
    enforced = floor is not None and _floor_binds(task)
    if floor is not None and not enforced:
        notes.append(
            "inputs and outputs of one call fit in twice the last-level cache, so the DRAM roofline "
            "floor does not bound this timing and is not enforced"
        )
    if floor is not None and enforced and candidate.median_ms < floor * ROOFLINE_MARGIN:
        return rejected(
            "below-roofline",
            f"median {candidate.median_ms:.4g} ms is under {ROOFLINE_MARGIN:g} of the roofline floor of "
            f"{floor:.4g} ms for this task on this machine: the work cannot have been done",
            notes=notes,
        )
    if floor is not None and candidate.median_ms * ABOVE_FLOOR_LIMIT < floor:
        notes.append(
            f"a median of {candidate.median_ms:.4g} ms is under the physical roofline floor of {floor:.4g} ms "
            "(this machine's FMA and streaming peaks): a measurement problem, not a result, so it ends no run"
            + (
                "; one call's data fits in the caches, whose bandwidth the memory roof may not cover"
                if not enforced
                else "; if it persists, measure the peaks again with `pragma roofline --refresh`"
            )
        )
    speedup = bootstrap_speedup(samples["reference"], samples["candidate"])
    compiled = speedup_vs_compiled = None
    if "compile" in samples:
        compiled = summarize(samples["compile"])
        speedup_vs_compiled = bootstrap_speedup(samples["compile"], samples["candidate"])
    conditions = _conditions(timings, settings, memory_bound=floors.memory_bound)
    notes.append(
        f"{len(samples['candidate'])} timed calls on fresh inputs, each sampled against the reference "
        "and timed by the parent's clock too; "
        f"{settings.threads} thread(s) on CPU {_cpu_list(conditions.cpus)}"
    )
    return Verdict(
        status=VerdictStatus.CORRECT,
        message=correct_message(settings, speedup, speedup_vs_compiled, noise=conditions.noise),
        conditions=conditions,
        reference=reference,
        candidate=candidate,
        speedup=speedup,
        compiled_reference=compiled,
        speedup_vs_compiled=speedup_vs_compiled,
        floor_ms=floor,
        library_floor_ms=floors.library_ms,
        notes=notes,
        **trial_errors(trial_results),
    )


def _conditions(timings: Timings, settings: VerifySettings, *, memory_bound: bool) -> TimingConditions:
    """The machine around the timing, and whether it makes the timing noisy. The memory probe's
    slowdown against its best counts only for a ``memory_bound`` task; its change during the
    timing counts for every task."""
    assert settings.threads is not None
    before, after, calibrated_before, calibrated_after = timings.machine
    samples = timings.samples
    cpus = settings.cpus or all_cpus()
    other, steal = usage_between(before, after, cpus)
    calibration = (statistics.median(calibrated_before), statistics.median(calibrated_after))
    best = best_calibration(settings.threads, min(calibrated_before + calibrated_after))
    probed_before, probed_after = timings.memory_probe
    probe = (statistics.median(probed_before), statistics.median(probed_after))
    probe_best = best_memory_probe(settings.threads, timings.memory_probe_bytes, min(probed_before + probed_after))
    drift = block_drift(samples["reference"], samples["candidate"])
    loads = (before.load1, after.load1)
    return TimingConditions(
        threads=settings.threads,
        cpus=cpus,
        seconds=after.wall - before.wall,
        other_cpu=other,
        steal=steal,
        load_average=loads if None not in loads else None,
        frequency_mhz=frequency_mhz(cpus),
        calibration_ms=calibration,
        calibration_best_ms=best,
        memory_probe_ms=probe,
        memory_probe_best_ms=probe_best,
        drift=drift,
        noise=noise_reasons(
            cpus=len(cpus),
            seconds=after.wall - before.wall,
            other_cpu=other,
            steal=steal,
            calibration_ms=calibration,
            calibration_best_ms=best,
            drift=drift,
            memory_probe_ms=probe,
            memory_probe_best_ms=probe_best,
            memory_bound=memory_bound,
        ),
    )


def _floor_binds(task: Task) -> bool:
    """Whether one call's inputs and outputs are at least twice the last-level cache: then most of
    what a call reads comes from DRAM, though the inputs were written just before it."""
    analysis = task.analysis
    if analysis is None:
        return False
    from ..machine.hardware import describe_cpu
    from ..machine.physical_peaks import last_level_cache_bytes

    cache = last_level_cache_bytes(describe_cpu())
    moved = sum(spec.nbytes for spec in analysis.inputs) + sum(spec.nbytes for spec in analysis.outputs)
    return cache is not None and moved >= 2 * cache


def _cpu_list(cpus: tuple[int, ...]) -> str:
    return ", ".join(map(str, cpus))
