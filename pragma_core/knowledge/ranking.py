"""How search ranks: nearness in meaning, then metric names the query spells out, then what pragma
collects by default.

A small embedding model reads "Interpretation of HSA counters: VALUBusy and MemUnitBusy" as a
sentence about HSA and correlation ids; a person asks about VALUBusy. So an entry whose name or
alias the query writes out (an identifier such as ``VALUBusy`` or ``context-switches``, or a label
of several words such as ``Achieved Occupancy``) gains :data:`NAME_BONUS`, and a metric some
installed profiler plugin collects by default gains :data:`DEFAULT_BONUS`: among near-equals, the
metric the Conductor actually sees comes first. The score of a hit is its cosine similarity plus
these bonuses; cosines of related texts rarely pass 0.7, so a metric the query names comes first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import attrs

from .entries import Compendium, GuideEntry, MetricEntry

__all__ = ["NAME_BONUS", "DEFAULT_BONUS", "CANDIDATES", "named_in", "rerank", "ranked_search"]

NAME_BONUS = 0.5
DEFAULT_BONUS = 0.15
CANDIDATES = 40
"""Semantic candidates fetched before ranking."""

_SEPARATORS = re.compile(r"[\s\-_./:()%\[\],]+")
_IDENTIFIER = re.compile(r"[_\-.\d]|[a-z][A-Z]|[A-Z]{2}[a-z]")


def _normal(text: str) -> str:
    return " " + " ".join(_SEPARATORS.split(text.lower())).strip() + " "


def _spelled_like_a_name(name: str) -> bool:
    """Identifiers, acronyms and labels of several words; not plain words like ``cycles``."""
    return bool(_IDENTIFIER.search(name)) or (name.isupper() and len(name) >= 2) or len(name.split()) >= 2


def named_in(query: str, entries: Iterable[MetricEntry]) -> list[MetricEntry]:
    """The entries whose name or an alias the query writes out, in the order given."""
    normal_query = _normal(query)
    tokens = set(re.findall(r"[\w\-.]+", query))
    found = []
    for entry in entries:
        for name in entry.names:
            short = len(name) <= 4 and not name.isupper()
            if short and name in tokens:  # Ir, Dr, D1mr: exact spelling only
                found.append(entry)
                break
            if not short and _spelled_like_a_name(name) and _normal(name) in normal_query:
                found.append(entry)
                break
    return found


def rerank(
    hits: Sequence,
    *,
    named: Iterable[MetricEntry | GuideEntry] = (),
    defaults: Iterable[tuple[str, str]] = (),
    k: int = 5,
) -> list:
    """``hits`` (semantic, with cosine scores) re-scored with the bonuses; the best ``k``."""
    named_keys = {(e.profiler, e.name) for e in named}
    default_keys = set(defaults)
    rescored = {}
    for hit in hits:
        key = (hit.entry.profiler, hit.title, hit.kind)
        bonus = 0.0
        if hit.kind == "metric":
            names = {(hit.entry.profiler, n) for n in hit.entry.names}
            bonus += NAME_BONUS if (hit.entry.profiler, hit.entry.name) in named_keys else 0.0
            bonus += DEFAULT_BONUS if names & default_keys else 0.0
        scored = attrs.evolve(hit, score=hit.score + bonus)
        if key not in rescored or scored.score > rescored[key].score:
            rescored[key] = scored
    return sorted(rescored.values(), key=lambda hit: -hit.score)[:k]


def ranked_search(
    index,
    compendia: Sequence[Compendium],
    query: str,
    *,
    profiler: str | Sequence[str] | None = None,
    kind: str | None = None,
    k: int = 5,
    defaults: Iterable[tuple[str, str]] = (),
) -> list:
    """Semantic candidates from ``index``, plus the entries of ``compendia`` the query names and
    the default metrics among them (so a bonus can lift an entry the semantic cut left out),
    re-scored by :func:`rerank`."""
    defaults = set(defaults)
    hits = index.search(query, profiler=profiler, kind=kind, k=max(k, CANDIDATES))
    metrics = [] if kind == "guide" else [entry for compendium in compendia for entry in compendium.metrics]
    named = named_in(query, metrics)
    preferred = [entry for entry in metrics if any((entry.profiler, n) in defaults for n in entry.names)]
    seen = {(hit.entry.profiler, hit.title) for hit in hits if hit.kind == "metric"}
    missing = list({(e.profiler, e.name): e for e in (*named, *preferred) if (e.profiler, e.name) not in seen}.values())
    if missing:
        hits += index.search(query, kind="metric", k=len(missing), within=missing)
    return rerank(hits, named=named, defaults=defaults, k=k)
