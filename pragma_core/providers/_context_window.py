"""The last resort for a prompt too long for the model: cut in the middle of its longest user
message (head and tail kept, a marker saying how much went) to the share that fits.

The loop fits its prompts part by part before it sends them (:mod:`pragma_core.agents.budget`)
whenever the window is known; this cut is for a window learned only from the server's refusal,
and for callers that send their own messages."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["shrink_prompt"]

_CUT_MARKER = "[... {n} characters cut to fit the context window ...]"
_KEEP_AT_EACH_END = 200  # characters of the cut message always kept at its head and its tail
_UNKNOWN_FIT = 0.5  # share of the prompt kept when the model's context window is unknown


def shrink_prompt(
    litellm: Any, model: str, messages: list[dict[str, str]], room: tuple[int, int] | None = None
) -> tuple[list[dict[str, str]], int]:
    """The messages with the middle of the longest user message cut, and how many characters went.
    ``room`` is (tokens the prompt may take, tokens it takes) when known; else litellm is asked."""
    users = [i for i, message in enumerate(messages) if message["role"] == "user"]
    if not users:
        return messages, 0
    longest = max(users, key=lambda i: len(messages[i]["content"]))
    text = messages[longest]["content"]
    total = sum(len(message["content"]) for message in messages)
    share = min(0.75, 0.9 * room[0] / room[1]) if room and room[1] else _share_that_fits(litellm, model, messages)
    wanted = math.ceil(total * (1.0 - share))
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
