"""The AsciiDoc reader on perf's own manual pages: sections, options kept whole, perf stat counters."""

from __future__ import annotations

from pathlib import Path

import pytest
from mirror_pages import mirror_page

from knowledge_builder.formats import asciidoc

PERF_DOCS = "perf/linux-6.1.192/tools/perf/Documentation"
UPSTREAM = "perf/upstream"


def _read(mirror: Path, path: str) -> list:
    return asciidoc.read(mirror_page(mirror, path, profiler="perf", fmt="txt"))


def _definitions(chunks: list) -> dict:
    return {d.term: d for chunk in chunks for d in chunk.definitions}


def test_perf_stat_example_output_gives_the_counters_it_prints(docs_mirror):
    chunks = _read(docs_mirror, f"{PERF_DOCS}/perf-stat.txt")
    examples = [c for c in chunks if c.kind == "definitions" and c.headings[-1] == "EXAMPLES"]
    assert len(examples) == 1
    terms = [d.term for d in examples[0].definitions]
    assert terms == [
        "task-clock",
        "context-switches",
        "cpu-migrations",
        "page-faults",
        "cycles",
        "instructions",
        "branches",
        "branch-misses",
    ]
    found = {d.term: d for d in examples[0].definitions}
    assert found["task-clock"].unit == "msec"
    assert found["task-clock"].measured == "CPUs utilized"
    assert found["instructions"].measured == "insn per cycle"
    assert found["branch-misses"].measured == "of all branches"
    assert found["cycles"].measured == "GHz"
    assert all(d.context == "perf stat output" and d.text == "" for d in examples[0].definitions)
    assert "313,163,853,778      instructions:u" in examples[0].text
    prose = next(c for c in chunks if c.kind == "prose" and c.headings[-1] == "EXAMPLES")
    assert "insn per cycle" in prose.text


def test_options_stay_prose_and_are_never_cut(docs_mirror):
    chunks = _read(docs_mirror, f"{PERF_DOCS}/perf-stat.txt")
    assert not any(d.term.startswith("-") for d in _definitions(chunks).values())
    options = [c for c in chunks if c.headings == ("perf-stat(1)", "OPTIONS") and c.kind == "prose"]
    assert len(options) > 1
    event = next(c for c in options if "-e, --event=\n" in c.text)
    assert "Select the PMU event" in event.text and "'uncore_' is also ignored" in event.text
    control = next(c for c in options if "--control=fifo:ctl-fifo[,ack-fifo], --control=fd:ctl-fd[,ack-fd]" in c.text)
    assert "wait -n ${perf_pid}" in control.text
    assert all(c.text.split("\n")[0].startswith(("-", "<command>")) for c in options)


def test_markup_and_see_also_are_dropped(docs_mirror):
    for name in ("perf-stat.txt", "perf-list.txt"):
        chunks = _read(docs_mirror, f"{PERF_DOCS}/{name}")
        assert not any(c.headings[-1] == "SEE ALSO" for c in chunks)
        text = "\n".join(c.text for c in chunks)
        assert "linkperf:" not in text and "\\--" not in text and "<<" not in text
        assert "ifdef::" not in text and "[verse]" not in text
    stat = "\n".join(c.text for c in _read(docs_mirror, f"{PERF_DOCS}/perf-stat.txt"))
    assert "perf-list(1) man page" in stat and "$ perf stat -- make" in stat


def test_anchors_become_the_source_fragment(docs_mirror):
    chunks = _read(docs_mirror, f"{UPSTREAM}/perf-list.txt")
    modifiers = next(c for c in chunks if c.headings[-1] == "EVENT MODIFIERS")
    assert modifiers.source.endswith("perf-list.txt#EVENT_MODIFIERS")
    assert "R - retire latency value of the event" in modifiers.text
    raw = next(c for c in chunks if c.headings[-1] == "RAW HARDWARE EVENT DESCRIPTOR")
    assert "#" not in raw.source
    assert "must be setup using EVENT MODIFIERS." in raw.text


def test_title_levels_follow_the_page_not_fixed_underlines(docs_mirror):
    chunks = _read(docs_mirror, f"{UPSTREAM}/topdown.txt")
    headings = [c.headings for c in chunks]
    assert ("Using TopDown metrics",) in headings
    assert ("Using TopDown metrics", "Limits on Intel Ice Lake") in headings
    assert ("Using TopDown metrics", "Extension on Intel Sapphire Rapids Server") in headings
    intro = next(c for c in chunks if c.headings == ("Using TopDown metrics",))
    assert "tma_frontend_bound" in intro.text


def test_hybrid_pmu_spellings_are_aliases_of_the_event(docs_mirror):
    chunks = _read(docs_mirror, f"{PERF_DOCS}/intel-hybrid.txt")
    cycles = [d for c in chunks for d in c.definitions]
    assert cycles and all(d.term == "cycles" for d in cycles)
    assert cycles[0].aliases == ("cpu_core/cycles/", "cpu_atom/cycles/")


def test_pmu_events_readme_without_extension(docs_mirror):
    chunks = _read(docs_mirror, "perf/linux-6.1.192/tools/perf/pmu-events/README")
    assert chunks[0].headings == ()
    mapfile = next(c for c in chunks if c.headings == ("Mapfile format",))
    assert "CPUID,Version,Dir/path/name,Type" in mapfile.text
    assert not any(c.definitions for c in chunks)


@pytest.mark.parametrize(
    "path",
    sorted(
        f"{folder}/{name}"
        for folder, names in (
            (PERF_DOCS, ("perf-stat.txt", "perf-list.txt", "topdown.txt", "intel-hybrid.txt")),
            (UPSTREAM, ("perf-stat.txt", "perf-list.txt", "topdown.txt")),
        )
        for name in names
    ),
)
def test_chunks_are_bounded_and_deterministic(docs_mirror, path):
    chunks = _read(docs_mirror, path)
    assert chunks and all(c.text.strip() for c in chunks)
    assert max(len(c.text) for c in chunks) <= 3000
    assert chunks == _read(docs_mirror, path)


def test_default_perf_counters_named_across_the_docs(docs_mirror):
    paths = [f"{PERF_DOCS}/{name}" for name in ("perf-stat.txt", "perf-list.txt", "topdown.txt", "intel-hybrid.txt")]
    paths += [f"{UPSTREAM}/{name}" for name in ("perf-stat.txt", "perf-list.txt", "topdown.txt")]
    terms = {d.term for path in paths for d in _definitions(_read(docs_mirror, path)).values()}
    assert {
        "instructions",
        "cycles",
        "branches",
        "branch-misses",
        "task-clock",
        "page-faults",
        "context-switches",
        "cpu-migrations",
    } <= terms
