"""Secret redaction: API keys stay in the environment, out of every message pragma raises or logs.

A provider's error text may quote the key it was given, a URL with a password, or a bearer token;
:func:`redact` replaces what looks like one with ``[redacted]`` before the text goes anywhere.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

__all__ = ["redact"]

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
