"""The Conductor's advice on an attempt: the documentation it reads, its reply read into
:class:`~pragma_core.records.Guidance` (after one repair request, else the diagnosis alone), and
the metric names it cites that no profile measured (:func:`advise`)."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from ..agents.budget import FULL_BUDGET
from ..agents.clipping import clip
from ..agents.prompts import conductor_messages
from ..agents.replies import GuidanceParseError, parse_guidance, repair_messages
from ..errors import PromptTooLong
from ..knowledge import conductor_documentation, unmeasured_citations
from ..knowledge.conductor_docs import RELATED_ENTRIES
from ..records import (
    AgentRole,
    Attempt,
    Candidate,
    ChatMessage,
    Completion,
    Diagnosis,
    Guidance,
    Profile,
    Task,
    Verdict,
)
from ._conversation import Agents, transcript

__all__ = ["Advice", "advise"]


@attrs.frozen(kw_only=True)
class Advice:
    """The Conductor's guidance, its reply and the repair request's (None: the reply parsed), and
    the files the attempt keeps of them (the prompt, the reply, notes)."""

    guidance: Guidance
    reply: Completion
    repair: Completion | None
    files: dict[str, str]


def advise(
    agents: Agents,
    task: Task,
    *,
    candidate: Candidate | None,
    verdict: Verdict,
    profiles: list[Profile],
    diagnosis: Diagnosis,
    best: Attempt | None,
    last: Attempt | None,
    history: Sequence[Attempt],
) -> Advice:
    """Ask the Conductor about the attempt (``last`` is the one it builds on); its guidance."""
    measured = [*profiles, *(best.profiles if best else ())]
    documentation = conductor_documentation(
        measured,
        diagnosis,
        related=RELATED_ENTRIES if agents.provider.reads_messages else 0,
    )
    previous = last.guidance.unmeasured_citations if last and last.guidance else ()
    try:
        prompt = agents.fit(
            lambda budget: conductor_messages(
                task=task,
                candidate=candidate,
                verdict=verdict,
                profiles=profiles,
                diagnosis=diagnosis,
                best=best,
                metric_docs=documentation.metric_docs,
                related_docs=documentation.related,
                unmeasured_citations=previous,
                budget=budget,
            ),
            who="the Conductor's prompt",
        )
    except PromptTooLong as too_long:  # the attempt stands; the rules' diagnosis guides the next
        fallback = _diagnosis_alone(diagnosis, "the Conductor's prompt does not fit the model's context window")
        return Advice(guidance=fallback, reply=_NO_REPLY, repair=None, files={"conductor_note": str(too_long)})
    messages = prompt.messages
    files: dict[str, str] = {}
    if documentation.note:
        files["knowledge_note"] = documentation.note
    reply = agents.ask(
        AgentRole.CONDUCTOR,
        messages,
        candidate=candidate,
        verdict=verdict,
        profiles=tuple(profiles),
        diagnosis=diagnosis,
        best=best,
        history=tuple(history),
    )
    files.update(conductor_prompt=transcript(messages, prompt.note()), conductor_reply=reply.text)
    guidance, repair, note = _read_guidance(agents, messages, reply, diagnosis)
    guidance = _check_citations(guidance, measured)
    if note:
        files["conductor_note"] = note
    return Advice(guidance=guidance, reply=reply, repair=repair, files=files)


def _read_guidance(
    agents: Agents, messages: tuple[ChatMessage, ...], reply: Completion, diagnosis: Diagnosis
) -> tuple[Guidance, Completion | None, str]:
    """Parse the Conductor's reply; one repair request (returned, for its usage); else the
    diagnosis alone, noted."""
    try:
        return parse_guidance(reply.text), None, ""
    except GuidanceParseError as unread:
        first = f"{unread} (the reply was cut at the model's token limit)" if reply.cut_at_token_limit else str(unread)
        repair = agents.fit(
            lambda budget: repair_messages(
                # given way: the system message, the reply and the request, without the first question
                messages if budget is FULL_BUDGET else messages[:1],
                clip(reply.text, budget.code_chars // 2),
                first,
            ),
            who="the Conductor's repair request",
        )
        second = agents.ask(AgentRole.CONDUCTOR, repair.messages, diagnosis=diagnosis)
        try:
            return parse_guidance(second.text), second, f"repaired after: {first}"
        except GuidanceParseError as error:
            fallback = _diagnosis_alone(diagnosis, "the Conductor's reply could not be read")
            note = f"unparseable twice: {first}; then: {error}\n--- repair reply ---\n{second.text}"
            return fallback, second, note


def _diagnosis_alone(diagnosis: Diagnosis, why: str) -> Guidance:
    """Guidance from the rules' diagnosis alone, saying why the Conductor's was not had."""
    return Guidance(
        analysis=f"{why}; acting on the diagnosis alone: " + "; ".join(diagnosis.hints),
        actions=diagnosis.hints,
        extra_metrics=diagnosis.request_metrics,
    )


_NO_REPLY = Completion(text="", model="none")
"""The Conductor's reply where it was not asked (its prompt did not fit): no tokens, no cost."""


def _check_citations(guidance: Guidance, profiles: list[Profile]) -> Guidance:
    """The guidance with the metric names it cites that none of ``profiles`` measured."""
    cited = unmeasured_citations(
        [guidance.analysis, *guidance.actions],
        measured=[metric.name for profile in profiles for metric in profile.metrics],
        requested=guidance.extra_metrics,
    )
    return attrs.evolve(guidance, unmeasured_citations=cited)
