"""The counter-definition XML reader on rocprofiler-sdk's basic and derived counter files."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledge_builder.documents import Chunk, Page
from knowledge_builder.formats import read_page
from knowledge_builder.formats.counters_xml import MAX_CHUNK_CHARS, gfx_sort_key, read

ORIGIN = "https://github.com/ROCm/rocm-systems/blob/1b1610fc2b2ab32af71e6e04e4d4a6a4ae597992/projects/"
SHARE = "rocprofiler-sdk/source/share/rocprofiler-sdk/"


def _page(mirror: Path, name: str) -> Page:
    return Page(
        url=ORIGIN + SHARE + name,
        profiler="rocprof",
        format="xml",
        text=(mirror / "rocprof" / SHARE / name).read_text(encoding="utf-8"),
        path=f"rocprof/{SHARE}{name}",
    )


@pytest.fixture(scope="module")
def derived(docs_mirror: Path) -> list[Chunk]:
    return read(_page(docs_mirror, "derived_counters.xml"))


@pytest.fixture(scope="module")
def basic(docs_mirror: Path) -> list[Chunk]:
    return read(_page(docs_mirror, "basic_counters.xml"))


def _named(chunks: list[Chunk], term: str) -> list:
    return [d for chunk in chunks for d in chunk.definitions if d.term == term]


def test_one_definition_per_distinct_expression_with_its_architectures(derived):
    occupancy = {d.context: d for d in _named(derived, "MeanOccupancyPerCU")}
    mi300 = occupancy["gfx940, gfx941, gfx942"]  # gfx941 and gfx942 inherit from gfx940
    assert mi300.measured == (
        "reduce(SQ_LEVEL_WAVES,sum)*0+reduce(SQ_ACCUM_PREV_HIRES,sum)/reduce(GRBM_GUI_ACTIVE,sum)/CU_NUM"
    )
    assert mi300.text == "Mean occupancy per compute unit."
    assert occupancy["gfx90a"].measured == "SQ_LEVEL_WAVES*0+SQ_ACCUM_PREV_HIRES/GRBM_GUI_ACTIVE/CU_NUM"
    keys = [(d.term, d.text, d.measured) for chunk in derived for d in chunk.definitions]
    assert len(keys) == len(set(keys))


def test_common_metrics_reach_every_architecture_that_inherits_them(derived):
    (gpu_busy,) = _named(derived, "GPUBusy")
    architectures = gpu_busy.context.split(", ")
    assert {"gfx8", "gfx900", "gfx906", "gfx908", "gfx90a", "gfx1030", "gfx1100"} <= set(architectures)
    assert "common_derived" not in architectures
    assert architectures == sorted(architectures, key=gfx_sort_key)
    assert gpu_busy.measured == "100*GRBM_GUI_ACTIVE/GRBM_COUNT"
    assert gpu_busy.text == "The percentage of time GPU was busy."


def test_default_rocprof_metrics_are_described(derived, basic):
    for name in (
        "VALUBusy",
        "MemUnitBusy",
        "MfmaUtil",
        "TCC_HIT_sum",
        "TCC_MISS_sum",
        "FETCH_SIZE",
        "WRITE_SIZE",
        "TCP_TOTAL_CACHE_ACCESSES_sum",
        "TCP_TCC_READ_REQ_sum",
        "TCP_TCC_WRITE_REQ_sum",
        "L2CacheHit",
        "MeanOccupancyPerCU",
    ):
        assert all(d.text and d.measured for d in _named(derived, name)) and _named(derived, name), name
    for name in ("SQ_INSTS_VALU_MFMA_MOPS_F16", "SQ_INSTS_VALU_MFMA_MOPS_BF16", "SQ_INSTS_VALU_MFMA_MOPS_F32"):
        counters = _named(basic, name)
        assert counters, name
        for counter in counters:
            assert "matrix" in counter.text.lower() and counter.measured.startswith("hardware counter SQ event ")
    (busy,) = [d for d in _named(derived, "VALUBusy") if "gfx942" in d.context]
    assert busy.text.startswith("The percentage of GPUTime vector ALU instructions are processed.")


def test_basic_counters_name_their_block_and_event(basic):
    waves = {d.context: d for d in _named(basic, "SQ_WAVES")}
    cdna = waves["gfx8, gfx9, gfx900, gfx906, gfx908, gfx90a, gfx940, gfx941, gfx942"]
    assert cdna.measured == "hardware counter SQ event 4"
    assert cdna.text == "Count number of waves sent to SQs. (per-simd, emulated, global)"
    rdna = waves["gfx10, gfx1010, gfx1030, gfx1031, gfx1032, gfx11, gfx1100, gfx1101, gfx1102"]
    assert rdna.text == "Count number of waves sent to SQs. {emulated, global, C1}"
    chunk = next(c for c in basic if cdna in c.definitions)
    assert (
        "SQ_WAVES: Count number of waves sent to SQs. (per-simd, emulated, global) "
        "[hardware counter SQ event 4]" in chunk.text
    )


def test_unit_only_descriptions_give_the_unit(derived):
    (util,) = [d for d in _named(derived, "GpuUtil")]
    assert util.unit == "percent" and util.text == "Unit: percent"


def test_chunks_are_bounded_grouped_and_deterministic(docs_mirror, derived, basic):
    for chunks, title in ((derived, "Derived counters"), (basic, "Basic counters")):
        assert chunks
        for chunk in chunks:
            assert chunk.kind == "definitions" and chunk.profiler == "rocprof"
            assert 0 < len(chunk.definitions) <= 200 and len(chunk.text) <= MAX_CHUNK_CHARS
            assert chunk.headings == (title, chunk.definitions[0].context)
            assert {d.context for d in chunk.definitions} == {chunk.headings[1]}
            assert chunk.text.startswith(f"{title} for {chunk.headings[1]}:")
            assert chunk.source == ORIGIN + SHARE + title.lower().replace(" ", "_") + ".xml"
    assert read(_page(docs_mirror, "derived_counters.xml")) == derived


def test_read_page_dispatches_counter_xml_here(docs_mirror, basic, derived):
    assert read_page(_page(docs_mirror, "basic_counters.xml")) == basic
    assert read_page(_page(docs_mirror, "derived_counters.xml")) == derived


def test_tolerant_of_unquoted_values_comments_and_empty_elements():
    # Lines copied from derived_counters.xml.
    text = """<common_derived>
  # GPUBusy         The percentage of time GPU was busy.
  <metric
    name="GPUBusy"
    descr="The percentage of time GPU was busy."
    expr=100*GRBM_GUI_ACTIVE/GRBM_COUNT
  ></metric>
