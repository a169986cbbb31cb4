"""A model's context window, and how many tokens a prompt takes in it.

The window is read, first found first, from: the ``PRAGMA_CONTEXT_WINDOW`` environment variable
(the user's word); litellm's model list (``max_input_tokens``); the model server itself (``GET
/models`` answers ``max_model_len`` on vLLM, ``meta.n_ctx_train`` on llama.cpp's server, and
llama.cpp's ``GET /props`` the window it was started with); and, failing all of those, the
server's own error when a prompt was too long ("exceed context window of 2048", "maximum context
length is 4096 tokens"), remembered for the rest of the process. llama-cpp-python's server names
its window nowhere but in that error: its first too-long prompt is cut by the provider
(:mod:`~pragma_core.providers._context_window`), the later ones are fitted part by part.

A prompt's tokens are counted with litellm's ``token_counter`` (the model's tokenizer where litellm
has it, else a generic one) and scaled by what the server reported for earlier prompts of the
same model (its ``usage.prompt_tokens`` over the count), so a model with another tokenizer is
measured by its own.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import attrs

from ..errors import PragmaError

__all__ = ["WINDOW_VARIABLE", "Window", "WindowMemory", "reply_tokens", "window_in_error"]

WINDOW_VARIABLE = "PRAGMA_CONTEXT_WINDOW"
"""Environment variable that sets a model's context window in tokens, above what is found."""

_ASK_TIMEOUT_S = 2.0  # a model server answers its model list at once, or not at all
_UNCALIBRATED_MARGIN = 1.15  # tokenizers differ: until the server reports a count, assume 15% more
_CALIBRATED_MARGIN = 1.03
# Tokenizers differ from litellm's count by tens of percent, not by factors: a server's count
# outside these bounds (a cached prompt counted short, a stand-in reporting a constant) is clamped.
_SCALE_BOUNDS = (0.8, 4.0)
_REPLY_SHARE = 4  # a quarter of the window is kept for the reply ...
_FEWEST_REPLY_TOKENS = 256
_MOST_REPLY_TOKENS = 8_192  # ... at most this many, enough for a module of 25,000 characters

_WINDOW_PATTERNS = (
    re.compile(r"context window of (\d+)", re.IGNORECASE),  # llama-cpp-python
    re.compile(r"maximum context length is (\d+)", re.IGNORECASE),  # OpenAI, vLLM
    re.compile(r"available context size \((\d+) tokens\)", re.IGNORECASE),  # llama.cpp's server
    re.compile(r"context (?:length|window|size)[^0-9]{0,30}?(\d{3,8}) tokens", re.IGNORECASE),
)
_SERVER_WINDOW_KEYS = ("max_model_len", "context_length", "context_window", "max_context_length", "n_ctx")


@attrs.frozen
class Window:
    """A context window in tokens and where the figure came from."""

    tokens: int
    source: str


def window_in_error(text: str) -> int | None:
    """The context window a server's "prompt too long" error names, if it names one."""
    for pattern in _WINDOW_PATTERNS:
        found = pattern.search(text)
        if found and int(found.group(1)) > 0:
            return int(found.group(1))
    return None


