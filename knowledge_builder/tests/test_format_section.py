"""The Nsight Compute section reader on the mirrored stock ``.section`` files, and what the
section files and the Profiling Guide together say about ncu's default metrics."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from knowledge_builder.documents import Chunk, Definition, Page
from knowledge_builder.formats import markdown, section
from pragma_ncu.metrics import DEFAULT_METRICS

SECTIONS = "ncu/sections"


def _read(mirror: Path, name: str) -> list[Chunk]:
    path = mirror / SECTIONS / name
    url = f"https://github.com/singularitti/nsight-compute/blob/main/src/nsight_compute/sections/{name}"
    return section.read(
        Page(
            url=url, profiler="ncu", format="section", text=path.read_text(encoding="utf-8"), path=f"{SECTIONS}/{name}"
        )
    )


def _terms(chunks: list[Chunk]) -> dict[str, Definition]:
    return {d.term: d for c in chunks for d in c.definitions}


@pytest.fixture(scope="module")
def all_sections(docs_mirror: Path) -> dict[str, list[Chunk]]:
    return {p.name: _read(docs_mirror, p.name) for p in sorted((docs_mirror / SECTIONS).glob("*.section"))}


def test_section_description_and_labelled_metrics(docs_mirror):
    chunks = _read(docs_mirror, "SpeedOfLight.section")
    overview = chunks[0]
    assert overview.kind == "prose" and overview.headings == ("GPU Speed Of Light Throughput",)
    assert overview.text.startswith(
        "High-level overview of the throughput for compute and memory resources of the GPU."
    )
    assert "Section identifier: SpeedOfLight. Sets: basic, detailed, full, roofline." in overview.text
    terms = _terms(chunks)
    duration = terms["gpu__time_duration.sum"]
    assert duration.aliases == ("Duration",) and duration.text == ""
    assert duration.context == "GPU Speed Of Light Throughput" and duration.role == "metric"
    # The header and the chart label the same metric: one definition with both labels.
    throughput = terms["sm__throughput.avg.pct_of_peak_sustained_elapsed"]
    assert throughput.aliases == ("Compute (SM) Throughput", "Compute (SM) [%]")
    assert (
        "GPU Speed Of Light Throughput [CC_75-CC_86, CC_89-CC_100, CC_103, CC_120]"
        == terms["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"].context
    )


def test_every_term_once_per_file_and_a_bare_metric_name(all_sections):
    for name, chunks in all_sections.items():
        terms = [d.term for c in chunks for d in c.definitions]
        assert len(terms) == len(set(terms)), name
        for term in terms:
            assert ":" not in term or term.startswith("group:"), (name, term)
            assert "Triage" not in term and term == term.strip(), (name, term)


def test_collection_and_domain_prefixes_are_removed(all_sections):
    terms = _terms(all_sections["PmSampling.section"])
    assert "l1tex__t_sector_hit_rate.pct" in terms  # pmsampling:l1tex__t_sector_hit_rate.pct
    assert "lts__average_t_sector_hit_rate_realtime.pct" in terms  # LTS.TriageCompute.lts__...
    assert "group:smsp__pmwarpsamp_warp_stall_reasons" in terms
    assert "smsp__pcsamp_samples_data_dropped" in terms  # warpsampling:smsp__...
    # Its label only repeats the name.
    assert terms["group:smsp__pmwarpsamp_warp_stall_reasons"].aliases == ()


def test_options_derived_metrics_and_suffix_tables(all_sections):
    sampling = _terms(all_sections["PmSampling.section"])
    assert sampling["profiler__pmsampler_interval_time"].aliases == ("Maximum Sampling Interval",)
    assert sampling["profiler__pmsampler_interval_time"].context == "PM Sampling [CC_86 and newer]"
    derived = _terms(all_sections["Occupancy.section"])["derived__pct_occupancy_per_register_count"]
    assert derived.measured.startswith("( launch__occupancy_per_register_count * 100 )")
    launch = _terms(all_sections["LaunchStatistics.section"])
    assert launch["gr__workids_requested.avg"].aliases == ("WorkId/CLC Requests (Average)",)
    assert launch["gr__workids_requested.avg"].context == "Launch Statistics [CC_100 and newer]"
    assert "gr__workids_requested" not in launch


def test_described_charts_join_the_section_prose(all_sections):
    prose = [c for c in all_sections["ComputeWorkloadAnalysis.section"] if c.kind == "prose"]
    assert all(c.headings == ("Compute Workload Analysis",) for c in prose)
    text = "\n\n".join(c.text for c in prose)
    assert text.startswith("Detailed analysis of the compute resources of the streaming multiprocessors (SM)")
    assert (
        "\n\nPipe Utilization (% of elapsed cycles): Pipeline utilization based on the number of elapsed "
        "(all) cycles in the workload."
    ) in text
    rows = "\n\n".join(c.text for c in all_sections["PmSampling.section"] if c.kind == "prose")
    assert "L2 Hit Miss: L2 cache lookup hits and misses" in rows


def test_definition_chunks_are_bounded(all_sections):
    for chunks in all_sections.values():
        assert chunks[0].kind == "prose" and chunks[0].text
        for chunk in chunks:
            assert 0 < len(chunk.text) <= 3000
            assert bool(chunk.definitions) == (chunk.kind == "definitions")


def test_the_largest_section_file_is_read_quickly(docs_mirror):
    start = time.perf_counter()
    chunks = _read(docs_mirror, "SpeedOfLight_HierarchicalTensorRooflineChart.section")
    assert time.perf_counter() - start < 1.0
    peak = _terms(chunks)["sm__ops_path_tensor_src_fp16_dst_fp16.sum.peak_sustained"]
    assert "Theoretical Tensor Operations" in peak.aliases


def test_comments_and_strings_in_protobuf_text():
    # The tail of the stock LaunchStatistics.section, which ends in a C preprocessor remnant.
    text = (
        'Identifier: "LaunchStats"\nDisplayName: "Launch Statistics"\n'
        'Header {\n  Metrics {\n    Label: "Grid Size"\n    Name: "launch__grid_size"\n  }\n}\n#endif'
    )
    chunks = section.read(
        Page(url="https://example.org/LaunchStatistics.section", profiler="ncu", format="section", text=text)
    )
    assert _terms(chunks)["launch__grid_size"].aliases == ("Grid Size",)


def test_default_metrics_are_all_defined_across_the_guide_and_the_sections(docs_mirror, all_sections):
    guide_text = (docs_mirror / "ncu/docs/ProfilingGuide.md").read_text(encoding="utf-8")
    guide = markdown.read(
        Page(
            url="https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html",
            profiler="ncu",
            format="md",
            text=guide_text,
        )
    )
    definitions = [d for chunks in [guide, *all_sections.values()] for c in chunks for d in c.definitions]
    by_term: dict[str, list[Definition]] = {}
    for definition in definitions:
        by_term.setdefault(definition.term, []).append(definition)
    missing = [m for m in DEFAULT_METRICS if m not in by_term]
    assert not missing
    labels = {m: {a for d in by_term[m] for a in d.aliases} for m in DEFAULT_METRICS}
    assert "Achieved Occupancy" in labels["sm__warps_active.avg.pct_of_peak_sustained_active"]
    assert "Block Limit Registers" in labels["launch__occupancy_limit_registers"]
    assert "L2 Hit Rate" in labels["lts__t_sector_hit_rate.pct"]
    assert "Tensor (FP)" in labels["sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"]
    described = {m for m in DEFAULT_METRICS if any(d.text for d in by_term[m])}
    assert {m for m in DEFAULT_METRICS if m.startswith("launch__")} <= described
