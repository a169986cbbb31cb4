"""Calls and retries: one answer from litellm, with a time limit, backoff on transient errors only,
and one more try with the prompt cut when it did not fit the context window.

Each call is ``litellm.completion`` with an explicit timeout and litellm's own retries off; the
provider retries by itself, with exponential backoff and jitter, on transient errors only (rate
limits, timeouts, lost connections, 5xx: :mod:`~pragma_core.providers._call_failures`); a call that
fails for good raises :class:`~pragma_core.errors.ProviderError`. The model's context window
(:mod:`~pragma_core.providers._window_discovery`) sets the reply's ``max_tokens`` and lets the
loop fit each prompt before it is sent (:meth:`LiteLLMProvider.room`). A prompt the server still
finds too long teaches the provider the window its error names, and is cut in the middle of its
longest user message and sent once more (:mod:`~pragma_core.providers._context_window`).
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs
from attrs import validators as v

from ..errors import PromptTooLong, ProviderError
from ..plugin_api.components import PromptRoom
from ..records import ChatMessage, Completion, CompletionRequest, TokenUsage
from ._call_failures import error_detail, from_litellm, gave_up_message, refusal_message, worth_retrying
from ._context_window import shrink_prompt
from ._provider_setup import chosen_model, provider_of, server_address
from ._window_discovery import Window, WindowMemory, reply_tokens, window_in_error
from .litellm_import import imported_litellm

__all__ = ["DEFAULT_TIMEOUT_S", "LiteLLMProvider", "LiteLLMSettings"]

log = logging.getLogger("pragma_core.providers.litellm_provider")  # the plugin's name, which logging filters name

DEFAULT_TIMEOUT_S = 600.0
"""Seconds one call may take before it counts as a (transient) timeout."""


_RESERVED_ARGUMENTS = frozenset({"model", "messages", "timeout", "num_retries", "max_retries", "stream"})


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
    memory: WindowMemory = attrs.field(factory=WindowMemory, kw_only=True, eq=False, repr=False)
    """What this provider learned of its models' windows and tokenizers in this process."""

    def room(self, model: str | None, messages: tuple[ChatMessage, ...]) -> PromptRoom | None:
        """How ``messages`` stand against ``model``'s context window; None when the window is unknown."""
        model = chosen_model(model)
        litellm = imported_litellm()
        window = self._window(litellm, model)
        if window is None:
            return None
        chat = [{"role": message.role, "content": message.content} for message in messages]
        return PromptRoom(
            tokens=self.memory.prompt_tokens(litellm, model, chat),
            window=window.tokens,
            reply_tokens=self._reply_tokens(litellm, model, window),
            window_from=window.source,
        )

    def complete(self, request: CompletionRequest) -> Completion:
        """One answer; ``latency_s`` is the wall time of it all, retries and waits included.

        litellm's one-time import (seconds) happens before the clock starts, so the first answer's
        latency is comparable with the rest.
        """
        model = chosen_model(request.model)
        litellm = imported_litellm()
        started = self.clock()
        messages = [{"role": message.role, "content": message.content} for message in request.messages]

        response = self._call(litellm, model, messages)
        if isinstance(response, _TooLong):
            room = self._room_after(litellm, model, messages, response)
            messages, cut = shrink_prompt(litellm, model, messages, room)
            if not cut:
                raise PromptTooLong(
                    f"the prompt does not fit the context window of {model} and has no long user "
                    "message to cut; choose a model with a larger context window"
                )
            log.warning("%s: prompt too long for the context window; cut %d characters, retrying once", model, cut)
            response = self._call(litellm, model, messages)
            if isinstance(response, _TooLong):
                raise PromptTooLong(
                    f"the prompt does not fit the context window of {model} even with {cut} characters "
                    "cut; choose a model with a larger context window"
                )

        usage = _usage(response)
        if usage.prompt:
            self.memory.calibrate(litellm, model, messages, usage.prompt)
        return Completion(
            text=_text(response),
            model=model,
            usage=usage,
            cost_usd=_cost(litellm, response),
            latency_s=max(0.0, self.clock() - started),
            finish_reason=_finish_reason(response),
        )

    def _address(self, litellm: Any, model: str) -> str | None:
        return server_address(provider_of(litellm, model), self.settings.api_base)

    def _window(self, litellm: Any, model: str) -> Window | None:
        return self.memory.window(litellm, model, self._address(litellm, model))

    def _reply_tokens(self, litellm: Any, model: str, window: Window) -> int:
        asked = self.settings.extra.get("max_tokens")
        try:
            limit = litellm.get_model_info(model).get("max_output_tokens")
        except Exception:  # a model litellm's list does not have
            limit = None
        return reply_tokens(window.tokens, int(asked) if asked else None, int(limit) if limit else None)

    def _room_after(
        self, litellm: Any, model: str, messages: list[dict[str, str]], refused: _TooLong
    ) -> tuple[int, int] | None:
        """(tokens the prompt may take, tokens it takes) once the server refused it as too long,
        with the window its error named remembered for the next prompts; None if unknown."""
        named = window_in_error(refused.detail)
        if named is not None:
            window = self.memory.learn_window(model, self._address(litellm, model), named, "the server's error")
            log.warning(
                "%s: the server's context window is %d tokens (from its error); prompts are fitted to it", model, named
            )
        else:
            found = self._window(litellm, model)
            if found is None:
                return None
            window = found
        limit = window.tokens - self._reply_tokens(litellm, model, window)
        return max(1, limit), self.memory.prompt_tokens(litellm, model, messages)

    def _call(self, litellm: Any, model: str, messages: list[dict[str, str]]) -> Any:
        """The response, or a :class:`_TooLong`; transient errors are retried, the rest raised at once."""
        completion = self.completion or litellm.completion
        arguments = dict(self.settings.extra)
        if self.settings.api_base is not None:
            arguments["api_base"] = self.settings.api_base
        if "max_tokens" not in arguments and (window := self._window(litellm, model)) is not None:
            arguments["max_tokens"] = self._reply_tokens(litellm, model, window)  # the prompt was fitted beside it
        arguments.update(model=model, messages=messages, timeout=self.settings.timeout_s, num_retries=0)

        for attempt in range(self.settings.max_retries + 1):
            started = self.clock()
            try:
                response = completion(**arguments)
            except litellm.ContextWindowExceededError as error:
                return _TooLong(str(error))
            except Exception as error:
                if not from_litellm(litellm, error):
                    raise
                if isinstance(error, litellm.BadRequestError) and window_in_error(str(error)) is not None:
                    return _TooLong(str(error))  # a server whose wording litellm does not map
                if not worth_retrying(litellm, error):
                    raise ProviderError(refusal_message(litellm, model, error, self.settings.api_base)) from None
                if attempt == self.settings.max_retries:
                    raise ProviderError(
                        gave_up_message(litellm, model, error, attempt + 1, self.settings.timeout_s)
                    ) from None
                delay = self._delay(attempt)
                log.warning(
                    "%s: %s; retry %d of %d in %.1f s",
                    model,
                    error_detail(error),
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


@attrs.frozen
class _TooLong:
    """The server refused the prompt as too long for the context window; ``detail`` is its error."""

    detail: str


def _text(response: Any) -> str:
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError, TypeError):
        return ""
    return content if isinstance(content, str) else ""


def _finish_reason(response: Any) -> str | None:
    try:
        reason = response.choices[0].finish_reason
    except (AttributeError, IndexError, TypeError):
        return None
    return reason if isinstance(reason, str) else None


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
