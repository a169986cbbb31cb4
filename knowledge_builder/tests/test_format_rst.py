"""The reStructuredText reader on the ROCm profiler guides of the docs mirror."""

from __future__ import annotations

from pathlib import Path

import pytest
from mirror_pages import definitions_by_term

from knowledge_builder.documents import Chunk, Page
from knowledge_builder.formats import read_page
from knowledge_builder.formats.rst import MAX_CHUNK_CHARS, inline_text, is_metric_name, read

ORIGIN = "https://github.com/ROCm/rocm-systems/blob/1b1610fc2b2ab32af71e6e04e4d4a6a4ae597992/projects/"
ROCPROFV3 = "rocprofiler-sdk/source/docs/how-to/using-rocprofv3.rst"


def _read(mirror: Path, relative: str) -> list[Chunk]:
    page = Page(
        url=ORIGIN + relative,
        profiler="rocprof",
        format="rst",
        text=(mirror / "rocprof" / relative).read_text(encoding="utf-8"),
        path=f"rocprof/{relative}",
    )
    return read(page)


def _all_pages(mirror: Path) -> dict[str, list[Chunk]]:
    root = mirror / "rocprof"
    return {
        str(path.relative_to(root)): _read(mirror, str(path.relative_to(root))) for path in sorted(root.rglob("*.rst"))
    }


def _chunk_with(chunks: list[Chunk], words: str) -> Chunk:
    return next(chunk for chunk in chunks if words in chunk.text)


@pytest.fixture(scope="module")
def rocprofv3(docs_mirror: Path) -> list[Chunk]:
    return _read(docs_mirror, ROCPROFV3)


def test_output_file_fields_become_metric_definitions(rocprofv3):
    defined = definitions_by_term(rocprofv3)
    chunk, vgprs = defined["VGPR_Count"]
    assert chunk.kind == "table"
    assert chunk.source == ORIGIN + ROCPROFV3 + "#output-file-fields"
    assert chunk.headings == ("Using rocprofv3", "Output file fields")
    assert vgprs.text == "Kernel's Architected Vector General Purpose Register (VGPR) count."
    assert vgprs.role == "metric" and vgprs.context == "Using rocprofv3 > Output file fields"
    assert "Local Data Share (LDS)" in defined["LDS_Block_Size"][1].text
    assert defined["Start_Timestamp"][1].text.startswith("Begin time in nanoseconds (ns)")
    for name in ("Accum_VGPR_Count", "SGPR_Count", "Scratch_Size", "End_Timestamp", "Grid_Size"):
        assert defined[name][1].text, name
    assert "Field | Description" in chunk.text
    assert "SGPR_Count | Kernel's Scalar General Purpose Register (SGPR) count." in chunk.text


def test_options_table_is_a_table_without_definitions(rocprofv3):
    options = [c for c in rocprofv3 if c.kind == "table" and c.text.startswith("rocprofv3 options")]
    assert len(options) > 1, "the long options table is split, each part repeating the header"
    assert all(c.text.splitlines()[1] == "Purpose | Option | Description" for c in options)
    assert all(not c.definitions and len(c.text) <= MAX_CHUNK_CHARS for c in options)
    post = _chunk_with(options, "Post-processing tracing")
    assert "--stats [BOOL]; -S [BOOL] | --summary [BOOL]" in post.text  # line blocks, |br| gone
    assert "Doesn't include default kernel stats unlike previous rocprof versions." in post.text
    assert all(c.source.endswith("#cli-options") for c in options)


def test_heading_levels_follow_the_order_of_adornment_styles(rocprofv3):
    stats = _chunk_with(rocprofv3, "This option collects statistics for the enabled tracing types.")
    assert stats.headings == ("Using rocprofv3", "Application tracing", "Post-processing tracing options", "Stats")
    assert stats.source.endswith("#stats")  # no label: the id docutils derives from the title
    output = _chunk_with(rocprofv3, "To specify the particular output format")
    assert output.headings == ("Using rocprofv3", "Output formats")


def test_code_is_kept_and_referenced_files_are_named(rocprofv3):
    stats = _chunk_with(rocprofv3, "This option collects statistics for the enabled tracing types.")
    assert "rocprofv3 --stats --hip-trace --output-format csv -- <application_path>" in stats.text
    assert "Table 'HIP stats': its rows are in the file /data/hip_api_stats.csv." in stats.text
    summary = _chunk_with(rocprofv3, "The preceding command generates an output file named")
    assert "[The file /data/summary.txt is included here.]" in summary.text


def test_no_markup_or_dropped_directives_remain(docs_mirror):
    for name, chunks in _all_pages(docs_mirror).items():
        assert chunks, name
        for chunk in chunks:
            assert chunk.text.strip(), name
            assert len(chunk.text) <= MAX_CHUNK_CHARS, (name, chunk.topic)
            for leftover in (
                ":ref:`",
                ":doc:`",
                "|br|",
                ".. code-block",
                ".. image",
                ".. jinja",
                ".. _",
                ":header-rows:",
                "metrics_table.j2",
                "<br />",
            ):
                assert leftover not in chunk.text, (name, leftover, chunk.text[:200])


def test_reading_is_deterministic(docs_mirror):
    assert _read(docs_mirror, ROCPROFV3) == _read(docs_mirror, ROCPROFV3)


def test_read_page_dispatches_rst_here(docs_mirror, rocprofv3):
    text = (docs_mirror / "rocprof" / ROCPROFV3).read_text(encoding="utf-8")
    page = Page(url=ORIGIN + ROCPROFV3, profiler="rocprof", format="rst", text=text)
    assert read_page(page) == rocprofv3


