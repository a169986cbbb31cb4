"""Embeddings computed once, beside the compendium, so a new index need not embed again.

Embedding every entry of the shipped compendium takes about a minute on two cores; the vectors
are the same on every machine, since the model and the texts are. So the knowledge builder writes
them next to the compendium (``vectors.npz``: the entries' content-hash ids and their vectors,
stored as float16) and :meth:`~.index.KnowledgeIndex.sync` takes a vector from there for every
entry whose id it finds, embedding only the rest::

    known = read_vectors(path)                   # {entry id: float32 vector}, {} when absent
    write_vectors(path, ids, vectors)

An id is a hash of the entry and of the text embedded for it, so a vector can only be reused for
exactly the text it was computed from; an edited entry has a new id and is embedded anew.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["VECTORS_FILE", "read_vectors", "write_vectors"]

VECTORS_FILE = "vectors.npz"
"""The file's name beside the compendium files."""


def read_vectors(path: Path) -> Mapping[str, np.ndarray[Any, np.dtype[np.float32]]]:
    """The vectors in ``path`` by entry id, as float32; nothing when the file is missing or unreadable
    (the index then embeds everything, which is only slower)."""
    try:
        with np.load(path, allow_pickle=False) as stored:
            ids, vectors = stored["ids"], stored["vectors"].astype(np.float32)
    except (OSError, KeyError, ValueError):
        return {}
    if vectors.ndim != 2 or len(ids) != len(vectors):
        return {}
    return dict(zip((str(key) for key in ids), vectors))


def write_vectors(path: Path, ids: Sequence[str], vectors: np.ndarray[Any, Any]) -> None:
    """Store ``vectors`` (one row per id) in ``path``, as float16: half the size, and cosine
    similarities change by less than 1e-3."""
    array = np.asarray(vectors, dtype=np.float16)
    if array.ndim != 2 or len(ids) != len(array):
        raise ValueError(f"{len(ids)} ids for an array of shape {array.shape}")
    order = np.argsort(np.asarray(ids))  # sorted: the same entries give the same arrays
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with open(partial, "wb") as handle:
        np.savez_compressed(handle, ids=np.asarray(ids)[order], vectors=array[order])
    partial.replace(path)
