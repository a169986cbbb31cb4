"""One attempt of the loop (:class:`AttemptRunner`): the writer's candidate, the Verifier's verdict
on it, its profiles, the rules' diagnosis and the Conductor's advice, written to the run folder.

A noisy timing is measured once more; the sandbox child of the next verification is started as
soon as nothing is timed any more (:class:`~pragma_core.loop._next_child.NextChild`), and the
verifier's child records the kernel calls the profilers replay, into folders the run's
:class:`~pragma_core.profiling.session.ProfilingSession` names and keeps.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import attrs

from ..agents.extraction import extract_code
from ..profiling.recordings import Recordings
from ..profiling.session import ProfilingSession
from ..records import (
    AgentRole,
    Attempt,
    BoundClass,
    Candidate,
    Completion,
    Profile,
    Task,
    TokenUsage,
    Verdict,
    VerdictStatus,
)
from ..verifier import verify
from ..verifier.head_to_head import incumbent_of, parent_code_of
from ..verifier.timing_statistics import bar_to_beat
from ._advice import Advice, advise
from ._conversation import Agents, cost_sum, transcript
from ._next_child import NextChild
from ._writing import Writer, WrittenAhead
from .diagnosis import diagnose
from .profiles import profile_each
from .progress import PhaseClock, PhaseReporter
from .run_directory import RunDirectory
from .search import Step
from .settings import OptimizeSettings

__all__ = ["AttemptRunner"]


@attrs.frozen(kw_only=True)
class AttemptRunner:
    """What stays the same from one attempt of a run to the next."""

    task: Task
    settings: OptimizeSettings
    agents: Agents
    writer: Writer
    run: RunDirectory
    profilers: tuple[str, ...]
    bound: BoundClass | None
    progress: PhaseReporter
    warm: NextChild
    profiling: ProfilingSession | None = None
    """The run's profiling (None when it does not profile): each profiler's size, the recordings."""
    verified_after: bool = False  # the caller verifies again after the last attempt, in the child left over

    def attempt(
        self, number: int, history: list[Attempt], best: Attempt | None, step: Step, ahead: WrittenAhead | None = None
    ) -> Attempt:
        """Write (or take the reply written ``ahead``, and wait for its build), verify, profile,
        diagnose and advise once; the attempt is on disk when this returns."""
        parent = last = step.parent
        started = time.monotonic()
        staging = self.run.staging_folder(number)
        self.run.append_event("attempt_started", attempt=number, parent=parent.number if parent else None)
        clock = PhaseClock()

        def phase(name: str, detail: str = "") -> None:
            clock.start(f"{name}:{detail}" if detail else name)
            self.progress(number, name, detail)

        phase("writing")
        prompt, reply = ahead.written.result() if ahead is not None else self.writer.write(step, history, best)
        files = {
            f"{step.writer.value}_prompt": transcript(prompt.messages, prompt.note()),
            f"{step.writer.value}_reply": reply.text,
        }
        candidate, verdict = self._candidate_and_verdict(number, reply, ahead, phase, staging, best, parent)
        if candidate is not None:
            files["candidate.py"] = candidate.source
        profiles: list[Profile] = []
        skipped: dict[str, str] = {}
        if verdict.ok and self.profilers and candidate is not None:
            profiles, skipped = profile_each(
                self.task,
                candidate,
                self.profilers,
                folder=staging,
                verify=self.settings.verify,
                metrics=last.guidance.extra_metrics if last and last.guidance else (),
                on_profiler=lambda name: phase("profiling", name),
                session=self.profiling,
            )
        Recordings.clear_staging(staging)
        phase("diagnosing")
        diagnosis = diagnose(verdict, profiles, best=best, roofline_bound=self.bound)

        phase("advising")
        advice = advise(
            self.agents, self.task, candidate=candidate, verdict=verdict, profiles=profiles,
            diagnosis=diagnosis, best=best, last=last, history=history,
        )  # fmt: skip
        files.update(advice.files)
        usage, by_role, cost = _usage_and_cost(step.writer, reply, advice)
        attempt = Attempt(
            number=number,
            parent=parent.number if parent else None,
            instruction=step.instruction,
            writer=step.writer,
            candidate=candidate,
            verdict=verdict,
            profiles=profiles,
            skipped=skipped,
            diagnosis=diagnosis,
            guidance=advice.guidance,
            usage=usage,
            usage_by_role=by_role,
            cost_usd=cost,
            phase_seconds=clock.stop(),
            elapsed_s=time.monotonic() - started,
        )
        self.run.complete_attempt(
            attempt, staging, {f"{name}.txt" if "." not in name else name: text for name, text in files.items()}
        )
        return attempt

    def _candidate_and_verdict(
        self,
        number: int,
        reply: Completion,
        ahead: WrittenAhead | None,
        phase: Callable[[str], None],
        staging: Path,
        best: Attempt | None,
        parent: Attempt | None,
    ) -> tuple[Candidate | None, Verdict]:
        """The candidate the writer's reply holds, and the Verifier's verdict on it (a compile
        error when the reply holds none). A candidate written ahead was built meanwhile: its build
        is waited for first."""
        source = extract_code(reply.text)
        cut = (
            f" (the reply was cut at the model's token limit after {reply.usage.completion} tokens: "
            "its module may be unfinished)"
            if reply.cut_at_token_limit
            else ""
        )
        if source is None:
            verdict = Verdict(
                status=VerdictStatus.COMPILE_ERROR,
                message=f"the Coder's reply held no Python module defining class ModelNew{cut}",
            )
            return None, verdict
        candidate = Candidate(source=source, backend=self.settings.backend, attempt=number)
        phase("building")
        if ahead is not None:
            built = ahead.built.result()  # its kernels, built beside the round's other children
            if built is not None:
                self.run.append_event("built_ahead", attempt=number, seconds=round(built[1] - built[0], 3))
        verdict = self._verify(number, candidate, phase, staging, best, parent)
        if cut and not verdict.ok:
            verdict = attrs.evolve(verdict, notes=(*verdict.notes, cut.strip(" ()")))
        return candidate, verdict

    def _verify(
        self,
        number: int,
        candidate: Candidate,
        phase: Callable[[str], None],
        staging: Path,
        best: Attempt | None,
        parent: Attempt | None,
    ) -> Verdict:
        """The Verifier's verdict; a noisy timing is measured once more, and the second verdict
        kept (still noisy if the machine stayed busy: it then replaces a best only by more than the
        busy machine could have inflated it, :func:`~pragma_core.verifier.timing_statistics.improves_on`). When
        the run profiles, the verifier's child also records the kernel calls the profilers replay,
        at the sizes each profiles, so profiling starts no child of its own to import torch
        again. Timing stops early for a candidate clearly slower than the best or than the
        reference (:func:`~pragma_core.verifier.timing_statistics.bar_to_beat`). With a correct, timed
        best, the candidate is timed side by side with it in the same child (the head-to-head a new
        best must win), and timing stops early once it is clearly slower than the best or than
        the reference. A candidate whose built machine code is its parent's is ``unchanged``: not
        timed."""
        profiling = self.profiling
        keep = profiling.recordings.staging(staging, profiling.recording_tasks()) if profiling else {}
        settings = self.settings.verify
        incumbent = incumbent_of(best)
        to_beat = 1.0 if incumbent is not None else bar_to_beat(best.verdict if best else None)

        def on_phase(name: str) -> None:
            phase(name)
            if name == "finishing" and (number < self.settings.max_attempts or self.verified_after):
                self.warm.start()  # nothing is timed from here on: the next child imports torch meanwhile

        child = self.warm.take()
        verdict = verify(
            self.task,
            candidate,
            settings,
            on_phase=on_phase,
            keep_recordings=keep,
            warm=child,
            to_beat=to_beat,
            incumbent=incumbent,
            parent_code=parent_code_of(parent),
        )
        self.warm.give_back(child)
        if verdict.noisy:  # measured again with the child started meanwhile, or a new one
            assert verdict.conditions is not None
            self.run.append_event("remeasuring", attempt=number, noise=list(verdict.conditions.noise))
            phase("building")
            child = self.warm.take()
            again = verify(
                self.task, candidate, settings, on_phase=on_phase, warm=child, to_beat=to_beat, incumbent=incumbent
            )
            self.warm.give_back(child)
            first = "; ".join(verdict.conditions.noise)
            verdict = attrs.evolve(again, notes=(*again.notes, f"measured twice: the first timing was noisy ({first})"))
        if profiling is not None:
            profiling.recordings.keep_staged(keep, candidate, settings.thread_count)
        return verdict


def _usage_and_cost(
    writer: AgentRole, reply: Completion, advice: Advice
) -> tuple[TokenUsage, dict[str, TokenUsage], float | None]:
    """An attempt's tokens (in all, and by role) and cost: the writer's call, then the
    Conductor's and its repair request's."""
    by_role = {writer.value: reply.usage}
    usage, cost = reply.usage + advice.reply.usage, cost_sum(reply.cost_usd, advice.reply.cost_usd)
    by_role[AgentRole.CONDUCTOR.value] = advice.reply.usage + (
        advice.repair.usage if advice.repair is not None else TokenUsage()
    )
    if advice.repair is not None:
        usage, cost = usage + advice.repair.usage, cost_sum(cost, advice.repair.cost_usd)
    return usage, by_role, cost
