"""The documentation part of the Conductor's prompt, filled from the compendium.

Two things: the meaning of each metric in the profiles the Conductor reads (exact lookup, in the
compendium of the profiler that measured it), and the entries that match the rules' diagnosis
(semantic search for the bound class's standard terms and the hints, in those profilers'
compendia). Search needs the local index; when it cannot be opened the metric meanings still come
and the failure is one line in the prompt, never a stopped run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

from ..records import Diagnosis, Profile
from .library import lookup, search
from .vocabulary import BOUND_TERMS

__all__ = ["ConductorDocs", "conductor_documentation", "diagnosis_query", "RELATED_ENTRIES"]

RELATED_ENTRIES = 3
_RELATED_CHARS = 600


def _lines(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(items)


@attrs.frozen(kw_only=True)
class ConductorDocs:
    """``metric_docs`` maps each profiled metric name to its entry's text; ``related`` are the
    entries matching the diagnosis, one line each; ``note`` says why search gave nothing, if so."""

    metric_docs: dict[str, str] = attrs.field(factory=dict)
    related: tuple[str, ...] = attrs.field(default=(), converter=_lines)
    note: str = ""


def diagnosis_query(diagnosis: Diagnosis) -> str:
    """What to search for: the bound class in the standard vocabulary, then the rules' hints."""
    terms = BOUND_TERMS.get(diagnosis.bound, ())
    parts = [f"kernel is {terms[0]}" if terms else "", *terms[1:], *diagnosis.hints[:2]]
    return "; ".join(part for part in parts if part)


def conductor_documentation(
    profiles: Sequence[Profile], diagnosis: Diagnosis | None, *, related: int = RELATED_ENTRIES
) -> ConductorDocs:
    """Meanings of the profiles' metrics and up to ``related`` entries matching the diagnosis."""
    metric_docs: dict[str, str] = {}
    for profile in profiles:
        names = [metric.name for metric in profile.metrics if metric.name not in metric_docs]
        for name, entry in lookup(names, profiler=profile.profiler).items():
            metric_docs[name] = f"{entry.document()} [source: {entry.source}]"
    profilers = sorted({profile.profiler for profile in profiles})
    if diagnosis is None or not profilers or related <= 0:
        return ConductorDocs(metric_docs=metric_docs)
    query = diagnosis_query(diagnosis)
    if not query:
        return ConductorDocs(metric_docs=metric_docs)
    try:
        hits = search(query, profiler=profilers, k=related + len(metric_docs))
    except Exception as error:  # the loop goes on without search; the prompt says why
        return ConductorDocs(
            metric_docs=metric_docs, note=f"documentation search unavailable ({type(error).__name__}: {error})"
        )
    lines = []
    for hit in hits:
        if hit.kind == "metric" and hit.title in metric_docs:
            continue
        text = " ".join(hit.entry.document().split())
        text = text if len(text) <= _RELATED_CHARS else text[: _RELATED_CHARS - 3].rstrip() + "..."
        lines.append(f"{text} [source: {hit.entry.source}]")
        if len(lines) == related:
            break
    return ConductorDocs(metric_docs=metric_docs, related=lines)
