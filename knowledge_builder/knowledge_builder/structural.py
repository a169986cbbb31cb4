"""Stage 1 without a model: metric notes from tables and definition lists, guide passages from prose.

Format readers already found every metric a page defines (:class:`~knowledge_builder.documents.Definition`);
this module turns each into a :class:`~knowledge_builder.notes.MetricNote` as written, and each
prose chunk into a short :class:`~pragma_core.knowledge.GuideEntry`: its heading path and its
opening sentences (the compendium carries short entries with their source, never whole pages).
Nothing is summarized or invented here; every entry it yields is ``built_by="structural"``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pragma_core.knowledge.entries import GuideEntry

from .documents import Chunk
from .notes import MetricNote, Stage1

__all__ = ["GUIDE_CHARS", "MEANING_CHARS", "structural_stage1", "opening"]

GUIDE_CHARS = 320
"""Longest guide passage the structural path keeps: the opening sentences of a section."""

MEANING_CHARS = 700
"""Longest meaning kept from a definition."""

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"(])")
_MIN_GUIDE_CHARS = 60


def opening(text: str, limit: int) -> str:
    """Whole sentences from the start of ``text`` up to ``limit`` characters (at least one, cut)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    taken = ""
    for sentence in _SENTENCE_END.split(text):
        if len(taken) + len(sentence) + 1 > limit:
            break
        taken = f"{taken} {sentence}".strip()
    return taken or text[: limit - 3].rstrip() + "..."


def structural_stage1(chunks: Iterable[Chunk]) -> Stage1:
    """Notes for every definition, a guide entry for every prose chunk with something to say."""
    notes: list[MetricNote] = []
    guides: list[GuideEntry] = []
    for chunk in chunks:
        for definition in chunk.definitions:
            notes.append(
                MetricNote(
                    profiler=chunk.profiler,
                    name=definition.term.strip(),
                    aliases=definition.aliases,
                    meaning=opening(definition.text, MEANING_CHARS),
                    measured=" ".join(definition.measured.split()),
                    unit=definition.unit,
                    context=definition.context or chunk.topic,
                    source=chunk.source,
                    built_by="structural",
                    glossary=definition.role == "glossary",
                )
            )
        if chunk.kind == "prose":
            text = opening(chunk.text, GUIDE_CHARS)
            if len(text) >= _MIN_GUIDE_CHARS:
                guides.append(
                    GuideEntry(
                        profiler=chunk.profiler,
                        topic=chunk.topic,
                        text=text,
                        source=chunk.source,
                        built_by="structural",
                    )
                )
    return Stage1(notes=notes, guides=guides)
