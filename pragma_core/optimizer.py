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

import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path

import attrs
from attrs import validators as v

from . import __version__
from .agents.extraction import extract_code
from .agents.prompts import coder_messages, conductor_messages
from .agents.replies import GuidanceParseError, parse_guidance, repair_messages
from .components import LLMProvider
from .diagnosis import diagnose
from .errors import PragmaError, ProfilerUnavailable
from .files import atomic_write_text
from .knowledge import conductor_documentation, unmeasured_citations
from .knowledge.conductor_docs import RELATED_ENTRIES
from .plugins import get_registry
from .providers.litellm_provider import check_model
from .records import (
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
    Profile,
    RunResult,
    Task,
    TokenUsage,
    Verdict,
    VerdictStatus,
)
from .run_directory import RunDirectory
from .statistics import improves_on
from .verifier import VerifySettings, verify

__all__ = ["OptimizeSettings", "optimize", "settings_of_run"]


@attrs.frozen(kw_only=True)
class OptimizeSettings:
    """How a run goes. ``profile=False`` is the paper's N-PRAGMA ablation: timing only.

    ``provider`` None means ``litellm`` when a model is chosen (``model`` or ``PRAGMA_MODEL``) and
    the built-in ``offline`` agents otherwise (:func:`provider_name`)."""

    model: str | None = None
    provider: str | None = None
    backend: str = "cpu-cpp"
    profilers: tuple[str, ...] = attrs.field(default=("valgrind", "perf"), converter=tuple)
    profile: bool = True
    max_attempts: int = attrs.field(default=15, validator=v.ge(1))
    patience: int = attrs.field(default=6, validator=v.ge(1))
    target_attainment: float = attrs.field(default=0.9, validator=v.gt(0))
    runs_dir: Path = attrs.field(default=Path("runs"), converter=Path)
    verify: VerifySettings = attrs.field(factory=VerifySettings)


def provider_name(settings: OptimizeSettings) -> str:
    """The provider a run uses: the one named, else litellm with a model, else offline."""
    if settings.provider:
        return settings.provider
    return "litellm" if settings.model or os.environ.get("PRAGMA_MODEL") else "offline"


def settings_of_run(run_dir: Path, **changes: object) -> OptimizeSettings:
    """The settings a run was started with (from its ``run.json``), with ``changes`` applied:
    what ``--resume`` continues with."""
    stored = dict(RunDirectory.open(run_dir).info()["settings"])
    verify_settings = VerifySettings(**stored.pop("verify"))
    settings = OptimizeSettings(**stored, verify=verify_settings, runs_dir=Path(run_dir).parent)
    return attrs.evolve(settings, **changes)


AttemptListener = Callable[[Attempt, "Attempt | None"], None]


def optimize(
    task: Task | None,
    settings: OptimizeSettings | None = None,
    *,
    resume: Path | None = None,
    on_attempt: AttemptListener | None = None,
) -> RunResult:
    """Run the loop on ``task``; returns the run with every attempt and the best.

    With ``resume`` (a run directory) the task comes from the run and, when ``settings`` is None,
    so do the settings (:func:`settings_of_run`).
    """
    if settings is None:
        settings = settings_of_run(resume) if resume is not None else OptimizeSettings()
    registry = get_registry()
    settings = attrs.evolve(settings, provider=provider_name(settings))
    provider = registry.llm_provider(settings.provider)
    backend = registry.backend(settings.backend)
    if resume is None and task is None:
        raise PragmaError("give a task to optimize, or resume= a run directory")
    if settings.provider == "litellm" and not (settings.model or os.environ.get("PRAGMA_MODEL")):
        raise PragmaError(
            "no language model chosen: pass --model (e.g. openai/gpt-4o-mini or ollama/qwen2.5-coder) "
            "or set PRAGMA_MODEL"
        )
    if settings.provider == "litellm":
        check_model(settings.model)  # a missing key or a dead server fails now, not after the baseline
    if resume is not None:
        run = RunDirectory.open(resume)
        task = run.task()
    if provider.prepare is not None:
        provider.prepare(task)
    if resume is not None:
        attempts = run.completed_attempts()
        run.append_event("resumed", after_attempt=attempts[-1].number if attempts else 0)
        baseline = run.baseline()
    else:
        run = RunDirectory.create(settings.runs_dir, task, _run_info(settings))
        attempts = []
        run.append_event("started", task=task.key, model=settings.model)
        baseline = _baseline(task, settings, run)
    best = _best_of(attempts)
    stop_reason = "max attempts"
    try:
        for number in range(len(attempts) + 1, settings.max_attempts + 1):
            attempt = _one_attempt(number, task, settings, provider, backend.guide, run, attempts, best)
            attempts.append(attempt)
            if attempt.guidance is not None and improves_on(attempt.verdict, best):
                best = attempt
                run.write_best(best)
            run.append_event(
                "attempt_done",
                attempt=number,
                status=attempt.verdict.status.value if attempt.verdict else None,
                best=best.number if best else None,
            )
            if on_attempt is not None:
                on_attempt(attempt, best)
            reason = _stop_reason(attempts, best, settings)
            if reason:
                stop_reason = reason
                break
    except KeyboardInterrupt:
        stop_reason = "interrupted"
        run.append_event("interrupted", completed=len(attempts))
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


