"""Nsight Compute section reader: the metrics a ``.section`` file shows, and what it says of itself.

A section file is protobuf text format (``Identifier: "SpeedOfLight"``, ``Header { Metrics {
Label: "Duration" Name: "gpu__time_duration.sum" } }``). A page becomes

* prose under the section's ``DisplayName``: its ``Description``, its identifier and sets (how
  ``ncu --section`` and ``--set`` name it), then ``Label: Description`` of every chart, table or
  timeline row the file describes (a ``BarChart``, a ``MetricRows``);
* definitions chunks with one :class:`Definition` per metric the file names, wherever it sits
  (header, body tables and charts, roofline expressions, derived ``MetricDefinitions``, metric
  ``Options`` for other architectures, ``SuffixTable`` base names with their suffixes).

The term is the metric name as ``ncu --metrics`` takes it: collection prefixes
(``pmsampling:``, ``warpsampling:``, ``breakdown:``) and counter-domain prefixes
(``TPC.TriageCompute.``) are removed; ``group:`` stays, as metric groups are named with it. The
section's labels become aliases, a derived metric's expression becomes ``measured``, the
architectures a metric is filtered to are noted in ``context``. The file gives no description of
its metrics, so ``text`` is empty unless a metric carries its own ``Description``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..documents import Chunk, Definition, Page
from .sizing import pack, runs

__all__ = ["read"]

_MAX_CHUNK = 3000

# Strings, comments, punctuation and bare words of protobuf text format.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|#[^\n]*|[{}<>:\[\],;]|[^\s{}<>:"\'\[\],;#]+')
_METRIC_NAME = re.compile(r"^(group:)?[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$")
_COLLECTION_PREFIX = re.compile(r"^(pmsampling|warpsampling|breakdown):")
_DOMAIN_PREFIX = re.compile(r"^(?:[A-Z][A-Za-z0-9_]*\.)+")
# Messages whose Name is a metric; Options only when it sits inside one of these.
_METRIC_FIELDS = {"Metrics", "Metric", "ValuePerCycleMetrics", "CyclesPerSecondMetric", "MetricDefinitions"}
# Messages whose Names are counter domains, sampling groups or sets, never metrics.
_NOT_METRICS = {"Filter", "Sets", "Group", "SchedulingHints"}

Message = list[tuple[str, object]]


def read(page: Page) -> list[Chunk]:
    """The section's description with those of its charts, and its metrics."""
    root = _parse(page.text)
    name = _scalar(root, "DisplayName") or _scalar(root, "Identifier") or page.path or page.url
    collector = _Collector(section=name)
    collector.walk(root, "", metric_label=None, arch=())
    paragraphs = _overview(root) + [f"{label}: {description}" for label, description in collector.described]
    chunks = [
        Chunk(profiler=page.profiler, source=page.url, headings=(name,), kind="prose", text=text)
        for text in pack(paragraphs, _MAX_CHUNK, "\n\n")
    ]
    # Each definition's line counts with its newline.
    for part in runs(collector.definitions(), lambda d: len(_line(d)) + 1, _MAX_CHUNK):
        chunks.append(
            Chunk(
                profiler=page.profiler,
                source=page.url,
                headings=(name,),
                kind="definitions",
                text="\n".join(_line(d) for d in part),
                definitions=tuple(part),
            )
        )
    return chunks


# --------------------------------------------------------------------------------------------
# Protobuf text format
# --------------------------------------------------------------------------------------------


def _parse(text: str) -> Message:
    """The file as nested (field, value) lists; a value is a string or a nested message."""
    tokens = [t for t in _TOKEN.findall(text) if not t.startswith("#")]
    root: Message = []
    stack = [root]
    i, n = 0, len(tokens)
    while i < n:
        token = tokens[i]
        i += 1
        if token in ("}", ">"):
            if len(stack) > 1:
                stack.pop()
            continue
        if token in (",", ";") or i >= n:
            continue
        if tokens[i] == ":":
            i += 1
        if i >= n:
            break
        value = tokens[i]
        if value in ("{", "<"):
            message: Message = []
            stack[-1].append((token, message))
            stack.append(message)
            i += 1
        elif value == "[":
            i += 1
            while i < n and tokens[i] != "]":
                if tokens[i] != ",":
                    stack[-1].append((token, _unquote(tokens[i])))
                i += 1
            i += 1
        else:
            parts = [_unquote(value)]
            i += 1
            while i < n and tokens[i][:1] in ('"', "'") and tokens[i - 1][:1] in ('"', "'"):
                parts.append(_unquote(tokens[i]))  # adjacent strings concatenate
                i += 1
            stack[-1].append((token, "".join(parts)))
    return root


def _unquote(token: str) -> str:
    if token[:1] in ('"', "'") and len(token) >= 2:
        escapes = {"n": "\n", "t": "\t"}
        return re.sub(r"\\(.)", lambda m: escapes.get(m.group(1), m.group(1)), token[1:-1])
    return token


def _scalar(message: Message, key: str) -> str:
    return next((v for k, v in message if k == key and isinstance(v, str)), "")


def _messages(message: Message, key: str) -> list[Message]:
    return [v for k, v in message if k == key and isinstance(v, list)]


# --------------------------------------------------------------------------------------------
# What the section says of itself
# --------------------------------------------------------------------------------------------


