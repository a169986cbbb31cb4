"""Stage 2 without a model: one entry per metric, merged by canonical name, in one vocabulary.

The notes of a profiler are grouped by name: a note's aliases join its group to the group of the
same name (a section's label ``Achieved Occupancy`` to the guide's description of that label),
unless several metrics claim the alias. Each group becomes one
:class:`~pragma_core.knowledge.MetricEntry`: the canonical name is the one the profiler plugin uses
(its default metrics and formulas), else the spelling without spaces, else the most documented;
the meaning is the most common description (the longest on a tie). A metric no page describes
in words is documented from the parts of its name where the guide has a glossary of them
(Nsight Compute's ``lts__t_sector_hit_rate.pct``: unit, counter, roll-up), and a metric the plugin
computes from its formula and the entries of the formula's terms. Every entry's bottleneck terms
come from :func:`pragma_core.knowledge.terms_in`, the vocabulary shared by all profilers.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import attrs

from pragma_core.knowledge.entries import Compendium, GuideEntry, MetricEntry
from pragma_core.knowledge.vocabulary import terms_in

from .notes import MetricNote, Stage1
from .structural import opening

__all__ = ["merge_stage1", "MergeReport", "TERM_CHARS"]

TERM_CHARS = 200
"""How much of a term's meaning a formula entry quotes."""

GLOSS_CHARS = 110
"""How much of a glossary text a meaning read from a name quotes: about its first sentence."""

_FORMULA_TOKEN = re.compile(r"[A-Za-z][\w.\-]*[\w]|[A-Za-z]")


@attrs.define
class MergeReport:
    """Names stage 2 could not document (no description, no glossary, no formula), by profiler."""

    undocumented: dict[str, list[str]] = attrs.field(factory=dict)


class _Groups:
    """Union-find over metric names."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def add(self, name: str) -> None:
        self.parent.setdefault(name, name)

    def find(self, name: str) -> str:
        while self.parent[name] != name:
            self.parent[name] = self.parent[self.parent[name]]
            name = self.parent[name]
        return name

    def union(self, a: str, b: str) -> None:
        root_a, root_b = self.find(a), self.find(b)
        if root_a != root_b:
            self.parent[max(root_a, root_b)] = min(root_a, root_b)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _most_common(values: Iterable[str]) -> str:
    counted = Counter(value for value in values if value)
    if not counted:
        return ""
    return max(counted, key=lambda value: (counted[value], len(value), value))


def _glossary_key(term: str) -> str:
    """``Hit Rate`` and ``hit_rate`` are one glossary term: names join words with underscores."""
    return re.sub(r"[\s\-]+", "_", term.strip("._ ").casefold())


def _glossary(notes: Sequence[MetricNote]) -> dict[str, list[str]]:
    """Glossary term -> its distinct texts, most common first (a column label such as ``Hit Rate``
    is explained once per cache)."""
    by_term: dict[str, Counter] = {}
    for note in notes:
        if note.glossary and note.meaning:
            by_term.setdefault(_glossary_key(note.name), Counter())[opening(note.meaning, GLOSS_CHARS)] += 1
    return {term: [text for text, _n in texts.most_common()] for term, texts in by_term.items()}


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _fitting(texts: list[str], context: set[str]) -> str:
    """The text sharing most words with what the name already says (the L2 text for an L2 metric)."""
    return max(texts, key=lambda text: (len(_words(text) & context), -texts.index(text)))


def _name_parts(name: str) -> list[str]:
    """``lts__t_sector_hit_rate.pct`` -> ``["lts", "t_sector_hit_rate", "pct"]``."""
    unit, _, rest = name.partition("__")
    return [unit, *rest.split(".")] if rest else name.split(".")


def _gloss(piece: str, glossary: Mapping[str, list[str]]) -> list[tuple[str, list[str]]]:
    """The glossary terms covering ``piece``: the whole piece, else its longest ``_``-joined runs."""
    if _glossary_key(piece) in glossary:
        return [(piece, glossary[_glossary_key(piece)])]
    words, found, start = piece.split("_"), [], 0
    while start < len(words):
        for end in range(len(words), start, -1):
            term = "_".join(words[start:end])
            if _glossary_key(term) in glossary:
                found.append((term, glossary[_glossary_key(term)]))
                start = end
                break
        else:
            start += 1
    return found


def _composed(name: str, label: str, glossary: Mapping[str, list[str]]) -> str:
    """A meaning built from the documented parts of a structured metric name, or "".

    Parts the glossary does not know are named as they are (``time_duration``): the name is the
    tool's own words for them."""
    parts = _name_parts(name)
    if len(parts) < 2 or not glossary:
        return ""
    glossed = [_gloss(piece, glossary) for piece in parts]
    if not glossed[0] or sum(1 for g in glossed if g) < 2:
        return ""
    context = _words(label) | _words(glossed[0][0][1][0])
    pieces = []
    for piece, found in zip(parts, glossed):
        pieces += [f"{term}: {_fitting(texts, context).rstrip('.')}" for term, texts in found]
        if not found:
            pieces.append(piece)
    intro = f"{label}. " if label else ""
    return f"{intro}Read from its name: " + "; ".join(pieces)


def _canonical(names: Iterable[str], counts: Counter, preferred: set[str]) -> str:
    return min(names, key=lambda n: (n not in preferred, any(c.isspace() for c in n), -counts[n], n))


