"""The DocBook reader on Valgrind's Cachegrind manual and man pages."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from mirror_pages import definitions_by_term, mirror_page

from knowledge_builder.documents import Page
from knowledge_builder.formats import docbook, read_page

MANUAL = "cachegrind/cg-manual.xml"
EVENTS = ("Ir", "I1mr", "ILmr", "Dr", "D1mr", "DLmr", "Dw", "D1mw", "DLmw", "Bc", "Bcm", "Bi", "Bim")


def _page(mirror: Path, path: str) -> Page:
    return mirror_page(mirror, path, profiler="cachegrind", fmt="xml")


def test_every_cachegrind_event_is_defined(docs_mirror):
    found = definitions_by_term(docbook.read(_page(docs_mirror, MANUAL)))
    for event in EVENTS:
        chunk, definition = found[event]
        assert definition.text, event
        assert chunk.kind == "definitions"
        assert chunk.headings[-1] == "Cache and Branch Simulation"
        assert chunk.source.endswith("#cg-manual.cache-branch-sim")
    assert found["Ir"][1].text == "I cache reads, which equals the number of instructions executed"
    assert found["I1mr"][1].text == "I1 cache read misses"
    assert found["DLmw"][1].text == "LL cache data write misses"
    assert found["Bcm"][1].text == "Conditional branches mispredicted"
    assert found["Bi"][1].text == "Indirect branches executed"
    cache = found["Ir"][0]
    assert cache.text.startswith("When simulating the cache, with --cache-sim=yes, Cachegrind gathers")


def test_summary_line_is_defined_by_the_paragraph_that_names_it(docs_mirror):
    chunks = docbook.read(_page(docs_mirror, MANUAL))
    chunk, refs = definitions_by_term(chunks)["I refs"]
    assert refs.context == "cachegrind summary output"
    assert refs.text.startswith(
        'The I refs number is short for "Instruction cache references", which is equivalent to "instructions executed".'
    )
    assert chunk.headings[-1] == "Running Cachegrind" and "==17942== I refs:" in chunk.text
    assert {d.term for c in chunks for d in c.definitions} == set(EVENTS) | {"I refs"}


def test_options_stay_prose_under_their_section(docs_mirror):
    chunks = docbook.read(_page(docs_mirror, MANUAL))
    options = [c for c in chunks if c.headings[-1] == "Cachegrind Command-line Options"]
    assert [c.kind for c in options] == ["prose"]
    assert options[0].source.endswith("#cg-manual.cgopts")
    assert (
        "--cache-sim=no|yes [no]\n    Enables or disables collection of cache access and miss counts."
        in options[0].text
    )


def test_headings_anchors_and_entities(docs_mirror):
    chunks = docbook.read(_page(docs_mirror, MANUAL))
    intro = chunks[0]
    assert intro.headings == ("Cachegrind: a high-precision tracing profiler",)
    assert intro.source == "https://mirror.invalid/cachegrind/cg-manual.xml"  # its id is an unresolved entity
    assert intro.text == "To use this tool, specify --tool=cachegrind on the Valgrind command line."
    accuracy = next(c for c in chunks if c.headings[-1] == "Accuracy")
    assert accuracy.headings == ("Cachegrind: a high-precision tracing profiler", "Simulation Details", "Accuracy")
    listing = next(c for c in chunks if c.headings[-1] == "Per-line Counts")
    assert "      8 (0.0%)  {" in listing.text  # listings keep their layout
    assert all(len(c.text) <= 3000 for c in chunks)
    assert chunks == docbook.read(_page(docs_mirror, MANUAL))


@pytest.mark.parametrize(
    "tool, purpose",
    [
        ("cg_annotate", "post-processing tool for Cachegrind"),
        ("cg_diff", "(deprecated) diffs two Cachegrind output files"),
        ("cg_merge", "(deprecated) merges multiple Cachegrind output files into one"),
    ],
)
def test_man_pages(docs_mirror, tool, purpose):
    chunks = docbook.read(_page(docs_mirror, f"cachegrind/{tool}-manpage.xml"))
    assert all(c.headings[0] == f"{tool} - {purpose}" for c in chunks)
    assert [c.headings[-1] for c in chunks] == ["Synopsis", "Description"]  # no See Also, no Author
    assert chunks[1].source.endswith(f"#{tool}-description")


def test_dispatcher_routes_the_manual_here(docs_mirror):
    page = _page(docs_mirror, MANUAL)
    assert read_page(page) == docbook.read(page)


def test_unparsable_xml_falls_back_to_plain_text(docs_mirror):
    page = _page(docs_mirror, MANUAL)
    chunks = docbook.read(attrs.evolve(page, text=page.text[:2000]))
    assert chunks and all(c.kind == "prose" for c in chunks)
    text = "\n".join(c.text for c in chunks)
    assert "Cachegrind is a high-precision tracing profiler." in text and "<para>" not in text
