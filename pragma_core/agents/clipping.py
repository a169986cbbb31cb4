"""Keep one part of a prompt within a size: the head and the tail, with a marker where text was cut.

Prompts carry code, compiler output and profiler notes whose length pragma does not control. A
part longer than its budget keeps whole lines from its start and its end (the imports and the
kernel's opening, the ``forward`` at the bottom; the first compiler errors and the summary line)
and says, on a line of its own, how much of the middle was left out, so the model knows the text
is incomplete and does not "fix" what it cannot see::

    clip(source, 12_000, comment="# ")
"""

from __future__ import annotations

__all__ = ["clip", "first_line"]

_HEAD_SHARE = 0.6


def clip(text: str, limit: int, *, comment: str = "") -> str:
    """``text`` if it has at most ``limit`` characters, else its head and tail around a marker.

    ``comment`` starts the marker line (``"# "`` inside Python, so clipped code still parses as
    far as the marker goes). The result is at most ``limit`` characters plus the marker line.
    """
    if limit <= 0:
        raise ValueError(f"limit must be positive, got {limit}")
    if len(text) <= limit:
        return text
    lines = text.splitlines(keepends=True)
    head, used = [], 0
    for line in lines:
        if used + len(line) > limit * _HEAD_SHARE:
            break
        head.append(line)
        used += len(line)
    tail: list[str] = []
    for line in reversed(lines[len(head) :]):
        if used + len(line) > limit:
            break
        tail.insert(0, line)
        used += len(line)
    if not head and not tail:  # one enormous line: cut by characters
        head_text = text[: int(limit * _HEAD_SHARE)]
        tail_text = text[len(text) - (limit - len(head_text)) :]
        left_out = len(text) - len(head_text) - len(tail_text)
        return f"{head_text}\n{comment}{_marker(1, left_out)}\n{tail_text}"
    left_lines = len(lines) - len(head) - len(tail)
    left_chars = len(text) - used
    head_text = "".join(head)
    if head_text and not head_text.endswith("\n"):
        head_text += "\n"
    return f"{head_text}{comment}{_marker(left_lines, left_chars)}\n{''.join(tail)}"


def _marker(lines: int, characters: int) -> str:
    unit = "line" if lines == 1 else "lines"
    return f"[... {lines} {unit} ({characters} characters) left out here to keep the prompt short ...]"


def first_line(text: str, limit: int = 120) -> str:
    """The first non-blank line of ``text``, shortened to ``limit`` characters with an ellipsis."""
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return line if len(line) <= limit else line[: limit - 3].rstrip() + "..."
