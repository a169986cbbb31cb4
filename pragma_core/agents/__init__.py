"""The agents' side of the loop that is not a model call: prompts in, code and guidance out.

- :mod:`.prompts`: :func:`coder_messages` and :func:`conductor_messages` build the chat messages
  from records; the wording lives in ``templates/*.j2``.
- :mod:`.extraction`: :func:`extract_code` finds the candidate module in a Coder's reply.
- :mod:`.replies`: :func:`parse_guidance` reads a Conductor's reply into :class:`Guidance`, and
  :func:`repair_messages` asks once more when it cannot.
- :mod:`.remedies`, :mod:`.history`, :mod:`.views`, :mod:`.clipping`: the parts the prompts are
  made of (likely causes and remedies of findings, the table of earlier attempts, record texts,
  size limits).
"""

from __future__ import annotations

from .extraction import extract_code
from .history import HistoryRow, history_rows
from .prompts import coder_messages, conductor_messages
from .replies import GuidanceParseError, parse_guidance, repair_messages

__all__ = [
    "coder_messages",
    "conductor_messages",
    "extract_code",
    "parse_guidance",
    "repair_messages",
    "GuidanceParseError",
    "HistoryRow",
    "history_rows",
]
