"""Reader for YAML documentation data: rocprofiler counter definitions and metric descriptions.

Two shapes carry metric definitions:

* rocprofiler-sdk's ``counter_defs.yaml`` (and ``--extra-counters`` files): ``counters``, a list
  of ``{name, description, definitions: [{architectures, expression | block, event}]}``. Each
  counter becomes one :class:`~knowledge_builder.documents.Definition`; ``measured`` is the
  definition of the newest architecture listed, and the chunk text shows every variant.
* rocprofiler-compute's ``metrics_description.yaml``: panels (``L2 Speed-of-Light``) mapping
  metric names (``HBM Bandwidth``) to ``{rst, unit}``. Each metric becomes a definition in its
  panel's chunk, its reStructuredText description cleaned to text.

Any other YAML document reads as prose, one section per top-level key.
"""

from __future__ import annotations

import re
from typing import Any

import yaml  # type: ignore[import-untyped]  # no stubs pinned in constraints.txt

from ..documents import Chunk, Definition, Page
from .counters_xml import gfx_sort_key
from .rst import inline_text
from .sizing import runs

__all__ = ["read"]

MAX_CHUNK_CHARS = 3000
"""Longest text a chunk gets; larger groups and sections are split over several chunks."""

_UNIT_ONLY = re.compile(r"Unit:\s*(\S+?)\.?")
# The same safe loader, in C when PyYAML has libyaml: counter_defs.yaml takes seconds otherwise.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read(page: Page) -> list[Chunk]:
    """Definitions for counter or metric-description files, prose for any other YAML."""
    try:
        data = yaml.load(page.text, Loader=_SAFE_LOADER)
    except yaml.YAMLError:
        return _prose(page, [((), page.text.splitlines())])
    counters = _counter_list(data)
    if counters:
        return _counter_chunks(page, *counters)
    if _is_metric_panels(data):
        return _panel_chunks(page, data)
    if isinstance(data, dict):
        return _prose(page, [((str(key),), _render(value)) for key, value in data.items()])
    return _prose(page, [((), _render(data))])


def _counter_list(data: Any) -> tuple[str, list[dict]] | None:
    """The tool name and counter records of a rocprofiler counter-definition document."""
    if not isinstance(data, dict):
        return None
    for root, body in data.items():
        counters = body.get("counters") if isinstance(body, dict) else None
        if isinstance(counters, list) and counters and all(isinstance(c, dict) and c.get("name") for c in counters):
            return str(root), counters
    return None


def _counter_chunks(page: Page, tool: str, counters: list[dict]) -> list[Chunk]:
    groups: dict[str, list[tuple[Definition, str]]] = {}
    for counter in counters:
        variants = [(_architectures(d), _measured(d)) for d in counter.get("definitions") or [] if isinstance(d, dict)]
        variants = [(archs, measured) for archs, measured in variants if archs or measured]
        description = " ".join(str(counter.get("description") or "").split())
        unit = _UNIT_ONLY.fullmatch(description)
        newest = max(variants, key=lambda v: max(map(gfx_sort_key, v[0]), default=(-1, -1, -1, "")), default=((), ""))
        architectures = sorted({a for archs, _ in variants for a in archs}, key=gfx_sort_key)
        definition = Definition(
            term=str(counter["name"]),
            text=description,
            measured=newest[1],
            unit=unit.group(1) if unit else "",
            context=", ".join(architectures),
        )
        lines = [f"{definition.term}: {description}" if description else definition.term]
        lines += [f"  {', '.join(archs)}: {measured}" if archs else f"  {measured}" for archs, measured in variants]
        groups.setdefault(_group(newest[1]), []).append((definition, "\n".join(lines)))
    heading = f"{tool} counters"
    return [chunk for group, entries in groups.items() for chunk in _definition_chunks(page, (heading, group), entries)]


def _architectures(definition: dict) -> tuple[str, ...]:
    return tuple(sorted({str(a) for a in definition.get("architectures") or []}, key=gfx_sort_key))


def _measured(definition: dict) -> str:
    if definition.get("expression"):
        return str(definition["expression"]).strip()
    if "block" in definition:
        return f"hardware counter {definition['block']} event {definition.get('event', '?')}"
    return ""


def _group(measured: str) -> str:
    match = re.fullmatch(r"hardware counter (\S+) event .*", measured)
    return f"Hardware counters of block {match.group(1)}" if match else "Derived metrics"


def _is_metric_panels(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and bool(data)
        and all(
            isinstance(metrics, dict)
            and metrics
            and all(isinstance(entry, dict) and "rst" in entry for entry in metrics.values())
            for metrics in data.values()
        )
    )


def _panel_chunks(page: Page, panels: dict) -> list[Chunk]:
    chunks: list[Chunk] = []
    for panel, metrics in panels.items():
        entries = []
        for name, entry in metrics.items():
            unit = " ".join(str(entry.get("unit") or "").split())
            definition = Definition(
                term=str(name), text=inline_text(str(entry["rst"] or "")), unit=unit, context=str(panel)
            )
            line = f"{definition.term}: {definition.text}" + (f" (unit: {unit})" if unit else "")
            entries.append((definition, line))
        chunks += _definition_chunks(page, (str(panel),), entries)
    return chunks


def _definition_chunks(page: Page, headings: tuple[str, ...], entries: list[tuple[Definition, str]]) -> list[Chunk]:
    lead = " > ".join(headings) + ":"
    chunks: list[Chunk] = []
    # Each line counts with the newline before it, after the lead.
    for batch in runs(entries, lambda entry: len(entry[1]) + 1, MAX_CHUNK_CHARS - len(lead)):
        text = "\n".join([lead, *(line for _, line in batch)])
        chunks.append(
            Chunk(
                profiler=page.profiler,
                source=page.url,
                headings=headings,
                kind="definitions",
                text=text,
                definitions=[definition for definition, _ in batch],
            )
        )
    return chunks


def _render(value: Any, indent: int = 0) -> list[str]:
    """A YAML value as indented ``key: value`` and ``- item`` lines."""
    pad = " " * indent
    if isinstance(value, dict):
        lines = []
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                lines += [f"{pad}{key}:", *_render(item, indent + 2)]
            else:
                lines.append(f"{pad}{key}: {_scalar(item)}")
        return lines
    if isinstance(value, list):
        lines = []
        for item in value:
            if isinstance(item, (dict, list)) and item:
                nested = _render(item, indent + 2)
                lines.append(f"{pad}- {nested[0].lstrip()}")
                lines += nested[1:]
            else:
                lines.append(f"{pad}- {_scalar(item)}")
        return lines
    return [f"{pad}{_scalar(value)}"]


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


def _prose(page: Page, sections: list[tuple[tuple[str, ...], list[str]]]) -> list[Chunk]:
    chunks: list[Chunk] = []
    for headings, lines in sections:
        for batch in runs([line for line in lines if line.strip()], lambda line: len(line) + 1, MAX_CHUNK_CHARS):
            chunks.append(
                Chunk(profiler=page.profiler, source=page.url, headings=headings, kind="prose", text="\n".join(batch))
            )
    return chunks
