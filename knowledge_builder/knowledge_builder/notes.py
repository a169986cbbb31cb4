"""Stage-1 results: what one chunk says about metrics, before entries are merged per profiler.

A :class:`MetricNote` is a metric as one chunk documents it: any field may be empty, and the same
metric gets one note from every page (and every CPU or GPU architecture) that mentions it. Stage 2
(:mod:`knowledge_builder.merge` without a model, :mod:`knowledge_builder.summarize` with one)
merges the notes of one metric into one :class:`~pragma_core.knowledge.MetricEntry`.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from pragma_core.knowledge.entries import GuideEntry

__all__ = ["MetricNote", "Stage1"]


def _texts(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(items)


@attrs.frozen(kw_only=True)
class MetricNote:
    """One chunk's account of one metric. ``glossary`` marks a term that documents parts of
    metric names (a unit, a sub-metric) and is no metric itself."""

    profiler: str
    name: str
    aliases: tuple[str, ...] = attrs.field(default=(), converter=_texts)
    meaning: str = ""
    measured: str = ""
    bottleneck: tuple[str, ...] = attrs.field(default=(), converter=_texts)
    remedies: tuple[str, ...] = attrs.field(default=(), converter=_texts)
    unit: str = ""
    context: str = ""
    source: str
    built_by: str
    glossary: bool = False


def _notes(items: Iterable[MetricNote]) -> tuple[MetricNote, ...]:
    return tuple(items)


def _guides(items: Iterable[GuideEntry]) -> tuple[GuideEntry, ...]:
    return tuple(items)


@attrs.frozen(kw_only=True)
class Stage1:
    """Everything stage 1 got from a profiler's chunks: metric notes and guide passages."""

    notes: tuple[MetricNote, ...] = attrs.field(default=(), converter=_notes)
    guides: tuple[GuideEntry, ...] = attrs.field(default=(), converter=_guides)

    def __add__(self, other: Stage1) -> Stage1:
        return Stage1(notes=self.notes + other.notes, guides=self.guides + other.guides)
