"""Find the candidate module in a Coder's reply.

Models answer in Markdown, and not always as asked: prose around the code, a C++ block and then
the Python module, a first draft and a corrected one, ```` ```py ```` or a bare ```` ``` ````
fence, a reply cut off before its closing fence, a reasoning model's ``<think>`` section full of
drafts, or the module with no fence at all. :func:`extract_code` takes, in this order:

1. among the fenced blocks (after any ``<think>...</think>``), those that define
   ``class ModelNew``: the last one that parses as Python, else the last one;
2. else the longest block fenced as Python (``python``, ``py``, ``python3``) or unlabelled that
   parses as Python;
3. with no fenced block, the reply itself, or its part from the first ``import`` line on, when it
   parses as Python and defines ``ModelNew``.

Otherwise the reply holds no candidate and the result is None: the loop records the attempt as
having no code and tells the Coder so.
"""

from __future__ import annotations

import re
import textwrap
import warnings

import attrs

from ..tasks.python_source import parse

__all__ = ["extract_code", "fenced_blocks", "FencedBlock"]

_PYTHON_LABELS = frozenset({"python", "py", "python3", "py3", "ipython", "pycon"})
_OPENING = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*)$")
_DEFINES_MODEL_NEW = re.compile(r"^[ \t]*class[ \t]+ModelNew\b", re.MULTILINE)
_THINKING = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_CODE_START = re.compile(r"^(import |from \S+ import |class ModelNew\b)")
_TRAILING_PROSE_LINES = 30


@attrs.frozen(kw_only=True)
class FencedBlock:
    """One fenced block of a Markdown reply: its language label (lower case, may be empty)."""

    label: str
    code: str
    closed: bool

    @property
    def is_python(self) -> bool:
        return self.label in _PYTHON_LABELS or (self.label == "" and _parses(self.code))

    @property
    def defines_model_new(self) -> bool:
        return bool(_DEFINES_MODEL_NEW.search(self.code))


def extract_code(reply: str) -> str | None:
    """The Python module defining ``ModelNew`` in ``reply``, ending in one newline, or None."""
    text = reply.replace("\r\n", "\n").replace("\r", "\n")
    answer = _THINKING.sub("", text)
    for candidate_text in (answer, text) if answer != text else (text,):
        blocks = fenced_blocks(candidate_text)
        if blocks:
            code = _choose(blocks)
            if code is not None:
                return code
        else:
            code = _unfenced(candidate_text)
            if code is not None:
                return code
    return None


def fenced_blocks(text: str) -> list[FencedBlock]:
    """Every fenced block in ``text`` in order; a block left open runs to the end of the text."""
    blocks: list[FencedBlock] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        opening = _OPENING.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, indent = opening["fence"], opening["indent"]
        label = opening["info"].strip().split(" ")[0].strip("{}.").lower() if opening["info"].strip() else ""
        body: list[str] = []
        closed = False
        i += 1
        while i < len(lines):
            line = lines[i]
            stripped = line.strip()
            if stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
                closed = True
                i += 1
                break
            if line.rstrip().endswith(fence) and not stripped.startswith(fence):
                # the closing fence glued to the last line of code: "    return out```"
                body.append(line.rstrip()[: -len(fence)])
                closed = True
                i += 1
                break
            body.append(line)
            i += 1
        code = "\n".join(body)
        if indent:
            code = textwrap.dedent(code)
        blocks.append(FencedBlock(label=label, code=code, closed=closed))
    return blocks


def _choose(blocks: list[FencedBlock]) -> str | None:
    with_model = [block for block in blocks if block.defines_model_new]
    if with_model:
        parsing = [block for block in with_model if _parses(block.code)]
        return _tidy((parsing or with_model)[-1].code)
    python = [block for block in blocks if block.is_python and block.code.strip()]
    if python:
        return _tidy(max(python, key=lambda block: len(block.code.strip())).code)
    return None


def _unfenced(text: str) -> str | None:
    """The reply, or its tail from the first line that starts code, if that is a ModelNew module."""
    if _DEFINES_MODEL_NEW.search(text) is None:
        return None
    if _parses(text):
        return _tidy(text)
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), None)
    if start is None:
        return None
    # drop prose after the code, a line at a time, a bounded number of times
    for end in range(len(lines), max(start, len(lines) - _TRAILING_PROSE_LINES), -1):
        code = "\n".join(lines[start:end])
        if _DEFINES_MODEL_NEW.search(code) and _parses(code):
            return _tidy(code)
    return None


def _parses(code: str) -> bool:
    with warnings.catch_warnings():  # invalid escapes in the model's strings are not our concern
        warnings.simplefilter("ignore")
        try:
            parse(code)
        except (SyntaxError, ValueError):  # ValueError: null bytes
            return False
    return True


def _tidy(code: str) -> str:
    return code.strip("\n").rstrip() + "\n"
