"""The pre-flight check: whether a model can answer at all, found in seconds before a run starts.

:func:`check_model` is what a run calls before it spends minutes on the reference: it fails in
seconds when the model's provider is unknown, its key variable is not set, or its server is down.
"""

from __future__ import annotations

import socket
import urllib.parse

from ..errors import PragmaError
from ._provider_setup import SERVERS, chosen_model, server_address, setup_advice, start_server_advice
from .litellm_import import imported_litellm

__all__ = ["CONNECT_TIMEOUT_S", "check_model"]

CONNECT_TIMEOUT_S = 2.0
"""Seconds :func:`check_model` waits for a model server to accept a connection."""


def check_model(model: str, *, api_base: str | None = None, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Raise :class:`PragmaError` when ``model`` surely cannot answer.

    Checked, in seconds and without calling the model: litellm knows the model's provider; the
    environment holds the variables litellm needs for it (``litellm.validate_environment``, e.g.
    ``OPENAI_API_KEY``); and for a model on a server of the user's own (``ollama/``,
    ``ollama_chat/``, ``hosted_vllm/``, or any ``api_base``) the server's address is known and
    accepts a TCP connection within ``connect_timeout_s``. A key's value is not tried, since that
    takes a paid call: a wrong key fails the run's first call at once instead.
    """
    model = chosen_model(model)
    litellm = imported_litellm()
    try:
        provider = litellm.get_llm_provider(model, api_base=api_base)[1]
    except Exception:  # litellm's BadRequestError "LLM Provider NOT provided", or worse
        raise PragmaError(
            f"litellm cannot tell which provider serves the model {model!r}: write it as provider/model, "
            "e.g. openai/gpt-4o-mini or ollama/qwen2.5-coder (providers: https://docs.litellm.ai/docs/providers)"
        ) from None
    address = server_address(provider, api_base)
    if provider in SERVERS and address is None:
        raise PragmaError(
            f"{model} runs on a server of your own, whose address is not set: {setup_advice(litellm, model)}"
        )
    missing = list(litellm.validate_environment(model=model, api_base=address).get("missing_keys") or ())
    if len(missing) == 1:
        raise PragmaError(
            f"{model} needs the environment variable {missing[0]}, which is not set: set it and run again"
        )
    if missing:
        raise PragmaError(
            f"{model} needs the environment variables {', '.join(missing)}, which are not set: set them and run again"
        )
    if address is not None:
        problem = _cannot_connect(address, connect_timeout_s)
        if problem:
            raise PragmaError(
                f"{model}: nothing answers at {address} ({problem}); {start_server_advice(provider, api_base)}"
            )


def _cannot_connect(address: str, timeout_s: float) -> str | None:
    """Why no TCP connection to the address's host and port opens within ``timeout_s``; None if one does."""
    url = urllib.parse.urlsplit(address if "://" in address else f"http://{address}")
    try:
        host, port = url.hostname, url.port or (443 if url.scheme == "https" else 80)
    except ValueError:  # a port that is not a number
        return "not an address: expected e.g. http://localhost:11434"
    if not host:
        return "not an address: expected e.g. http://localhost:11434"
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except socket.gaierror:
        return f"the host name {host} does not resolve"
    except TimeoutError:
        return f"no connection within {timeout_s:g} s"
    except OSError as error:
        return (error.strerror or str(error) or type(error).__name__).lower()
