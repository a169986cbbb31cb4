"""The loop: Coder writes, Verifier checks, Profiler measures, rules diagnose, Conductor advises.

    from pragma_core import load_task, optimize, OptimizeSettings

    result = optimize(load_task("examples/tasks/level1/1_GELUTanh.py"),
                      OptimizeSettings(model="openai/gpt-4o-mini", max_attempts=15))
    result.best.verdict.speedup

Per attempt (the design's loop): the Coder's reply becomes a candidate; the Verifier checks and
times it in the sandbox; a correct candidate is profiled; rules turn verdict and profile into a
:class:`~pragma_core.records.Diagnosis`; the Conductor turns everything into
:class:`~pragma_core.records.Guidance`. The best correct attempt is replaced only by one whose
speedup interval lies wholly above the best's. Everything is written to the run directory as it
happens; ``resume`` continues a run after its last complete attempt.
"""

from __future__ import annotations

import functools
import json
import shutil
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import attrs
from attrs import validators as v

from ..agents.extraction import extract_code
from ..agents.prompts import coder_messages, conductor_messages, debugger_messages, planner_messages
from ..agents.replies import GuidanceParseError, PlanParseError, parse_guidance, parse_plan, repair_messages
from ..errors import PragmaError
from ..files import atomic_write_text
from ..knowledge import conductor_documentation, unmeasured_citations
from ..knowledge.conductor_docs import RELATED_ENTRIES
from ..plugin_api.components import DEFAULT_PROFILE_TIMEOUT_S, LLMProvider
from ..plugin_api.registry import get_registry
from ..records import (
    AgentRole,
    Attempt,
    Baseline,
    BoundClass,
    Candidate,
    ChatMessage,
    Completion,
    CompletionRequest,
    Diagnosis,
    Guidance,
    Plan,
    Profile,
    RunResult,
    Task,
    TokenUsage,
    Verdict,
    VerdictStatus,
)
from ..verifier import VerifySettings, WarmChild, verify
from ..verifier.build_ahead import BuildsAhead
from ..verifier.timing_statistics import bar_to_beat, best_of, improves_on
from ..verifier.warm_child import ChildAhead
from .diagnosis import diagnose
from .run_directory import RunDirectory
from .search import SearchStrategy, SearchTree, Step, round_seed, strategy_named
from .settings import OptimizeSettings, check_agents, configured_model, provider_name, run_info, settings_of_run

__all__ = [
    "PHASES",
    "Progress",
    "AttemptListener",
    "ProgressListener",
    "unavailable_profilers",
    "optimize",
]


