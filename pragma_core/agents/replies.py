"""Read the Conductor's reply into :class:`~pragma_core.records.Guidance`, and ask once more if not.

The Conductor is asked for one JSON object (``templates/reply_format.j2``)::

    {"analysis": str, "actions": [str], "extra_metrics": [str], "new_best": bool, "done": bool}

Models wrap it in a fence or in prose, leave trailing commas, quote with single quotes, write
``True`` or ``"yes"``, add ``// comments``, or drop fields. :func:`parse_guidance` reads all of
that; the optional fields (``actions``, ``extra_metrics``, ``new_best``, ``done``) default to empty
and false. When nothing readable is there it raises :class:`GuidanceParseError` with a one-line
reason, and the loop sends :func:`repair_messages` once::

    try:
        guidance = parse_guidance(reply)
    except GuidanceParseError as error:
        reply = provider.complete(request(repair_messages(messages, reply, error))).text
        guidance = parse_guidance(reply)   # a second failure is the attempt's result
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from ..errors import PragmaError
from ..records import ChatMessage, Guidance
from .clipping import clip, first_line
from .extraction import fenced_blocks
from .rendering import render_parts

__all__ = ["GuidanceParseError", "PlanParseError", "parse_guidance", "parse_plan", "repair_messages"]

_THINKING = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_BAD_REPLY_CHARS = 8_000

_ALIASES = {
    "analysis": ("analysis", "reasoning", "diagnosis", "summary"),
    "actions": ("actions", "action", "recommendations", "suggestions", "next_steps", "steps"),
    "extra_metrics": ("extra_metrics", "metrics", "request_metrics", "requested_metrics", "additional_metrics"),
    "new_best": ("new_best", "is_new_best"),
    "done": ("done", "stop", "finished"),
}
_TRUE = frozenset({"true", "yes", "y", "1"})
_FALSE = frozenset({"false", "no", "n", "0", "", "none", "null"})
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+")


class GuidanceParseError(PragmaError):
    """A Conductor's reply holds no readable guidance; the message says why, in one line."""


def parse_guidance(reply: str) -> Guidance:
    """The guidance in ``reply``; raises :class:`GuidanceParseError` when there is none."""
    if not reply.strip():
        raise GuidanceParseError("the reply is empty; it must be one JSON object")
    text, reasons = _reply_text(reply), _Reasons()
    for candidate, value in _json_objects(text, reasons):
        fields = _fields(value) if isinstance(value, dict) else {}
        if not fields:
            keys = ", ".join(map(str, value)) if isinstance(value, dict) and value else "none"
            reasons.add(
                candidate,
                "the JSON object has none of the fields analysis, actions, "
                f"extra_metrics, new_best (its fields: {keys})",
            )
            continue
        return _guidance(fields)
    raise GuidanceParseError(_no_object(text, reasons))


_PLAN_KEYS = ("instructions", "plan", "changes", "actions")
_MAX_INSTRUCTIONS = 8


class PlanParseError(PragmaError):
    """A planner's reply holds no readable list of instructions; the message says why."""


def parse_plan(reply: str) -> tuple[str, ...]:
    """The planner's instructions in ``reply``, most promising first (at most eight): the list
    under ``instructions`` of the JSON object; an instruction given as an object (``anchor``,
    ``change``, ``why``) becomes one line. An empty list is an answer (nothing is left to try from
    this candidate). Raises :class:`PlanParseError` when there is no list."""
    text, reasons = _reply_text(reply), _Reasons()
    for candidate, value in _json_objects(text, reasons):
        by_key = _by_key(value) if isinstance(value, dict) else {}
        given = next((by_key[key] for key in _PLAN_KEYS if key in by_key), None)
        instructions = _items(given, split=r"\n")
        if instructions or given == []:
            return tuple(dict.fromkeys(instructions))[:_MAX_INSTRUCTIONS]
        reasons.add(candidate, "the JSON object has no list of instructions")
    raise PlanParseError(_no_object(text, reasons))


def repair_messages(
    original_messages: Sequence[ChatMessage], bad_reply: str, error: GuidanceParseError | str
) -> tuple[ChatMessage, ...]:
    """The original conversation, the unreadable reply, and one request to send it again as JSON."""
    reason = " ".join(str(error).split()) or "it is not the JSON object asked for"
    parts = render_parts("conductor_repair.j2", error=reason)
    return (
        *original_messages,
        ChatMessage(role="assistant", content=clip(bad_reply, _BAD_REPLY_CHARS) if bad_reply.strip() else "(empty)"),
        ChatMessage(role="user", content=parts["user"]),
    )


def _reply_text(reply: str) -> str:
    """The reply without a reasoning model's thinking section."""
    return _THINKING.sub("", reply).strip() or reply


def _json_objects(text: str, reasons: _Reasons):
    """Each candidate text that parses as JSON, with its value; those that do not are reasons."""
    for candidate in _candidates(text, reasons):
        try:
            yield candidate, json.loads(_normalize(candidate), strict=False)
        except json.JSONDecodeError as error:
            reasons.add(
                candidate,
                f"the JSON object does not parse: {error.msg} "
                f"(line {error.lineno}, column {error.colno} of the object)",
            )


