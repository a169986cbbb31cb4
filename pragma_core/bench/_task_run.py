"""One task of a bench, where an executor runs it: fit, optimize (or resume), confirm, summarize.

:func:`run_task` is the whole of a task's work and returns its row of ``bench.json`` (a plain dict,
schema in docs/bench.md). It runs in a worker process (local executor) or a Ray task; it hears
nothing from the driver after it starts and tells it where it is through ``report``.

A task's run folder is resumed when it exists: a run that ended is not run again (only its row is
made, from the files), a run killed mid-way continues after its last complete attempt, and a
confirmation, once written (``confirmation.json``, ``confirmation-2.json``... in the run folder),
is not timed again. A job asking for more confirmations than the folder holds (``TaskJob.confirmations``:
the bench hands these out after the other tasks, :mod:`.confirmations`) times the best again, no
sooner than ``retime_after_s`` after its previous confirmation, while the figures still call for it.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from ..errors import PragmaError, RecordError
from ..loop.optimizer import optimize
from ..loop.progress import Progress
from ..loop.run_directory import RunDirectory
from ..loop.run_summary import run_summary
from ..machine.timing_slot import start_turn
from ..records import Attempt, RunResult, Speedup, Task, Verdict
from ..serialization import read_record, write_record
from ..verifier import WarmChild
from .confirmations import Confirmed, confirmation_file, confirmed, stored_confirmations
from .plan import BenchSettings

__all__ = ["TaskJob", "Reporter", "run_task", "machine_threads", "retime_job"]

Reporter = Callable[[dict[str, Any]], None]
"""Hears ``{"key", "phase", "attempt", "detail"}`` as the task moves on."""


@attrs.frozen(kw_only=True)
class TaskJob:
    """A task to run: its key, the task as loaded (with ``--set`` sizes), the bench's settings and
    the folder its run goes in. ``confirmations`` is how many confirmations of its best the row
    may rest on after this job: 1 for a task's run, more for a re-timing job (:func:`retime_job`).
    ``fitted_sizes`` are the sizes the other half of the profiling ablation fitted this task to
    (:func:`~.store.sizes_fitted_before`): taken as they are instead of fitting again, so both
    halves time the same sizes."""

    key: str
    task: Task
    category: str
    settings: BenchSettings
    runs_dir: Path
    confirmations: int = attrs.field(default=1, validator=attrs.validators.ge(1))
    fitted_sizes: dict[str, Any] | None = None


def retime_job(key: str, row: dict[str, Any], settings: BenchSettings, runs_dir: Path) -> TaskJob:
    """A job that times the best of a finished task's run again (its row's confirmation is
    ``due``): the task as its run stored it, one confirmation more than the row holds."""
    run_dir = Path(row["run_dir"])
    held = sum(1 for m in row["confirmation"]["measurements"] if m["source"] != "loop")
    return TaskJob(
        key=key,
        task=read_record(run_dir / "task.json", Task),
        category=row.get("category") or "other",
        settings=settings,
        runs_dir=runs_dir,
        confirmations=held + 1,
    )


def machine_threads() -> int:
    """The CPUs this process may use: a bench times with all of them, since the timing slot keeps
    the other tasks off while it times (:mod:`pragma_core.machine.timing_slot`)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


_STARTED = frozenset({"writing", "planning"})
"""The phases in which a task first waits for its model: it has started, and gives up its turn."""


