"""The semantic index over compendium entries: a Chroma collection on disk.

One collection, :data:`COLLECTION`, holds every metric and guide entry of every compendium, each
embedded as its short ``index_text()`` with the whole entry in the metadata. Ids are content hashes, so
:meth:`KnowledgeIndex.sync` adds only entries whose text changed and deletes the ones that are
gone: a rebuild of an unchanged compendium embeds nothing. The embedding function
(:class:`~.embedding.MiniLMEmbedding`) is passed on every collection call::

    index = KnowledgeIndex(Path("~/.cache/pragma/knowledge/index"))
    index.sync(compendia)                      # SyncStats(embedded=..., removed=..., unchanged=...)
    index.search("why is my kernel memory bound", profiler="ncu", k=5)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import cast

import attrs
import chromadb
import numpy as np
from chromadb.api.types import Embeddable, EmbeddingFunction, Where
from chromadb.config import Settings

from ..serialization import from_dict, to_dict
from .embedding import MiniLMEmbedding
from .entries import Compendium, GuideEntry, MetricEntry

__all__ = ["COLLECTION", "Hit", "SyncStats", "KnowledgeIndex", "entry_id"]

COLLECTION = "pragma-compendium"
_BATCH = 128
_STORE_BATCH = 1000  # entries added at once when their vectors are known
_QUERIES_KEPT = 32

Entry = MetricEntry | GuideEntry


@attrs.frozen(kw_only=True)
class Hit:
    """One search result: the entry and its cosine similarity to the query (1 is identical)."""

    entry: MetricEntry | GuideEntry
    score: float

    @property
    def kind(self) -> str:
        return "metric" if isinstance(self.entry, MetricEntry) else "guide"

    @property
    def title(self) -> str:
        return self.entry.name if isinstance(self.entry, MetricEntry) else self.entry.topic


@attrs.frozen(kw_only=True)
class SyncStats:
    """What a sync did: entries embedded (new or changed), added with a vector computed before
    (``reused``), removed, and left as they were."""

    embedded: int
    removed: int
    unchanged: int
    reused: int = 0

    @property
    def total(self) -> int:
        return self.embedded + self.reused + self.unchanged


def entry_id(entry: Entry) -> str:
    """A content hash of the whole entry and of the text embedded for it: it changes exactly when
    either does."""
    kind = "metric" if isinstance(entry, MetricEntry) else "guide"
    payload = json.dumps(
        {"kind": kind, "embedded": entry.index_text(), **to_dict(entry)}, sort_keys=True, ensure_ascii=False
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def _batches(reused: int, total: int) -> list[tuple[int, int]]:
    """Slices of the new entries: the first ``reused`` (vectors known) in batches of
    :data:`_STORE_BATCH`, the rest in batches of :data:`_BATCH`; no batch mixes the two."""
    bounds = [(start, min(start + _STORE_BATCH, reused)) for start in range(0, reused, _STORE_BATCH)]
    return bounds + [(start, min(start + _BATCH, total)) for start in range(reused, total, _BATCH)]


def _metadata(entry: Entry) -> dict[str, str]:
    kind = "metric" if isinstance(entry, MetricEntry) else "guide"
    return {
        "kind": kind,
        "profiler": entry.profiler,
        "entry": json.dumps(to_dict(entry), sort_keys=True, ensure_ascii=False),
    }


def _entry(metadata: Mapping[str, object]) -> Entry:
    data = json.loads(str(metadata["entry"]))
    if metadata["kind"] == "metric":
        return from_dict(MetricEntry, data)
    return from_dict(GuideEntry, data)


class KnowledgeIndex:
    """A Chroma ``PersistentClient`` folder holding the :data:`COLLECTION` collection."""

    def __init__(self, path: Path, embedding: MiniLMEmbedding | None = None) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.embedding = embedding or MiniLMEmbedding()
        self._client = chromadb.PersistentClient(path=str(self.path), settings=Settings(anonymized_telemetry=False))
        # the function embeds documents only, which is all the index holds; chroma's signature asks
        # for one that also embeds images
        self._collection = self._client.get_or_create_collection(
            COLLECTION, embedding_function=cast("EmbeddingFunction[Embeddable]", self.embedding)
        )
        self._queries: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return self._collection.count()

    def _query_vector(self, query: str) -> np.ndarray:
        """The query's embedding; a search that asks the collection twice embeds it once."""
        vector = self._queries.get(query)
        if vector is None:
            vector = np.asarray(self.embedding([query])[0], dtype=np.float32)
            if len(self._queries) >= _QUERIES_KEPT:
                self._queries.pop(next(iter(self._queries)))
            self._queries[query] = vector
        return vector

    def sync(
        self,
        compendia: Iterable[Compendium],
        on_progress: Callable[[int, int], None] | None = None,
        *,
        known: Mapping[str, np.ndarray] | None = None,
    ) -> SyncStats:
        """Make the collection hold exactly the entries of ``compendia``, embedding only what is new.

        ``known`` holds vectors computed before, by entry id (:mod:`.vectors`): a new entry found
        there is added with that vector, not embedded. ``on_progress(done, total)`` is called
        after each batch of new entries.
        """
        known = known or {}
        wanted: dict[str, Entry] = {}
        for compendium in compendia:
            for entry in compendium.entries:
                wanted.setdefault(entry_id(entry), entry)
        present = set(self._collection.get(include=[])["ids"])
        stale = sorted(present - set(wanted))
        for start in range(0, len(stale), 5000):
            self._collection.delete(ids=stale[start : start + 5000])
        # texts of like length batched together: the model pads each batch to its longest text
        new = sorted(
            ((key, entry) for key, entry in wanted.items() if key not in present),
            key=lambda pair: len(pair[1].index_text()),
        )
        if new and on_progress is not None:
            on_progress(0, len(new))  # the first batch waits for the model to load
        # entries with a vector computed before go first, in large batches: adding them is quick
        new.sort(key=lambda pair: pair[0] not in known)
        reused = sum(1 for key, _ in new if key in known)
        for start, end in _batches(reused, len(new)):
            batch = new[start:end]
            vectors = [known[key] for key, _ in batch if key in known]
            self._collection.upsert(
                ids=[key for key, _ in batch],
                documents=[entry.index_text() for _, entry in batch],
                metadatas=[_metadata(entry) for _, entry in batch],
                embeddings=vectors if len(vectors) == len(batch) else None,  # else the function embeds them
            )
            if on_progress is not None:
                on_progress(end, len(new))
        return SyncStats(
            embedded=len(new) - reused, reused=reused, removed=len(stale), unchanged=len(wanted) - len(new)
        )

    def vectors(self) -> tuple[list[str], np.ndarray]:
        """Every entry's id and vector, in the order of the ids (what :mod:`.vectors` stores)."""
        stored = self._collection.get(include=["embeddings"])
        ids = list(stored["ids"])
        vectors = np.asarray(stored["embeddings"], dtype=np.float32) if ids else np.zeros((0, 0), np.float32)
        return ids, vectors

    def search(
        self,
        query: str,
        *,
        profiler: str | Sequence[str] | None = None,
        kind: str | None = None,
        k: int = 5,
        within: Sequence[Entry] | None = None,
    ) -> list[Hit]:
        """The ``k`` entries nearest in meaning to ``query``, best first, optionally of some
        profilers (a name or several), of one kind (``metric`` or ``guide``), among some entries."""
        if not query.strip() or len(self) == 0 or (within is not None and not within):
            return []
        clauses: list[Where] = []
        if profiler is not None:
            names = [profiler] if isinstance(profiler, str) else list(profiler)
            clauses.append(cast(Where, {"profiler": names[0]} if len(names) == 1 else {"profiler": {"$in": names}}))
        if kind is not None:
            clauses.append({"kind": kind})
        where: Where | None = None if not clauses else clauses[0] if len(clauses) == 1 else {"$and": clauses}
        ids = None if within is None else [entry_id(entry) for entry in within]
        result = self._collection.query(
            query_embeddings=[self._query_vector(query)],
            n_results=k,
            where=where,
            ids=ids,
            include=["metadatas", "distances"],
        )
        metadatas, distances = result["metadatas"] or [[]], result["distances"] or [[]]
        return [
            Hit(entry=_entry(metadata), score=1.0 - float(distance))
            for metadata, distance in zip(metadatas[0], distances[0])
        ]
