"""The compendium records: validation, names and aliases, files, markdown."""

from __future__ import annotations

import json

import pytest

from pragma_core.errors import RecordError
from pragma_core.knowledge import (
    Compendium,
    GuideEntry,
    MetricEntry,
    read_compendium,
    render_markdown,
    write_compendium,
)

SOURCE = "https://valgrind.org/docs/manual/cg-manual.html"


def _entry(name: str, **fields) -> MetricEntry:
    values = {
        "profiler": "valgrind",
        "name": name,
        "meaning": f"what {name} means",
        "source": SOURCE,
        "built_by": "structural",
        **fields,
    }
    return MetricEntry(**values)


def test_an_entry_needs_a_meaning_a_source_and_a_known_way_of_building():
    with pytest.raises(ValueError):
        _entry("Ir", meaning="")
    with pytest.raises(ValueError):
        _entry("Ir", built_by="guessed")
    assert _entry("Ir", built_by="model:openai/gpt-4o-mini").built_by == "model:openai/gpt-4o-mini"


def test_find_resolves_names_before_aliases_and_never_lets_an_alias_shadow_a_name():
    compendium = Compendium(
        profiler="valgrind",
        metrics=[
            _entry("D1mr", aliases=["D1 read misses"]),
            _entry("DLmr", aliases=["D1mr"]),  # a careless alias must not hide the real D1mr
        ],
    )
    assert compendium.find("D1mr").name == "D1mr"
    assert compendium.find("D1 read misses").name == "D1mr"
    assert compendium.find("d1mr") is None  # exact; case folding is lookup's business
    assert {"D1mr", "DLmr", "D1 read misses"} <= compendium.names()


def test_two_entries_of_one_name_or_of_another_profiler_are_refused():
    with pytest.raises(ValueError, match="two entries"):
        Compendium(profiler="valgrind", metrics=[_entry("Ir"), _entry("Ir")])
    with pytest.raises(ValueError, match="not valgrind"):
        Compendium(profiler="valgrind", metrics=[_entry("Ir", profiler="perf")])


def test_write_then_read_gives_the_same_compendium_and_the_same_hash(tmp_path):
    compendium = Compendium(
        profiler="valgrind",
        metrics=[_entry("Ir", unit="count", bottleneck=["compute bound"])],
        guides=[
            GuideEntry(
                profiler="valgrind",
                topic="Cache simulation",
                text="It simulates...",
                source=SOURCE,
                built_by="structural",
            )
        ],
    )
    write_compendium(tmp_path / "valgrind.json", compendium)
    again = read_compendium(tmp_path / "valgrind.json")
    assert again == compendium
    assert again.content_hash() == compendium.content_hash()
    changed = Compendium(profiler="valgrind", metrics=[_entry("Ir", unit="instructions")])
    assert changed.content_hash() != compendium.content_hash()


def test_a_file_that_is_not_a_compendium_is_named_in_the_error(tmp_path):
    path = tmp_path / "perf.json"
    path.write_text(json.dumps({"metrics": []}))
    with pytest.raises(RecordError, match="perf.json: not a compendium"):
        read_compendium(path)
    path.write_text(json.dumps({"schema_version": 99, "profiler": "perf"}))
    with pytest.raises(RecordError, match="upgrade pragma-core"):
        read_compendium(path)


def test_the_document_of_an_entry_carries_every_field_a_reader_needs():
    entry = _entry(
        "D1 miss rate",
        aliases=["D1  miss rate"],
        unit="%",
        measured="100 * (D1mr + D1mw) / (Dr + Dw)",
        bottleneck=["cache misses"],
        remedies=["block the loops so the tile fits in L1"],
    )
    text = entry.document()
    for part in (
        "D1 miss rate (valgrind)",
        "what D1 miss rate means",
        "unit: %",
        "100 * (D1mr + D1mw)",
        "reveals: cache misses",
        "remedies: block the loops",
    ):
        assert part in text


def test_markdown_lists_every_metric_with_its_source():
    compendium = Compendium(profiler="valgrind", metrics=[_entry("Ir"), _entry("Bcm")])
    page = render_markdown(compendium)
    assert page.startswith("# valgrind")
    assert "### `Ir`" in page and "### `Bcm`" in page and page.count(SOURCE) == 2
