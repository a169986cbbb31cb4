"""How search ranks: nearness in meaning, then metric names the query spells out, the bottlenecks it
speaks of, and what pragma collects by default.

A small embedding model reads "Interpretation of HSA counters: VALUBusy and MemUnitBusy" as a
sentence about HSA and correlation ids, but a person is asking about VALUBusy. So a score is the
cosine similarity plus bonuses:

* :data:`NAME_BONUS` for an entry the query names. The query can write out one of its names or
  aliases as a token (an identifier such as ``VALUBusy`` or ``L1-dcache-load-misses``). It can
  also write the name's words as a phrase (``context switches``, ``Achieved Occupancy``). A phrase
  counts only when it names one metric of its profiler. ``Hit Rate`` is an Nsight Compute label,
  but it is part of the names of a dozen cache metrics, so "L2 cache hit rate" names none of them.
* :data:`TERM_BONUS` for a metric that reveals a bottleneck the query speaks of, in the shared
  vocabulary (:func:`~.vocabulary.terms_in`): "warp divergence" lifts the divergent-branch and
  branch-efficiency metrics, which the model alone puts below the metrics about warps. The
  nearest of those metrics join the candidates however far the others are.
* :data:`DEFAULT_BONUS` for a metric some installed profiler plugin collects by default. Among
  near-equals, the metric the Conductor actually sees comes first.

The bonuses rank what the query says above what pragma prefers: a name the query writes out
(0.5), then a bottleneck it speaks of (0.2), then a default metric (0.15). Cosines of related
texts rarely pass 0.7, so a metric the query names comes first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import attrs

from .entries import Compendium, GuideEntry, MetricEntry
from .vocabulary import terms_in

if TYPE_CHECKING:
    from .index import Hit, KnowledgeIndex

__all__ = ["NAME_BONUS", "TERM_BONUS", "DEFAULT_BONUS", "CANDIDATES", "named_in", "rerank", "ranked_search"]

NAME_BONUS = 0.5
TERM_BONUS = 0.2
DEFAULT_BONUS = 0.15
CANDIDATES = 40
"""Semantic candidates fetched before ranking."""

_SEPARATORS = re.compile(r"[\s\-_./:()%\[\],]+")
_IDENTIFIER = re.compile(r"[_\-.\d]|[a-z][A-Z]|[A-Z]{2}[a-z]")
_TOKEN = re.compile(r"[\w\-.]+")


def _words(text: str) -> tuple[str, ...]:
    return tuple(word for word in _SEPARATORS.split(text.lower()) if word)


def _spelled_like_a_name(name: str) -> bool:
    """Identifiers, acronyms and labels of several words; not plain words like ``cycles``."""
    return bool(_IDENTIFIER.search(name)) or (name.isupper() and len(name) >= 2) or len(name.split()) >= 2


@attrs.frozen
class _Names:
    """A compendium's metric names as words, and the word sequences in them with the metrics
    whose names hold each."""

    spelled: tuple[tuple[MetricEntry, tuple[tuple[str, tuple[str, ...]], ...]], ...]
    owners: dict[tuple[str, ...], frozenset[str]]

    @classmethod
    def of(cls, compendium: Compendium) -> _Names:
        spelled = tuple((entry, tuple((name, _words(name)) for name in entry.names)) for entry in compendium.metrics)
        owners: dict[tuple[str, ...], set[str]] = {}
        for entry, names in spelled:
            for _name, words in names:
                for start in range(len(words)):
                    for end in range(start + 1, len(words) + 1):
                        owners.setdefault(words[start:end], set()).add(entry.name)
        return cls(spelled, {phrase: frozenset(names) for phrase, names in owners.items()})

    def names_one_metric(self, words: tuple[str, ...]) -> bool:
        return len(self.owners.get(words, ())) == 1


_names: dict[int, tuple[Compendium, _Names]] = {}


def _names_of(compendium: Compendium) -> _Names:
    """The compendium's names as words, worked out once per compendium object in a process."""
    cached = _names.get(id(compendium))
    if cached is None or cached[0] is not compendium:
        cached = (compendium, _Names.of(compendium))
        _names[id(compendium)] = cached
    return cached[1]