def run_task(job: TaskJob, report: Reporter) -> dict[str, Any]:
    """The task's row, after running (or resuming) its optimization and confirming its best.

    The task starts in its turn (:func:`~pragma_core.machine.timing_slot.start_turn`): it waits while
    another task on this machine starts, and gives its turn up once it waits for its model.

    A task the loop cannot take (its provider refuses it, as the offline agents do a task no
    recipe knows; its sizes cannot be fitted) gets a row with ``status: failed`` and the reason: a
    result, counted as a task without a correct kernel. Anything else that stops it (a model
    that stopped answering, a backend or profiler that cannot run) gives ``status: error``, which
    is not a result: a resumed bench runs the task again."""
    if job.confirmations > 1:
        _wait_to_retime(job, report)  # before its turn: a task waiting holds nothing
    with start_turn() as give_up:
        if job.settings.loop.model:  # part of starting: a Ray worker would import it at the first model call
            from ..providers.litellm_import import preload

            preload()

        def reporting(event: dict[str, Any]) -> None:
            if event.get("phase") in _STARTED:
                give_up()
            report(event)

        return _run_task(job, reporting)


def _run_task(job: TaskJob, report: Reporter) -> dict[str, Any]:
    started = time.monotonic()
    settings = job.settings
    threads = settings.loop.verify.threads or machine_threads()
    row: dict[str, Any] = {"key": job.key, "category": job.category, "level": job.task.level}

    def ended(status: str, error: PragmaError) -> dict[str, Any]:
        return row | {"status": status, "error": str(error), "seconds": round(time.monotonic() - started, 3)}

    existing = _existing_run(job.runs_dir)
    if existing is None and job.confirmations > 1:
        return ended("error", PragmaError(f"{job.runs_dir}: no run folder to time the best of again"))
    try:
        if existing is None:
            task = _taken(job, threads, report)
    except PragmaError as refused:
        return ended("failed", refused)
    leftover: list[WarmChild] = []  # the loop's child for an attempt that did not come: it confirms
    try:
        if existing is not None and (existing / "summary.json").is_file() and not _interrupted(existing):
            result = _finished_result(existing, job.key, report)
            run_dir = existing
        else:
            listener = _progress_listener(job.key, report)
            if existing is not None:
                done = len(RunDirectory(existing).completed_attempts())
                report({"key": job.key, "phase": "resuming", "attempt": done, "detail": ""})
                result = optimize(None, None, resume=existing, on_progress=listener, on_leftover_child=leftover.append)
                run_dir = existing
            else:
                result = optimize(
                    task,
                    settings.optimize_settings(job.runs_dir, threads),
                    on_progress=listener,
                    on_leftover_child=leftover.append,
                )
                run_dir = job.runs_dir / result.run_id
        confirmation = _confirmations(
            job, result, run_dir, threads, leftover[0] if leftover else None, report, len(result.attempts)
        )
    except PragmaError as error:
        return ended("error", error)
    finally:
        for child in leftover:
            child.close()  # closing a child verify used (and closed) is a no-op
    run = RunDirectory.open(run_dir)
    return (
        row
        | _result_row(result, confirmation, run, settings)
        | {
            "run_dir": str(run_dir),
            "seconds": round(time.monotonic() - started, 3),
        }
    )


def _existing_run(runs_dir: Path) -> Path | None:
    """The task's run folder from an earlier start of the bench, if one was created."""
    if not runs_dir.is_dir():
        return None
    runs = sorted(
        path for path in runs_dir.iterdir() if (path / "run.json").is_file() and (path / "task.json").is_file()
    )
    return runs[-1] if runs else None


def _finished_result(run_dir: Path, key: str, report: Reporter) -> RunResult:
    """A finished run's result: its ``summary.json``, or, when that cannot be read (cut short by
    a crash, say), the result made again from the run folder, and said."""
    try:
        return read_record(run_dir / "summary.json", RunResult)
    except RecordError as damaged:
        result = RunDirectory(run_dir).rebuilt_summary()
        report({"key": key, "phase": "rebuilt", "attempt": len(result.attempts), "detail": str(damaged)})
        return result


def _interrupted(run_dir: Path) -> bool:
    events = RunDirectory(run_dir).events()
    finished = [event for event in events if event.get("event") == "finished"]
    return not finished or finished[-1].get("stop_reason") == "interrupted"