def _overview(root: Message) -> list[str]:
    """The section's description, then how ncu names it: identifier, sets, the section it extends."""
    facts = []
    identifier = _scalar(root, "Identifier")
    if identifier:
        facts.append(f"Section identifier: {identifier}.")
    sets = [s for s in (_scalar(m, "Identifier") for m in _messages(root, "Sets")) if s]
    if sets:
        facts.append(f"Sets: {', '.join(sets)}.")
    extends = _scalar(root, "Extends")
    if extends:
        facts.append(f"Extends: {extends}.")
    return [x for x in (_scalar(root, "Description").strip(), " ".join(facts)) if x]


# --------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------


@dataclass
class _Occurrence:
    aliases: list[str] = field(default_factory=list)
    text: str = ""
    measured: str = ""
    arch: list[str] = field(default_factory=list)
    unfiltered: bool = False  # shown somewhere without an architecture filter


@dataclass
class _Collector:
    """Walks the message tree, gathering every metric once with all its labels."""

    section: str
    found: dict[str, _Occurrence] = field(default_factory=dict)
    described: list[tuple[str, str]] = field(default_factory=list)

    def walk(self, message: Message, key: str, metric_label: str | None, arch: tuple[str, ...]) -> None:
        """Gather the metrics under ``message``, which sits in its parent under ``key``.
        ``metric_label`` is the label of the metric ``message`` belongs to (None outside one): a
        metric's ``Options`` name the same quantity for other architectures. A message's own
        ``Filter`` narrows the architectures ``arch`` its contents apply to."""
        arch = _arch(message) or arch
        label, description = _scalar(message, "Label"), _scalar(message, "Description").strip()
        name = _scalar(message, "Name")
        is_metric = bool(name) and (key in _METRIC_FIELDS or (key == "Options" and metric_label is not None))
        if is_metric:
            self._add(name, label or metric_label or "", description, _scalar(message, "Expression"), arch)
        elif label and description and key and (label, description) not in self.described:
            self.described.append((label, description))
        if key == "SuffixTable":
            self._suffix_table(message, arch)
        for child_key, child in message:
            if not isinstance(child, list) or child_key in _NOT_METRICS:
                continue
            if key == "SuffixTable" and child_key in ("Suffixes", "BaseNames"):
                continue
            self.walk(child, child_key, (label or metric_label or "") if is_metric else None, arch)

    def _suffix_table(self, table: Message, arch: tuple[str, ...]) -> None:
        """A suffix table shows every base name with every suffix: ``gr__workids_requested.avg``."""
        suffixes = [
            (s, _scalar(s, "Name"), _scalar(s, "Label"))
            for group in _messages(table, "Suffixes")
            for s in _messages(group, "Suffix")
        ]
        for group in _messages(table, "BaseNames"):
            for base in _messages(group, "BaseName"):
                base_name, base_label = _scalar(base, "Name"), _scalar(base, "Label")
                for suffix, suffix_name, suffix_label in suffixes:
                    label = f"{base_label} ({suffix_label})" if base_label and suffix_label else base_label
                    self._add(base_name + suffix_name, label, "", "", _arch(base) or _arch(suffix) or arch)

    def _add(self, raw_name: str, label: str, description: str, expression: str, arch: tuple[str, ...]) -> None:
        name = _DOMAIN_PREFIX.sub("", _COLLECTION_PREFIX.sub("", raw_name.strip()))
        if not _METRIC_NAME.match(name):
            return
        occurrence = self.found.setdefault(name, _Occurrence())
        # "{UNIT}: {COMPOUND_NAME}" is a template the tool fills in; a label that is itself a
        # metric name says nothing more.
        if label and "{" not in label and "__" not in label and label not in occurrence.aliases:
            occurrence.aliases.append(label)
        occurrence.text = occurrence.text or description
        occurrence.measured = occurrence.measured or expression.strip()
        if arch:
            occurrence.arch.extend(a for a in arch if a not in occurrence.arch)
        else:
            occurrence.unfiltered = True

    def definitions(self) -> list[Definition]:
        result = []
        for name, occurrence in self.found.items():
            context = self.section
            if occurrence.arch and not occurrence.unfiltered:
                context = f"{self.section} [{', '.join(occurrence.arch)}]"
            result.append(
                Definition(
                    term=name,
                    text=occurrence.text,
                    aliases=tuple(occurrence.aliases),
                    measured=occurrence.measured,
                    context=context,
                )
            )
        return result


def _arch(message: Message) -> tuple[str, ...]:
    """The architectures a message's own Filter admits, as ``CC_75-CC_86`` ranges."""
    ranges = []
    for filter_ in _messages(message, "Filter"):
        for item in [filter_] + _messages(filter_, "Items"):
            low, high = _scalar(item, "MinArch"), _scalar(item, "MaxArch")
            if low and high:
                ranges.append(low if low == high else f"{low}-{high}")
            elif low:
                ranges.append(f"{low} and newer")
            elif high:
                ranges.append(f"up to {high}")
    return tuple(ranges)


def _line(definition: Definition) -> str:
    labels = f" ({'; '.join(definition.aliases)})" if definition.aliases else ""
    measured = f" = {definition.measured}" if definition.measured else ""
    return f"{definition.term}{labels}{measured}"
