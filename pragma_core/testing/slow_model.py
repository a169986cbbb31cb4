"""A stand-in language model for measuring a bench's throughput and its token and cost accounting.

Provider ``slow-offline`` answers what pragma's offline agents answer, after waiting
``$PRAGMA_TEST_LATENCY_S`` seconds (default 0), as a hosted model keeps a task waiting. The reply
goes through the real built-in litellm provider with litellm's ``mock_response``: tokens are
counted and the cost priced by litellm as for the model named in the request (such as
``openai/gpt-4o-mini``), and nothing touches the network.

Not registered by default: a test or benchmark installs it with an entry point that names this
module (``slow-offline = pragma_core.testing.slow_model`` in the ``pragma`` group).
"""

from __future__ import annotations

import os
import time
from typing import Any

from ..plugin_api.components import LLMProvider
from ..plugin_api.hookspecs import hookimpl
from ..records import Completion, CompletionRequest, Task

__all__ = ["LATENCY_VARIABLE", "complete", "pragma_register_llm_providers"]

LATENCY_VARIABLE = "PRAGMA_TEST_LATENCY_S"


def _offline() -> LLMProvider:
    from ..plugin_api.registry import get_registry

    return get_registry().llm_provider("offline")


def complete(request: CompletionRequest) -> Completion:
    """The offline agents' answer, delayed and passed through litellm as a model's reply."""
    from ..providers.litellm_calls import LiteLLMProvider, LiteLLMSettings

    text = _offline().complete(request).text
    time.sleep(float(os.environ.get(LATENCY_VARIABLE, "0") or 0))

    def completion(**arguments: Any) -> Any:
        import litellm  # after the provider set litellm's offline switches

        response = litellm.completion(mock_response=text, **arguments)
        usage = response.usage  # litellm's mock reports a constant: count the prompt, as an API does
        usage.prompt_tokens = litellm.token_counter(model=arguments["model"], messages=arguments["messages"])
        usage.total_tokens = usage.prompt_tokens + usage.completion_tokens
        return response

    return LiteLLMProvider(LiteLLMSettings(max_retries=0), completion=completion).complete(request)


def _prepare(task: Task) -> None:
    prepare = _offline().prepare
    if prepare is not None:
        prepare(task)


@hookimpl
def pragma_register_llm_providers(register: Any) -> None:
    register(
        LLMProvider(
            name="slow-offline",
            description=f"the offline agents' answers after ${LATENCY_VARIABLE} seconds, through litellm",
            complete=complete,
            prepare=_prepare,
        )
    )
