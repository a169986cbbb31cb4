"""Reader for perf's metric JSON files: the kernel's pmu-events tables and Intel's perfmon metrics.

Two layouts carry metrics:

* the kernel's ``tools/perf/pmu-events/arch/*/*.json`` (and the perf-format files Intel publishes
  for them): a list of records with ``MetricName``, ``BriefDescription``, ``PublicDescription``,
  ``MetricExpr``, ``MetricGroup``, ``ScaleUnit`` and, on hybrid CPUs, ``Unit`` (the PMU); event
  records (``EventName``, ``EventCode``, ``UMask``) may sit in the same list;
* Intel's ``perfmon`` ``*_metrics.json``: an object with a ``Header`` and ``Metrics``, each with
  ``MetricName``, ``LegacyName``, ``Level``, ``BriefDescription``, ``UnitOfMeasure``, ``Events``
  (formula aliases), ``Formula``, ``BaseFormula``, ``Category``, ``ParentCategory``, ``Threshold``
  and ``MetricGroup``.

Every record becomes a :class:`Definition`; records are chunked by PMU and metric group.
"""

from __future__ import annotations

import json
import re
from pathlib import PurePosixPath

import attrs

from ..documents import Chunk, Definition, Page
from .sizing import runs

__all__ = ["read"]

_MAX_CHARS = 3000
_LEVEL_GROUP = re.compile(r"(?:TopdownL|TmaL)\d+")
_SCALE = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*")
_TMA_REFERENCE = re.compile(r"\btma_\w+")
_FORMULA_ALIAS = re.compile(r"\b[A-Za-z_]\w*\b")
_EVENTS_GROUP = "PMU events"


@attrs.frozen
class _Record:
    """One metric or event of the file: its definition, its chunk group and its extra facts."""

    definition: Definition
    group: str
    pmu: str
    details: tuple[tuple[str, str], ...]


def read(page: Page) -> list[Chunk]:
    """One definitions chunk (or several, for a large group) per PMU and metric group."""
    data = json.loads(page.text)
    if isinstance(data, dict) and isinstance(data.get("Metrics"), list):
        entries = data["Metrics"]
    elif isinstance(data, list):
        entries = data
    else:
        return []
    entries = [entry for entry in entries if isinstance(entry, dict)]
    naming = _PerfmonNaming.of(entries)
    records = [record for entry in entries if (record := _record(entry, naming)) is not None]
    groups: dict[tuple[str, str], list[_Record]] = {}
    for record in records:
        groups.setdefault((record.pmu, record.group), []).append(record)
    title = _file_title(page)
    chunks: list[Chunk] = []
    for (pmu, group), members in groups.items():
        headings = tuple(part for part in (title, pmu, group) if part)
        # Each record's text counts with the blank line that follows it.
        for run in runs(members, lambda record: len(_render(record)) + 2, _MAX_CHARS):
            chunks.append(
                Chunk(
                    profiler=page.profiler,
                    source=page.url,
                    headings=headings,
                    kind="definitions",
                    text="\n\n".join(_render(r) for r in run),
                    definitions=tuple(r.definition for r in run),
                )
            )
    return chunks


def _file_title(page: Page) -> str:
    """A heading naming the file: its folder and name (``skylake/skl-metrics.json``)."""
    path = PurePosixPath(page.path or page.url.split("#")[0])
    return "/".join(path.parts[-2:])


@attrs.frozen
class _PerfmonNaming:
    """What a perfmon file says about its TMA metrics as a whole.

    ``perf_spelling``: perfmon names a TMA node ``Frontend_Bound``, perf ``tma_frontend_bound``.
    The file shows perf's spelling in the ``BaseFormula`` of metrics built on others
    (``tma_fetch_latency * ...``); when every ``tma_*`` name there is one of the file's TMA
    metrics, lower-cased and prefixed, the file supports that spelling for all its TMA metrics.
    ``tree_nodes``: the TMA hierarchy's nodes, the metrics that have a parent or are one.
    """

    perf_spelling: bool
    tree_nodes: frozenset[str]

    @classmethod
    def of(cls, entries: list[dict]) -> _PerfmonNaming:
        """What the file's records show (nothing, for a file without TMA metrics)."""
        tma = [entry for entry in entries if entry.get("Category") == "TMA"]
        perf_names = {"tma_" + str(entry.get("MetricName", "")).lower() for entry in tma}
        referenced = {name for entry in entries for name in _TMA_REFERENCE.findall(str(entry.get("BaseFormula", "")))}
        parents = {str(entry["ParentCategory"]) for entry in tma if entry.get("ParentCategory")}
        children = {str(entry.get("MetricName")) for entry in tma if entry.get("ParentCategory")}
        return cls(bool(referenced) and referenced <= perf_names, frozenset(parents | children))

    def perf_name(self, name: str) -> str:
        """The TMA metric's name as perf spells it, when the file supports that spelling."""
        return f"tma_{name.lower()}" if self.perf_spelling else name


def _record(entry: dict, naming: _PerfmonNaming) -> _Record | None:
    """The record of one JSON object, or None when it names neither a metric nor an event."""
    if "MetricName" in entry and "Formula" in entry:
        return _perfmon_record(entry, naming)
    if "MetricName" in entry:
        return _kernel_record(entry)
    if "EventName" in entry:
        return _event_record(entry)
    return None