def _one_attempt(
    number: int,
    task: Task,
    settings: OptimizeSettings,
    provider: LLMProvider,
    guide: str,
    run: RunDirectory,
    history: list[Attempt],
    best: Attempt | None,
) -> Attempt:
    started = time.monotonic()
    staging = run.staging_folder(number)
    files: dict[str, str] = {}
    last = history[-1] if history else None
    run.append_event("attempt_started", attempt=number)

    messages = coder_messages(
        task=task, guide=guide, guidance=last.guidance if last else None, best=best, last=last, history=history
    )
    reply = _ask(
        provider,
        AgentRole.CODER,
        messages,
        settings,
        task,
        last.verdict if last else None,
        (),
        None,
        best,
        history=history,
    )
    files.update(coder_prompt=_transcript(messages), coder_reply=reply.text)
    usage = reply.usage
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
        verdict = verify(task, candidate, settings.verify, job_dir=None)

    profiles: list[Profile] = []
    if verdict.ok and settings.profile and candidate is not None:
        extra = last.guidance.extra_metrics if last and last.guidance else ()
        profiles = _profile(task, candidate, settings, staging, extra)
    diagnosis = diagnose(verdict, profiles, best=best, roofline_bound=_roofline_bound(task, settings))

    documentation = conductor_documentation(
        [*profiles, *(best.profiles if best else ())],
        diagnosis,
        related=RELATED_ENTRIES if provider.reads_messages else 0,
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
    reply = _ask(
        provider,
        AgentRole.CONDUCTOR,
        messages,
        settings,
        task,
        verdict,
        profiles,
        diagnosis,
        best,
        candidate=candidate,
        history=history,
    )
    usage = usage + reply.usage
    files.update(conductor_prompt=_transcript(messages), conductor_reply=reply.text)
    guidance, repair_usage, note = _guidance(provider, messages, reply, settings, task, diagnosis)
    usage = usage + repair_usage
    guidance = _check_citations(guidance, [*profiles, *(best.profiles if best else ())])
    if note:
        files["conductor_note"] = note
    attempt = Attempt(
        number=number,
        candidate=candidate,
        verdict=verdict,
        profiles=profiles,
        diagnosis=diagnosis,
        guidance=guidance,
        usage=usage,
        elapsed_s=time.monotonic() - started,
    )
    run.complete_attempt(
        attempt, staging, {f"{name}.txt" if "." not in name else name: text for name, text in files.items()}
    )
    return attempt


def _ask(
    provider: LLMProvider,
    role: AgentRole,
    messages: tuple[ChatMessage, ...],
    settings: OptimizeSettings,
    task: Task,
    verdict: Verdict | None,
    profiles: list[Profile] | tuple[()],
    diagnosis: Diagnosis | None,
    best: Attempt | None,
    *,
    candidate: Candidate | None = None,
    history: list[Attempt] | None = None,
) -> Completion:
    request = CompletionRequest(
        role=role,
        messages=messages,
        model=settings.model,
        task=task,
        candidate=candidate,
        verdict=verdict,
        profiles=profiles,
        diagnosis=diagnosis,
        best=best,
        history=tuple(history or ()),
    )
    return provider.complete(request)


def _guidance(
    provider: LLMProvider,
    messages: tuple[ChatMessage, ...],
    reply: Completion,
    settings: OptimizeSettings,
    task: Task,
    diagnosis: Diagnosis,
) -> tuple[Guidance, TokenUsage, str]:
    """Parse the Conductor's reply; one repair request; else the diagnosis alone, noted."""
    try:
        return parse_guidance(reply.text), TokenUsage(), ""
    except GuidanceParseError as first:
        repair = repair_messages(messages, reply.text, str(first))
        second = _ask(provider, AgentRole.CONDUCTOR, repair, settings, task, None, (), diagnosis, None)
        try:
            return parse_guidance(second.text), second.usage, f"repaired after: {first}"
        except GuidanceParseError as error:
            fallback = Guidance(
                analysis="the Conductor's reply could not be read; acting on the diagnosis alone: "
                + "; ".join(diagnosis.hints),
                actions=diagnosis.hints,
                extra_metrics=diagnosis.request_metrics,
            )
            return (
                fallback,
                second.usage,
                f"unparseable twice: {first}; then: {error}\n--- repair reply ---\n{second.text}",
            )


def _check_citations(guidance: Guidance, profiles: list[Profile]) -> Guidance:
    """The guidance with the metric names it cites that none of ``profiles`` measured."""
    cited = unmeasured_citations(
        [guidance.analysis, *guidance.actions],
        measured=[metric.name for profile in profiles for metric in profile.metrics],
        requested=guidance.extra_metrics,
    )
    return attrs.evolve(guidance, unmeasured_citations=cited)


def _profile(
    task: Task, candidate: Candidate, settings: OptimizeSettings, staging: Path, extra: tuple[str, ...]
) -> list[Profile]:
    from .profiling import profile

    profiles = []
    for name in settings.profilers:
        try:
            profiles.append(
                profile(
                    task,
                    candidate,
                    profiler=name,
                    metrics=extra,
                    out_dir=staging / f"profile-{name}",
                    threads=settings.verify.threads,
                )
            )
        except (ProfilerUnavailable, PragmaError):
            continue
    return profiles


def _baseline(task: Task, settings: OptimizeSettings, run: RunDirectory) -> Baseline:
    """Before attempt 1: the reference's time here, the task's roofline floor, and the reference's
    profile from each profiler that can watch it (perf can, through Python; cachegrind needs a
    native kernel)."""
    from .profiling import profile
    from .roofline import floor_ms, machine_peaks
    from .serialization import to_dict
    from .verifier.reference import reference_timing

    folder = run.root / "baseline"
    folder.mkdir(exist_ok=True)
    floor = None
    if task.analysis is not None:
        floor = floor_ms(task.analysis, machine_peaks(settings.verify.threads))
        atomic_write_text(folder / "roofline.json", json.dumps(to_dict(floor), indent=2) + "\n")
    profiles, skipped = [], {}
    for name in settings.profilers if settings.profile else ():
        try:
            profiles.append(
                profile(task, None, profiler=name, out_dir=folder / f"profile-{name}", threads=settings.verify.threads)
            )
        except PragmaError as error:
            skipped[name] = str(error)
    baseline = Baseline(
        reference=reference_timing(task, settings.verify),
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
    )
    return baseline


def _roofline_bound(task: Task, settings: OptimizeSettings) -> BoundClass | None:
    if task.analysis is None:
        return None
    from .roofline import floor_ms, machine_peaks

    return floor_ms(task.analysis, machine_peaks(settings.verify.threads)).bound


def _best_of(attempts: list[Attempt]) -> Attempt | None:
    best = None
    for attempt in attempts:
        if improves_on(attempt.verdict, best):
            best = attempt
    return best


def _stop_reason(attempts: list[Attempt], best: Attempt | None, settings: OptimizeSettings) -> str:
    guidance = attempts[-1].guidance
    if guidance is not None and guidance.done:
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


def _run_info(settings: OptimizeSettings) -> dict:
    from .hardware import describe_cpu
    from .serialization import to_dict

    return {
        "settings": {
            "model": settings.model,
            "provider": settings.provider,
            "backend": settings.backend,
            "profilers": list(settings.profilers),
            "profile": settings.profile,
            "max_attempts": settings.max_attempts,
            "patience": settings.patience,
            "target_attainment": settings.target_attainment,
            "verify": attrs.asdict(settings.verify),
        },
        "versions": {"pragma-core": __version__, "python": platform.python_version()},
        "hardware": to_dict(describe_cpu()),
    }
