"""The man-page reader on perf_event_open(2) in roff: sections, tagged paragraphs, markup, perf's event names."""

from __future__ import annotations

from pathlib import Path

import pytest
from mirror_pages import definitions_by_term, mirror_page

from knowledge_builder.documents import Page
from knowledge_builder.formats import format_of, man, read_page
from knowledge_builder.formats.perf_event_names import CACHES, HARDWARE, SOFTWARE

PAGE = "perf/man-pages-6.03/perf_event_open.2"


def _page(mirror: Path) -> Page:
    return mirror_page(mirror, PAGE, profiler="perf", fmt="man")


@pytest.fixture(scope="module")
def chunks(docs_mirror):
    return man.read(_page(docs_mirror))


def _text(chunks) -> str:
    return "\n".join(chunk.text for chunk in chunks)


def test_man_pages_are_told_by_their_section_number():
    assert format_of("perf/man-pages-6.03/perf_event_open.2") == "man"
    assert format_of("man3/pthread_create.3p") == format_of("perf-stat.1") == "man"
    # a crawled page's content type wins over a path that only looks like a manual page
    assert format_of("/docs/v1.2", "text/html; charset=utf-8") == "html"
    assert format_of("https://man7.org/linux/man-pages/man2/perf_event_open.2.html") == "html"
    assert format_of("GPL-2.0") is None


def test_sections_follow_the_title_and_cite_their_anchor(chunks):
    paths = {chunk.headings for chunk in chunks}
    assert ("perf_event_open(2)", "NAME") in paths
    assert ("perf_event_open(2)", "DESCRIPTION", "Arguments") in paths
    assert ("perf_event_open(2)", "DESCRIPTION", "MMAP layout") in paths
    assert ("perf_event_open(2)", "RETURN VALUE") in paths
    name = next(c for c in chunks if c.headings[-1] == "NAME")
    assert name.text == "perf_event_open - set up performance monitoring"
    returned = next(c for c in chunks if c.headings[-1] == "RETURN VALUE")
    assert returned.source == "https://mirror.invalid/perf/man-pages-6.03/perf_event_open.2#RETURN_VALUE"
    mmap = next(c for c in chunks if c.headings[-1] == "MMAP layout")
    assert mmap.source.endswith("#DESCRIPTION")
    assert not any("SEE ALSO" in c.headings for c in chunks)


def test_fonts_escapes_and_comments_become_plain_text(chunks):
    text = _text(chunks)
    # .BR "pid == 0" " and " "cpu == \-1": alternating fonts joined, \- a hyphen
    assert "pid == 0 and cpu == -1\n    This measures the calling process/thread on any CPU." in text
    # .RB ( read "(2), " mmap "(2), " ...
    assert "returns a file descriptor, for use in subsequent system calls (read(2), mmap(2), prctl(2), fcntl(2)" in text
    assert "exclude_user   : 1,   /* don't count user */" in text  # \[aq]
    assert 'printf("Used %lld instructions\\n", count);' in text  # \e
    assert "1+2^n pages" in text  # \[ha]
    for markup in ("\\f", "\\-", "\\[", ".BR ", ".I ", ".TP", ".RS", "commit 24f1e32c"):
        assert markup not in text, markup


def test_a_tagged_paragraph_keeps_its_tag_and_body_and_a_long_one_lends_its_tag_to_its_parts(chunks):
    arguments = [c for c in chunks if c.headings[-2:] == ("Arguments", "config")]
    assert arguments, "the config field is longer than a chunk: its parts go under its tag"
    text = _text(arguments)
    assert "PERF_COUNT_HW_CPU_CYCLES\n    Total cycles.\n    Be wary" not in text  # paragraphs are filled
    assert "PERF_COUNT_HW_CPU_CYCLES\n    Total cycles. Be wary of what happens during CPU frequency scaling." in text
    assert "PERF_COUNT_HW_STALLED_CYCLES_FRONTEND (since Linux 3.0)\n    Stalled cycles during issue." in text
    # .TQ gives one tagged paragraph several tags
    sample = _text(c for c in chunks if c.headings[-1] == "PERF_RECORD_SAMPLE")
    assert "size, data[size], dyn_size\n    If PERF_SAMPLE_STACK_USER is enabled" in sample
    # what .RS indents under a tagged paragraph is part of it
    data_src = next(c for c in chunks if c.text.startswith("data_src\n"))
    assert "\n    mem_op\n        Type of opcode, a bitwise combination of:\n        PERF_MEM_OP_NA" in data_src.text