def _kernel_record(entry: dict) -> _Record:
    """A metric of the kernel's pmu-events layout."""
    groups = _groups(entry.get("MetricGroup"))
    pmu = _clean(entry.get("Unit"))
    context = ", ".join(groups)
    definition = Definition(
        term=_clean(entry["MetricName"]),
        text=_description(entry),
        measured=_clean(entry.get("MetricExpr")),
        unit=_unit(entry.get("ScaleUnit")),
        context=f"{pmu}: {context}" if pmu and context else pmu or context,
    )
    details = (("Threshold", _clean(entry.get("MetricThreshold"))), ("Groups", _clean(entry.get("MetricGroup"))))
    return _Record(definition, _home_group(groups), pmu, details)


def _perfmon_record(entry: dict, naming: _PerfmonNaming) -> _Record:
    """A metric of Intel's perfmon layout, named as perf names it when the file supports that.

    Nodes of the TMA hierarchy are chunked by level (``TmaL3``, as the file names its level
    groups); other metrics by their first metric group, else their category.
    """
    name = _clean(entry["MetricName"])
    legacy = _clean(entry.get("LegacyName"))
    is_tma = entry.get("Category") == "TMA"
    term = naming.perf_name(name) if is_tma else name
    aliases = tuple(dict.fromkeys(a for a in (name, legacy) if a and a != term))
    parent = _clean(entry.get("ParentCategory"))
    category = _clean(entry.get("Category"))
    level = f" level {entry['Level']}" if is_tma and entry.get("Level") else ""
    groups = _groups(entry.get("MetricGroup"))
    context = "; ".join(
        part
        for part in (
            f"{category}{level}" if category else "",
            f"under {naming.perf_name(parent)}" if parent else "",
            ", ".join(groups),
        )
        if part
    )
    definition = Definition(
        term=term,
        text=_description(entry),
        aliases=aliases,
        measured=_formula(entry),
        unit=_clean(entry.get("UnitOfMeasure")),
        context=context,
    )
    threshold = entry.get("Threshold")
    threshold = threshold.get("BaseFormula") if isinstance(threshold, dict) else None
    details = (
        ("Threshold", _clean(threshold)),
        ("Groups", _clean(entry.get("MetricGroup"))),
        ("Locate with", _clean(entry.get("LocateWith"))),
    )
    if is_tma and name in naming.tree_nodes and entry.get("Level"):
        group = f"TmaL{entry['Level']}"
    else:
        group = _home_group(groups) or category
    return _Record(definition, group, "", details)


def _event_record(entry: dict) -> _Record:
    """A hardware event listed among the metrics, with its encoding as perf's raw syntax."""
    fields = (("EventCode", "event"), ("UMask", "umask"))
    encoding = ",".join(f"{field}={entry[key]}" for key, field in fields if entry.get(key))
    pmu = _clean(entry.get("Unit"))
    definition = Definition(
        term=_clean(entry["EventName"]), text=_description(entry), measured=encoding, context=_EVENTS_GROUP
    )
    return _Record(definition, _EVENTS_GROUP, pmu, ())


def _description(entry: dict) -> str:
    """The longer of the public and the brief description."""
    texts = (_clean(entry.get("PublicDescription")), _clean(entry.get("BriefDescription")))
    return max(texts, key=len)


def _formula(entry: dict) -> str:
    """The perfmon formula in event names: ``BaseFormula``, else ``Formula`` with aliases resolved."""
    base = _clean(entry.get("BaseFormula"))
    if base:
        return base
    names = {
        item["Alias"]: item["Name"]
        for key in ("Events", "Constants")
        for item in entry.get(key) or ()
        if isinstance(item, dict) and "Alias" in item
    }
    return _FORMULA_ALIAS.sub(lambda match: names.get(match.group(), match.group()), _clean(entry.get("Formula")))


def _groups(value: object) -> list[str]:
    """The metric groups of a ``MetricGroup`` field (``PGO;TopdownL1;tma_L1_group``)."""
    return [group.strip() for group in str(value or "").split(";") if group.strip()]


def _home_group(groups: list[str]) -> str:
    """The group a metric is chunked under: its TMA level when it has one, else its first group."""
    level = next((group for group in groups if _LEVEL_GROUP.fullmatch(group)), "")
    return level or (groups[0] if groups else "")


def _unit(scale_unit: object) -> str:
    """The unit of a ``ScaleUnit`` (``100%`` gives ``%``, ``1per_instr`` gives ``per_instr``)."""
    return _SCALE.sub("", _clean(scale_unit))


def _clean(value: object) -> str:
    """The value as one line of text, whitespace collapsed; "" for a missing value."""
    return " ".join(str(value).split()) if value is not None else ""


def _render(record: _Record) -> str:
    """The record as text a model reads: the name, the description, then its facts."""
    definition = record.definition
    name = definition.term
    if definition.aliases:
        name += f" ({', '.join(definition.aliases)})"
    facts = [("Formula", definition.measured), ("Unit", definition.unit), *record.details]
    lines = [name, f"  {definition.text}" if definition.text else ""]
    lines += [f"  {label}: {value}" for label, value in facts if value]
    return "\n".join(line for line in lines if line)