def _contains(words: tuple[str, ...], phrase: tuple[str, ...]) -> bool:
    size = len(phrase)
    return any(words[start : start + size] == phrase for start in range(len(words) - size + 1))


def named_in(query: str, compendia: Iterable[Compendium]) -> list[MetricEntry]:
    """The metrics of ``compendia`` the query names: one of its names or aliases as a token of the
    query, or as a phrase of the query that names no other metric of its profiler."""
    query_words = _words(query)
    tokens = {token.rstrip(".") for token in _TOKEN.findall(query)}
    folded_tokens = {token.casefold() for token in tokens}
    found = []
    for compendium in compendia:
        names = _names_of(compendium)
        for entry, spelled in names.spelled:
            for name, words in spelled:
                if len(name) <= 4 and not name.isupper():  # Ir, Dr, D1mr: exact spelling only
                    named = name in tokens
                elif not _spelled_like_a_name(name):  # plain words such as cycles
                    named = False
                else:
                    named = name.casefold() in folded_tokens or (
                        _contains(query_words, words) and names.names_one_metric(words)
                    )
                if named:
                    found.append(entry)
                    break
    return found


def rerank(
    hits: Sequence[Hit],
    *,
    named: Iterable[MetricEntry | GuideEntry] = (),
    terms: Iterable[str] = (),
    defaults: Iterable[tuple[str, str]] = (),
    k: int = 5,
) -> list[Hit]:
    """``hits`` (semantic, with cosine scores) re-scored with the bonuses; the best ``k``."""
    named_keys = {(e.profiler, e.name) for e in named if isinstance(e, MetricEntry)}
    query_terms = set(terms)
    default_keys = set(defaults)
    rescored: dict[tuple[str, str, str], Hit] = {}
    for hit in hits:
        key = (hit.entry.profiler, hit.title, hit.kind)
        bonus = 0.0
        if isinstance(hit.entry, MetricEntry):
            names = {(hit.entry.profiler, n) for n in hit.entry.names}
            bonus += NAME_BONUS if (hit.entry.profiler, hit.entry.name) in named_keys else 0.0
            bonus += TERM_BONUS if query_terms & set(hit.entry.bottleneck) else 0.0
            bonus += DEFAULT_BONUS if names & default_keys else 0.0
        scored = attrs.evolve(hit, score=hit.score + bonus)
        if key not in rescored or scored.score > rescored[key].score:
            rescored[key] = scored
    return sorted(rescored.values(), key=lambda hit: -hit.score)[:k]


def ranked_search(
    index: KnowledgeIndex,
    compendia: Sequence[Compendium],
    query: str,
    *,
    profiler: str | Sequence[str] | None = None,
    kind: str | None = None,
    k: int = 5,
    defaults: Iterable[tuple[str, str]] = (),
) -> list[Hit]:
    """Semantic candidates from ``index``, plus the entries of ``compendia`` the query names and
    the default metrics among them (so a bonus can lift an entry the semantic cut left out),
    re-scored by :func:`rerank`."""
    defaults = set(defaults)
    terms = set(terms_in(query))
    hits = index.search(query, profiler=profiler, kind=kind, k=max(k, CANDIDATES))
    named = [] if kind == "guide" else named_in(query, compendia)
    metrics = [] if kind == "guide" else [entry for compendium in compendia for entry in compendium.metrics]
    preferred = [entry for entry in metrics if any((entry.profiler, n) in defaults for n in entry.names)]
    seen = {(hit.entry.profiler, hit.title) for hit in hits if hit.kind == "metric"}
    missing = list({(e.profiler, e.name): e for e in (*named, *preferred) if (e.profiler, e.name) not in seen}.values())
    if missing:
        hits += index.search(query, kind="metric", k=len(missing), within=missing)
    # the nearest of the metrics that reveal what the query speaks of, however far the others are
    topical = [e for e in metrics if terms.intersection(e.bottleneck) and (e.profiler, e.name) not in seen]
    if topical:
        hits += index.search(query, kind="metric", k=min(len(topical), CANDIDATES), within=topical)
    return rerank(hits, named=named, terms=terms, defaults=defaults, k=k)
