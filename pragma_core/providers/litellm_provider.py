"""Built-in LLM provider ``litellm``: any model litellm can call, retried with care, offline-safe.

Models are litellm's strings (``openai/gpt-4o-mini``, ``anthropic/...``, ``deepseek/...``,
``ollama/...``, ``hosted_vllm/...``), taken from the request (the loop resolves ``PRAGMA_MODEL``). Each call
is ``litellm.completion`` with an explicit timeout and litellm's own retries off; the provider
retries by itself, with exponential backoff and jitter, on transient errors only (rate limits,
timeouts, lost connections, 5xx). Bad credentials, bad requests and a refused connection (nothing
listens at the server's address) fail at once, saying what to set. A prompt too long for the model
is cut in the middle of its longest user message and sent once more.

:func:`check_model` is what a run calls before it spends minutes on the reference: it fails in
seconds when the model's provider is unknown, its key variable is not set, or its server is down.

litellm is imported on the first call, after it is told to use its bundled price list, so that
importing pragma stays fast and never touches the network. API keys stay in the environment:
every message the provider raises or logs is scrubbed of anything that looks like a key.

The registered provider uses :class:`LiteLLMSettings` defaults. Other settings, or scripted
replies in tests (litellm's ``mock_response`` in :attr:`LiteLLMSettings.extra`, or a stand-in
``completion``), take an instance of their own::

    provider = LiteLLMProvider(LiteLLMSettings(timeout_s=120, extra={"temperature": 0.2}))
    completion = provider.complete(request)

The concerns live beside this module, which is the plugin: the provider and its settings, calls and
retries (:mod:`.litellm_calls`, :mod:`.call_failures`); the pre-flight check (:mod:`.preflight`,
:mod:`.provider_setup`); secret redaction (:mod:`.redaction`); fitting the context window
(:mod:`.context_window`); and litellm's import (:mod:`.litellm_import`). The names below are this
provider's documented interface.
"""

from __future__ import annotations

from ..plugin_api.components import LLMProvider
from ..plugin_api.hookspecs import hookimpl
from ._redaction import redact
from .litellm_calls import DEFAULT_TIMEOUT_S, LiteLLMProvider, LiteLLMSettings
from .litellm_import import preload, set_offline_switches
from .preflight import CONNECT_TIMEOUT_S, check_model

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "CONNECT_TIMEOUT_S",
    "LiteLLMSettings",
    "LiteLLMProvider",
    "check_model",
    "complete",
    "preload",
    "redact",
    "set_offline_switches",
]


# -- the plugin ----------------------------------------------------------------------------------

_default = LiteLLMProvider()
complete = _default.complete
"""Answer a request with the default settings (the registered provider's ``complete``)."""


@hookimpl
def pragma_register_llm_providers(register):
    register(
        LLMProvider(
            name="litellm",
            description="any model litellm can call (openai/..., anthropic/..., deepseek/..., ollama/..., "
            "hosted_vllm/...), the run's model",
            complete=complete,
            room=_default.room,
        )
    )