def _taken(job: TaskJob, threads: int, report: Reporter) -> Task:
    """The task as its run starts: its provider asked first whether it can take it (so no fit is
    spent on a task the offline agents know no recipe for), then fitted with ``--fit-ms``, or set
    to the sizes the bench's other variant was fitted to when it ran this task (fitting again
    would land on other sizes, and the two halves of the ablation would not time the same task)."""
    from ..loop.settings import provider_name
    from ..plugin_api.registry import get_registry

    provider = get_registry().llm_provider(provider_name(job.settings.optimize_settings(job.runs_dir, threads)))
    if provider.prepare is not None:
        provider.prepare(job.task)
    if job.settings.fit_ms is None:
        return job.task
    if job.fitted_sizes:
        from ..sizes.shrinking import at_sizes

        same = at_sizes(job.task, job.fitted_sizes)
        if same is not None:
            report({"key": job.key, "phase": "sizes_kept", "attempt": 0, "detail": _sizes_text(job.fitted_sizes)})
            return same
    from ..sizes.fitting import fit_task

    report({"key": job.key, "phase": "fitting", "attempt": 0, "detail": f"{job.settings.fit_ms:g} ms"})
    return fit_task(job.task, job.settings.fit_ms, threads=threads).task


def _sizes_text(sizes: dict[str, Any]) -> str:
    return ", ".join(f"{name}={value}" for name, value in sizes.items())


def _progress_listener(key: str, report: Reporter) -> Callable[[Progress], None]:
    def listener(progress: Progress) -> None:
        report({"key": key, "phase": progress.phase, "attempt": progress.attempt, "detail": progress.detail})

    return listener


def _wait_to_retime(job: TaskJob, report: Reporter) -> None:
    """Sleep until ``retime_after_s`` passed since the run's last confirmation was written."""
    run_dir = _existing_run(job.runs_dir)
    if run_dir is None:
        return
    held = stored_confirmations(run_dir)
    if not held:
        return
    written = (run_dir / confirmation_file(len(held))).stat().st_mtime
    left = job.settings.retime_after_s - (time.time() - written)
    if left > 0:
        report({"key": job.key, "phase": "waiting", "attempt": 0, "detail": f"{left:.0f} s"})
        time.sleep(left)


def _confirmations(
    job: TaskJob,
    result: RunResult,
    run_dir: Path,
    threads: int,
    warm: WarmChild | None,
    report: Reporter,
    attempts: int,
) -> Confirmed | None:
    """The best candidate verified once more against every baseline (an unbiased speedup: the
    loop's best is the largest of several noisy figures), in ``warm`` when it fits; and again, up
    to ``job.confirmations`` in all, while the figures call for it (:func:`.confirmations.confirmed`).
    Each is kept in the run folder, so a resumed bench does not time it again. None when no
    attempt was correct."""
    best = result.best
    if best is None or best.candidate is None:
        return None
    settings = job.settings
    held = stored_confirmations(run_dir)
    baseline = "compile" if "compile" in settings.baselines else "eager"
    while not held or (len(held) < job.confirmations and confirmed(best.verdict, held, settings.baselines).due):
        from ..verifier import verify

        number = len(held) + 1
        phase = "confirming" if number == 1 else "retiming"
        report({"key": job.key, "phase": phase, "attempt": attempts, "detail": str(number)})
        verdict = verify(
            result.task,
            best.candidate,
            attrs.evolve(settings.loop.verify, threads=threads, baseline=baseline),
            warm=warm if number == 1 else None,
        )
        write_record(run_dir / confirmation_file(number), verdict)
        held.append(verdict)
    return confirmed(best.verdict, held, settings.baselines)


def _speedup(speedup: Speedup | None) -> dict[str, float] | None:
    if speedup is None:
        return None
    return {"value": speedup.value, "low": speedup.low, "high": speedup.high}