def test_bulleted_field_list_gives_definitions(docs_mirror):
    chunks = _read(docs_mirror, "rocprofiler-sdk/source/docs/how-to/using-pc-sampling.rst")
    chunk, dispatch = definitions_by_term(chunks)["Dispatch_Id"]
    assert chunk.kind == "definitions" and chunk.source.endswith("#pc-sampling-fields")
    assert dispatch.text == "Originating kernel dispatch ID"
    assert dispatch.context == "Using PC sampling > PC sampling fields"
    # The paragraph after the list is not part of its last item.
    assert definitions_by_term(chunks)["Correlation_Id"][1].text == "API launch call ID that matches dispatch ID"
    assert definitions_by_term(chunks)["Exec_Mask"][1].text == "Active SIMD lanes when sampled"


def test_vocabulary_tables_give_glossary_terms_with_units(docs_mirror):
    terms = definitions_by_term(_read(docs_mirror, "rocprofiler-compute/docs/conceptual/includes/terms.rst"))
    kernel_time = terms["Kernel time"][1]
    assert kernel_time.role == "glossary" and kernel_time.unit == "Seconds"
    assert kernel_time.text.startswith("The number of seconds the accelerator was executing a kernel")
    assert "command processor's (CP) start-of-kernel" in kernel_time.text
    assert terms["Wavefront"][1].unit == ""  # "N/A" is no unit
    units = definitions_by_term(
        _read(docs_mirror, "rocprofiler-compute/docs/conceptual/includes/normalization-units.rst")
    )
    assert units["per_wave"][1].role == "glossary"
    assert "wavefronts launched in the kernel" in units["per_wave"][1].text


def test_option_definition_lists_read_as_prose(docs_mirror):
    chunks = _read(docs_mirror, "rocprofiler-compute/docs/how-to/use.rst")
    assert not any(chunk.kind == "definitions" for chunk in chunks)
    options = _chunk_with(chunks, "-k, --kernel: Enables filtering kernels by name.")
    assert options.headings == ("Basic usage", "Command line profiler", "Customize data collection")
    assert options.source.endswith("#basic-filter-data-collection")


def test_grid_table_with_wide_characters(docs_mirror):
    chunks = _read(docs_mirror, "rocprofiler-compute/docs/conceptual/performance-model.rst")
    table = _chunk_with(chunks, "Architecture | CDNA | CDNA 2 | CDNA 3 | CDNA 4")
    assert table.kind == "table"
    assert (
        "Spatial partition mode | ❌ | ❌ | Compute partition mode and Memory partition mode | "
        "Compute partition mode and Memory partition mode"
    ) in table.text
    assert "Supported series | MI100 | MI200 MI210 MI250 | MI300A MI300X MI325X | MI350X MI355X" in table.text


def test_metric_pages_keep_prose_notes_and_footnotes(docs_mirror):
    chunks = _read(docs_mirror, "rocprofiler-compute/docs/conceptual/vector-l1-cache.rst")
    sol = _chunk_with(chunks, "speed-of-light chart shows several key metrics")
    assert sol.headings == ("Vector L1 cache (vL1D)", "vL1D Speed-of-Light")
    assert sol.source.endswith("#vl1d-sol")
    assert sol.text.startswith("Warning: The theoretical maximum throughput")
    # A bare :ref: to a label of the page reads as the section's title.
    assert (
        "- Busy / stall metrics\n- Instruction counts\n- Spill / stack metrics"
        in _chunk_with(chunks, "broken down into a few categories").text
    )
    footnote = _chunk_with(chunks, "[vl1d-hit] The vL1D cache on AMD Instinct MI-series CDNA")
    assert "hit-on-miss" in footnote.text
    figure = _chunk_with(chunks, "Performance model of the vL1D Cache on AMD Instinct MI-series")
    assert "l1perf_model.png" not in figure.text


def test_inline_markup_snippets():
    # Cells and sentences copied from the mirror's pages.
    assert inline_text("``-i`` INPUT \\| ``--input`` INPUT |br| |br|") == "-i INPUT | --input INPUT"
    assert inline_text("see :ref:`AGPRs <desc-agprs>`.  Note: this may") == "see AGPRs. Note: this may"
    assert (
        inline_text(
            "predecessor, `rocprof <https://rocm.docs.amd.com/projects/rocprofiler/en/latest/index.html>`_, and"
        )
        == "predecessor, rocprof, and"
    )
    assert inline_text("the :doc:`command processor <command-processor>`'s (CP)") == "the command processor's (CP)"
    assert inline_text("hit [#vl1d-hit]_  in vL1D cache") == "hit in vL1D cache"
    assert inline_text("**NOT** for visualization, doing *any* work") == "NOT for visualization, doing any work"
    assert inline_text("``reduce(GL2C_HIT,sum)`` sums all ``GL2C_HIT``") == "reduce(GL2C_HIT,sum) sums all GL2C_HIT"


@pytest.mark.parametrize(
    ("term", "expected"),
    [
        ("VGPR_Count", True),
        ("VALUBusy", True),
        ("SQ_INSTS_VALU_MFMA_MOPS_F16", True),
        ("Workgroup_Size_n", True),
        ("Wavefront", False),
        ("per_wave", False),
        ("Kernel time", False),
        ("-k, --kernel", False),
    ],
)
def test_metric_name_shapes(term, expected):
    assert is_metric_name(term) is expected
