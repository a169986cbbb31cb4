"""The shipped compendium asked as the loop and a user ask it: exact lookup, citations, the
Conductor's documentation, the `pragma knowledge` command and the first-use index."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import attrs
import pytest

from pragma_core import Diagnosis, Metric, Profile
from pragma_core.agents import conductor_messages
from pragma_core.knowledge import (
    conductor_documentation,
    diagnosis_query,
    lookup,
    packaged_compendia,
    search,
    similar_names,
    terms_in,
    unmeasured_citations,
    write_compendium,
)
from pragma_core.knowledge.library import open_index
from pragma_core.knowledge.ranking import named_in
from pragma_core.plugin_api.registry import get_registry

from .test_agents_prompts import BEST, DIAGNOSIS, TASK, Candidate, correct, module

PRAGMA = str(Path(sys.executable).with_name("pragma"))


def test_every_installed_profiler_has_a_shipped_compendium_with_sources():
    compendia = packaged_compendia()
    assert set(get_registry().profilers()) <= set(compendia)
    for compendium in compendia.values():
        assert compendium.metrics and compendium.guides
        assert all(entry.source and entry.meaning for entry in compendium.metrics)


@pytest.mark.parametrize("profiler", ["ncu", "perf", "rocprof", "valgrind"])
def test_the_shipped_compendium_gives_a_meaning_for_every_default_metric(profiler):
    defaults = get_registry().profiler(profiler).default_metrics
    found = lookup(defaults, profiler=profiler)
    assert set(found) == set(defaults), sorted(set(defaults) - set(found))


def test_lookup_is_exact_by_name_then_alias_then_ignoring_case():
    found = lookup(["D1 miss rate", "Achieved Occupancy", "ipc", "no such metric"])
    assert found["D1 miss rate"].profiler == "valgrind" and "D1mr" in found["D1 miss rate"].meaning
    assert found["Achieved Occupancy"].name == "sm__warps_active.avg.pct_of_peak_sustained_active"
    assert found["ipc"].profiler == "perf" and "Instructions Per Cycle" in found["ipc"].meaning
    assert "no such metric" not in found
    # a name means what its profiler says: perf's cycles is not ncu's
    assert lookup(["launch__registers_per_thread"], profiler="perf") == {}


def test_a_metric_the_plugin_computes_is_documented_by_its_formula_and_its_terms():
    entry = lookup(["HBMBandwidth"], profiler="rocprof")["HBMBandwidth"]
    assert entry.built_by == "formula" and entry.measured == "(FETCH_SIZE + WRITE_SIZE) * 1024 / TotalDurationNs"
    assert "kilobytes fetched from the video memory" in entry.meaning and "memory bound" in entry.bottleneck


def test_the_vocabulary_is_shared_across_profilers():
    assert (
        "memory bound"
        in lookup(["dram__throughput.avg.pct_of_peak_sustained_elapsed"])[
            "dram__throughput.avg.pct_of_peak_sustained_elapsed"
        ].bottleneck
    )
    assert "occupancy" in lookup(["OccupancyPercent"])["OccupancyPercent"].bottleneck
    assert "bad speculation" in lookup(["tma_bad_speculation"])["tma_bad_speculation"].bottleneck
    assert terms_in("Backend-bound: memory bandwidth") == ("memory bound",)


def test_citations_of_metrics_nobody_measured_are_caught():
    text = [
        "The D1 miss rate is 0.4%, so caches are fine; `l1tex__t_sector_hit_rate.pct` and "
        "tma_backend_bound would say more. More instructions per element than needed."
    ]
    measured = ["D1 miss rate", "Ir", "instructions"]
    assert unmeasured_citations(text, measured) == ("l1tex__t_sector_hit_rate.pct", "tma_backend_bound")
    assert unmeasured_citations(text, measured, requested=["tma_backend_bound"]) == ("l1tex__t_sector_hit_rate.pct",)
    # plain words that are also perf event names are not citations unless written as names
    assert unmeasured_citations(["use fewer instructions per element"], []) == ()
    assert unmeasured_citations(["`instructions` went up"], []) == ("instructions",)


def test_the_conductor_reads_the_meaning_of_each_profiled_metric_and_entries_on_its_diagnosis():
    profiles = [
        Profile(
            profiler="valgrind",
            metrics=[
                Metric(name="D1 miss rate", value=12.5, unit="%", profiler="valgrind"),
                Metric(name="Ir", value=9e6, profiler="valgrind"),
            ],
        )
    ]
    docs = conductor_documentation(profiles, Diagnosis(bound="memory", hints=("block the loops for L1",)))
    assert set(docs.metric_docs) == {"D1 miss rate", "Ir"}
    assert "valgrind.org/docs/manual/cg-manual.html" in docs.metric_docs["Ir"]
    assert 1 <= len(docs.related) <= 3 and all("[source: " in line for line in docs.related)
    assert diagnosis_query(Diagnosis(bound="memory")).startswith("kernel is memory bound")

    prompt = conductor_messages(
        TASK,
        Candidate(source=module("current"), backend="cpu-cpp", attempt=5),
        correct(2.2),
        DIAGNOSIS,
        profiles=profiles,
        best=BEST,
        metric_docs=docs.metric_docs,
        related_docs=docs.related,
        unmeasured_citations=("tma_backend_bound",),
    )[1].content
    documentation = prompt.split("## 3. Documentation of the profiled metrics")[1].split("## 4.")[0]
    assert "- Ir: Ir (valgrind). I cache reads" in documentation
    assert "From the profilers' documentation, on the diagnosed bottleneck:" in documentation
    assert "Citation check: your previous reply cited tma_backend_bound" in documentation


def test_search_ranks_the_metric_a_user_names_or_describes_first():
    top = search("Interpretation of HSA counters: VALUBusy and MemUnitBusy", profiler="rocprof", k=2)
    assert {hit.title for hit in top} == {"VALUBusy", "MemUnitBusy"}
    top = search("how many registers does each thread use", profiler="ncu", kind="metric", k=5)
    assert "launch__registers_per_thread" in [hit.title for hit in top]
    guides = search("top-down analysis of pipeline slots", profiler="perf", kind="guide", k=3)
    assert guides and all(hit.kind == "guide" and hit.entry.profiler == "perf" for hit in guides)


def test_a_phrase_names_a_metric_only_when_it_names_no_other():
    ncu, perf = packaged_compendia()["ncu"], packaged_compendia()["perf"]
    # ncu's memory tables label an L1 metric "Hit Rate", words that are part of a dozen cache metrics' names
    assert ncu.find("Hit Rate").name == "l1tex__t_sector_hit_rate_realtime.pct"
    assert named_in("L2 cache hit rate", [ncu]) == []
    assert named_in("Divergent Branches are many", [ncu]) == []  # two metrics carry that label
    assert [e.name for e in named_in("the achieved occupancy is low", [ncu])] == [
        "sm__warps_active.avg.pct_of_peak_sustained_active"
    ]
    assert [e.name for e in named_in("a high number of context switches", [perf])] == ["context-switches"]
    # a name written out whole names its metric, whatever longer names hold its words
    assert [e.name for e in named_in("my L1-dcache-load-misses went up", [perf])] == ["L1-dcache-load-misses"]


def test_the_l2_hit_rate_is_found_first_for_a_question_about_it():
    top = search("L2 cache hit rate", profiler="ncu", kind="metric", k=3)
    assert top[0].title == "lts__t_sector_hit_rate.pct"


def test_a_bottleneck_the_query_speaks_of_brings_the_metrics_that_reveal_it():
    assert terms_in("warp divergence") == ("divergence",)
    efficiency = lookup(["Branch Efficiency"], profiler="ncu")["Branch Efficiency"]
    assert efficiency.name == "smsp__sass_average_branch_targets_threads_uniform.pct"
    assert "divergence" in efficiency.bottleneck
    top = search("warp divergence", profiler="ncu", kind="metric", k=5)
    titles = [hit.title for hit in top]
    assert {"smsp__branch_targets_threads_divergent", "smsp__sass_branch_targets_threads_divergent.avg"} <= set(titles)
    assert all("divergence" in hit.entry.bottleneck for hit in top)


def test_outside_queries_find_the_right_metric_in_the_top_five():
    """Questions people asked in public (tests/data/knowledge_queries.json, each with its address).
    The shipped compendium must answer most of them; the exact share is in benchmarks/knowledge.py."""
    queries = json.loads((Path(__file__).parent / "data" / "knowledge_queries.json").read_text())["queries"]
    documented = [q for q in queries if lookup(q["expected"], profiler=q["profiler"])]
    found = [
        q
        for q in documented
        if {n for hit in search(q["query"], profiler=q["profiler"], kind="metric", k=5) for n in hit.entry.names}
        & set(q["expected"])
    ]
    assert len(found) / len(documented) >= 0.8, [q["query"][:60] for q in documented if q not in found]


def test_the_index_is_built_on_first_use_and_again_only_when_the_compendium_changes(tmp_path):
    small = {"valgrind": packaged_compendia()["valgrind"]}
    index = open_index(small, folder=tmp_path / "kb")
    assert len(index) == len(small["valgrind"].metrics) + len(small["valgrind"].guides)
    assert (tmp_path / "kb" / "compendium.stamp").is_file()
    embedded = index.embedding.embedded
    assert open_index(small, folder=tmp_path / "kb") is index and index.embedding.embedded == embedded
    first = small["valgrind"].metrics[0]
    changed = {
        "valgrind": attrs.evolve(
            small["valgrind"],
            metrics=[attrs.evolve(first, meaning=first.meaning + " (revised)"), *small["valgrind"].metrics[1:]],
        )
    }
    again = open_index(changed, folder=tmp_path / "kb")
    assert again.embedding.embedded == 1  # only the changed entry, in a fresh process's terms


def _env(tmp_path: Path, knowledge_dir: Path) -> dict[str, str]:
    """The environment of a `pragma` run: this one (its PYTHONPATH picks the code under test) with
    its own index folder and home."""
    return {**os.environ, "PRAGMA_KNOWLEDGE_DIR": str(knowledge_dir), "HOME": str(tmp_path)}


def test_cli_search_and_show(tmp_path):
    small = tmp_path / "compendium"
    write_compendium(small / "valgrind.json", packaged_compendia()["valgrind"])
    env = _env(tmp_path, tmp_path / "kb")
    run = subprocess.run(
        [PRAGMA, "knowledge", "search", "branch mispredictions", "--compendium", str(small), "--json", "-k", "3"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    hits = json.loads(run.stdout)
    assert len(hits) == 3 and hits[0]["name"] in ("Mispred rate", "Bcm", "Bim")
    shown = subprocess.run(
        [PRAGMA, "knowledge", "show", "D1mr", "--compendium", str(small)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert shown.returncode == 0 and "D1 cache read misses" in shown.stdout and "source: https://" in shown.stdout
    bad = subprocess.run(
        [PRAGMA, "knowledge", "search", "x", "--compendium", str(tmp_path / "nothing")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert bad.returncode == 2 and "no compendium files" in bad.stderr and "pragma-kb build" in bad.stderr


# Runs a `pragma` command in this interpreter, then says which heavy modules it imported.
_RUN_AND_REPORT_IMPORTS = """
import json, sys
from pragma_core.cli import main
try:
    main(sys.argv[1:])