</common_derived>

<gfx10 base="common_derived">
</gfx10>

<gfx940>
  <metric name="MeanOccupancyPerCU" expr=reduce(SQ_LEVEL_WAVES,sum)*0+reduce(SQ_ACCUM_PREV_HIRES,sum)/reduce(GRBM_GUI_ACTIVE,sum)/CU_NUM descr="Mean occupancy per compute unit."></metric>
</gfx940>

<gfx941 base="gfx940"></gfx941>
<gfx942 base="gfx940"></gfx942>
<gfx1032 base="gfx1032"></gfx1032>
"""
    chunks = read(
        Page(
            url="https://example.org/derived_counters.xml",
            profiler="rocprof",
            format="xml",
            text=text,
            path="derived_counters.xml",
        )
    )
    found = {d.term: d for chunk in chunks for d in chunk.definitions}
    assert found["GPUBusy"].context == "gfx10"
    assert found["GPUBusy"].measured == "100*GRBM_GUI_ACTIVE/GRBM_COUNT"
    assert found["MeanOccupancyPerCU"].context == "gfx940, gfx941, gfx942"
    assert [c.headings[1] for c in chunks] == ["gfx10", "gfx940, gfx941, gfx942"]


def test_architecture_order():
    names = ["gfx1201", "gfx942", "gfx10", "gfx90a", "gfx9", "gfx950", "gfx1100", "gfx906", "gfx12"]
    assert sorted(names, key=gfx_sort_key) == [
        "gfx9",
        "gfx906",
        "gfx90a",
        "gfx942",
        "gfx950",
        "gfx10",
        "gfx1100",
        "gfx12",
        "gfx1201",
    ]
