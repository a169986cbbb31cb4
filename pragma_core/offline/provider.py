"""The ``offline`` LLM provider (built in): the recipe Coder, the rule-based Conductor, the
offline planner and the offline debugger answer the loop's requests with no model and no network. It is the default when no model is configured."""

from __future__ import annotations

import time

from ..errors import PragmaError
from ..plugin_api.components import LLMProvider
from ..plugin_api.hookspecs import hookimpl
from ..records import AgentRole, Completion, CompletionRequest, Task

__all__ = ["complete", "prepare", "OFFLINE_MODEL"]

OFFLINE_MODEL = "pragma-offline"
"""The model name offline completions carry."""


def complete(request: CompletionRequest) -> Completion:
    from ._debugger import write_fix
    from ._planner import plan
    from .coder import write_module_reply
    from .conductor import advise

    if request.role is AgentRole.SUMMARIZER:
        raise PragmaError(
            "the offline provider answers the loop's agents only; summarize "
            "documentation with a language model, or build with no model at all"
        )
    started = time.monotonic()
    answer = {
        AgentRole.CODER: write_module_reply,
        AgentRole.CONDUCTOR: advise,
        AgentRole.PLANNER: plan,
        AgentRole.DEBUGGER: write_fix,
    }
    text = answer[request.role](request)
    return Completion(text=text, model=OFFLINE_MODEL, cost_usd=0.0, latency_s=time.monotonic() - started)


def prepare(task: Task) -> None:
    """Raise :class:`~pragma_core.offline.graph.NotRecognized` unless a recipe knows the task."""
    from .coder import recognized

    recognized(task)


@hookimpl
def pragma_register_llm_providers(register):
    register(
        LLMProvider(
            name="offline",
            description="no model: a recipe Coder writes C++ for the patterns it recognizes in the traced reference, "
            "a rule-based Conductor picks each next move from the verdict and the profiles",
            complete=complete,
            prepare=prepare,
            reads_messages=False,
        )
    )