def _confirmation_part(confirmation: Confirmed) -> dict[str, Any]:
    """The row's ``confirmation``: the verdict's status and message, every measurement (the loop's
    best and each confirmation) with its speedups and noise, the spread, and whether another is due."""
    return {
        "status": confirmation.verdict.status.value,
        "message": confirmation.verdict.message,
        "measurements": [
            {
                "source": m.source,
                "status": m.verdict.status.value,
                "eager": _speedup(m.verdict.speedup),
                "compile": _speedup(m.verdict.speedup_vs_compiled),
                "noise": list(m.verdict.conditions.noise) if m.verdict.conditions is not None else [],
            }
            for m in confirmation.measurements
        ],
        "spread": {baseline: list(bounds) for baseline, bounds in confirmation.spread.items()},
        "due": confirmation.due,
    }


def _result_row(
    result: RunResult, confirmation: Confirmed | None, run: RunDirectory, settings: BenchSettings
) -> dict[str, Any]:
    correct = confirmation is not None and confirmation.correct
    speedups: dict[str, dict[str, float] | None] = {}
    if correct and confirmation is not None:
        speedups["eager"] = _speedup(confirmation.speedups.get("eager"))
        if "compile" in settings.baselines:
            speedups["compile"] = _speedup(confirmation.speedups.get("compile"))
    best = result.best.verdict if result.best is not None else None
    stored = run.info().get("settings", {})
    summary = run_summary(result, run_dir=run.root, model=stored.get("model"), provider=stored.get("provider") or "")
    return {
        "status": "finished",
        "correct": correct,
        "timed": bool(correct and speedups.get("eager") is not None),
        "speedup": speedups,
        "loop_best": _speedup(best.speedup) if best is not None else None,
        "flags": list(confirmation.flags) if confirmation is not None else [],
        "confirmation": _confirmation_part(confirmation) if confirmation is not None else None,
        "roofline": _roofline_part(confirmation.verdict) if correct and confirmation is not None else None,
        "best_by_attempt": _best_by_attempt(result.attempts),
        "sizes": dict(result.task.sizes),
        "loop_seconds": round(_loop_seconds(run, result.attempts), 3),
    } | {
        name: summary[name]
        for name in (
            "attempts",
            "correct_attempts",
            "best_attempt",
            "best_kernel",
            "stop_reason",
            "reference_ms",
            "provider",
            "model",
            "tokens",
            "cost_usd",
        )
    }


def _roofline_part(verdict: Verdict) -> dict[str, float | None] | None:
    """The confirmed best against the task's physical floor (this machine's own peaks) and against
    the floor at torch's own sgemm and copy rates, shown beside it: each floor in ms, and the
    share of it the best's median time reaches (its attainment)."""
    if verdict.candidate is None or verdict.candidate.median_ms <= 0 or verdict.floor_ms is None:
        return None
    median = verdict.candidate.median_ms
    library = verdict.library_floor_ms
    return {
        "floor_ms": verdict.floor_ms,
        "attainment": verdict.floor_ms / median,
        "library_floor_ms": library,
        "library_attainment": library / median if library is not None else None,
    }


def _loop_seconds(run: RunDirectory, attempts: tuple[Attempt, ...]) -> float:
    """The run's own work: its baseline and every attempt, across every start of the bench."""
    baseline = sum(event.get("seconds", 0.0) for event in run.events() if event.get("event") == "baseline")
    return baseline + math.fsum(attempt.elapsed_s for attempt in attempts)


def _best_by_attempt(attempts: tuple[Attempt, ...]) -> list[float | None]:
    """After each attempt, the loop's best speedup over eager so far (None before a correct, timed
    one): the curve of the paper's figure 4."""
    curve: list[float | None] = []
    best: float | None = None
    for attempt in attempts:
        verdict = attempt.verdict
        if verdict is not None and verdict.ok and verdict.speedup is not None:
            best = max(best or 0.0, verdict.speedup.value)
        curve.append(best)
    return curve
