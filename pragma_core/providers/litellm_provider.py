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
"""

from __future__ import annotations

import functools
import logging
import math
import os
import random
import re
import socket
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

import attrs
from attrs import validators as v

from ..errors import PragmaError
from ..plugin_api.components import LLMProvider
from ..plugin_api.hookspecs import hookimpl
from ..records import Completion, CompletionRequest, TokenUsage

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

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 600.0
"""Seconds one call may take before it counts as a (transient) timeout."""

CONNECT_TIMEOUT_S = 2.0
"""Seconds :func:`check_model` waits for a model server to accept a connection."""

_OFFLINE_ENVIRONMENT = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # else import downloads the price list
    "LITELLM_OFFLINE_MODE": "true",  # the same switch in newer litellm releases
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",  # else the first anthropic call downloads them
}

_RESERVED_ARGUMENTS = frozenset({"model", "messages", "timeout", "num_retries", "max_retries", "stream"})

_CUT_MARKER = "[... {n} characters cut to fit the context window ...]"
_KEEP_AT_EACH_END = 200  # characters of the cut message always kept at its head and its tail
_UNKNOWN_FIT = 0.5  # share of the prompt kept when the model's context window is unknown


@attrs.frozen
class _Server:
    """A provider that runs on a server of the user's own: it needs an address, not a key."""

    variable: str  # where the user sets the address
    example: str  # an address to show in messages
    default: str | None  # the address litellm uses when the variable is not set (litellm/main.py)


_SERVERS = {
    "ollama": _Server("OLLAMA_API_BASE", "http://localhost:11434", "http://localhost:11434"),
    "ollama_chat": _Server("OLLAMA_API_BASE", "http://localhost:11434", "http://localhost:11434"),
    "hosted_vllm": _Server("HOSTED_VLLM_API_BASE", "http://localhost:8000/v1", None),
}
_KEY_VARIABLES = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
}


def _no_reserved(_instance: Any, attribute: attrs.Attribute, value: Mapping[str, Any]) -> None:
    reserved = sorted(_RESERVED_ARGUMENTS & set(value))
    if reserved:
        raise ValueError(
            f"{attribute.name} may not set {', '.join(reserved)}: the provider sets them "
            "(the model comes from the request, the time limit from timeout_s)"
        )


@attrs.frozen(kw_only=True)
class LiteLLMSettings:
    """How the provider calls litellm: time limit, retry budget, server address, extra arguments.

    A transient failure is retried up to ``max_retries`` times; before retry *n* (from 0) the
    provider sleeps ``min(max_backoff_s, backoff_s * 2**n)`` scaled by a random factor in
    [0.5, 1]. ``extra`` goes to ``litellm.completion`` as keyword arguments (``temperature``,
    ``max_tokens``, ``mock_response``, ...).
    """

    timeout_s: float = attrs.field(default=DEFAULT_TIMEOUT_S, validator=v.gt(0))
    max_retries: int = attrs.field(default=3, validator=[v.instance_of(int), v.ge(0)])
    backoff_s: float = attrs.field(default=1.0, validator=v.gt(0))
    max_backoff_s: float = attrs.field(default=16.0, validator=v.gt(0))
    api_base: str | None = None
    extra: dict[str, Any] = attrs.field(factory=dict, converter=dict, validator=_no_reserved)


