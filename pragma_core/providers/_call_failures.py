"""A failed model call: whether it is worth retrying, and the message that tells the user what to do.

Transient errors (rate limits, timeouts, lost connections, 5xx) are retried; bad credentials, bad
requests, a refused connection (nothing listens at the server's address) and a request the SDK
would not send are not. Every message names what to set or start and carries the error's text,
with keys removed.
"""

from __future__ import annotations

import re
from typing import Any

from ._provider_setup import SERVERS, provider_of, server_address, setup_advice, start_server_advice
from ._redaction import redact

__all__ = ["error_detail", "from_litellm", "gave_up_message", "refusal_message", "worth_retrying"]


def from_litellm(litellm: Any, error: Exception) -> bool:
    """Whether litellm (or the OpenAI SDK under it) raised the error; anything else is a bug to raise as it is."""
    import openai  # litellm's errors derive from the OpenAI SDK's, which litellm requires

    return isinstance(error, (openai.OpenAIError, *litellm.LITELLM_EXCEPTION_TYPES))


def worth_retrying(litellm: Any, error: Exception) -> bool:
    """Whether another try may succeed: a transient error, unless no server listens or the
    request was never sent."""
    return _is_transient(litellm, error) and not _refused(error) and not _unsent(error)


def _is_transient(litellm: Any, error: Exception) -> bool:
    transient = (
        litellm.RateLimitError,
        litellm.Timeout,
        litellm.APIConnectionError,
        litellm.InternalServerError,
        litellm.ServiceUnavailableError,
        litellm.BadGatewayError,
    )
    if isinstance(error, transient):
        return True
    status = getattr(error, "status_code", None)
    return isinstance(error, litellm.APIError) and isinstance(status, int) and status >= 500


def _refused(error: BaseException) -> bool:
    """Whether the error comes from a refused connection: nothing listens at the address, and
    backing off for seconds will not start a server."""
    return isinstance(_root_os_error(error), ConnectionRefusedError)


def _unsent(error: BaseException) -> bool:
    """Whether the OpenAI SDK refused to send the request at all (a client with no key: litellm
    reports it as a 500, but no server was asked, and asking again changes nothing)."""
    import openai

    return type(_chain(error)[-1]) is openai.OpenAIError


def _chain(error: BaseException) -> list[BaseException]:
    """The error and its causes, outermost first."""
    chain: list[BaseException] = []
    cause: BaseException | None = error
    while cause is not None and all(cause is not seen for seen in chain):
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    return chain


def _root_os_error(error: BaseException) -> OSError | None:
    """The operating system's error at the bottom of litellm's chain (httpx's ``ConnectError`` wraps
    ``ConnectionRefusedError`` or ``socket.gaierror``), if there is one."""
    errors = [cause for cause in _chain(error) if isinstance(cause, OSError)]
    return errors[-1] if errors else None


def refusal_message(litellm: Any, model: str, error: Exception, api_base: str | None) -> str:
    """The message for an error not worth retrying: what went wrong and what to set or start."""
    detail = error_detail(error)
    if _refused(error):
        provider = provider_of(litellm, model)
        address = server_address(provider, api_base)
        to = f" to {address}" if address else ""
        return f"{model}: the connection{to} was refused ({detail}); {start_server_advice(provider, api_base)}"
    if isinstance(error, (litellm.AuthenticationError, litellm.PermissionDeniedError)):
        return f"{model} refused the credentials ({detail}); {setup_advice(litellm, model)}"
    if isinstance(error, litellm.NotFoundError):
        return f"{model} is unknown to its provider ({detail}); check the model string"
    if isinstance(error, litellm.BadRequestError):
        return (
            f"{model} rejected the request ({detail}); check the model string "
            f"(provider/model, e.g. openai/gpt-4o-mini) and {setup_advice(litellm, model)}"
        )
    return f"{model} failed ({detail}); {setup_advice(litellm, model)}"


def gave_up_message(litellm: Any, model: str, error: Exception, attempts: int, timeout_s: float) -> str:
    """The message once the retries are spent: how often it failed, and what to try next."""
    detail = error_detail(error)
    if isinstance(error, litellm.RateLimitError):
        advice = "the provider is limiting the rate: wait and rerun, or raise the account's limit"
    elif isinstance(error, litellm.Timeout):
        advice = f"no answer within {timeout_s:g} s: rerun, or allow more time"
    elif isinstance(error, litellm.APIConnectionError) or _root_os_error(error) is not None:
        server = SERVERS.get(provider_of(litellm, model))
        where = f" and that the server at {server.variable} (or api_base) is running" if server else ""
        advice = f"could not reach the provider: check the network{where}"
    else:
        advice = "the provider is failing on its side: rerun later"
    return f"{model} failed {attempts} times ({detail}); {advice}"


def error_detail(error: BaseException, limit: int = 300) -> str:
    """``AuthenticationError: Incorrect API key provided: [redacted]``: one line, keys removed."""
    text = re.sub(r"^(?:litellm\.\w+:\s*)+", "", " ".join(str(error).split()))
    text = redact(text)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