finally:
    heavy = ("chromadb", "sentence_transformers", "torch", "transformers")
    print(json.dumps([name for name in heavy if name in sys.modules]))
"""


@pytest.mark.parametrize(
    "args, found",
    [
        (["knowledge", "show", "Achieved Occupancy"], True),
        (["knowledge", "show", "Achieved Ocupancy"], False),
    ],
)
def test_show_is_an_exact_lookup_that_never_opens_the_index(tmp_path, args, found):
    index = tmp_path / "kb"
    index.mkdir()
    started = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-c", _RUN_AND_REPORT_IMPORTS, *args],
        capture_output=True,
        text=True,
        env=_env(tmp_path, index),
        timeout=120,
    )
    elapsed = time.perf_counter() - started
    *shown, imported = run.stdout.strip().splitlines()
    assert json.loads(imported) == []  # no chromadb, no model: nothing but the compendium's JSON
    assert list(index.iterdir()) == []
    assert elapsed < 30  # seconds, on a shared machine; it takes about one on a quiet one
    if found:
        assert run.returncode == 0, run.stderr
        assert shown[0] == "sm__warps_active.avg.pct_of_peak_sustained_active (ncu)"
    else:
        assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1
        assert run.stderr.startswith("pragma: error: no metric named 'Achieved Ocupancy' in the compendium; ")
        assert "did you mean 'Achieved Occupancy' (ncu)" in run.stderr


def test_a_search_in_a_new_process_loads_no_torch_once_the_index_exists(tmp_path):
    small = tmp_path / "compendium"
    write_compendium(small / "valgrind.json", packaged_compendia()["valgrind"])
    env = _env(tmp_path, tmp_path / "kb")
    search_args = ["knowledge", "search", "cache misses", "--compendium", str(small), "--json"]
    first = subprocess.run([PRAGMA, *search_args], capture_output=True, text=True, env=env, timeout=600)
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "kb" / "compendium.stamp").is_file()
    again = subprocess.run(
        [sys.executable, "-c", _RUN_AND_REPORT_IMPORTS, *search_args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert again.returncode == 0, again.stderr
    *answer, imported = again.stdout.strip().splitlines()
    assert json.loads("\n".join(answer)) == json.loads(first.stdout)
    # the index is open and the query embedded with numpy: neither torch nor sentence-transformers
    assert json.loads(imported) == ["chromadb"]


def test_similar_names_are_the_spellings_closest_to_a_mistyped_name():
    assert similar_names("L1-dcache-load-mises", profiler="perf")[0] == ("L1-dcache-load-misses", "perf")
    assert similar_names("d1 MISS rate")[0] == ("D1 miss rate", "valgrind")
    assert similar_names("completely unrelated words") == []