@attrs.frozen
class LiteLLMProvider:
    """Answers requests through litellm with the given settings.

    ``completion`` stands in for ``litellm.completion`` (None: the real one), ``sleep`` waits
    between retries, ``jitter`` draws in [0, 1) and ``clock`` reads seconds; tests replace them.
    """

    settings: LiteLLMSettings = attrs.field(factory=LiteLLMSettings)
    completion: Callable[..., Any] | None = attrs.field(default=None, kw_only=True)
    sleep: Callable[[float], None] = attrs.field(default=time.sleep, kw_only=True)
    jitter: Callable[[], float] = attrs.field(default=random.random, kw_only=True)
    clock: Callable[[], float] = attrs.field(default=time.monotonic, kw_only=True)

    def complete(self, request: CompletionRequest) -> Completion:
        """One answer; ``latency_s`` is the wall time of it all, retries and waits included.

        litellm's one-time import (seconds) happens before the clock starts, so the first answer's
        latency is comparable with the rest.
        """
        model = _chosen_model(request.model)
        litellm = _litellm()
        started = self.clock()
        messages = [{"role": message.role, "content": message.content} for message in request.messages]

        response = self._call(litellm, model, messages)
        if response is _TOO_LONG:
            messages, cut = _shrink(litellm, model, messages)
            if not cut:
                raise PragmaError(
                    f"the prompt does not fit the context window of {model} and has no long user "
                    "message to cut; choose a model with a larger context window"
                )
            log.warning("%s: prompt too long for the context window; cut %d characters, retrying once", model, cut)
            response = self._call(litellm, model, messages)
            if response is _TOO_LONG:
                raise PragmaError(
                    f"the prompt does not fit the context window of {model} even with {cut} characters "
                    "cut; choose a model with a larger context window"
                )

        return Completion(
            text=_text(response),
            model=model,
            usage=_usage(response),
            cost_usd=_cost(litellm, response),
            latency_s=max(0.0, self.clock() - started),
        )

    def _call(self, litellm: Any, model: str, messages: list[dict[str, str]]) -> Any:
        """The response, or ``_TOO_LONG``; transient errors are retried, the rest raised at once."""
        completion = self.completion or litellm.completion
        arguments = dict(self.settings.extra)
        if self.settings.api_base is not None:
            arguments["api_base"] = self.settings.api_base
        arguments.update(model=model, messages=messages, timeout=self.settings.timeout_s, num_retries=0)

        for attempt in range(self.settings.max_retries + 1):
            started = self.clock()
            try:
                response = completion(**arguments)
            except litellm.ContextWindowExceededError:
                return _TOO_LONG
            except Exception as error:
                if not _from_litellm(litellm, error):
                    raise
                if not _is_transient(litellm, error) or _refused(error) or _unsent(error):
                    raise PragmaError(_refusal(litellm, model, error, self.settings.api_base)) from None
                if attempt == self.settings.max_retries:
                    raise PragmaError(_gave_up(litellm, model, error, attempt + 1, self.settings)) from None
                delay = self._delay(attempt)
                log.warning(
                    "%s: %s; retry %d of %d in %.1f s",
                    model,
                    _detail(error),
                    attempt + 1,
                    self.settings.max_retries,
                    delay,
                )
                self.sleep(delay)
            else:
                log.debug("%s answered in %.2f s (attempt %d)", model, self.clock() - started, attempt + 1)
                return response
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _delay(self, retry: int) -> float:
        settings = self.settings
        ceiling = min(settings.max_backoff_s, settings.backoff_s * 2.0**retry)
        return ceiling * (0.5 + 0.5 * min(max(self.jitter(), 0.0), 1.0))


_TOO_LONG = object()


# -- litellm, imported on first use ------------------------------------------------------------


def set_offline_switches() -> None:
    """Set litellm's switches that keep its import and its token counting off the network, unless
    the environment already chose (a process that imports litellm later inherits them)."""
    for variable, value in _OFFLINE_ENVIRONMENT.items():
        os.environ.setdefault(variable, value)


def preload() -> None:
    """Import litellm now, as the provider does (seconds of a core), rather than at the first
    model call: a bench task does it while it starts (:func:`~pragma_core.machine.timing_slot.start_turn`)."""
    _litellm()


@functools.cache
def _litellm() -> Any:
    set_offline_switches()
    try:
        import litellm
    except ImportError:
        raise PragmaError("the litellm provider needs the litellm package: pip install litellm") from None
    litellm.suppress_debug_info = True  # else bad requests print a banner to stdout
    if litellm.disable_hf_tokenizer_download is None:
        litellm.disable_hf_tokenizer_download = True  # counting tokens must not download tokenizers
    return litellm


def _chosen_model(model: str | None) -> str:
    chosen = (model or "").strip()
    if not chosen:
        raise PragmaError("no language model named: give a litellm model string, e.g. openai/gpt-4o-mini")
    return chosen


# -- before a run --------------------------------------------------------------------------------


