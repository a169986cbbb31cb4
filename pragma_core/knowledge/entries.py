"""The compendium: what pragma knows about each profiler's metrics, in short entries with sources.

A :class:`MetricEntry` says what one metric means, how it is measured, which bottleneck it reveals
and what to do about it, in the one vocabulary of :mod:`.vocabulary`; a :class:`GuideEntry` is a
short passage of a profiler's guide (a method, a caveat). A :class:`Compendium` holds one
profiler's entries; it is written as ``<profiler>.json`` (and rendered as markdown for people) by
the knowledge builder, and read by :mod:`pragma_core.knowledge` to document the Conductor's metrics::

    compendium = read_compendium(Path("compendium/valgrind.json"))
    compendium.find("D1 miss rate").meaning

Every entry names its ``source`` (the page it was read from) and ``built_by``: ``structural`` (read
from a metric table or definition list with no model), ``formula`` (a metric the profiler plugin
computes, documented by its formula and the documented meanings of its terms), or ``model:<name>``
(summarized by a language model).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs
from attrs import validators as v

from ..errors import RecordError
from ..files import atomic_write_text
from ..serialization import from_dict, read_json_object, to_dict

__all__ = [
    "COMPENDIUM_SCHEMA",
    "MetricEntry",
    "GuideEntry",
    "Compendium",
    "read_compendium",
    "write_compendium",
    "render_markdown",
]

COMPENDIUM_SCHEMA = 1
"""Grows when an entry changes in a way older readers cannot follow."""

INDEX_TEXT_CHARS = 200
"""Characters of a meaning or guide text the index embeds."""

_non_empty = v.and_(v.instance_of(str), v.min_len(1))


def _built_by(_instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if value not in ("structural", "formula") and not value.startswith("model:"):
        raise ValueError(f"{attribute.name} must be 'structural', 'formula' or 'model:<name>', got {value!r}")


def _strings(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        raise TypeError(f"expected a sequence of strings, got the single string {value!r}")
    return tuple(dict.fromkeys(str(item) for item in value if str(item).strip()))


@attrs.frozen(kw_only=True)
class MetricEntry:
    """One metric of one profiler: canonical name and aliases, meaning, measurement, bottleneck,
    remedies, unit, and the page it comes from."""

    profiler: str = attrs.field(validator=_non_empty)
    name: str = attrs.field(validator=_non_empty)
    aliases: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    meaning: str = attrs.field(validator=_non_empty)
    measured: str = ""
    bottleneck: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    remedies: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    unit: str = ""
    source: str = attrs.field(validator=_non_empty)
    built_by: str = attrs.field(validator=_built_by)

    @property
    def names(self) -> tuple[str, ...]:
        """The canonical name, then the aliases."""
        return (self.name, *self.aliases)

    def document(self) -> str:
        """The entry as one text: what the Conductor reads and what the index embeds."""
        parts = [f"{self.name} ({self.profiler})"]
        if self.aliases:
            parts.append("also called " + ", ".join(self.aliases[:6]))
        parts.append(self.meaning)
        if self.unit:
            parts.append(f"unit: {self.unit}")
        if self.measured:
            parts.append(f"measured: {self.measured}")
        if self.bottleneck:
            parts.append("reveals: " + ", ".join(self.bottleneck))
        if self.remedies:
            parts.append("remedies: " + "; ".join(self.remedies))
        return ". ".join(part.rstrip(". ") for part in parts) + "."

    def index_text(self) -> str:
        """What the index embeds: name, a few aliases, the start of the meaning, the bottleneck terms.
        Short on purpose: embedding time grows with length, and the opening carries the sense."""
        aliases = f" ({', '.join(self.aliases[:3])})" if self.aliases else ""
        terms = f" Reveals: {', '.join(self.bottleneck)}." if self.bottleneck else ""
        return f"{self.name}{aliases}: {_start(self.meaning)}{terms}"


def _start(text: str, limit: int = INDEX_TEXT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " ..."


@attrs.frozen(kw_only=True)
class GuideEntry:
    """A short passage of a profiler's guide: a topic (its headings) and the text."""

    profiler: str = attrs.field(validator=_non_empty)
    topic: str = attrs.field(validator=_non_empty)
    text: str = attrs.field(validator=_non_empty)
    source: str = attrs.field(validator=_non_empty)
    built_by: str = attrs.field(validator=_built_by)

    def document(self) -> str:
        return f"{self.topic} ({self.profiler}): {self.text}"

    def index_text(self) -> str:
        return f"{self.topic}: {_start(self.text)}"


def _metric_entries(items: Iterable[MetricEntry]) -> tuple[MetricEntry, ...]:
    return tuple(items)


def _guide_entries(items: Iterable[GuideEntry]) -> tuple[GuideEntry, ...]:
    return tuple(items)


