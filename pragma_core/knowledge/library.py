"""The compendium pragma ships, and the two ways to ask it: by metric name and by meaning.

The compendium built from the profilers' documentation ships as package data
(``pragma_core/knowledge/data/<profiler>.json``; the knowledge builder writes it). ``lookup`` is
exact and needs no model: a name as the profiler spelled it, or one of its aliases, then the same
ignoring case (``similar_names`` suggests the names a misspelling meant). ``search`` is semantic:
it embeds the query and asks the local index, which is built from the shipped compendium on first
use (with a progress bar; the entries' vectors ship too, so nothing is embedded then) into
``$PRAGMA_KNOWLEDGE_DIR`` (default: ``<cache>/knowledge``) and synced again whenever the
compendium changes::

    from pragma_core import knowledge
    knowledge.lookup(["D1 miss rate", "tma_backend_bound"])     # {name: MetricEntry}
    knowledge.search("kernel limited by DRAM bandwidth", profiler="ncu")
"""

from __future__ import annotations

import contextlib
import difflib
import fcntl
import functools
import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import PragmaError
from ..files import atomic_write_text
from ..paths import cache_dir
from ..progress import progress_bar
from .entries import Compendium, MetricEntry, read_compendium

if TYPE_CHECKING:
    from .index import Hit, KnowledgeIndex

__all__ = [
    "KnowledgeError",
    "packaged_compendia",
    "packaged_vectors",
    "load_compendia",
    "lookup",
    "similar_names",
    "index_dir",
    "open_index",
    "search",
]


class KnowledgeError(PragmaError):
    """A compendium folder or index that cannot be used; the message says which and what to do."""


@functools.cache
def packaged_compendia() -> dict[str, Compendium]:
    """The compendia shipped with pragma-core, by profiler name."""
    data = resources.files("pragma_core.knowledge") / "data"
    compendia = {}
    for item in sorted(data.iterdir(), key=lambda p: p.name):
        if item.name.endswith(".json"):
            with resources.as_file(item) as path:
                compendium = read_compendium(path)
            compendia[compendium.profiler] = compendium
    return compendia


@functools.cache
def packaged_vectors() -> Mapping[str, Any]:
    """The shipped compendium's vectors by entry id (:mod:`.vectors`), so a new index embeds nothing."""
    from .vectors import VECTORS_FILE, read_vectors

    with resources.as_file(resources.files("pragma_core.knowledge") / "data" / VECTORS_FILE) as path:
        return read_vectors(path)


def load_compendia(folder: Path | None = None) -> dict[str, Compendium]:
    """The compendia of a folder of ``<profiler>.json`` files (a ``pragma-kb build`` output), or
    the shipped ones when ``folder`` is None."""
    if folder is None:
        return packaged_compendia()
    folder = Path(folder)
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        raise KnowledgeError(
            f"{folder}: no compendium files (<profiler>.json) there; build them with `pragma-kb build --out DIR`"
        )
    compendia = {}
    for path in files:
        compendium = read_compendium(path)
        compendia[compendium.profiler] = compendium
    return compendia


def lookup(
    names: Iterable[str],
    *,
    profiler: str | Sequence[str] | None = None,
    compendia: Mapping[str, Compendium] | None = None,
) -> dict[str, MetricEntry]:
    """The entries of the metric names that have one: exact name or alias first, then ignoring case.

    ``profiler`` keeps the lookup to those profilers' compendia (a metric name such as ``cycles``
    means different things to different tools).
    """
    chosen = _chosen(compendia if compendia is not None else packaged_compendia(), profiler)
    folded: dict[str, MetricEntry] = {}
    for compendium in chosen:
        for name in sorted(compendium.names()):
            entry = compendium.find(name)
            if entry is not None:
                folded.setdefault(name.casefold(), entry)
    found: dict[str, MetricEntry] = {}
    for name in names:
        entry = next((c.find(name) for c in chosen if c.find(name) is not None), None) or folded.get(name.casefold())
        if entry is not None:
            found[name] = entry
    return found


def similar_names(
    name: str,
    *,
    profiler: str | Sequence[str] | None = None,
    compendia: Mapping[str, Compendium] | None = None,
    n: int = 5,
) -> list[tuple[str, str]]:
    """(name, profiler) of the ``n`` metric names or aliases spelled most like ``name``, ignoring
    case: what a user who mistyped a name meant. String similarity only; no model, no index."""
    chosen = _chosen(compendia if compendia is not None else packaged_compendia(), profiler)
    spellings: dict[str, list[tuple[str, str]]] = {}
    for compendium in chosen:
        for known in sorted(compendium.names()):
            spellings.setdefault(known.casefold(), []).append((known, compendium.profiler))
    close = difflib.get_close_matches(name.casefold(), list(spellings), n=n, cutoff=0.6)
    return [found for folded in close for found in spellings[folded]][:n]


def _chosen(compendia: Mapping[str, Compendium], profiler: str | Sequence[str] | None) -> list[Compendium]:
    if profiler is None:
        return list(compendia.values())
    names = [profiler] if isinstance(profiler, str) else list(profiler)
    return [compendia[name] for name in names if name in compendia]


