"""Stage 2 without a model, on the notes of real pages: one entry per metric, by canonical name."""

from __future__ import annotations

import pytest

from knowledge_builder.documents import Page
from knowledge_builder.formats import read_page
from knowledge_builder.merge import MergeReport, merge_stage1
from knowledge_builder.notes import MetricNote, Stage1
from knowledge_builder.structural import GUIDE_CHARS, opening, structural_stage1
from pragma_core.knowledge import terms_in
from pragma_core.plugin_api.registry import get_registry


def _stage1(docs_mirror, profiler: str, *paths: str) -> Stage1:
    chunks = []
    for path in paths:
        fmt = {
            "md": "md",
            "section": "section",
            "xml": "xml",
            "json": "json",
            "yaml": "yaml",
            "rst": "rst",
            "txt": "txt",
        }[path.rsplit(".", 1)[1]]
        page = Page(
            url=f"https://example.org/{path}",
            profiler=profiler,
            format=fmt,
            text=(docs_mirror / path).read_text(encoding="utf-8"),
            path=path,
        )
        chunks += read_page(page)
    return structural_stage1(chunks)


def test_opening_keeps_whole_sentences():
    text = "First sentence here. Second one is longer than the rest of it. Third."
    assert opening(text, 25) == "First sentence here."
    assert opening("one word " * 100, 30).endswith("...")


def test_guides_are_short_openings_of_prose_with_their_source(docs_mirror):
    stage1 = _stage1(docs_mirror, "valgrind", "cachegrind/cg-manual.xml")
    assert stage1.guides and all(len(g.text) <= GUIDE_CHARS for g in stage1.guides)
    assert all(g.source.startswith("https://example.org/cachegrind/cg-manual.xml") for g in stage1.guides)


def test_a_section_label_joins_the_metric_to_its_documentation_and_names_compose_a_meaning(docs_mirror):
    stage1 = _stage1(
        docs_mirror,
        "ncu",
        "ncu/docs/ProfilingGuide.md",
        "ncu/sections/Occupancy.section",
        "ncu/sections/SpeedOfLight.section",
        "ncu/sections/MemoryWorkloadAnalysis.section",
    )
    ncu = get_registry().profiler("ncu")
    compendium = merge_stage1("ncu", stage1, preferred=ncu.default_metrics)
    occupancy = compendium.find("Achieved Occupancy")
    assert occupancy.name == "sm__warps_active.avg.pct_of_peak_sustained_active"
    assert "occupancy" in occupancy.bottleneck
    registers = compendium.find("launch__occupancy_limit_registers")
    assert registers.meaning == "Occupancy limit due to register usage."
    assert registers.source.endswith("#launch-metrics")
    hit_rate = compendium.find("lts__t_sector_hit_rate.pct")
    assert hit_rate.meaning.startswith("L2 Hit Rate. Read from its name: lts: A Level 2 (L2) Cache Slice")
    assert "hit_rate: Hit rate (percentage of requested sectors that do not miss) in the L2 cache" in hit_rate.meaning
    # glossary terms document names; they are no metrics themselves
    assert compendium.find("lts") is None and compendium.find("pct_of_peak_sustained_elapsed") is None


def test_an_alias_several_metrics_claim_joins_none_of_them():
    notes = [
        MetricNote(
            profiler="ncu",
            name="gpu__time_duration.sum",
            aliases=("Duration",),
            meaning="kernel time",
            source="s",
            built_by="structural",
        ),
        MetricNote(
            profiler="ncu",
            name="gpu__time_duration.max",
            aliases=("Duration",),
            meaning="longest time",
            source="s",
            built_by="structural",
        ),
        MetricNote(profiler="ncu", name="Duration", meaning="a label", source="s", built_by="structural"),
    ]
    compendium = merge_stage1("ncu", Stage1(notes=notes))
    assert {e.name for e in compendium.metrics} == {"gpu__time_duration.sum", "gpu__time_duration.max", "Duration"}
    assert compendium.find("gpu__time_duration.sum").aliases == ()


def test_the_most_common_description_wins_and_the_plugins_spelling_is_canonical():
    notes = [
        MetricNote(
            profiler="perf",
            name="IPC",
            meaning="Instructions Per Cycle (per Logical Processor)",
            source=f"https://example.org/{cpu}",
            built_by="structural",
        )
        for cpu in ("skl", "icl")
    ]
    notes.append(
        MetricNote(profiler="perf", name="IPC", meaning="instructions per cycle", source="other", built_by="structural")
    )
    compendium = merge_stage1(
        "perf", Stage1(notes=notes), formulas={"ipc": "instructions / cycles"}, preferred=("ipc",)
    )
    entry = compendium.find("ipc")
    assert entry.name == "IPC" and "ipc" in entry.aliases
    assert entry.meaning == "Instructions Per Cycle (per Logical Processor)"
    assert entry.measured == "instructions / cycles" and entry.source == "https://example.org/skl"


def test_a_computed_metric_is_documented_by_its_formula_and_terms(docs_mirror):
    stage1 = _stage1(docs_mirror, "valgrind", "cachegrind/cg-manual.xml")
    valgrind = get_registry().profiler("valgrind")
    report = MergeReport()
    compendium = merge_stage1(
        "valgrind", stage1, formulas=valgrind.formulas, preferred=valgrind.default_metrics, report=report
    )
    rate = compendium.find("Mispred rate")
    assert rate.built_by == "formula" and rate.measured == "100 * (Bcm + Bim) / (Bc + Bi)"
    assert "Bcm: Conditional branches mispredicted" in rate.meaning
    assert rate.bottleneck == ("bad speculation",)
    assert set(valgrind.default_metrics) <= compendium.names()
    assert report.undocumented["valgrind"] == []


@pytest.mark.parametrize(
    "text, terms",
    [
        ("DRAM throughput as % of peak", ("memory bound",)),
        ("Occupancy limit due to register usage", ("occupancy", "register pressure")),
        ("share of slots wasted by branch mispredictions", ("bad speculation",)),
        ("D1 cache read misses", ("cache misses",)),
        ("Number of divergent branch targets, including fallthrough", ("divergence",)),
        ("Branch Efficiency", ("divergence",)),
    ],
)
def test_bottlenecks_are_named_in_the_one_vocabulary(text, terms):
    assert terms_in(text) == terms