def check_model(model: str, *, api_base: str | None = None, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Raise :class:`PragmaError` when ``model`` surely cannot answer.

    Checked, in seconds and without calling the model: litellm knows the model's provider; the
    environment holds the variables litellm needs for it (``litellm.validate_environment``, e.g.
    ``OPENAI_API_KEY``); and for a model on a server of the user's own (``ollama/``,
    ``ollama_chat/``, ``hosted_vllm/``, or any ``api_base``) the server's address is known and
    accepts a TCP connection within ``connect_timeout_s``. A key's value is not tried, since that
    takes a paid call: a wrong key fails the run's first call at once instead.
    """
    model = _chosen_model(model)
    litellm = _litellm()
    try:
        provider = litellm.get_llm_provider(model, api_base=api_base)[1]
    except Exception:  # litellm's BadRequestError "LLM Provider NOT provided", or worse
        raise PragmaError(
            f"litellm cannot tell which provider serves the model {model!r}: write it as provider/model, "
            "e.g. openai/gpt-4o-mini or ollama/qwen2.5-coder (providers: https://docs.litellm.ai/docs/providers)"
        ) from None
    address = _server_address(provider, api_base)
    if provider in _SERVERS and address is None:
        raise PragmaError(f"{model} runs on a server of your own, whose address is not set: {_setup(litellm, model)}")
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
            raise PragmaError(f"{model}: nothing answers at {address} ({problem}); {_start_server(provider, api_base)}")


def _server_address(provider: str, api_base: str | None) -> str | None:
    """The address litellm will call for a server provider (or any given ``api_base``), else None."""
    if api_base:
        return api_base
    server = _SERVERS.get(provider)
    if server is None:
        return None
    return os.environ.get(server.variable, "").strip() or server.default


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


def _start_server(provider: str, api_base: str | None) -> str:
    server = _SERVERS.get(provider)
    if api_base or server is None:
        return "start the server, or correct api_base"
    return f"start the server, or set {server.variable} to its address (e.g. {server.example})"


# -- errors --------------------------------------------------------------------------------------


def _from_litellm(litellm: Any, error: Exception) -> bool:
    import openai  # litellm's errors derive from the OpenAI SDK's, which litellm requires

    return isinstance(error, (openai.OpenAIError, *litellm.LITELLM_EXCEPTION_TYPES))


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


def _refusal(litellm: Any, model: str, error: Exception, api_base: str | None) -> str:
    detail = _detail(error)
    if _refused(error):
        provider = _provider(litellm, model)
        address = _server_address(provider, api_base)
        to = f" to {address}" if address else ""
        return f"{model}: the connection{to} was refused ({detail}); {_start_server(provider, api_base)}"
    if isinstance(error, (litellm.AuthenticationError, litellm.PermissionDeniedError)):
        return f"{model} refused the credentials ({detail}); {_setup(litellm, model)}"
    if isinstance(error, litellm.NotFoundError):
        return f"{model} is unknown to its provider ({detail}); check the model string"
    if isinstance(error, litellm.BadRequestError):
        return (
            f"{model} rejected the request ({detail}); check the model string "
            f"(provider/model, e.g. openai/gpt-4o-mini) and {_setup(litellm, model)}"
        )
    return f"{model} failed ({detail}); {_setup(litellm, model)}"


def _gave_up(litellm: Any, model: str, error: Exception, attempts: int, settings: LiteLLMSettings) -> str:
    detail = _detail(error)
    if isinstance(error, litellm.RateLimitError):
        advice = "the provider is limiting the rate: wait and rerun, or raise the account's limit"
    elif isinstance(error, litellm.Timeout):
        advice = f"no answer within {settings.timeout_s:g} s: rerun, or allow more time"
    elif isinstance(error, litellm.APIConnectionError) or _root_os_error(error) is not None:
        server = _SERVERS.get(_provider(litellm, model))
        where = f" and that the server at {server.variable} (or api_base) is running" if server else ""
        advice = f"could not reach the provider: check the network{where}"
    else:
        advice = "the provider is failing on its side: rerun later"
    return f"{model} failed {attempts} times ({detail}); {advice}"


def _provider(litellm: Any, model: str) -> str:
    if "/" in model:
        return model.split("/", 1)[0]
    try:
        return litellm.get_llm_provider(model)[1]
    except Exception:  # litellm cannot tell either; the hint falls back to the generic one
        return ""


def _setup(litellm: Any, model: str) -> str:
    """What to set for the model's provider: its key variable, or its server's address."""
    provider = _provider(litellm, model)
    server = _SERVERS.get(provider)
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


def _detail(error: BaseException, limit: int = 300) -> str:
    """``AuthenticationError: Incorrect API key provided: [redacted]``: one line, keys removed."""
    text = re.sub(r"^(?:litellm\.\w+:\s*)+", "", " ".join(str(error).split()))
    text = redact(text)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


# -- redaction -----------------------------------------------------------------------------------

_SECRET_NAME = re.compile(r"(API_KEY|_KEY|_TOKEN|_SECRET|_PASSWORD)$", re.IGNORECASE)
_SECRET_PATTERNS = (
    re.compile(r"(https?://)[^\s/@:]+:[^\s/@]+(?=@)"),  # credentials in a URL
    re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"(?i)(\b[\w-]*(?:api[_-]?key|token|secret|password)[\"']?\s*[:=]\s*[\"']?)[^\s\"',;&]{6,}"),
    re.compile(r"()\bsk-[A-Za-z0-9_-]{6,}"),  # OpenAI, Anthropic (sk-ant-), DeepSeek keys
)
_LONG_TOKEN = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{32,}={0,2}")
_REDACTED = "[redacted]"


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    """The text with API keys replaced by ``[redacted]``.

    Removed: the values of environment variables named like ``*_API_KEY``, ``*_TOKEN``,
    ``*_SECRET``; ``sk-...`` keys; bearer tokens; ``api_key=...`` pairs; passwords in URLs; and
    long random-looking tokens (32+ characters of letters and digits).
    """
    environ = os.environ if environ is None else environ
    values = sorted(
        (value for name, value in environ.items() if _SECRET_NAME.search(name) and len(value) >= 6),
        key=len,
        reverse=True,
    )
    for value in values:
        text = text.replace(value, _REDACTED)
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(lambda match: match.group(1) + _REDACTED, text)
    return _LONG_TOKEN.sub(_redact_long_token, text)


def _redact_long_token(match: re.Match[str]) -> str:
    token = match.group(0)
    random_looking = (
        any(c.isdigit() for c in token)
        and any(c.isalpha() for c in token)
        and token.count("-") + token.count("_") <= len(token) // 10  # model names are hyphenated words
    )
    return _REDACTED if random_looking else token


# -- context window ------------------------------------------------------------------------------


def _shrink(litellm: Any, model: str, messages: list[dict[str, str]]) -> tuple[list[dict[str, str]], int]:
    """The messages with the middle of the longest user message cut, and how many characters went."""
    users = [i for i, message in enumerate(messages) if message["role"] == "user"]
    if not users:
        return messages, 0
    longest = max(users, key=lambda i: len(messages[i]["content"]))
    text = messages[longest]["content"]
    total = sum(len(message["content"]) for message in messages)
    wanted = math.ceil(total * (1.0 - _share_that_fits(litellm, model, messages)))
    cut = min(wanted, len(text) - 2 * _KEEP_AT_EACH_END)
    if cut <= len(_CUT_MARKER):
        return messages, 0
    shrunk = list(messages)
    shrunk[longest] = {**messages[longest], "content": _cut_middle(text, cut)}
    return shrunk, cut


def _share_that_fits(litellm: Any, model: str, messages: list[dict[str, str]]) -> float:
    """The share of the prompt to keep: the model's window over the prompt's tokens, with a margin."""
    try:
        window = litellm.get_model_info(model).get("max_input_tokens")
        used = litellm.token_counter(model=model, messages=messages)
    except Exception:  # a model litellm does not know: no window to measure against
        return _UNKNOWN_FIT
    if not window or not used:
        return _UNKNOWN_FIT
    return min(0.75, 0.9 * window / used)  # the call failed, so always cut a quarter at least


def _cut_middle(text: str, cut: int) -> str:
    head = (len(text) - cut) // 2
    tail = len(text) - cut - head
    return f"{text[:head]}\n{_CUT_MARKER.format(n=cut)}\n{text[len(text) - tail :]}"


# -- the response --------------------------------------------------------------------------------


def _text(response: Any) -> str:
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError, TypeError):
        return ""
    return content if isinstance(content, str) else ""


def _usage(response: Any) -> TokenUsage:
    usage = getattr(response, "usage", None)
    return TokenUsage(
        prompt=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion=int(getattr(usage, "completion_tokens", 0) or 0),
    )


def _cost(litellm: Any, response: Any) -> float | None:
    """US dollars by litellm's price list; None when litellm does not know the model's price."""
    try:
        cost = litellm.completion_cost(completion_response=response)
    except Exception:  # litellm raises a bare Exception for models it has no price for
        return None
    if isinstance(cost, bool) or not isinstance(cost, (int, float)) or not math.isfinite(cost) or cost < 0:
        return None
    return float(cost)


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
        )
    )
