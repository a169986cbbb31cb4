"""Calls and retries: one answer from litellm, with a time limit, backoff on transient errors only,
and one more try with the prompt cut when it did not fit the context window.

Each call is ``litellm.completion`` with an explicit timeout and litellm's own retries off; the
provider retries by itself, with exponential backoff and jitter, on transient errors only (rate
limits, timeouts, lost connections, 5xx: :mod:`~pragma_core.providers._call_failures`). A prompt too
long for the model is cut in the middle of its longest user message and sent once more
(:mod:`~pragma_core.providers._context_window`).
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

from ..errors import PragmaError
from ..records import Completion, CompletionRequest, TokenUsage
from ._call_failures import error_detail, from_litellm, gave_up_message, refusal_message, worth_retrying
from ._context_window import shrink_prompt
from ._provider_setup import chosen_model
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
        if response is _TOO_LONG:
            messages, cut = shrink_prompt(litellm, model, messages)
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
                if not from_litellm(litellm, error):
                    raise
                if not worth_retrying(litellm, error):
                    raise PragmaError(refusal_message(litellm, model, error, self.settings.api_base)) from None
                if attempt == self.settings.max_retries:
                    raise PragmaError(
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


_TOO_LONG = object()


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
