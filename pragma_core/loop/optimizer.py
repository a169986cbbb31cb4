"""The loop: Coder writes, Verifier checks, Profiler measures, rules diagnose, Conductor advises.

    from pragma_core import load_task, optimize, OptimizeSettings

    result = optimize(load_task("examples/tasks/level1/1_GELUTanh.py"),
                      OptimizeSettings(model="openai/gpt-4o-mini", max_attempts=15))
    result.best.verdict.speedup

Per attempt (the design's loop): the Coder's reply becomes a candidate; the Verifier checks and
times it in the sandbox; a correct candidate is profiled; rules turn verdict and profile into a
:class:`~pragma_core.records.Diagnosis`; the Conductor turns everything into
:class:`~pragma_core.records.Guidance`. The best correct attempt is replaced only by one faster
than it side by side (timed in the same child, the ratio's interval above 1); a move whose machine
code is its parent's is ``unchanged``, not timed. Everything is written to the run directory as it
happens; ``resume`` continues a run after its last complete attempt. A model provider that stops
answering (:class:`~pragma_core.errors.ProviderError`) ends the run as interrupted, saved, and the
error is raised for the caller to say so; a prompt that cannot fit the model's context window
(:class:`~pragma_core.errors.PromptTooLong`) ends it with that as its stop reason.

One attempt is :class:`~pragma_core.loop._attempt.AttemptRunner`'s; the next round's attempts are
chosen by :class:`~pragma_core.loop._rounds.RoundPlanner`, and written (ahead, for a round of
several) by :class:`~pragma_core.loop._writing.Writer`; the reference is measured once, before
attempt 1 (:mod:`~pragma_core.loop._baseline`), and the run ends by :mod:`~pragma_core.loop._stopping`'s
rules.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from ..errors import PragmaError, PromptTooLong, ProviderError
from ..plugin_api.registry import get_registry
from ..profiling.session import ProfilingSession
from ..records import Attempt, Baseline, RunResult, Task
from ..verifier import WarmChild
from ..verifier.build_ahead import BuildsAhead
from ..verifier.timing_statistics import best_of, improves_on
from ._attempt import AttemptRunner
from ._baseline import measure_baseline
from ._conversation import Agents
from ._next_child import NextChild
from ._rounds import RoundPlanner
from ._stopping import reason_to_stop
from ._writing import Writer, WrittenAhead
from .profiles import unavailable_profilers
from .progress import AttemptListener, PhaseReporter, ProgressListener
from .run_directory import RunDirectory
from .search import Step, strategy_named
from .settings import OptimizeSettings, check_agents, configured_model, provider_name, run_info, settings_of_run

__all__ = ["optimize"]


def optimize(
    task: Task | None,
    settings: OptimizeSettings | None = None,
    *,
    resume: Path | None = None,
    on_attempt: AttemptListener | None = None,
    on_progress: ProgressListener | None = None,
    on_leftover_child: Callable[[WarmChild], None] | None = None,
) -> RunResult:
    """Run the loop on ``task``; returns the run with every attempt and the best.

    With ``resume`` (a run directory) the task comes from the run and, when ``settings`` is None,
    so do the settings (:func:`settings_of_run`). ``on_attempt(attempt, best)`` hears of each
    completed attempt (``best`` is the best so far, or None), ``on_progress(progress)`` of each
    phase as it starts (:class:`~pragma_core.loop.progress.Progress`); both are called in the
    caller's thread, between steps of the loop. Ctrl-C (KeyboardInterrupt) ends the run after
    writing what is complete, then propagates. ``on_leftover_child(child)`` is for a caller that
    verifies the task again after the run (the bench's confirmation): the loop then also starts a
    child after its last attempt's timing, and hands over the child started for an attempt that
    did not come (:class:`~pragma_core.verifier.WarmChild`, torch imported while the loop
    finished); without it, such a child is closed.

    Named profilers no plugin registers raise :class:`~pragma_core.errors.PluginError` before
    anything is written; profilers that cannot run on this machine are left out of the run and
    named in the baseline's ``skipped``.
    """
    ready = _prepare(
        task, settings, resume=resume, on_progress=on_progress, verified_after=on_leftover_child is not None
    )
    run, settings, runner, rounds, attempts = ready.run, ready.settings, ready.runner, ready.rounds, ready.attempts
    best = best_of(attempts)
    stop_reason = "max attempts"
    provider_failure: ProviderError | None = None
    strategy = strategy_named(settings.search)
    plans = run.plans()
    queue: list[Step] = []
    ahead: list[WrittenAhead] = []
    if len(attempts) < settings.max_attempts:
        runner.warm.start()  # after the baseline's timing: the first attempt's child imports torch meanwhile
    try:
        for number in range(len(attempts) + 1, settings.max_attempts + 1):
            if not queue:
                queue = rounds.next_round(strategy, attempts, best, plans)
                ahead = runner.writer.write_ahead(queue, attempts, best)
            if not queue:
                stop_reason = "every instruction of the plans worth following was tried"
                break
            step = queue.pop(0)
            attempt = runner.attempt(number, attempts, best, step, ahead.pop(0) if ahead else None)
            attempts.append(attempt)
            if attempt.guidance is not None and improves_on(attempt.verdict, best):
                best = attempt
                run.write_best(best)
            run.append_event(
                "attempt_done",
                attempt=number,
                status=attempt.verdict.status.value if attempt.verdict else None,
                best=best.number if best else None,
                skipped=attempt.skipped,
                **_time_fields(attempt),
            )
            if on_attempt is not None:
                on_attempt(attempt, best)
            reason = reason_to_stop(attempts, best, settings, untimed=ready.untimed, planned=strategy.name != "linear")
            if reason:
                stop_reason = reason
                break
    except KeyboardInterrupt:
        stop_reason = "interrupted"
        run.append_event("interrupted", completed=len(attempts))
    except ProviderError as failure:  # the model stopped answering: resuming asks again
        stop_reason, provider_failure = "interrupted", failure
        run.append_event(
            "interrupted", completed=len(attempts), by="provider", attempt=len(attempts) + 1, reason=str(failure)
        )
    except PromptTooLong as too_long:  # no later attempt would fit either
        stop_reason = str(too_long)
        run.append_event("prompt_too_long", attempt=len(attempts) + 1, reason=stop_reason)
    finally:
        if on_leftover_child is not None and stop_reason != "interrupted" and (child := runner.warm.take()) is not None:
            on_leftover_child(child)
        runner.warm.close()
        runner.writer.builds.close()
    result = RunResult(
        run_id=run.root.name,
        task=runner.task,
        baseline=ready.baseline,
        attempts=tuple(attempts),
        best_attempt=best.number if best else None,
        stop_reason=stop_reason,
    )
    run.write_summary(result)
    run.append_event("finished", stop_reason=stop_reason, best=result.best_attempt)
    if provider_failure is not None:
        raise provider_failure
    if stop_reason == "interrupted":
        raise KeyboardInterrupt
    return result


@attrs.frozen(kw_only=True)
class _Prepared:
    """A run ready for its first attempt (or its next, when resumed), and the parts of its loop."""

    settings: OptimizeSettings
    run: RunDirectory
    baseline: Baseline | None
    attempts: list[Attempt]
    untimed: str  # why the backend's attempts are not timed here, or ""
    runner: AttemptRunner
    rounds: RoundPlanner


def _prepare(
    task: Task | None,
    settings: OptimizeSettings | None,
    *,
    resume: Path | None,
    on_progress: ProgressListener | None,
    verified_after: bool,
) -> _Prepared:
    """The settings completed, the agents checked and the profilers probed; the run folder
    created and the baseline measured, or the run to resume opened; the parts of the loop."""
    if settings is None:
        settings = settings_of_run(resume) if resume is not None else OptimizeSettings()
    if resume is None and task is None:
        raise PragmaError("give a task to optimize, or resume= a run directory")
    settings, threads_note = _completed(settings)
    registry = get_registry()
    provider = registry.llm_provider(provider_name(settings))
    backend = registry.backend(settings.backend)
    check_agents(settings)  # a missing key or a dead server fails now, not after the baseline
    unavailable = unavailable_profilers(settings.profilers) if settings.profile else {}
    untimed = backend.timing_refusal()  # an interpreter: attempts are checked, never timed or profiled
    if untimed:
        unavailable = {name: f"not profiled: {untimed}" for name in settings.profilers} if settings.profile else {}
    run = RunDirectory.open(resume) if resume is not None else None
    if run is not None:
        task = run.task()
    assert task is not None
    if provider.prepare is not None:
        provider.prepare(task)
    progress = PhaseReporter(on_progress)
    profilers = tuple(name for name in settings.profilers if name not in unavailable) if settings.profile else ()
    profiling = ProfilingSession.for_task(task, profilers) if profilers else None  # each one's size, derived once
    if run is not None:
        progress.run_dir = run.root
        attempts = run.completed_attempts()
        run.append_event("resumed", after_attempt=attempts[-1].number if attempts else 0)
        baseline = run.baseline()
    else:
        run, baseline = _start(task, settings, progress, unavailable, threads_note, profiling)
        attempts = []
    agents = Agents(provider=provider, model=settings.model, task=task, backend=settings.backend)
    builds = BuildsAhead(task, settings.verify, backend=settings.backend, workers=max(2, settings.branching))
    runner = AttemptRunner(
        task=task,
        settings=settings,
        agents=agents,
        writer=Writer(agents=agents, task=task, guide=backend.guide, builds=builds),
        run=run,
        profilers=profilers,
        bound=baseline.bound if baseline is not None else None,
        progress=progress,
        warm=NextChild(task=task, settings=settings.verify),
        profiling=profiling,
        verified_after=verified_after,
    )
    rounds = RoundPlanner(agents=agents, task=task, run=run, progress=progress, branching=settings.branching)
    return _Prepared(
        settings=settings, run=run, baseline=baseline, attempts=attempts, untimed=untimed, runner=runner, rounds=rounds
    )


def _completed(settings: OptimizeSettings) -> tuple[OptimizeSettings, str]:
    """The settings with the model, the provider and the thread count chosen, and a note when the
    machine was busy as the threads were chosen."""
    settings = attrs.evolve(settings, model=configured_model(settings))
    settings = attrs.evolve(settings, provider=provider_name(settings))
    verify_settings, threads_note = settings.verify.with_threads()  # once: every attempt times alike
    return attrs.evolve(settings, verify=verify_settings), threads_note


def _start(
    task: Task,
    settings: OptimizeSettings,
    progress: PhaseReporter,
    unavailable: dict[str, str],
    threads_note: str,
    profiling: ProfilingSession | None,
) -> tuple[RunDirectory, Baseline]:
    """A new run folder, its first events, and the baseline measured before attempt 1."""
    run = RunDirectory.create(settings.runs_dir, task, run_info(settings))
    progress.run_dir = run.root
    run.append_event("started", task=task.key, model=settings.model)
    if threads_note:
        run.append_event("busy_machine", note=threads_note)
    for name, reason in unavailable.items():
        run.append_event("profiler_unavailable", profiler=name, reason=reason)
    progress(0, "baseline")
    return run, measure_baseline(task, settings, run, unavailable, profiling)


def _time_fields(attempt: Attempt) -> dict[str, Any]:
    """An attempt's times for ``events.jsonl``, in seconds rounded to the millisecond."""
    return {
        "elapsed_s": round(attempt.elapsed_s, 3),
        "timed_s": round(attempt.timed_s, 3),
        "phase_seconds": {name: round(seconds, 3) for name, seconds in attempt.phase_seconds.items()},
    }