def test_examples_keep_their_lines(chunks):
    example = next(c for c in chunks if c.headings[-1] == "EXAMPLES")
    assert "int\nmain(void)\n{\n    int                     fd;" in example.text
    synopsis = next(c for c in chunks if c.headings[-1] == "SYNOPSIS")
    assert synopsis.text.startswith("#include <linux/perf_event.h>    /* Definition of PERF_* constants */\n")


def test_chunks_are_bounded_and_deterministic(docs_mirror, chunks):
    assert chunks and all(c.text.strip() for c in chunks)
    assert max(len(c.text) for c in chunks) <= 3000
    assert chunks == man.read(_page(docs_mirror))
    assert read_page(_page(docs_mirror)) == chunks


def test_the_generic_events_are_defined_under_perfs_names(chunks):
    found = definitions_by_term(chunks)
    chunk, cycles = found["cycles"]
    assert cycles.text == "Total cycles. Be wary of what happens during CPU frequency scaling."
    assert cycles.aliases == ("cpu-cycles", "PERF_COUNT_HW_CPU_CYCLES")
    assert cycles.measured == "PERF_TYPE_HARDWARE, config PERF_COUNT_HW_CPU_CYCLES"
    assert chunk.kind == "definitions" and chunk.headings[-1] == "config" and chunk.source.endswith("#DESCRIPTION")
    assert found["branches"][1].aliases == ("branch-instructions", "PERF_COUNT_HW_BRANCH_INSTRUCTIONS")
    assert found["branch-misses"][1].text == "Mispredicted branch instructions."
    assert found["cache-misses"][1].text.startswith("Cache misses. Usually this indicates Last Level Cache misses")
    assert found["task-clock"][1].text == "This reports a clock count specific to the task that is running."
    assert found["context-switches"][1].aliases == ("cs", "PERF_COUNT_SW_CONTEXT_SWITCHES")
    assert found["cpu-migrations"][1].text == "This reports the number of times the process has migrated to a new CPU."
    assert found["page-faults"][1].measured == "PERF_TYPE_SOFTWARE, config PERF_COUNT_SW_PAGE_FAULTS"


def test_cache_events_are_perfs_combinations_described_by_the_pages_words(chunks):
    found = definitions_by_term(chunks)
    misses = found["L1-dcache-load-misses"][1]
    assert misses.text == "Hardware cache event for Level 1 Data Cache: measures misses of read accesses."
    assert misses.measured == (
        "PERF_TYPE_HW_CACHE, config PERF_COUNT_HW_CACHE_L1D | (PERF_COUNT_HW_CACHE_OP_READ << 8) | "
        "(PERF_COUNT_HW_CACHE_RESULT_MISS << 16)"
    )
    assert found["L1-dcache-loads"][1].text == "Hardware cache event for Level 1 Data Cache: measures read accesses."
    assert (
        found["dTLB-store-misses"][1].text
        == "Hardware cache event for the Data TLB: measures misses of write accesses."
    )
    # only the operations perf counts for each cache: the instruction cache is never written
    assert "L1-icache-stores" not in found and "iTLB-prefetches" not in found and "branch-stores" not in found
    operations = sum(len(ops) for _name, ops in CACHES.values())
    assert sum(1 for d in found.values() if d[1].measured.startswith("PERF_TYPE_HW_CACHE")) == 2 * operations
    assert len(found) == len(HARDWARE) + len(SOFTWARE) + 2 * operations
