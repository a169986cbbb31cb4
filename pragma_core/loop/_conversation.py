"""Asking the agents: the provider with what every request of a run carries (:class:`Agents`), a
prompt kept as text in the attempt's folder (:func:`transcript`), and the cost of several calls
(:func:`cost_sum`)."""

from __future__ import annotations

from typing import Any

import attrs

from ..plugin_api.components import LLMProvider
from ..records import AgentRole, ChatMessage, Completion, CompletionRequest, Task

__all__ = ["Agents", "transcript", "cost_sum"]


@attrs.frozen(kw_only=True)
class Agents:
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


def transcript(messages: tuple[ChatMessage, ...]) -> str:
    """The messages of a prompt as one text, each under its role."""
    return "\n\n".join(f"### {message.role}\n{message.content}" for message in messages)


def cost_sum(total: float | None, more: float | None) -> float | None:
    """Costs added up; None only while no call reported one."""
    return more if total is None else total + (more or 0.0)