def merge_stage1(
    profiler: str,
    stage1: Stage1,
    *,
    formulas: Mapping[str, str] | None = None,
    preferred: Iterable[str] = (),
    report: MergeReport | None = None,
) -> Compendium:
    """The compendium of one profiler from its stage-1 notes, glossary and the plugin's formulas."""
    notes = [note for note in stage1.notes if note.profiler == profiler]
    glossary = _glossary(notes)
    metric_notes = [note for note in notes if not note.glossary and note.name]
    preferred_names = set(preferred) | set(formulas or {})
    counts = Counter(note.name for note in metric_notes)

    claims: dict[str, set[str]] = {}
    for note in metric_notes:
        for alias in note.aliases:
            if alias and alias != note.name:
                claims.setdefault(alias, set()).add(note.name)
    usable = {alias for alias, names in claims.items() if len(names) == 1}

    groups = _Groups()
    for note in metric_notes:
        groups.add(note.name)
    for note in metric_notes:
        for alias in note.aliases:
            if alias in usable and alias in groups.parent:
                groups.union(note.name, alias)

    members: dict[str, list[MetricNote]] = {}
    for note in metric_notes:
        members.setdefault(groups.find(note.name), []).append(note)

    entries: dict[str, MetricEntry] = {}
    undocumented: list[str] = []
    for group in members.values():
        names = {note.name for note in group}
        name = _canonical(names, counts, preferred_names)
        aliases = sorted((names | {a for note in group for a in note.aliases if a in usable}) - {name})
        described = [note for note in group if note.meaning]
        meaning = _most_common(note.meaning for note in described)
        origin = next((note for note in described if note.meaning == meaning), group[0])
        if not meaning:  # a section's label names this metric even where other metrics share it
            label = _most_common(a for note in group for a in note.aliases if "__" not in a)
            meaning = _composed(name, label, glossary)
        if not meaning:
            undocumented.append(name)
            continue
        measured = origin.measured or _most_common(note.measured for note in group)
        # the name and the first sentence say what a metric reveals; later sentences wander
        text = " ".join((name.replace("_", " "), opening(meaning, 160)))
        entries[name] = MetricEntry(
            profiler=profiler,
            name=name,
            aliases=aliases,
            meaning=meaning,
            measured=measured,
            bottleneck=terms_in(text),
            remedies=[r for note in group for r in note.remedies],
            unit=origin.unit or _most_common(note.unit for note in group),
            source=origin.source,
            built_by=origin.built_by,
        )

    _adopt_spellings(entries, preferred_names, formulas or {})
    known = {alias: entry for entry in entries.values() for alias in entry.names}
    known.update({alias.casefold(): entry for alias, entry in list(known.items()) if alias.casefold() not in known})
    for name, formula in (formulas or {}).items():
        if name in known:
            continue
        entries[name] = _formula_entry(profiler, name, formula, known)
    if report is not None:
        report.undocumented[profiler] = sorted(n for n in undocumented if n not in entries)
    return Compendium(
        profiler=profiler, metrics=tuple(entries.values()), guides=_unique(stage1.guides, profiler)
    ).in_order()


def _adopt_spellings(entries: dict[str, MetricEntry], preferred: set[str], formulas: Mapping[str, str]) -> None:
    """A name the plugin uses that the pages spell only in another case (``ipc`` for ``IPC``)
    becomes an alias of the documented entry, which takes the plugin's formula when the pages gave
    none. A name that is an entry of its own (perf's ``instructions`` beside the top-down
    ``Instructions``) stays with it."""
    folded: dict[str, str] = {}
    for name in sorted(entries):
        for alias in entries[name].names:
            folded.setdefault(alias.casefold(), name)
    for spelling in sorted(preferred):
        target = folded.get(spelling.casefold())
        if target is None or spelling in entries or spelling in entries[target].names:
            continue
        entry = entries[target]
        entries[target] = attrs.evolve(
            entry, aliases=(*entry.aliases, spelling), measured=entry.measured or formulas.get(spelling, "")
        )


def _formula_entry(profiler: str, name: str, formula: str, known: Mapping[str, MetricEntry]) -> MetricEntry:
    documented = {
        token: entry
        for token in dict.fromkeys(_FORMULA_TOKEN.findall(formula))
        if (entry := known.get(token) or known.get(token.casefold())) is not None
    }
    terms = list(documented)
    where = "; ".join(f"{term}: {_clip(entry.meaning, TERM_CHARS).rstrip('.')}" for term, entry in documented.items())
    meaning = f"{name} = {formula}" + (f", where {where}" if where else "")
    meaning += f". Computed by pragma-{profiler} from the tool's own counters."
    # what the terms reveal, and what the name says (HBMBandwidth: HBM bandwidth)
    spoken = re.sub(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", name).replace("_", " ")
    bottleneck = dict.fromkeys((*terms_in(spoken), *(t for entry in documented.values() for t in entry.bottleneck)))
    source = documented[terms[0]].source if terms else f"pragma-{profiler} (the plugin's formula)"
    return MetricEntry(
        profiler=profiler,
        name=name,
        meaning=meaning,
        measured=formula,
        bottleneck=tuple(bottleneck),
        source=source,
        built_by="formula",
    )


def _unique(guides: Iterable[GuideEntry], profiler: str) -> tuple[GuideEntry, ...]:
    """One guide entry per (topic, text): mirrored copies of one page say the same things."""
    seen: dict[tuple[str, str], GuideEntry] = {}
    for guide in guides:
        if guide.profiler == profiler:
            seen.setdefault((guide.topic, guide.text), guide)
    return tuple(seen.values())