def reply_tokens(window: int, asked: int | None, model_limit: int | None) -> int:
    """Tokens kept for the reply: what the settings ask (``max_tokens``), else a quarter of the
    window within [256, 8192] and within the model's own output limit."""
    if asked is not None:
        return asked
    share = min(_MOST_REPLY_TOKENS, max(_FEWEST_REPLY_TOKENS, window // _REPLY_SHARE))
    return min(share, model_limit) if model_limit else share


@attrs.define
class WindowMemory:
    """What a provider learned of its models in this process: each model's window, its output
    limit, and how its server counts tokens against litellm's count."""

    _windows: dict[tuple[str, str | None], Window | None] = attrs.field(factory=dict)
    _ratios: dict[str, float] = attrs.field(factory=dict)
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    def window(self, litellm: Any, model: str, address: str | None) -> Window | None:
        """The model's context window, looked up once per model and address; None when unknown."""
        key = (model, address)
        with self._lock:
            if key in self._windows:
                return self._windows[key]
        found = _from_environment() or _from_litellm(litellm, model) or _from_server(address, model)
        with self._lock:
            return self._windows.setdefault(key, found)

    def learn_window(self, model: str, address: str | None, tokens: int, source: str) -> Window:
        """Remember the window a server named (in an error); later prompts are fitted to it."""
        window = Window(tokens, source)
        with self._lock:
            self._windows[(model, address)] = window
        return window

    def prompt_tokens(self, litellm: Any, model: str, messages: list[dict[str, str]]) -> int:
        """The tokens the prompt takes for this model: litellm's count scaled by the server's own."""
        counted = _count(litellm, model, messages)
        with self._lock:
            ratio = self._ratios.get(model)
        scale = ratio * _CALIBRATED_MARGIN if ratio else _UNCALIBRATED_MARGIN
        return math.ceil(counted * scale)

    def calibrate(self, litellm: Any, model: str, messages: list[dict[str, str]], reported: int) -> None:
        """Take the server's count of a prompt it was sent (``usage.prompt_tokens``) as the scale."""
        counted = _count(litellm, model, messages)
        if counted <= 0 or reported <= 0:
            return
        with self._lock:
            low, high = _SCALE_BOUNDS
            self._ratios[model] = max(self._ratios.get(model, low), min(high, max(low, reported / counted)))


def _count(litellm: Any, model: str, messages: list[dict[str, str]]) -> int:
    try:
        return int(litellm.token_counter(model=model, messages=messages))
    except Exception:  # a tokenizer litellm cannot load: about four characters a token
        return sum(len(message["content"]) for message in messages) // 4 + 4 * len(messages)


def _from_environment() -> Window | None:
    text = os.environ.get(WINDOW_VARIABLE, "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise PragmaError(f"{WINDOW_VARIABLE}={text!r}: not a number of tokens; set it to e.g. 8192, or unset it")
    return Window(int(text), WINDOW_VARIABLE)


def _from_litellm(litellm: Any, model: str) -> Window | None:
    try:
        info = litellm.get_model_info(model)
    except Exception:  # a model litellm's list does not have
        return None
    tokens = info.get("max_input_tokens") or info.get("max_tokens")
    return Window(int(tokens), "litellm's model list") if tokens else None


def _from_server(address: str | None, model: str) -> Window | None:
    """The window the model server reports, asked at its address (vLLM, llama.cpp and others)."""
    if not address:
        return None
    base = address.rstrip("/")
    listing = _get_json(f"{base}/models")
    name = model.split("/", 1)[1] if "/" in model else model
    for entry in listing.get("data", []) if isinstance(listing, dict) else []:
        if not isinstance(entry, dict) or (entry.get("id") not in (name, model) and len(listing["data"]) > 1):
            continue
        for where in (entry, entry.get("meta") or {}):
            for key in (*_SERVER_WINDOW_KEYS, "n_ctx_train"):
                value = where.get(key) if isinstance(where, dict) else None
                if isinstance(value, int) and value > 0:
                    # llama.cpp's server names only the training window there; its /props says what it serves
                    served = _served_window(base) if key == "n_ctx_train" else None
                    return Window(served or value, f"the server's {'/props' if served else '/models'} at {base}")
    served = _served_window(base)
    return Window(served, f"the server's /props at {base}") if served else None


def _served_window(base: str) -> int | None:
    """llama.cpp's server: the window it was started with (``/props``, at the root of the address)."""
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    props = _get_json(f"{root}/props")
    settings = props.get("default_generation_settings") if isinstance(props, dict) else None
    value = settings.get("n_ctx") if isinstance(settings, dict) else None
    return value if isinstance(value, int) and value > 0 else None


def _get_json(url: str) -> Any:
    """The JSON a GET of ``url`` answers, or {} (no answer, another format, an error status)."""
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        return {}
    try:
        with urllib.request.urlopen(url, timeout=_ASK_TIMEOUT_S) as answer:  # noqa: S310 (scheme checked)
            return json.loads(answer.read(1_000_000).decode("utf-8", errors="replace"))
    except (OSError, ValueError, urllib.error.URLError):
        return {}
