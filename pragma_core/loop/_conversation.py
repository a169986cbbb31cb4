"""Asking the agents: the provider with what every request of a run carries (:class:`Agents`), a
prompt fitted to the model's context window (:meth:`Agents.fit`), kept as text in the attempt's
folder (:func:`transcript`), and the cost of several calls (:func:`cost_sum`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from ..agents.budget import FittedPrompt, PromptBudget, fit_prompt
from ..plugin_api.components import LLMProvider, PromptRoom
from ..records import AgentRole, ChatMessage, Completion, CompletionRequest, Task

__all__ = ["Agents", "transcript", "cost_sum"]


@attrs.frozen(kw_only=True)
class Agents:
    """The provider answering the Coder and the Conductor, with what every request carries."""

    provider: LLMProvider
    model: str | None
    task: Task
    backend: str

    def fit(self, build: Callable[[PromptBudget], tuple[ChatMessage, ...]], who: str) -> FittedPrompt:
        """The prompt ``build`` makes, cut part by part until it fits the model's context window
        (when the provider knows it); raises :class:`~pragma_core.errors.PromptTooLong` when
        it cannot fit. ``who`` names the prompt in that message ("the Coder's prompt")."""
        room = self.provider.room

        def measure(messages: tuple[ChatMessage, ...]) -> PromptRoom | None:
            return room(self.model, messages) if room is not None else None

        return fit_prompt(build, measure, who=who)

    def ask(self, role: AgentRole, messages: tuple[ChatMessage, ...], **context: Any) -> Completion:
        """One answer; ``context`` is the structured part of the request (verdict, profiles, ...)."""
        request = CompletionRequest(
            role=role, messages=messages, model=self.model, task=self.task, backend=self.backend, **context
        )
        return self.provider.complete(request)


def transcript(messages: tuple[ChatMessage, ...], note: str = "") -> str:
    """The messages of a prompt as one text, each under its role, after ``note`` (what was cut to
    fit the context window) when there is one."""
    text = "\n\n".join(f"### {message.role}\n{message.content}" for message in messages)
    return f"### pragma\n{note}\n\n{text}" if note else text


def cost_sum(total: float | None, more: float | None) -> float | None:
    """Costs added up; None only while no call reported one."""
    return more if total is None else total + (more or 0.0)