def _no_object(text: str, reasons: _Reasons) -> str:
    return reasons.best() or f"the reply holds no JSON object; it begins {first_line(text, 60)!r}"


# -- finding the object ---------------------------------------------------------------------------


class _Reasons:
    """Why candidates failed; a candidate that names a guidance field explains the failure best."""

    def __init__(self) -> None:
        self._found: list[tuple[bool, str]] = []

    def add(self, candidate: str, reason: str) -> None:
        names_a_field = any(alias in candidate for aliases in _ALIASES.values() for alias in aliases)
        self._found.append((names_a_field, reason))

    def best(self) -> str | None:
        return next(
            (reason for relevant, reason in self._found if relevant), self._found[0][1] if self._found else None
        )


def _candidates(text: str, reasons: _Reasons):
    """Texts that may hold the object: fenced blocks (JSON ones first), then balanced ``{...}``."""
    blocks = [block for block in fenced_blocks(text) if "{" in block.code]
    blocks.sort(key=lambda block: block.label not in ("json", "json5", "jsonc"))
    for block in blocks:
        yield from _objects(block.code, reasons)
    yield from _objects(text, reasons)


def _objects(text: str, reasons: _Reasons):
    """Each outermost ``{...}`` in ``text``, found with strings (either quote) taken into account."""
    start = text.find("{")
    while start != -1:
        end = _matching_brace(text, start)
        if end is None:
            reasons.add(text[start:], "the JSON object is not closed; the reply may have been cut off")
            return
        yield text[start : end + 1]
        start = text.find("{", end + 1)


def _matching_brace(text: str, start: int) -> int | None:
    depth, quote, i = 0, None, start
    while i < len(text):
        char = text[i]
        if quote:
            if char == "\\":
                i += 1
            elif char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


# -- repairing near-JSON --------------------------------------------------------------------------


def _normalize(text: str) -> str:
    """Near-JSON made JSON: comments and trailing commas dropped, single quotes, Python literals
    and bare keys rewritten. Text inside strings is left alone."""
    out: list[str] = []
    i = 0
    plain_start = 0
    while i < len(text):
        char = text[i]
        if char in "\"'":
            out.append(_plain(text[plain_start:i]))
            end = _string_end(text, i)
            out.append(_json_string(text[i + 1 : end], char))
            i = plain_start = end + 1
        else:
            i += 1
    out.append(_plain(text[plain_start:]))
    return "".join(out)


def _string_end(text: str, start: int) -> int:
    quote, i = text[start], start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == quote:
            return i
        i += 1
    return len(text)  # unterminated: json.loads will say so


def _json_string(body: str, quote: str) -> str:
    body = body.replace("\\'", "'")
    if quote == "'":
        body = re.sub(r'(?<!\\)"', r'\\"', body)
    return f'"{body}"'


def _plain(segment: str) -> str:
    segment = re.sub(r"//[^\n]*|/\*.*?\*/|#[^\n]*", "", segment, flags=re.DOTALL)
    segment = re.sub(r",(\s*[}\]])", r"\1", segment)
    segment = re.sub(r"\bTrue\b", "true", segment)
    segment = re.sub(r"\bFalse\b", "false", segment)
    segment = re.sub(r"\bNone\b", "null", segment)
    return re.sub(r"([{,]\s*)([A-Za-z_][\w-]*)(\s*:)", r'\1"\2"\3', segment)


# -- the fields -----------------------------------------------------------------------------------


def _by_key(value: dict) -> dict[str, object]:
    """The object's items by key in snake case (``Extra Metrics``, ``extra-metrics``: ``extra_metrics``)."""
    return {re.sub(r"[\s-]+", "_", str(key).strip().lower()): item for key, item in value.items()}


def _fields(value: dict) -> dict[str, object]:
    by_key = _by_key(value)
    fields = {}
    for field, aliases in _ALIASES.items():
        for alias in aliases:
            if alias in by_key:
                fields[field] = by_key[alias]
                break
    return fields


def _guidance(fields: dict[str, object]) -> Guidance:
    analysis = _text(fields.get("analysis"))
    actions = _items(fields.get("actions"), split=r"\n")
    if not analysis and not actions:
        raise GuidanceParseError("the JSON object has neither an analysis nor any actions")
    return Guidance(
        analysis=analysis,
        actions=actions,
        extra_metrics=_items(fields.get("extra_metrics"), split=r"[,\n]"),
        new_best=_flag(fields.get("new_best")),
        done=_flag(fields.get("done"), "done"),
    )


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list):
        return "\n".join(_text(item) for item in value if _text(item))
    if isinstance(value, dict):
        return "; ".join(f"{key}: {_text(item)}" for key, item in value.items())
    return str(value)


def _items(value: object, *, split: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = re.split(split, value)
    elif not isinstance(value, list):
        value = [value]
    items = (_BULLET.sub("", _text(item)).strip() for item in value)
    return tuple(item for item in items if item)


def _flag(value: object, name: str = "new_best") -> bool:
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise GuidanceParseError(f"{name} must be true or false, not {value!r}")
