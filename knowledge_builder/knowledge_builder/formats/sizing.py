"""Keeping chunks within a size: greedy runs of items, and over-long texts cut into pieces.

Every reader bounds the text of its chunks. It groups rows, definitions or paragraphs into runs
that fit a limit (:func:`runs`, or :func:`pack` for texts joined by a separator), and first cuts
a paragraph or listing that is longer than the limit on its own (:func:`split_long`). Readers
differ in what they cut at and what they join with, so those are arguments; the greedy rule is
written once, here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

__all__ = ["LINE_ENDS", "SENTENCE_ENDS", "runs", "pack", "split_long", "cut_at_spaces", "cut_anywhere"]

T = TypeVar("T")

LINE_ENDS = re.compile(r"\n")
"""Where :func:`split_long` cuts a text into its lines (the newline is dropped)."""

SENTENCE_ENDS = re.compile(r"(?<=[.!?])\s+")
"""Where :func:`split_long` cuts a text into sentences: the whitespace after a ``.``, ``!`` or ``?``
(dropped)."""


def runs(
    items: Iterable[T], size_of: Callable[[T], int], limit: int, *, gap: int | Callable[[T], int] = 0
) -> Iterator[list[T]]:
    """Consecutive ``items`` in greedy runs whose size stays within ``limit``.

    A run's size is the sum of its items' ``size_of`` and of a ``gap`` between each item and the
    one before it; ``gap`` is a number, or a function of the item when the separator before it
    varies. An item joins the current run when the run stays within ``limit``, else it opens the
    next run, so an item larger than ``limit`` is alone in its run.
    """
    return _runs(items, size_of, limit, gap, opens_run=lambda item: True)


def pack(texts: Iterable[str], limit: int, separator: str) -> Iterator[str]:
    """``texts`` joined by ``separator`` into greedy runs of at most ``limit`` characters.

    A text longer than ``limit`` is alone in its run. An empty text never opens a run: at the
    start, or right after a cut, it is dropped along with the separator.
    """
    for run in _runs(texts, len, limit, len(separator), opens_run=bool):
        yield separator.join(run)


def _runs(
    items: Iterable[T],
    size_of: Callable[[T], int],
    limit: int,
    gap: int | Callable[[T], int],
    opens_run: Callable[[T], bool],
) -> Iterator[list[T]]:
    """:func:`runs`, with items for which ``opens_run`` is false dropped where they would open one."""
    gap_before = gap if callable(gap) else (lambda item: gap)
    run: list[T] = []
    size = 0
    for item in items:
        item_size = size_of(item)
        if run and size + gap_before(item) + item_size > limit:
            yield run
            run, size = [], 0
        if not run and not opens_run(item):
            continue
        size += (gap_before(item) if run else 0) + item_size
        run.append(item)
    if run:
        yield run


def cut_at_spaces(text: str, limit: int) -> list[str]:
    """``text`` in pieces of at most ``limit`` characters.

    A piece ends before the last space among its first ``limit`` characters, or after ``limit``
    characters when no space follows its first character; the whitespace at a cut is dropped.
    """
    pieces: list[str] = []
    while len(text) > limit:
        cut = text.rfind(" ", 0, limit)
        cut = cut if cut > 0 else limit
        pieces.append(text[:cut])
        text = text[cut:].lstrip()
    pieces.append(text)
    return pieces


def cut_anywhere(text: str, limit: int) -> list[str]:
    """``text`` in pieces of ``limit`` characters (the last one shorter), nothing dropped."""
    return [text[start : start + limit] for start in range(0, len(text), limit)]


def split_long(
    text: str, limit: int, *, at: re.Pattern[str] = LINE_ENDS, then: Callable[[str, int], list[str]] = cut_at_spaces
) -> list[str]:
    """``text`` as it is when it has at most ``limit`` characters, else cut into pieces.

    A longer text is cut wherever ``at`` matches, the match (a newline, the space after a
    sentence) dropped. A piece still longer than ``limit`` is cut again by ``then``
    (:func:`cut_at_spaces` or :func:`cut_anywhere`). The pieces are not joined back: the caller
    packs them, with the separator it writes between them.
    """
    if len(text) <= limit:
        return [text]
    pieces: list[str] = []
    for piece in at.split(text):
        pieces.extend(then(piece, limit) if len(piece) > limit else [piece])
    return pieces
