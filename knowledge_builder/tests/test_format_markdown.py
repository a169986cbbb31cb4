"""The Markdown reader on the mirrored Nsight Compute guides, Intel perfmon's README and
rocprofiler-compute's performance model."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledge_builder.documents import Chunk, Definition, Page
from knowledge_builder.formats.markdown import read

GUIDE_URL = "https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html"
CLI_URL = "https://docs.nvidia.com/nsight-compute/NsightComputeCli/index.html"


def _read(mirror: Path, relative: str, url: str, profiler: str = "ncu") -> list[Chunk]:
    text = (mirror / relative).read_text(encoding="utf-8")
    return read(Page(url=url, profiler=profiler, format="md", text=text, path=relative))


def _definitions(chunks: list[Chunk], term: str) -> list[Definition]:
    return [d for c in chunks for d in c.definitions if d.term == term]


@pytest.fixture(scope="module")
def guide(docs_mirror: Path) -> list[Chunk]:
    return _read(docs_mirror, "ncu/docs/ProfilingGuide.md", GUIDE_URL)


@pytest.fixture(scope="module")
def cli(docs_mirror: Path) -> list[Chunk]:
    return _read(docs_mirror, "ncu/docs/NsightComputeCli.md", CLI_URL)


def test_launch_metric_comes_out_with_its_description_and_place(guide):
    (definition,) = _definitions(guide, "launch__registers_per_thread")
    assert definition.role == "metric"
    assert definition.text == "Number of registers allocated per thread."
    assert definition.context == "Profiling Guide > Metrics Reference > Launch Metrics"
    chunk = next(c for c in guide if definition in c.definitions)
    assert chunk.kind == "table"
    assert chunk.headings == ("Profiling Guide", "Metrics Reference", "Launch Metrics")
    assert chunk.source == GUIDE_URL + "#launch-metrics"  # the anchor the page's own menu gives
    assert chunk.text.startswith("Launch Metrics\n")  # the caption glued to the first row


def test_long_descriptions_are_kept_whole(guide):
    (barrier,) = _definitions(guide, "smsp__pcsamp_warps_issue_stalled_barrier")
    assert barrier.text.startswith("Warp was stalled waiting for sibling warps at a CTA barrier.")
    assert len(barrier.text) > 300
    assert "__" not in barrier.text.replace("__syncthreads", "")  # no markup left


def test_label_descriptions_become_aliases_and_formulas_measured(guide):
    (occupancy,) = _definitions(guide, "sm__maximum_warps_per_active_cycle_pct")
    assert occupancy.aliases == ("Theoretical Occupancy",)
    (threads,) = _definitions(guide, "derived__avg_thread_executed")
    assert threads.measured == "thread_inst_executed / inst_executed"
    assert threads.text.startswith("Average number of thread-level executed instructions per warp")


def test_metrics_decoder_tables_give_glossary_name_parts(guide):
    glossary = {d.term: d for c in guide for d in c.definitions if d.role == "glossary"}
    assert glossary["lts"].text.startswith("A Level 2 (L2) Cache Slice is a sub-partition of the Level 2 cache.")
    assert glossary["lts"].context == "Profiling Guide > Metrics Guide > Units"
    assert glossary["smsp"].text.startswith("Each SM is partitioned into four processing blocks")
    assert glossary["sector"].text.startswith("Aligned 32 byte-chunk of memory")
    assert glossary["avg"].text == "The average counter value across all unit instances."
    assert glossary["avg"].aliases == (".avg",)
    elapsed = glossary["pct_of_peak_sustained_elapsed"]
    assert elapsed.text == "% of peak sustained rate achieved during unit elapsed cycles"
    assert glossary["fma"].text.startswith("Fused Multiply Add/Accumulate.")  # a pipeline
    assert glossary["cycles_active"].aliases == ("unit__cycles_active",)  # a list item
    assert glossary["throughput"].text.startswith("Throughputs indicate how close a portion of the GPU")
    assert glossary["launch"].text.startswith("launch__* metrics are collected per kernel launch")
    assert not {"lts", "avg", "sector", "throughput"} & {
        d.term for c in guide for d in c.definitions if d.role == "metric"
    }


def test_memory_table_columns_are_glossary_labels(guide):
    hit_rates = [d for d in _definitions(guide, "Hit Rate") if "L2 Cache > Columns" in d.context]
    assert hit_rates and hit_rates[0].role == "glossary"
    assert hit_rates[0].text.startswith("Hit rate (percentage of requested sectors that do not miss) in the L2 cache.")
    assert not _definitions(guide, "(Access Types)")


def test_navigation_front_matter_images_and_notices_are_dropped(guide):
    text = "\n".join(c.text for c in guide)
    assert "url:" not in text
    assert "1. Release Notes" not in text  # the site menu in front of the first heading
    assert "Developer Interfaces" not in text and "Occupancy Calculator Python Interface" not in text
    assert "_images/" not in text and "](" not in text
    assert "ALL NVIDIA DESIGN SPECIFICATIONS" not in text
    assert guide[0].headings == ("Profiling Guide",)
    assert guide[0].text.startswith("Nsight Compute profiling guide.")


def test_chunks_are_bounded_and_not_empty(guide, cli):
    for chunk in guide + cli:
        assert chunk.text.strip()
        if chunk.kind == "prose":
            assert len(chunk.text) <= 3000
        else:
            assert len(chunk.text) <= 6000


def test_preformatted_blocks_stay_code_not_headings(guide):
    (examples,) = [c for c in guide if c.headings[-1] == "Metrics Examples"]
    assert "## non-metric names -- *not* directly evaluable\nsm__inst_executed" in examples.text
    assert all(h != "non-metric names -- *not* directly evaluable" for c in guide for h in c.headings)


def test_cells_spilled_over_lines_are_joined_back_into_their_row(cli):
    profile = [c for c in cli if c.kind == "table" and c.headings[-1] == "Profile"]
    rows = [line for c in profile for line in c.text.split("\n")]
    metrics = next(line for line in rows if line.startswith("metrics | "))
    assert "pmsampling:<metric> collects the metric using PM sampling" in metrics
    assert "metric-distribution-groups" not in metrics
    assert any(line.startswith("metric-distribution-groups | ") for line in rows)
    assert not [c for c in cli if c.kind == "prose" and c.text.startswith("| ")]
    assert not [d for c in cli for d in c.definitions if d.role == "metric"]  # options are no metrics


def test_reading_is_deterministic(docs_mirror, guide):
    assert _read(docs_mirror, "ncu/docs/ProfilingGuide.md", GUIDE_URL) == guide


def test_headerless_caption_table_snippet():
    # Copied from the Profiling Guide's metrics reference.
    text = (
        "## 2.4.3. Occupancy Metrics\n\n"
        "> Occupancy Metrics `sm__maximum_warps_avg_per_active_cycle` | Theoretical Active Warps Per SM  \n"
        "> ---|---  \n"
        "> `sm__maximum_warps_per_active_cycle_pct` | Theoretical Occupancy  \n"
        "> `smsp__maximum_warps_avg_per_active_cycle` | Theoretical Warps Per Scheduler  \n"
    )
    (chunk,) = read(Page(url=GUIDE_URL, profiler="ncu", format="md", text=text))
    assert chunk.headings == ("Occupancy Metrics",)
    assert [d.term for d in chunk.definitions] == [
        "sm__maximum_warps_avg_per_active_cycle",
        "sm__maximum_warps_per_active_cycle_pct",
        "smsp__maximum_warps_avg_per_active_cycle",
    ]
    assert chunk.definitions[0].context == "Occupancy Metrics"


def test_myst_list_tables_give_metrics_with_units_and_anchors(docs_mirror):
    chunks = _read(
        docs_mirror,
        "rocprof/rocprofiler-compute/docs/archive/docs-2.x/performance_model.md",
        "https://github.com/ROCm/rocm-systems/blob/develop/projects/rocprofiler-compute/docs/archive/"
        "docs-2.x/performance_model.md",
        profiler="rocprof",
    )
    (grid,) = _definitions(chunks, "Grid Size")
    assert grid.role == "metric" and grid.unit == "Work-items"
    assert grid.text.startswith('The total number of work-items (a.k.a "threads") launched')
    chunk = next(c for c in chunks if grid in c.definitions)
    assert chunk.source.endswith("#Wavefront_launch_stats")  # the MyST (label)= target
    assert chunk.headings[-1] == "Wavefront Launch Stats"
    assert "list-table" not in "\n".join(c.text for c in chunks)


def test_repository_readme_drops_link_lists_and_notices(docs_mirror):
    chunks = _read(
        docs_mirror,
        "perf/intel-perfmon/README.md",
        "https://github.com/intel/perfmon/blob/main/README.md",
        profiler="perf",
    )
    text = "\n".join(c.text for c in chunks)
    assert not [c for c in chunks if c.headings == ("Outline",)]
    assert "INFORMATION IN THIS DOCUMENT IS PROVIDED" not in text
    (field,) = _definitions(chunks, "BriefDescription")
    assert field.role == "glossary"
    assert field.text.startswith("The description of what the metric is measuring.")
    first_metrics = next(c for c in chunks if c.headings == ("Metrics",))
    assert first_metrics.source.endswith("#metrics")
