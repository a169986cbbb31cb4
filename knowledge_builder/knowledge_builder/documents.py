"""What the builder reads: pages of documentation, and the chunks they are cut into.

A :class:`Page` is one document as fetched or read from a mirror: its address, the profiler it
documents, its format and text. A format reader (:mod:`knowledge_builder.formats`) cuts a page into
:class:`Chunk` s that stand on their own: prose under its heading path, one metric table, or one
definition list. Tables and definition lists carry :class:`Definition` s, one per metric the page
names, which the structural path turns into compendium entries with no model; every chunk's
``text`` is what a model reads in stage 1.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs
from attrs import validators as v

__all__ = ["FORMATS", "CHUNK_KINDS", "Page", "Definition", "Chunk"]

FORMATS = ("html", "md", "rst", "txt", "xml", "json", "yaml", "csv", "section", "man")
"""Formats a reader exists for: HTML pages, Markdown, reStructuredText, AsciiDoc-like text, XML
(DocBook manuals, counter definitions), JSON metric files, YAML counter definitions, CSV tables,
Nsight Compute's protobuf-text ``.section`` files, and manual pages in roff (``perf_event_open.2``)."""

CHUNK_KINDS = ("prose", "table", "definitions")

_non_empty = v.and_(v.instance_of(str), v.min_len(1))


def _texts(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(items)


def _definitions(items: Iterable[Definition]) -> tuple[Definition, ...]:
    return tuple(items)


@attrs.frozen(kw_only=True)
class Page:
    """One documentation page: where it came from, which profiler it documents, its format and text.

    ``url`` is the address entries cite: the page's own URL when crawled, the origin the mirror
    records for a mirrored file. ``path`` is the file's path inside a mirror ("" when crawled).
    """

    url: str = attrs.field(validator=_non_empty)
    profiler: str = attrs.field(validator=_non_empty)
    format: str = attrs.field(validator=v.in_(FORMATS))
    text: str = attrs.field(validator=v.instance_of(str))
    path: str = ""


@attrs.frozen(kw_only=True)
class Definition:
    """One metric a page names: its name as the tool spells it and what the page says of it.

    ``text`` is the page's description ("" when the page only names the metric, as a section file
    does); ``aliases`` are other spellings (a section's label, a legacy name); ``measured`` the
    formula, event or hardware unit behind it; ``context`` where it sits (a section, a group).
    ``role`` is ``glossary`` for a term that is not a metric but a part of metric names or of the
    tool's vocabulary (ncu's ``lts`` unit, its ``pct_of_peak_sustained_elapsed`` sub-metric): such
    terms document the metrics whose names are built from them, and never become entries.
    """

    term: str = attrs.field(validator=_non_empty)
    text: str = ""
    aliases: tuple[str, ...] = attrs.field(default=(), converter=_texts)
    measured: str = ""
    unit: str = ""
    context: str = ""
    role: str = attrs.field(default="metric", validator=v.in_(("metric", "glossary")))


@attrs.frozen(kw_only=True)
class Chunk:
    """A piece of a page that stands on its own.

    ``kind`` is ``prose`` (text under ``headings``), ``table`` (one table, rendered as text) or
    ``definitions`` (a definition list or a structured file's records). ``source`` is the page's
    URL, with ``#anchor`` where the page gives the part one.
    """

    profiler: str = attrs.field(validator=_non_empty)
    source: str = attrs.field(validator=_non_empty)
    headings: tuple[str, ...] = attrs.field(default=(), converter=_texts)
    kind: str = attrs.field(validator=v.in_(CHUNK_KINDS))
    text: str = attrs.field(validator=v.instance_of(str))
    definitions: tuple[Definition, ...] = attrs.field(default=(), converter=_definitions)

    @property
    def topic(self) -> str:
        """The heading path as one line: ``Metrics Reference > Launch Metrics``."""
        return " > ".join(h for h in self.headings if h) or "(untitled)"
