"""The metric JSON reader on the kernel's pmu-events tables and Intel's perfmon metric files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mirror_pages import definitions_by_term, mirror_page

from knowledge_builder.formats import json_metrics

X86 = "perf/linux-6.1.192/tools/perf/pmu-events/arch/x86"
PERFMON = "perf/intel-perfmon"
LEVEL1 = ("tma_frontend_bound", "tma_backend_bound", "tma_bad_speculation", "tma_retiring")


def _read(mirror: Path, path: str) -> list:
    return json_metrics.read(mirror_page(mirror, path, profiler="perf", fmt="json"))


def test_tma_level1_metrics_from_pmu_events(docs_mirror):
    found = definitions_by_term(_read(docs_mirror, f"{X86}/skylake/skl-metrics.json"))
    for term in LEVEL1:
        chunk, definition = found[term]
        assert chunk.kind == "definitions"
        assert chunk.headings == ("skylake/skl-metrics.json", "TopdownL1")
        assert definition.unit == "%" and definition.measured
        assert "TopdownL1" in definition.context
    frontend = found["tma_frontend_bound"][1]
    assert frontend.text.startswith(
        "This category represents fraction of slots where the processor's "
        "Frontend undersupplies its Backend. Frontend denotes"
    )
    assert frontend.text.endswith("Sample with: FRONTEND_RETIRED.LATENCY_GE_4_PS")  # the longer description
    assert frontend.measured == "IDQ_UOPS_NOT_DELIVERED.CORE / SLOTS"
    assert "slots wasted due to incorrect speculations" in found["tma_bad_speculation"][1].text
    assert "lack of required resources" in found["tma_backend_bound"][1].text
    assert "slots utilized by useful work" in found["tma_retiring"][1].text


def test_summary_metrics_keep_perf_spelling(docs_mirror):
    found = definitions_by_term(_read(docs_mirror, f"{X86}/skylake/skl-metrics.json"))
    ipc = found["IPC"][1]
    assert ipc.text == "Instructions Per Cycle (per Logical Processor)"
    assert ipc.measured == "INST_RETIRED.ANY / CLKS"
    assert found["CPI"][1].measured == "1 / IPC"


def test_hybrid_cpu_metrics_are_chunked_per_pmu(docs_mirror):
    chunks = _read(docs_mirror, f"{X86}/alderlake/adl-metrics.json")
    frontend = [(c, d) for c in chunks for d in c.definitions if d.term == "tma_frontend_bound"]
    assert [c.headings for c, _ in frontend] == [
        ("alderlake/adl-metrics.json", "cpu_core", "TopdownL1"),
        ("alderlake/adl-metrics.json", "cpu_atom", "TopdownL1"),
    ]
    assert frontend[0][1].context.startswith("cpu_core: ")
    assert "issue slots that were not consumed by the backend" in frontend[1][1].text


def test_amd_recommended_metrics_and_events(docs_mirror):
    found = definitions_by_term(_read(docs_mirror, f"{X86}/amdzen3/recommended.json"))
    ratio = found["branch_misprediction_ratio"][1]
    assert ratio.text == "Execution-Time Branch Misprediction Ratio (Non-Speculative)"
    assert ratio.measured == "d_ratio(ex_ret_brn_misp, ex_ret_brn)" and ratio.unit == "%"
    chunk, event = found["all_data_cache_accesses"]
    assert event.text == "All L1 Data Cache Accesses" and event.measured == "event=0x29,umask=0x07"
    assert chunk.headings[-1] == "PMU events"


def test_perfmon_tma_metrics_are_named_as_perf_names_them(docs_mirror):
    found = definitions_by_term(_read(docs_mirror, f"{PERFMON}/SPR/metrics/sapphirerapids_metrics.json"))
    for term in LEVEL1:
        assert found[term][0].headings[-1] == "TmaL1"
    frontend = found["tma_frontend_bound"][1]
    assert frontend.aliases == ("Frontend_Bound", "metric_TMA_Frontend_Bound(%)")
    assert "Frontend undersupplies its Backend" in frontend.text
    assert frontend.measured.startswith("perf_metrics.frontend_bound / ( perf_metrics.frontend_bound")
    assert frontend.unit == "percent" and frontend.context.startswith("TMA level 1")
    fetch = found["tma_fetch_latency"]
    assert fetch[0].headings[-1] == "TmaL2" and "under tma_frontend_bound" in fetch[1].context
    assert "Threshold: ( metric_TMA_..Fetch_Latency(%) > 10 )" in fetch[0].text
    assert found["tma_info_thread_ipc"][1].aliases == ("Info_Thread_IPC", "metric_TMA_Info_Thread_IPC")


def test_perfmon_formula_aliases_are_resolved(docs_mirror):
    found = definitions_by_term(_read(docs_mirror, f"{PERFMON}/SPR/metrics/sapphirerapids_metrics.json"))
    frequency = found["cpu_operating_frequency"][1]
    assert frequency.measured == "(CPU_CLK_UNHALTED.THREAD / CPU_CLK_UNHALTED.REF_TSC * SYSTEM_TSC_FREQ) / 1000000000"
    assert frequency.unit == "GHz" and frequency.aliases == ("metric_CPU operating frequency (in GHz)",)


def test_perfmon_perf_format_file(docs_mirror):
    found = definitions_by_term(_read(docs_mirror, f"{PERFMON}/SPR/metrics/perf/sapphirerapids_metrics_perf.json"))
    cpi = found["cpi"][1]
    assert cpi.measured == "CPU_CLK_UNHALTED.THREAD / INST_RETIRED.ANY" and cpi.unit == "per_instr"
    assert cpi.text.startswith("Cycles per instruction retired")


@pytest.mark.parametrize(
    "path",
    [
        f"{X86}/skylake/skl-metrics.json",
        f"{X86}/sapphirerapids/spr-metrics.json",
        f"{X86}/amdzen1/recommended.json",
        f"{X86}/elkhartlake/ehl-metrics.json",
        f"{PERFMON}/GNR/metrics/graniterapids_metrics.json",
        f"{PERFMON}/ADL/metrics/alderlake_metrics_goldencove_core.json",
    ],
)
def test_every_record_is_defined_once_in_bounded_chunks(docs_mirror, path):
    data = json.loads((docs_mirror / path).read_text(encoding="utf-8"))
    records = data["Metrics"] if isinstance(data, dict) else data
    chunks = _read(docs_mirror, path)
    terms = [d.term for c in chunks for d in c.definitions]
    assert len(terms) == len(records) == len(set(terms))
    assert all(c.kind == "definitions" and len(c.text) <= 3000 for c in chunks)
    assert chunks == _read(docs_mirror, path)
