"""The Chroma index: built with the packaged model offline, synced by content hash, searched by meaning."""

from __future__ import annotations

import attrs
import numpy as np
import pytest

from pragma_core.knowledge import Compendium, GuideEntry, MetricEntry, packaged_compendia
from pragma_core.knowledge.embedding import EMBEDDING_NAME, MiniLMEmbedding, _model
from pragma_core.knowledge.index import COLLECTION, KnowledgeIndex
from pragma_core.knowledge.minilm import MAX_TOKENS, MiniLM


def _metric(name: str, meaning: str, profiler: str = "ncu") -> MetricEntry:
    return MetricEntry(
        profiler=profiler, name=name, meaning=meaning, source=f"https://example.org/{profiler}", built_by="structural"
    )


NCU = Compendium(
    profiler="ncu",
    metrics=[
        _metric("dram__throughput.avg.pct_of_peak_sustained_elapsed", "DRAM throughput as a percentage of its peak"),
        _metric("launch__registers_per_thread", "Number of registers allocated per thread"),
        _metric(
            "sm__warps_active.avg.pct_of_peak_sustained_active",
            "Achieved occupancy: active warps per SM as a percentage of the maximum",
        ),
    ],
)
PERF = Compendium(
    profiler="perf",
    metrics=[
        _metric(
            "tma_bad_speculation",
            "Fraction of slots wasted due to incorrect speculations, such as branch mispredictions",
            "perf",
        ),
        _metric("page-faults", "Page faults: first touches of memory and pages read from disk", "perf"),
    ],
    guides=[
        GuideEntry(
            profiler="perf",
            topic="Topdown",
            text="Topdown analysis splits pipeline slots into four "
            "categories: frontend bound, backend bound, bad speculation and retiring.",
            source="https://example.org/topdown",
            built_by="structural",
        )
    ],
)


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> KnowledgeIndex:
    index = KnowledgeIndex(tmp_path_factory.mktemp("index"))
    index.sync([NCU, PERF])
    return index


def test_the_embedding_function_is_registered_with_chroma_by_name():
    from chromadb.utils.embedding_functions import known_embedding_functions

    assert known_embedding_functions[EMBEDDING_NAME] is MiniLMEmbedding
    rebuilt = MiniLMEmbedding.build_from_config(MiniLMEmbedding().get_config())
    assert isinstance(rebuilt, MiniLMEmbedding)


def test_search_finds_the_metric_a_question_is_about(index):
    assert index.search("is my kernel limited by memory bandwidth", k=1)[0].title.startswith("dram__throughput")
    assert index.search("how many registers does each thread use", k=1)[0].title == "launch__registers_per_thread"
    top = index.search("branch mispredicts waste cycles", profiler="perf", k=1)[0]
    assert top.title == "tma_bad_speculation" and 0 < top.score <= 1


def test_filters_keep_to_the_profilers_and_the_kind_asked_for(index):
    assert {hit.entry.profiler for hit in index.search("occupancy", profiler="perf", k=5)} == {"perf"}
    assert {hit.entry.profiler for hit in index.search("occupancy", profiler=["perf", "ncu"], k=5)} == {"perf", "ncu"}
    guides = index.search("top-down method categories", kind="guide", profiler="perf", k=3)
    assert [hit.kind for hit in guides] == ["guide"] and guides[0].title == "Topdown"


def test_a_second_sync_embeds_nothing_and_a_change_embeds_only_that_entry(index):
    again = index.sync([NCU, PERF])
    assert (again.embedded, again.removed, again.unchanged) == (0, 0, 6)
    changed = attrs.evolve(
        PERF,
        metrics=[
            attrs.evolve(PERF.metrics[1], meaning="Page faults of the process") if m.name == "page-faults" else m
            for m in PERF.metrics
        ],
    )
    before = index.embedding.embedded
    stats = index.sync([NCU, changed])
    assert (stats.embedded, stats.removed, stats.unchanged) == (1, 1, 5)
    assert index.embedding.embedded - before == 1
    assert len(index) == 6


def test_reopening_the_folder_finds_the_collection_with_no_embedding(index):
    reopened = KnowledgeIndex(index.path)
    stats = reopened.sync([NCU, PERF])
    assert reopened._collection.name == COLLECTION
    assert stats.unchanged + stats.embedded == 6 and reopened.embedding.embedded == stats.embedded


def test_the_numpy_model_embeds_as_sentence_transformers_does():
    """Queries are embedded with numpy, the index's thousands of entries with sentence-transformers:
    the two must put a text at the same point."""
    entries = [entry for compendium in packaged_compendia().values() for entry in compendium.entries]
    texts = [entry.index_text() for entry in entries[:: len(entries) // 16]]  # every compendium, short and long
    texts += ["warp divergence", "L2 cache hit rate"]  # padded to the longest of the batch
    truncated = "occupancy " * MAX_TOKENS  # cut at MAX_TOKENS; alone, as a query is, not padding the batch to it
    model = MiniLM.load()
    ours = np.vstack([model.encode(texts), model.encode([truncated])])
    texts.append(truncated)
    theirs = _model("cpu").encode(texts, convert_to_numpy=True, normalize_embeddings=True, batch_size=16)
    assert ours.shape == (len(texts), 384) and ours.dtype == np.float32
    assert np.abs(ours - theirs).max() < 1e-5
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-6)


# -- vectors computed once, shipped beside the compendium ---------------------------------------------


def test_known_vectors_are_stored_not_embedded_and_the_rest_are_embedded(tmp_path):
    from pragma_core.knowledge.index import entry_id

    first = NCU.metrics[0]
    stand_in = np.zeros(384, dtype=np.float32)
    stand_in[7] = 1.0  # a vector the model would never give: it must be the one stored
    index = KnowledgeIndex(tmp_path / "index")
    stats = index.sync([NCU], known={entry_id(first): stand_in})
    assert (stats.reused, stats.embedded, stats.total) == (1, 2, 3)
    assert index.embedding.embedded == 2
    ids, vectors = index.vectors()
    assert np.allclose(vectors[ids.index(entry_id(first))], stand_in)


def test_the_shipped_vectors_are_those_of_the_shipped_entries():
    """`make compendium` writes both; a compendium changed without its vectors fails here."""
    from pragma_core.knowledge.index import entry_id
    from pragma_core.knowledge.library import packaged_vectors

    entries = [entry for compendium in packaged_compendia().values() for entry in compendium.entries]
    shipped = packaged_vectors()
    assert set(shipped) == {entry_id(entry) for entry in entries}, "run `make compendium`"
    sample = entries[:: max(1, len(entries) // 12)]
    computed = MiniLM.load().encode([entry.index_text() for entry in sample])
    for entry, vector in zip(sample, computed):
        stored = shipped[entry_id(entry)]
        assert float(np.dot(vector, stored)) > 0.999 and abs(float(np.linalg.norm(stored)) - 1) < 1e-3, entry.name


def test_vectors_round_trip_through_their_file(tmp_path):
    from pragma_core.knowledge.vectors import read_vectors, write_vectors

    vectors = np.random.default_rng(0).standard_normal((3, 384)).astype(np.float32)
    write_vectors(tmp_path / "v.npz", ["c", "a", "b"], vectors)
    read = read_vectors(tmp_path / "v.npz")
    assert list(read) == ["a", "b", "c"]
    assert np.allclose(read["c"], vectors[0], atol=1e-2) and read["c"].dtype == np.float32
    assert read_vectors(tmp_path / "missing.npz") == {}
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    assert read_vectors(tmp_path / "junk.npz") == {}
