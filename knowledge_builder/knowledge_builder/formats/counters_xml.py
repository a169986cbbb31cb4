"""Reader for rocprofiler counter-definition XML (``basic_counters.xml``, ``derived_counters.xml``).

These files are not well-formed XML: attribute values such as ``expr=100*SQ_WAVES/...`` are
unquoted, and ``# comment`` lines sit between elements. They are read with a tolerant scan of
``<metric name=.. [block=.. event=..] [expr=..] descr=..>`` tags, grouped by their enclosing
architecture element (``<gfx942 base="gfx940">``). An architecture inherits its ``base``
element's metrics and may redefine them, as rocprofiler resolves them.

The same metric is repeated for many architectures, so each distinct (name, description,
expression or event) becomes one :class:`~knowledge_builder.documents.Definition` whose
``context`` lists the architectures it holds for. Definitions that hold for the same
architectures share a chunk.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from ..documents import Chunk, Definition, Page
from .sizing import runs

__all__ = ["read", "gfx_sort_key"]

MAX_CHUNK_CHARS = 3000
"""Longest text a chunk gets; a larger group of definitions is split over several chunks."""

_VALUE = r"(?:\"[^\"]*\"|[^\s\">]+)"
_ELEMENT = re.compile(rf"<([\w-]+)((?:\s+[\w-]+\s*=\s*{_VALUE})*)\s*>(.*?)</\1\s*>", re.S)
_METRIC = re.compile(rf"<metric((?:\s+[\w-]+\s*=\s*{_VALUE})*)\s*/?>")
_ATTRIBUTE = re.compile(r"([\w-]+)\s*=\s*(?:\"([^\"]*)\"|([^\s\">]+))")
_ARCHITECTURE = re.compile(r"gfx[0-9a-f]+")
_UNIT_ONLY = re.compile(r"Unit:\s*(\S+?)\.?")


def gfx_sort_key(architecture: str) -> tuple[int, int, int, str]:
    """Order of AMD GPU architecture names, oldest first: gfx9 < gfx90a < gfx942 < gfx10 < gfx1201.

    A family name (``gfx9``, ``gfx11``) sorts before the processors of its family; the last two
    characters of a processor name are its minor version and stepping, in hexadecimal. Names of
    another shape sort first, by name.
    """
    family = re.fullmatch(r"gfx(\d{1,2})", architecture, re.I)
    if family:
        return int(family.group(1)), -1, -1, architecture
    processor = re.fullmatch(r"gfx(\d+)([0-9a-f])([0-9a-f])", architecture, re.I)
    if processor:
        major, minor, stepping = processor.groups()
        return int(major), int(minor, 16), int(stepping, 16), architecture
    return -1, -1, -1, architecture


@dataclass(frozen=True)
class _Metric:
    position: int
    name: str
    description: str
    measured: str


def read(page: Page) -> list[Chunk]:
    """One definitions chunk per group of metrics that hold for the same architectures."""
    own: dict[str, dict[str, _Metric]] = {}
    bases: dict[str, str] = {}
    for element in _ELEMENT.finditer(page.text):
        tag = element.group(1)
        base = _attributes(element.group(2)).get("base", "")
        if base and base != tag:
            bases.setdefault(tag, base)
        metrics = own.setdefault(tag, {})
        for tag_match in _METRIC.finditer(element.group(3)):
            metric = _metric(_attributes(tag_match.group(1)), element.start(3) + tag_match.start())
            if metric:
                metrics[metric.name] = metric

    # A metric repeated verbatim in several elements is one definition, placed where it first
    # appears in the file.
    architectures: dict[tuple[str, str, str], list[str]] = {}
    first_position: dict[tuple[str, str, str], int] = {}
    for tag in own:
        if _ARCHITECTURE.fullmatch(tag):
            for metric in _resolved(tag, own, bases, frozenset()).values():
                key = (metric.name, metric.description, metric.measured)
                architectures.setdefault(key, []).append(tag)
                first_position[key] = min(first_position.get(key, metric.position), metric.position)

    groups: dict[str, list[Definition]] = {}
    for key in sorted(architectures, key=lambda k: (first_position[k], k)):
        name, description, measured = key
        context = ", ".join(sorted(set(architectures[key]), key=gfx_sort_key))
        unit = _UNIT_ONLY.fullmatch(description)
        groups.setdefault(context, []).append(
            Definition(
                term=name, text=description, measured=measured, unit=unit.group(1) if unit else "", context=context
            )
        )
    return _chunks(page, groups)


def _attributes(text: str) -> dict[str, str]:
    return {
        m.group(1): html.unescape(m.group(2) if m.group(2) is not None else m.group(3))
        for m in _ATTRIBUTE.finditer(text)
    }


def _metric(attributes: dict[str, str], position: int) -> _Metric | None:
    name = attributes.get("name", "").strip()
    if not name:
        return None
    if "expr" in attributes:
        measured = attributes["expr"].strip()
    elif "block" in attributes:
        measured = f"hardware counter {attributes['block']} event {attributes.get('event', '?')}"
    else:
        measured = ""
    description = " ".join(attributes.get("descr", "").split())
    return _Metric(position, name, description, measured)


def _resolved(
    tag: str, own: dict[str, dict[str, _Metric]], bases: dict[str, str], visiting: frozenset[str]
) -> dict[str, _Metric]:
    """The metrics an element defines, over those it inherits from its base chain."""
    base = bases.get(tag, "")
    metrics = (
        {} if not base or base in visiting or base not in own else dict(_resolved(base, own, bases, visiting | {tag}))
    )
    metrics.update(own.get(tag, {}))
    return metrics


def _chunks(page: Page, groups: dict[str, list[Definition]]) -> list[Chunk]:
    title = PurePosixPath(page.path or page.url).stem.replace("_", " ").capitalize()
    chunks: list[Chunk] = []
    for context, definitions in groups.items():
        lead = f"{title} for {context}:"
        # Each definition's line counts with the newline before it, after the lead.
        for batch in runs(definitions, lambda d: len(_line(d)) + 1, MAX_CHUNK_CHARS - len(lead)):
            chunks.append(_chunk(page, title, context, lead, batch))
    return chunks


def _chunk(page: Page, title: str, context: str, lead: str, batch: list[Definition]) -> Chunk:
    text = "\n".join([lead, *(_line(definition) for definition in batch)])
    return Chunk(
        profiler=page.profiler,
        source=page.url,
        headings=(title, context),
        kind="definitions",
        text=text,
        definitions=batch,
    )


def _line(definition: Definition) -> str:
    described = f"{definition.term}: {definition.text}" if definition.text else definition.term
    if not definition.measured:
        return described
    if definition.measured.startswith("hardware counter"):
        return f"{described} [{definition.measured}]"
    return f"{described} [expression: {definition.measured}]"