def unavailable_profilers(names: Sequence[str]) -> dict[str, str]:
    """Of the named profilers, those that cannot run on this machine, each with its probe's reason.

    A name no installed plugin registers raises :class:`~pragma_core.errors.PluginError`: a typo
    must not turn into a run without its profiler."""
    registry = get_registry()
    profilers = [registry.profiler(name) for name in names]
    unavailable = {}
    for profiler in profilers:
        availability = profiler.probe()
        if not availability.available:
            unavailable[profiler.name] = availability.reason
    return unavailable


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
    phase as it starts (:class:`Progress`); both are called in the caller's thread, between steps
    of the loop. Ctrl-C (KeyboardInterrupt) ends the run after writing what is complete, then
    propagates. ``on_leftover_child(child)`` is for a caller that verifies the task again after the
    run (the bench's confirmation): the loop then also starts a child after its last attempt's
    timing, and hands over the child started for an attempt that did not come
    (:class:`~pragma_core.verifier.WarmChild`, torch imported while the loop finished); without
    it, such a child is closed.

    Named profilers no plugin registers raise :class:`~pragma_core.errors.PluginError` before
    anything is written; profilers that cannot run on this machine are left out of the run and
    named in the baseline's ``skipped``.
    """
    if settings is None:
        settings = settings_of_run(resume) if resume is not None else OptimizeSettings()
    if resume is None and task is None:
        raise PragmaError("give a task to optimize, or resume= a run directory")
    settings = attrs.evolve(settings, model=configured_model(settings))
    settings = attrs.evolve(settings, provider=provider_name(settings))
    verify_settings, threads_note = settings.verify.with_threads()  # once: every attempt times alike
    settings = attrs.evolve(settings, verify=verify_settings)
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
    progress = _Reporter(on_progress)
    if run is not None:
        progress.run_dir = run.root
        attempts = run.completed_attempts()
        run.append_event("resumed", after_attempt=attempts[-1].number if attempts else 0)
        baseline = run.baseline()
    else:
        run = RunDirectory.create(settings.runs_dir, task, run_info(settings))
        progress.run_dir = run.root
        attempts = []
        run.append_event("started", task=task.key, model=settings.model)
        if threads_note:
            run.append_event("busy_machine", note=threads_note)
        for name, reason in unavailable.items():
            run.append_event("profiler_unavailable", profiler=name, reason=reason)
        progress(0, "baseline")
        baseline = _baseline(task, settings, run, unavailable)
    profilers = tuple(name for name in settings.profilers if name not in unavailable) if settings.profile else ()
    loop = _Loop(
        task=task,
        settings=settings,
        agents=_Agents(provider=provider, model=settings.model, task=task, backend=settings.backend),
        guide=backend.guide,
        run=run,
        profilers=profilers,
        bound=baseline.bound if baseline is not None else None,
        progress=progress,
        warm=_NextChild(task=task, settings=settings.verify),
        builds=BuildsAhead(task, settings.verify, backend=settings.backend, workers=max(2, settings.branching)),
        recording_tasks=_recording_tasks(task, profilers),
        verified_after=on_leftover_child is not None,
    )
    best = best_of(attempts)
    stop_reason = "max attempts"
    strategy = strategy_named(settings.search)
    plans = run.plans()
    queue: list[Step] = []
    ahead: list[_Ahead] = []
    if len(attempts) < settings.max_attempts:
        loop.warm.start()  # after the baseline's timing: the first attempt's child imports torch meanwhile
    try:
        for number in range(len(attempts) + 1, settings.max_attempts + 1):
            if not queue:
                queue = loop.next_round(strategy, attempts, best, plans)
                ahead = loop.write_ahead(queue, attempts, best)
            if not queue:
                stop_reason = "every instruction of the plans worth following was tried"
                break
            step = queue.pop(0)
            attempt = loop.attempt(number, attempts, best, step, ahead.pop(0) if ahead else None)
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
            reason = _stop_reason(attempts, best, settings, untimed=untimed, planned=strategy.name != "linear")
            if reason:
                stop_reason = reason
                break
    except KeyboardInterrupt:
        stop_reason = "interrupted"
        run.append_event("interrupted", completed=len(attempts))
    finally:
        if on_leftover_child is not None and stop_reason != "interrupted" and (child := loop.warm.take()) is not None:
            on_leftover_child(child)
        loop.warm.close()
        loop.builds.close()
    result = RunResult(
        run_id=run.root.name,
        task=task,
        baseline=baseline,
        attempts=tuple(attempts),
        best_attempt=best.number if best else None,
        stop_reason=stop_reason,
    )
    run.write_summary(result)
    run.append_event("finished", stop_reason=stop_reason, best=result.best_attempt)
    if stop_reason == "interrupted":
        raise KeyboardInterrupt
    return result


@attrs.define
class _Reporter:
    """Passes phase changes to the caller's listener, if any."""

    listener: ProgressListener | None
    run_dir: Path = Path()

    def __call__(self, attempt: int, phase: str, detail: str = "") -> None:
        if self.listener is not None:
            self.listener(Progress(run_dir=self.run_dir, attempt=attempt, phase=phase, detail=detail))


@attrs.frozen(kw_only=True)
class _Agents:
    """The provider answering the Coder and the Conductor, with what every request carries."""

    provider: LLMProvider
    model: str | None
    task: Task
    backend: str

    def ask(self, role: AgentRole, messages: tuple[ChatMessage, ...], **context: Any) -> Completion:
        """One answer; ``context`` is the structured part of the request (verdict, profiles, ...)."""
        request = CompletionRequest(
            role=role, messages=messages, model=self.model, task=self.task, backend=self.backend, **context
        )
        return self.provider.complete(request)


@attrs.define(kw_only=True)
class _NextChild:
    """The sandbox child of the next verification, started ahead so that it imports torch while the
    loop finishes a verification, profiles, diagnoses and writes
    (:class:`~pragma_core.verifier.WarmChild`): about two seconds off every attempt. Never started
    while anything is timed: after the baseline, and when a verification's timing is over; and it
    imports only while no other task's timing holds the machine
    (:class:`~pragma_core.verifier.warm_child.ChildAhead`)."""

    task: Task
    settings: VerifySettings
    ahead: ChildAhead | None = None
    child: WarmChild | None = None  # one a verification left unused

    def start(self) -> None:
        if self.ahead is None and self.child is None:
            self.ahead = ChildAhead(self.task, self.settings)

    def take(self) -> WarmChild | None:
        """The child for a verification (None: it starts one); ``verify`` uses and closes it, or
        leaves it unused."""
        if self.ahead is not None:
            ahead, self.ahead = self.ahead, None
            return ahead.take()
        child, self.child = self.child, None
        return child

    def give_back(self, child: WarmChild | None) -> None:
        """After a verification: keep ``child`` if it was not used and none was started meanwhile."""
        if child is None or child.closed or child.session.begun:
            return
        if self.ahead is None and self.child is None:
            self.child = child
        else:
            child.close()

    def close(self) -> None:
        if self.ahead is not None:
            self.ahead.close()
            self.ahead = None
        if self.child is not None:
            self.child.close()
            self.child = None


@attrs.frozen(kw_only=True)
class _Ahead:
    """A child of a round written in a thread (its prompt and reply) and built in another."""

    written: Future[tuple[tuple[ChatMessage, ...], Completion]]
    built: Future[tuple[float, float] | None]


def _source(written: Future[tuple[tuple[ChatMessage, ...], Completion]]) -> str | None:
    """The module a writer's reply holds, once it has replied."""
    return extract_code(written.result()[1].text)


@attrs.frozen(kw_only=True)
class _Loop:
    """What stays the same from one attempt of a run to the next."""

    task: Task
    settings: OptimizeSettings
    agents: _Agents
    guide: str
    run: RunDirectory
    profilers: tuple[str, ...]
    bound: BoundClass | None
    progress: _Reporter
    warm: _NextChild
    builds: BuildsAhead
    recording_tasks: tuple[Task, ...] = ()
    """The task at each size the run's profilers profile at (one entry per distinct size)."""
    verified_after: bool = False  # the caller verifies again after the last attempt, in the child left over

    def next_round(
        self, strategy: SearchStrategy, attempts: list[Attempt], best: Attempt | None, plans: dict[int, Plan]
    ) -> list[Step]:
        """The next attempts: the linear loop's one step from the last attempt; in a tree or beam
        search, first the debugger's fix of each child that failed (once each, newest first, at
        most ``branching``), else the strategy's picks, each given the first instruction of its
        parent's plan (asked of the planner on first need, kept in ``plans``) that no child took.
        Empty when no plan has an instruction left."""
        if strategy.name == "linear" or not attempts:
            return [Step(parent=attempts[-1] if attempts else None)]
        broken = SearchTree(attempts=attempts).to_debug()
        if broken:
            return [Step(parent=a, writer=AgentRole.DEBUGGER) for a in broken[: self.settings.branching]]
        while True:
            tree = SearchTree(attempts=attempts, best=best, plans={n: p.instructions for n, p in plans.items()})
            parents = strategy.parents(tree, self.settings.branching, round_seed(self.run.root.name, attempts))
            queue: list[Step] = []
            asked = False
            for parent in parents:
                if parent.verdict is None or not parent.verdict.ok:  # no correct attempt yet: repair it
                    queue.append(Step(parent=parent))
                    continue
                if parent.number not in plans:
                    plans[parent.number] = self.plan(parent, attempts)
                    asked = True
                    tree = attrs.evolve(tree, plans={**tree.plans, parent.number: plans[parent.number].instructions})
                taken = {step.instruction for step in queue if step.parent is parent}
                options = [i for i in tree.untried(parent.number) or () if i not in taken]
                if options:
                    queue.append(Step(parent=parent, instruction=options[0]))
            if queue or not asked:  # a new plan may leave the picked node with nothing: pick again
                return queue

    def plan(self, node: Attempt, attempts: list[Attempt]) -> Plan:
        """The planner's ranked changes to ``node``, written to the run's ``plans/``. A reply that
        does not parse leaves the node's Conductor actions as its plan, and the plan says so."""
        self.progress(node.number, "planning")
        messages = planner_messages(self.task, node, tree=attempts)
        reply = self.agents.ask(
            AgentRole.PLANNER, messages, parent=node, history=tuple(attempts), verdict=node.verdict,
            profiles=node.profiles, diagnosis=node.diagnosis,
        )  # fmt: skip
        note = ""
        try:
            instructions = parse_plan(reply.text)
        except PlanParseError as error:
            instructions = node.guidance.actions if node.guidance else ()
            note = f"the planner's reply did not parse ({error}); the Conductor's actions stand in"
        if not instructions:
            note = note or "the planner proposed no change: nothing is left to try from this attempt"
        plan = Plan(
            parent=node.number, instructions=instructions, usage=reply.usage, cost_usd=reply.cost_usd, note=note
        )
        self.run.write_plan(plan)
        self.run.append_event("planned", parent=node.number, instructions=len(plan.instructions))
        return plan

    def write(
        self, step: Step, history: Sequence[Attempt], best: Attempt | None
    ) -> tuple[tuple[ChatMessage, ...], Completion]:
        """The prompt and reply of the agent that writes ``step``'s candidate: the Coder changes
        ``step.parent`` (the linear loop: the last attempt) following its Conductor's advice, or
        only ``step.instruction`` when one is given (tree and beam search); the debugger fixes the
        failing parent from its evidence alone."""
        parent = last = step.parent
        if step.writer is AgentRole.DEBUGGER and parent is not None:
            messages = debugger_messages(self.task, self.guide, parent)
        else:
            messages = coder_messages(
                task=self.task,
                guide=self.guide,
                guidance=last.guidance if last else None,
                best=best,
                last=last,
                history=history,
                instruction=step.instruction,
            )
        reply = self.agents.ask(
            step.writer, messages, verdict=last.verdict if last else None, best=best, history=tuple(history),
            parent=parent, instruction=step.instruction,
        )  # fmt: skip
        return messages, reply

    def write_ahead(self, queue: Sequence[Step], history: Sequence[Attempt], best: Attempt | None) -> list[_Ahead]:
        """The candidates of a round of several written at once, each in a thread of its own (a
        language model's replies take seconds; they overlap), and each built as soon as it is
        written (:class:`~pragma_core.verifier.build_ahead.BuildsAhead`: the compilers overlap too).
        The round's attempts are then verified one after another as they come."""
        if len(queue) < 2:
            return []
        pool = ThreadPoolExecutor(max_workers=len(queue), thread_name_prefix="pragma-writer")
        ahead = []
        for step in queue:
            written = pool.submit(self.write, step, tuple(history), best)
            ahead.append(_Ahead(written=written, built=self.builds.submit(functools.partial(_source, written))))
        pool.shutdown(wait=False)
        return ahead

    def attempt(
        self, number: int, history: list[Attempt], best: Attempt | None, step: Step, ahead: _Ahead | None = None
    ) -> Attempt:
        """Write (or take the reply written ``ahead``, and wait for its build), verify, profile,
        diagnose and advise once; the attempt is on disk when this returns."""
        task, settings, run = self.task, self.settings, self.run
        parent, instruction = step.parent, step.instruction
        started = time.monotonic()
        staging = run.staging_folder(number)
        files: dict[str, str] = {}
        last = parent
        run.append_event("attempt_started", attempt=number, parent=parent.number if parent else None)
        clock = _PhaseClock()

        def phase(name: str, detail: str = "") -> None:
            clock.start(f"{name}:{detail}" if detail else name)
            self.progress(number, name, detail)

        phase("writing")
        messages, reply = ahead.written.result() if ahead is not None else self.write(step, history, best)
        files.update({f"{step.writer.value}_prompt": _transcript(messages), f"{step.writer.value}_reply": reply.text})
        usage, cost = reply.usage, reply.cost_usd
        source = extract_code(reply.text)
        if source is None:
            candidate = None
            verdict = Verdict(
                status=VerdictStatus.COMPILE_ERROR,
                message="the Coder's reply held no Python module defining class ModelNew",
            )
        else:
            candidate = Candidate(source=source, backend=settings.backend, attempt=number)
            files["candidate.py"] = source
            phase("building")
            if ahead is not None:
                built = ahead.built.result()  # its kernels, built beside the round's other children
                if built is not None:
                    run.append_event("built_ahead", attempt=number, seconds=round(built[1] - built[0], 3))
            verdict = self._verify(number, candidate, phase, staging, best)

        profiles: list[Profile] = []
        skipped: dict[str, str] = {}
        if verdict.ok and self.profilers and candidate is not None:
            extra = last.guidance.extra_metrics if last and last.guidance else ()
            profiles, skipped = self._profile(phase, candidate, staging, extra)
        for recording in staging.glob("recording-*"):  # each profile kept its own copy
            shutil.rmtree(recording, ignore_errors=True)
        phase("diagnosing")
        diagnosis = diagnose(verdict, profiles, best=best, roofline_bound=self.bound)

        phase("advising")
        documentation = conductor_documentation(
            [*profiles, *(best.profiles if best else ())],
            diagnosis,
            related=RELATED_ENTRIES if self.agents.provider.reads_messages else 0,
        )
        previous = last.guidance.unmeasured_citations if last and last.guidance else ()
        messages = conductor_messages(
            task=task,
            candidate=candidate,
            verdict=verdict,
            profiles=profiles,
            diagnosis=diagnosis,
            best=best,
            metric_docs=documentation.metric_docs,
            related_docs=documentation.related,
            unmeasured_citations=previous,
        )
        if documentation.note:
            files["knowledge_note"] = documentation.note
        reply = self.agents.ask(
            AgentRole.CONDUCTOR,
            messages,
            candidate=candidate,
            verdict=verdict,
            profiles=tuple(profiles),
            diagnosis=diagnosis,
            best=best,
            history=tuple(history),
        )
        by_role = {step.writer.value: usage}
        usage, cost = usage + reply.usage, _cost_sum(cost, reply.cost_usd)
        files.update(conductor_prompt=_transcript(messages), conductor_reply=reply.text)
        guidance, repair, note = _guidance(self.agents, messages, reply, diagnosis)
        by_role[AgentRole.CONDUCTOR.value] = reply.usage + (repair.usage if repair is not None else TokenUsage())
        if repair is not None:
            usage, cost = usage + repair.usage, _cost_sum(cost, repair.cost_usd)
        guidance = _check_citations(guidance, [*profiles, *(best.profiles if best else ())])
        if note:
            files["conductor_note"] = note
        attempt = Attempt(
            number=number,
            parent=parent.number if parent else None,
            instruction=instruction,
            writer=step.writer,
            candidate=candidate,
            verdict=verdict,
            profiles=profiles,
            skipped=skipped,
            diagnosis=diagnosis,
            guidance=guidance,
            usage=usage,
            usage_by_role=by_role,
            cost_usd=cost,
            phase_seconds=clock.stop(),
            elapsed_s=time.monotonic() - started,
        )
        run.complete_attempt(
            attempt, staging, {f"{name}.txt" if "." not in name else name: text for name, text in files.items()}
        )
        return attempt

    def _verify(
        self, number: int, candidate: Candidate, phase: Callable[[str], None], staging: Path, best: Attempt | None
    ) -> Verdict:
        """The Verifier's verdict; a noisy timing is measured once more, and the second verdict
        kept (still noisy if the machine stayed busy: it then replaces a best only by more than the
        busy machine could have inflated it, :func:`~pragma_core.verifier.timing_statistics.improves_on`). When
        the run profiles, the verifier's child also records the kernel calls the profilers replay,
        at the sizes each profiles, so profiling starts no child of its own to import torch
        again. Timing stops early for a candidate clearly slower than the best or than the
        reference (:func:`~pragma_core.verifier.timing_statistics.bar_to_beat`)."""
        from ..profiling.targets import remember_recording

        keep = {staging / f"recording-{index}": sized for index, sized in enumerate(self.recording_tasks)}
        settings = self.settings.verify
        to_beat = bar_to_beat(best.verdict if best else None)

        def on_phase(name: str) -> None:
            phase(name)
            if name == "finishing" and (number < self.settings.max_attempts or self.verified_after):
                self.warm.start()  # nothing is timed from here on: the next child imports torch meanwhile

        child = self.warm.take()
        verdict = verify(
            self.task, candidate, settings, on_phase=on_phase, keep_recordings=keep, warm=child, to_beat=to_beat
        )
        self.warm.give_back(child)
        if verdict.noisy:  # measured again with the child started meanwhile, or a new one
            assert verdict.conditions is not None
            self.run.append_event("remeasuring", attempt=number, noise=list(verdict.conditions.noise))
            phase("building")
            child = self.warm.take()
            again = verify(self.task, candidate, settings, on_phase=on_phase, warm=child, to_beat=to_beat)
            self.warm.give_back(child)
            first = "; ".join(verdict.conditions.noise)
            verdict = attrs.evolve(again, notes=(*again.notes, f"measured twice: the first timing was noisy ({first})"))
        for folder, sized in keep.items():
            remember_recording(sized, candidate, self.settings.verify.thread_count, folder)
        return verdict

    def _profile(
        self, phase: Callable[[str, str], None], candidate: Candidate, staging: Path, extra: tuple[str, ...]
    ) -> tuple[list[Profile], dict[str, str]]:
        """Each profiler's profile of the candidate, and why each of the others gave none; ``phase``
        hears each profiler start."""
        profiles, skipped = [], {}
        for name in self.profilers:
            phase("profiling", name)
            folder = staging / f"profile-{name}"
            try:
                profiles.append(self._profile_with(name, candidate, folder, extra))
            except PragmaError as error:
                skipped[name] = str(error)
            except Exception as error:  # a broken plugin must neither end the run nor pass unseen
                skipped[name] = _plugin_failure(name, error, folder)
        return profiles, skipped

    def _profile_with(self, name: str, candidate: Candidate, folder: Path, extra: tuple[str, ...]) -> Profile:
        """One profiler's profile, within the run's thread count and time limit."""
        from ..profiling import profile

        verify = self.settings.verify
        return profile(
            self.task,
            candidate,
            profiler=name,
            metrics=extra,
            out_dir=folder,
            threads=verify.thread_count,
            timeout_s=_profile_limit(verify),
        )


@attrs.define
class _PhaseClock:
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


def _recording_tasks(task: Task, profilers: Sequence[str]) -> tuple[Task, ...]:
    """The task at the sizes each profiler will profile a candidate at, once per distinct size:
    the verifier's child records the candidate's kernel calls at each."""
    from ..profiling import profiling_task
    from ..tasks.loading import task_program

    registry = get_registry()
    sized: dict[str, Task] = {}
    for name in profilers:
        shrunk = profiling_task(task, registry.profiler(name)).task
        sized.setdefault(task_program(shrunk), shrunk)
    return tuple(sized.values())


def _time_fields(attempt: Attempt) -> dict[str, Any]:
    """An attempt's times for ``events.jsonl``, in seconds rounded to the millisecond."""
    return {
        "elapsed_s": round(attempt.elapsed_s, 3),
        "timed_s": round(attempt.timed_s, 3),
        "phase_seconds": {name: round(seconds, 3) for name, seconds in attempt.phase_seconds.items()},
    }


def _profile_limit(verify: VerifySettings) -> float:
    """A profile's time limit in a run: the run's --timeout when one is set, else the default."""
    return verify.timeout_s if verify.timeout_s is not None else DEFAULT_PROFILE_TIMEOUT_S


def _plugin_failure(name: str, error: Exception, folder: Path) -> str:
    """Keep the traceback of a profiler plugin's own failure next to its output; say where."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "plugin-error.txt"
    atomic_write_text(path, "".join(traceback.format_exception(type(error), error, error.__traceback__)))
    return f"the {name} plugin failed ({type(error).__name__}: {error}); a bug in the plugin, traceback in {path}"


def _cost_sum(total: float | None, more: float | None) -> float | None:
    """Costs added up; None only while no call reported one."""
    return more if total is None else total + (more or 0.0)


def _guidance(
    agents: _Agents, messages: tuple[ChatMessage, ...], reply: Completion, diagnosis: Diagnosis
) -> tuple[Guidance, Completion | None, str]:
    """Parse the Conductor's reply; one repair request (returned, for its usage); else the
    diagnosis alone, noted."""
    try:
        return parse_guidance(reply.text), None, ""
    except GuidanceParseError as first:
        repair = repair_messages(messages, reply.text, str(first))
        second = agents.ask(AgentRole.CONDUCTOR, repair, diagnosis=diagnosis)
        try:
            return parse_guidance(second.text), second, f"repaired after: {first}"
        except GuidanceParseError as error:
            fallback = Guidance(
                analysis="the Conductor's reply could not be read; acting on the diagnosis alone: "
                + "; ".join(diagnosis.hints),
                actions=diagnosis.hints,
                extra_metrics=diagnosis.request_metrics,
            )
            note = f"unparseable twice: {first}; then: {error}\n--- repair reply ---\n{second.text}"
            return fallback, second, note


def _check_citations(guidance: Guidance, profiles: list[Profile]) -> Guidance:
    """The guidance with the metric names it cites that none of ``profiles`` measured."""
    cited = unmeasured_citations(
        [guidance.analysis, *guidance.actions],
        measured=[metric.name for profile in profiles for metric in profile.metrics],
        requested=guidance.extra_metrics,
    )
    return attrs.evolve(guidance, unmeasured_citations=cited)


def _baseline(task: Task, settings: OptimizeSettings, run: RunDirectory, unavailable: dict[str, str]) -> Baseline:
    """Before attempt 1: the reference's time here, the task's roofline floor (computed once per
    run), and the reference's profile from each profiler that can watch it (perf can, through
    Python; cachegrind needs a native kernel). ``unavailable`` profilers are not tried."""
    from ..machine.roofline import floor_ms, machine_peaks
    from ..profiling import profile
    from ..serialization import to_dict
    from ..verifier.reference import reference_timing

    clock = _PhaseClock()
    folder = run.root / "baseline"
    folder.mkdir(exist_ok=True)
    floor = None
    if task.analysis is not None:
        clock.start("roofline")  # measures the machine's peaks the first time a thread count needs them
        floor = floor_ms(task.analysis, machine_peaks(settings.verify.thread_count))
        atomic_write_text(folder / "roofline.json", json.dumps(to_dict(floor), indent=2) + "\n")
    profiles, skipped = [], dict(unavailable)
    for name in settings.profilers if settings.profile else ():
        if name in unavailable:
            continue
        clock.start(f"profiling:{name}")
        try:
            verify = settings.verify
            out_dir = folder / f"profile-{name}"
            profiles.append(
                profile(
                    task,
                    None,
                    profiler=name,
                    out_dir=out_dir,
                    threads=verify.thread_count,
                    timeout_s=_profile_limit(verify),
                )
            )
        except PragmaError as error:
            skipped[name] = str(error)
        except Exception as error:  # a broken plugin must neither end the run nor pass unseen
            skipped[name] = _plugin_failure(name, error, folder / f"profile-{name}")
    clock.start("timing")
    reference = reference_timing(task, settings.verify)
    seconds = clock.stop()
    baseline = Baseline(
        reference=reference,
        floor_ms=floor.floor_ms if floor else None,
        bound=floor.bound if floor else None,
        profiles=profiles,
        skipped=skipped,
    )
    run.write_baseline(baseline)
    run.append_event(
        "baseline",
        reference_ms=baseline.reference.median_ms if baseline.reference else None,
        floor_ms=baseline.floor_ms,
        bound=baseline.bound.value if baseline.bound else None,
        profiled=[p.profiler for p in profiles],
        skipped=skipped,
        seconds=round(sum(seconds.values()), 3),
        phase_seconds={name: round(value, 3) for name, value in seconds.items()},
    )
    return baseline


def _stop_reason(
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
        if attainment is not None and attainment >= settings.target_attainment:
            return f"roofline attainment {attainment:.0%} reached the target {settings.target_attainment:.0%}"
    last_improvement = best.number if best else 0
    if attempts[-1].number - last_improvement >= settings.patience:
        return f"{settings.patience} attempts without a better candidate"
    return ""


def _transcript(messages: tuple[ChatMessage, ...]) -> str:
    return "\n\n".join(f"### {message.role}\n{message.content}" for message in messages)
