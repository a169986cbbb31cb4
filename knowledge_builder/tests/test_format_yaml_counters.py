"""The YAML reader on rocprofiler-sdk's counter_defs.yaml and rocprofiler-compute's metric descriptions."""

from __future__ import annotations

from pathlib import Path

import pytest
from mirror_pages import definitions_by_term

from knowledge_builder.documents import Chunk, Page
from knowledge_builder.formats import read_page
from knowledge_builder.formats.yaml_counters import MAX_CHUNK_CHARS, read

ORIGIN = "https://github.com/ROCm/rocm-systems/blob/1b1610fc2b2ab32af71e6e04e4d4a6a4ae597992/projects/"
COUNTER_DEFS = "rocprofiler-sdk/source/share/rocprofiler-sdk/counter_defs.yaml"
METRIC_DESCRIPTIONS = "rocprofiler-compute/docs/data/metrics_description.yaml"

# The metrics pragma's rocprof plugin collects or reports by default.
ROCPROF_DEFAULT_METRICS = (
    "OccupancyPercent",
    "MeanOccupancyPerCU",
    "VGPR_Count",
    "Accum_VGPR_Count",
    "SGPR_Count",
    "LDS_Block_Size",
    "Scratch_Size",
    "VALUBusy",
    "MemUnitBusy",
    "MfmaUtil",
    "SQ_INSTS_VALU_MFMA_MOPS_F16",
    "TCC_HIT_sum",
    "TCC_MISS_sum",
    "FETCH_SIZE",
    "WRITE_SIZE",
    "TCP_TOTAL_CACHE_ACCESSES_sum",
    "TCP_TCC_READ_REQ_sum",
    "TCP_TCC_WRITE_REQ_sum",
    "SQ_INSTS_VALU_MFMA_MOPS_BF16",
    "SQ_INSTS_VALU_MFMA_MOPS_F32",
    "L2CacheHit",
    "Start_Timestamp",
    "End_Timestamp",
)


def _page(mirror: Path, relative: str) -> Page:
    fmt = {".yaml": "yaml", ".rst": "rst", ".xml": "xml"}[Path(relative).suffix]
    return Page(
        url=ORIGIN + relative,
        profiler="rocprof",
        format=fmt,
        text=(mirror / "rocprof" / relative).read_text(encoding="utf-8"),
        path=f"rocprof/{relative}",
    )


def _snippet(text: str) -> list[Chunk]:
    return read(Page(url="https://example.org/input.yaml", profiler="rocprof", format="yaml", text=text))


@pytest.fixture(scope="module")
def counter_defs(docs_mirror: Path) -> list[Chunk]:
    return read(_page(docs_mirror, COUNTER_DEFS))


@pytest.fixture(scope="module")
def metric_descriptions(docs_mirror: Path) -> list[Chunk]:
    return read(_page(docs_mirror, METRIC_DESCRIPTIONS))


def test_every_counter_is_defined_once(counter_defs):
    terms = [d.term for chunk in counter_defs for d in chunk.definitions]
    assert len(terms) == len(set(terms)) == 797
    assert all(d.text and d.measured and d.context for chunk in counter_defs for d in chunk.definitions)


def test_derived_metric_measured_by_the_newest_architecture(counter_defs):
    chunk, fetch = definitions_by_term(counter_defs)["FETCH_SIZE"]
    assert fetch.text.startswith("The total kilobytes fetched from the video memory.")
    assert fetch.measured == "(GL2C_EA_RDREQ_32B_sum*32+GL2C_EA_RDREQ_64B_sum*64+GL2C_EA_RDREQ_128B_sum*128)/1024"
    assert {"gfx90a", "gfx942", "gfx950", "gfx1201"} <= set(fetch.context.split(", "))
    assert chunk.headings == ("rocprofiler-sdk counters", "Derived metrics")
    # The text still shows the expression of every architecture group.
    assert (
        "  gfx940, gfx941, gfx942, gfx950: (TCC_BUBBLE_sum*128 + (TCC_EA0_RDREQ_sum-TCC_BUBBLE_sum"
        "-TCC_EA0_RDREQ_32B_sum)*64 + TCC_EA0_RDREQ_32B_sum*32)/1024"
    ) in chunk.text


def test_hardware_counters_give_block_and_event(counter_defs):
    chunk, mops = definitions_by_term(counter_defs)["SQ_INSTS_VALU_MFMA_MOPS_F16"]
    assert mops.measured == "hardware counter SQ event 51"  # gfx950's event
    assert mops.context == "gfx90a, gfx940, gfx941, gfx942, gfx950"
    assert "MFMA (Matrix-Fused-Multiply-Add) and operating on F16 (float16) data" in mops.text
    assert chunk.headings == ("rocprofiler-sdk counters", "Hardware counters of block SQ")
    assert "  gfx940, gfx941, gfx942: hardware counter SQ event 50" in chunk.text


def test_unit_only_descriptions_give_the_unit(counter_defs):
    _, mfma = definitions_by_term(counter_defs)["MfmaUtil"]
    assert mfma.text == "Unit: percent" and mfma.unit == "percent"