def index_dir() -> Path:
    """Where the local index lives: ``$PRAGMA_KNOWLEDGE_DIR`` or ``<cache>/knowledge``."""
    configured = os.environ.get("PRAGMA_KNOWLEDGE_DIR")
    return Path(configured).expanduser() if configured else cache_dir("knowledge")


def _stamp(compendia: Mapping[str, Compendium]) -> str:
    """A hash of what the index must hold for ``compendia``: the embedding model and the id of
    every entry (ids hash the entry and the text embedded for it). Computed once per set of
    compendium objects in a process, so the loop's later searches do not hash every entry again."""
    key = tuple(sorted((name, id(compendium)) for name, compendium in compendia.items()))
    cached = _stamps.get(key)
    if cached is not None:
        return cached[1]
    from .embedding import EMBEDDING_NAME
    from .index import entry_id

    hashes = {name: [entry_id(e) for e in compendium.entries] for name, compendium in sorted(compendia.items())}
    stamp = hashlib.sha256(json.dumps([EMBEDDING_NAME, hashes]).encode()).hexdigest()[:16]
    if len(_stamps) >= _KEPT:
        _stamps.pop(next(iter(_stamps)))
    # the compendia are kept with their stamp, so their ids cannot be reused while it is cached
    _stamps[key] = (tuple(compendia.values()), stamp)
    return stamp


_KEPT = 8
_stamps: dict[tuple[tuple[str, int], ...], tuple[tuple[Compendium, ...], str]] = {}
_open: dict[tuple[Path, str], KnowledgeIndex] = {}


def open_index(compendia: Mapping[str, Compendium] | None = None, *, folder: Path | None = None) -> KnowledgeIndex:
    """The index of ``compendia`` (default: the shipped ones) in ``folder`` (default:
    :func:`index_dir`), opened once per process and kept open: the loop's repeated searches reuse
    the collection and the model.

    The index is synced first when the compendia changed since the last sync, which a stamp file
    beside it (``compendium.stamp``) tells without reading the collection. The first sync adds
    every entry, with a progress bar on a terminal, taking the shipped vectors of those it can
    (:func:`packaged_vectors`) and embedding the others.
    """

    compendia = compendia if compendia is not None else packaged_compendia()
    folder = Path(folder) if folder is not None else index_dir()
    stamp_file, stamp = folder / "compendium.stamp", _stamp(compendia)
    opened = _open.get((folder, stamp))
    if opened is not None:
        return opened
    with _one_process_at_a_time(folder):
        index = _opened_and_synced(folder, compendia, stamp_file, stamp)
    _open[(folder, stamp)] = index
    return index


@contextlib.contextmanager
def _one_process_at_a_time(folder: Path) -> Iterator[None]:
    """Hold the folder's lock while the index is opened and synced: a second process (two
    `pragma optimize`, a bench's workers) must open it complete, never sync beside the first."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _opened_and_synced(
    folder: Path, compendia: Mapping[str, Compendium], stamp_file: Path, stamp: str
) -> KnowledgeIndex:
    from .index import KnowledgeIndex

    try:
        index = KnowledgeIndex(folder / "chroma")
    except Exception as error:  # chroma raises many kinds; the user needs the folder and the fix
        raise KnowledgeError(
            f"{folder}: the knowledge index cannot be opened ({type(error).__name__}: "
            f"{error}); delete the folder and it is rebuilt"
        ) from error
    if not (stamp_file.is_file() and stamp_file.read_text().strip() == stamp and len(index) > 0):
        first = len(index) == 0
        with progress_bar() as progress:
            task = progress.add_task(
                "Indexing the metric compendium" + (" (first use, once)" if first else " (it changed)"), total=None
            )
            index.sync(
                compendia.values(),
                on_progress=lambda done, total: progress.update(task, completed=done, total=total),
                known=packaged_vectors(),
            )
        atomic_write_text(stamp_file, stamp + "\n")
    return index


def search(
    query: str,
    *,
    profiler: str | Sequence[str] | None = None,
    kind: str | None = None,
    k: int = 5,
    compendia: Mapping[str, Compendium] | None = None,
) -> list[Hit]:
    """The ``k`` best entries for ``query``, optionally of some profilers and of one kind
    (``metric`` or ``guide``): nearest in meaning, with the bonuses of :mod:`.ranking`."""
    from .ranking import ranked_search

    compendia = compendia if compendia is not None else packaged_compendia()
    return ranked_search(
        open_index(compendia),
        _chosen(compendia, profiler),
        query,
        profiler=profiler,
        kind=kind,
        k=k,
        defaults=_default_metrics(),
    )


def _default_metrics() -> set[tuple[str, str]]:
    """(profiler, metric) for every default metric of the installed profiler plugins."""
    from ..plugin_api.registry import get_registry

    registry = get_registry()
    return {(name, metric) for name in registry.profilers() for metric in registry.profiler(name).default_metrics}