@attrs.frozen(kw_only=True)
class Compendium:
    """All entries of one profiler; names (canonical and aliases) resolve through :meth:`find`."""

    profiler: str = attrs.field(validator=_non_empty)
    metrics: tuple[MetricEntry, ...] = attrs.field(default=(), converter=_metric_entries)
    guides: tuple[GuideEntry, ...] = attrs.field(default=(), converter=_guide_entries)
    _by_name: dict[str, MetricEntry] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        by_name: dict[str, MetricEntry] = {}
        for entry in self.metrics:  # canonical names first: an alias never shadows a name
            if entry.profiler != self.profiler:
                raise ValueError(f"entry {entry.name!r} is of {entry.profiler}, not {self.profiler}")
            if entry.name in by_name:
                raise ValueError(f"{self.profiler}: two entries are named {entry.name!r}")
            by_name[entry.name] = entry
        for entry in self.metrics:
            for alias in entry.aliases:
                by_name.setdefault(alias, entry)
        object.__setattr__(self, "_by_name", by_name)

    @property
    def entries(self) -> tuple[MetricEntry | GuideEntry, ...]:
        """Every entry: the metrics, then the guide passages."""
        return (*self.metrics, *self.guides)

    def find(self, name: str) -> MetricEntry | None:
        """The entry of a canonical name or alias, exactly as written; None when there is none."""
        return self._by_name.get(name)

    def names(self) -> frozenset[str]:
        """Every canonical name and alias."""
        return frozenset(self._by_name)

    def in_order(self) -> Compendium:
        """The same entries in the order files keep them: metrics by name, guides by topic."""
        return attrs.evolve(
            self,
            metrics=sorted(self.metrics, key=lambda e: (e.name.lower(), e.name)),
            guides=sorted(self.guides, key=lambda e: (e.topic.lower(), e.source, e.text)),
        )

    def content_hash(self) -> str:
        """A hash of every entry, whatever their order: any change of an entry changes it."""
        text = json.dumps(_plain(self.in_order()), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _plain(compendium: Compendium) -> dict[str, Any]:
    return {
        "schema_version": COMPENDIUM_SCHEMA,
        "profiler": compendium.profiler,
        "metrics": [to_dict(entry) for entry in compendium.metrics],
        "guides": [to_dict(entry) for entry in compendium.guides],
    }


def write_compendium(path: Path, compendium: Compendium) -> None:
    """Write ``<profiler>.json`` atomically, entries in a stable order so rebuilds diff cleanly."""
    text = json.dumps(_plain(compendium.in_order()), indent=1, sort_keys=True, ensure_ascii=False)
    atomic_write_text(Path(path), text + "\n")


def read_compendium(path: Path) -> Compendium:
    """Read a compendium file; a file that is not one raises :class:`RecordError` naming it."""
    path = Path(path)
    data = read_json_object(path, what="compendium file")
    if "profiler" not in data:
        raise RecordError(f"{path}: not a compendium (no 'profiler' field)")
    version = data.get("schema_version")
    if not isinstance(version, int) or version > COMPENDIUM_SCHEMA:
        raise RecordError(
            f"{path}: compendium schema {version!r}; this pragma reads {COMPENDIUM_SCHEMA}, "
            "upgrade pragma-core or rebuild the compendium"
        )
    try:
        return Compendium(
            profiler=data["profiler"],
            metrics=[from_dict(MetricEntry, item) for item in data.get("metrics", [])],
            guides=[from_dict(GuideEntry, item) for item in data.get("guides", [])],
        )
    except (RecordError, ValueError, TypeError) as error:
        raise RecordError(f"{path}: {error}") from None


def render_markdown(compendium: Compendium, *, limit_guides: int | None = None) -> str:
    """The compendium as a page people read: one heading per metric, then the guide passages."""
    lines = [
        f"# {compendium.profiler}: metric compendium",
        "",
        f"{len(compendium.metrics)} metrics, {len(compendium.guides)} guide passages. "
        "Each entry names the page it was read from and how it was built.",
        "",
    ]
    lines += ["## Metrics", ""]
    for entry in sorted(compendium.metrics, key=lambda e: e.name.lower()):
        lines += [f"### `{entry.name}`", "", entry.meaning, ""]
        facts = [
            ("aliases", ", ".join(f"`{a}`" for a in entry.aliases)),
            ("unit", entry.unit),
            ("measured", entry.measured),
            ("reveals", ", ".join(entry.bottleneck)),
            ("remedies", "; ".join(entry.remedies)),
            ("source", entry.source),
            ("built by", entry.built_by),
        ]
        lines += [f"- {label}: {value}" for label, value in facts if value] + [""]
    guides: Iterable[GuideEntry] = sorted(compendium.guides, key=lambda e: e.topic.lower())
    guides = list(guides)[:limit_guides] if limit_guides is not None else guides
    lines += ["## Guide", ""]
    for guide in guides:
        lines += [
            f"### {guide.topic}",
            "",
            guide.text,
            "",
            f"- source: {guide.source}",
            f"- built by: {guide.built_by}",
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"