def test_metric_descriptions_by_panel(metric_descriptions):
    defined = definitions_by_term(metric_descriptions)
    chunk, hbm = defined["HBM Bandwidth"]
    assert hbm.context == "L2 Speed-of-Light" and hbm.unit == "GB/s"
    assert hbm.text.startswith("Maximum theoretical bandwidth of the accelerator's local high-bandwidth memory (HBM)")
    assert chunk.headings == ("L2 Speed-of-Light",) and chunk.kind == "definitions"
    _, hit_rate = defined["vL1D Cache Hit Rate"]
    assert hit_rate.context == "System Speed-of-Light" and hit_rate.unit == "Percent"
    assert hit_rate.text == (
        "The ratio of the number of vL1D cache line requests that hit in vL1D cache "
        "over the total number of cache line requests to the vL1D cache RAM."
    )
    _, agprs = defined["AGPRs"]
    assert agprs.text.startswith(
        "The number of accumulation vector general-purpose registers allocated for the kernel, see AGPRs. Note:"
    )


def test_same_metric_name_in_several_panels_keeps_each(metric_descriptions):
    assert len([d for chunk in metric_descriptions for d in chunk.definitions]) == 302
    hit_rates = {d.context: d for chunk in metric_descriptions for d in chunk.definitions if d.term == "Cache Hit Rate"}
    assert set(hit_rates) == {
        "vL1D cache access metrics",
        "Scalar L1D Speed-of-Light",
        "Scalar L1D cache accesses",
        "L1I Speed-of-Light",
        "L1I cache accesses",
    }
    assert "sL1D" in hit_rates["Scalar L1D cache accesses"].text


def test_rst_markup_is_cleaned_from_descriptions(metric_descriptions):
    for chunk in metric_descriptions:
        for definition in chunk.definitions:
            for leftover in (":ref:`", ":doc:`", "``", "[#", "<desc-"):
                assert leftover not in definition.text, (definition.term, definition.text)


def test_chunks_are_bounded(counter_defs, metric_descriptions):
    for chunk in counter_defs + metric_descriptions:
        assert chunk.kind == "definitions" and chunk.source.startswith(ORIGIN)
        assert 0 < len(chunk.definitions) <= 200 and len(chunk.text) <= MAX_CHUNK_CHARS


def test_read_page_dispatches_yaml_here_deterministically(docs_mirror, metric_descriptions):
    assert read_page(_page(docs_mirror, METRIC_DESCRIPTIONS)) == metric_descriptions


def test_extra_counter_file_from_the_guide():
    # The extra-counters example of using-rocprofv3.rst.
    chunks = _snippet("""rocprofiler-sdk:
  counters-schema-version: 1
  counters:
    - name: GRBM_GUI_ACTIVE_SUM
      description: "Unit: cycles"
      properties: []
      definitions:
        - architectures:
            - gfx10
            - gfx90a
            - gfx942
          expression: reduce(GRBM_GUI_ACTIVE,max)*CU_NUM
    - name: CPC_CPC_STAT_BUSY
      description: CPC Busy.
      properties: []
      definitions:
        - architectures:
            - gfx940
            - gfx941
          block: CPC
          event: 25
""")
    defined = definitions_by_term(chunks)
    assert defined["GRBM_GUI_ACTIVE_SUM"][1].unit == "cycles"
    assert defined["GRBM_GUI_ACTIVE_SUM"][1].context == "gfx90a, gfx942, gfx10"
    assert defined["CPC_CPC_STAT_BUSY"][1].measured == "hardware counter CPC event 25"


def test_other_yaml_reads_as_prose():
    # The input.yaml example of using-rocprofv3.rst.
    chunks = _snippet("""jobs:
  - output_directory: "@CMAKE_CURRENT_BINARY_DIR@/%env{ARBITRARY_ENV_VARIABLE}%"
    output_file: out
    output_format: [pftrace, json, otf2]
    log_level: env
    runtime_trace: true
    summary_groups: ["KERNEL_DISPATCH|MEMORY_COPY"]
""")
    (chunk,) = chunks
    assert chunk.kind == "prose" and chunk.headings == ("jobs",) and not chunk.definitions
    assert chunk.text.splitlines() == [
        "- output_directory: @CMAKE_CURRENT_BINARY_DIR@/%env{ARBITRARY_ENV_VARIABLE}%",
        "  output_file: out",
        "  output_format:",
        "    - pftrace",
        "    - json",
        "    - otf2",
        "  log_level: env",
        "  runtime_trace: true",
        "  summary_groups:",
        "    - KERNEL_DISPATCH|MEMORY_COPY",
    ]


def test_rocprof_default_metrics_are_all_defined(docs_mirror):
    """Every metric the rocprof plugin uses has a described definition from some reader."""
    sources = [
        COUNTER_DEFS,
        METRIC_DESCRIPTIONS,
        "rocprofiler-sdk/source/share/rocprofiler-sdk/derived_counters.xml",
        "rocprofiler-sdk/source/share/rocprofiler-sdk/basic_counters.xml",
        "rocprofiler-sdk/source/docs/how-to/using-rocprofv3.rst",
    ]
    described = {
        d.term
        for source in sources
        for chunk in read_page(_page(docs_mirror, source))
        for d in chunk.definitions
        if d.text and d.role == "metric"
    }
    assert [name for name in ROCPROF_DEFAULT_METRICS if name not in described] == []
