"""What a model needs from the user, and the advice that says what to set.

A model is named by a litellm string (``provider/model``). A hosted provider needs its key variable
(``OPENAI_API_KEY``); a provider that runs on a server of the user's own (``ollama/``,
``hosted_vllm/``) needs the server's address instead. The pre-flight check and the messages of a
failed call both name what to set from here.
"""

from __future__ import annotations

import os
from typing import Any

import attrs

from ..errors import PragmaError

__all__ = ["SERVERS", "chosen_model", "provider_of", "server_address", "setup_advice", "start_server_advice"]


@attrs.frozen
class _Server:
    """A provider that runs on a server of the user's own: it needs an address, not a key."""

    variable: str  # where the user sets the address
    example: str  # an address to show in messages
    default: str | None  # the address litellm uses when the variable is not set (litellm/main.py)


SERVERS = {
    "ollama": _Server("OLLAMA_API_BASE", "http://localhost:11434", "http://localhost:11434"),
    "ollama_chat": _Server("OLLAMA_API_BASE", "http://localhost:11434", "http://localhost:11434"),
    "hosted_vllm": _Server("HOSTED_VLLM_API_BASE", "http://localhost:8000/v1", None),
}
_KEY_VARIABLES = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
}


def chosen_model(model: str | None) -> str:
    """The model string without surrounding blanks; raises :class:`PragmaError` when none is named."""
    chosen = (model or "").strip()
    if not chosen:
        raise PragmaError("no language model named: give a litellm model string, e.g. openai/gpt-4o-mini")
    return chosen


_BASE_VARIABLES = {"openai": ("OPENAI_API_BASE", "OPENAI_BASE_URL")}
"""Where litellm reads another address for a hosted provider's API: an OpenAI-compatible server
of the user's own (llama.cpp's, vLLM, LM Studio) behind the ``openai/`` prefix."""


def server_address(provider: str, api_base: str | None) -> str | None:
    """The address litellm will call for a server provider (or any given ``api_base``, or an
    OpenAI-compatible server set in ``OPENAI_API_BASE``), else None."""
    if api_base:
        return api_base
    for variable in _BASE_VARIABLES.get(provider, ()):
        if os.environ.get(variable, "").strip():
            return os.environ[variable].strip()
    server = SERVERS.get(provider)
    if server is None:
        return None
    return os.environ.get(server.variable, "").strip() or server.default


def start_server_advice(provider: str, api_base: str | None) -> str:
    """What to do when nothing answers at the server's address."""
    server = SERVERS.get(provider)
    if api_base or server is None:
        return "start the server, or correct api_base"
    return f"start the server, or set {server.variable} to its address (e.g. {server.example})"


def provider_of(litellm: Any, model: str) -> str:
    """The provider part of the model string (``ollama`` of ``ollama/qwen``), else litellm's guess, else ""."""
    if "/" in model:
        return model.split("/", 1)[0]
    try:
        return litellm.get_llm_provider(model)[1]
    except Exception:  # litellm cannot tell either; the hint falls back to the generic one
        return ""


def setup_advice(litellm: Any, model: str) -> str:
    """What to set for the model's provider: its key variable, or its server's address."""
    provider = provider_of(litellm, model)
    server = SERVERS.get(provider)
    if server is not None:
        key = " (and HOSTED_VLLM_API_KEY if the server wants a key)" if provider == "hosted_vllm" else ""
        return f"set {server.variable} (e.g. {server.example}) or api_base to the server's address{key}"
    variables: tuple[str, ...] | None = _KEY_VARIABLES.get(provider)
    if variables is None:
        try:
            variables = tuple(litellm.validate_environment(model).get("missing_keys") or ())
        except Exception:  # an unknown provider: no list of variables to give
            variables = ()
    missing = [variable for variable in variables if not os.environ.get(variable)]
    if missing:
        return f"set {', '.join(missing)} (not set now)"
    if variables:
        return f"set {', '.join(variables)} to a valid key"
    return "set the provider's key as https://docs.litellm.ai/docs/providers says"
