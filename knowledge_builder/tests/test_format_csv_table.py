"""The CSV reader on Intel's TMA spreadsheets (definitions) and on sample tables (shown as they are)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mirror_pages import definitions_by_term, mirror_page

from knowledge_builder.formats import csv_table

PERFMON = "perf/intel-perfmon"


def _read(mirror: Path, path: str, profiler: str = "perf") -> list:
    return csv_table.read(mirror_page(mirror, path, profiler=profiler, fmt="csv"))


def test_tma_tree_nodes_are_defined_under_their_parents(docs_mirror):
    found = definitions_by_term(_read(docs_mirror, f"{PERFMON}/TMA_Metrics-full.csv"))
    chunk, frontend = found["Frontend_Bound"]
    assert chunk.kind == "definitions" and chunk.headings == ("TMA_Metrics-full.csv", "FE")
    assert frontend.text.startswith(
        "This category represents fraction of slots where the processor's Frontend undersupplies its Backend."
    )
    assert frontend.context == "FE" and frontend.role == "metric"
    assert frontend.measured.startswith("PERF_METRICS.FRONTEND_BOUND")  # the newest model's formula
    assert found["Fetch_Latency"][1].context == "FE > Frontend_Bound"
    assert found["ICache_Misses"][1].context == "FE > Frontend_Bound > Fetch_Latency"
    assert "Formula (LNL/ARL): PERF_METRICS.FRONTEND_BOUND / #PERF_METRICS_SUM" in chunk.text
    assert "Threshold: > 0.15" in chunk.text and "Metric Group: BvFB;BvIO;TmaL1;PGO" in chunk.text
    assert "Tool;bot;" not in chunk.text and "flavor" not in chunk.text


def test_info_metrics_and_helpers(docs_mirror):
    found = definitions_by_term(_read(docs_mirror, f"{PERFMON}/TMA_Metrics-full.csv"))
    chunk, ipc = found["IPC"]
    assert chunk.headings[-1] == "Info.Thread"
    assert ipc.text == "Instructions Per Cycle (per Logical Processor)"
    assert ipc.measured == "INST_RETIRED.ANY / CLKS"
    assert found["Num_CPUs"][1].role == "glossary"
    assert "#Pipeline_Width" not in found  # an undescribed helper
    assert not {"tree", "metrics", "auxiliary"} & set(found)  # the file's part markers


@pytest.mark.parametrize("path", [f"{PERFMON}/E-core_TMA_Metrics.csv", f"{PERFMON}/Atom_TMA.csv"])
def test_header_is_found_below_the_title_rows(docs_mirror, path):
    found = definitions_by_term(_read(docs_mirror, path))
    frontend = found["Frontend_Bound"][1]
    assert "not consumed by the backend due to frontend stalls" in frontend.text
    assert frontend.measured.startswith("TOPDOWN_FE_BOUND.ALL")
    assert "IPC" in found


@pytest.mark.parametrize(
    "path, first_line",
    [
        (
            "perf/linux-6.1.192/tools/perf/pmu-events/arch/x86/mapfile.csv",
            "Family-model | Version | Filename | EventType",
        ),
        (
            f"{PERFMON}/mapfile.csv",
            "Family-model | Version | Filename | EventType | Core Type | Native Model ID | Core Role Name",
        ),
    ],
)
def test_a_table_without_descriptions_is_one_sample_table(docs_mirror, path, first_line):
    chunks = _read(docs_mirror, path)
    assert len(chunks) == 1
    table = chunks[0]
    assert table.kind == "table" and not table.definitions
    lines = table.text.split("\n")
    assert lines[0] == first_line
    assert len(lines) <= 22 and lines[-1].endswith("more rows)")


def test_tool_output_sample_is_not_definitions(docs_mirror):
    path = "rocprof/rocprofiler-sdk/source/docs/data/kernel_trace.csv"
    chunks = _read(docs_mirror, path, profiler="rocprof")
    assert [c.kind for c in chunks] == ["table"]
    assert chunks[0].text.startswith("Kind | Agent_Id | Queue_Id")
    assert "KERNEL_DISPATCH | Agent 4" in chunks[0].text
    assert chunks[0].headings == ("kernel_trace.csv",)


@pytest.mark.parametrize(
    "path", [f"{PERFMON}/TMA_Metrics-full.csv", f"{PERFMON}/E-core_TMA_Metrics.csv", f"{PERFMON}/Atom_TMA.csv"]
)
def test_chunks_are_bounded_and_deterministic(docs_mirror, path):
    chunks = _read(docs_mirror, path)
    assert all(len(c.text) <= 3000 for c in chunks)
    terms = [d.term for c in chunks for d in c.definitions]
    assert len(terms) == len(set(terms))
    assert chunks == _read(docs_mirror, path)
