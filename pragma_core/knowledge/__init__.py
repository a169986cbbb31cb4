"""What pragma knows about profiler metrics: the compendium, exact lookup, semantic search.

The compendium is built from the profilers' own documentation by the knowledge builder
(``pragma-kb``) and ships with pragma-core. :func:`lookup` resolves metric names exactly (name or
alias) and :func:`similar_names` suggests what a misspelt name meant; :func:`search` finds
entries by meaning through a local Chroma index that is built on first use;
:func:`conductor_documentation` is what the Conductor's prompt shows; and
:func:`unmeasured_citations` catches metric names the Conductor cites but nobody measured.
"""

from __future__ import annotations

from ._citations import unmeasured_citations
from .conductor_docs import conductor_documentation, diagnosis_query
from .entries import Compendium, GuideEntry, MetricEntry, read_compendium, render_markdown, write_compendium
from .library import (
    KnowledgeError,
    index_dir,
    load_compendia,
    lookup,
    open_index,
    packaged_compendia,
    search,
    similar_names,
)
from .vocabulary import TERMS, bound_of, standard_term, terms_in

__all__ = [
    "Compendium",
    "MetricEntry",
    "GuideEntry",
    "KnowledgeError",
    "TERMS",
    "read_compendium",
    "write_compendium",
    "render_markdown",
    "packaged_compendia",
    "load_compendia",
    "lookup",
    "similar_names",
    "search",
    "open_index",
    "index_dir",
    "conductor_documentation",
    "diagnosis_query",
    "unmeasured_citations",
    "terms_in",
    "standard_term",
    "bound_of",
]
