"""Whole builds from the real docs mirror, through the API and the `pragma-kb` command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from knowledge_builder.build import BuildSettings, build
from pragma_core.knowledge import packaged_compendia, read_compendium
from pragma_core.knowledge.index import entry_id
from pragma_core.knowledge.vectors import VECTORS_FILE, read_vectors
from pragma_core.plugin_api.registry import get_registry

PRAGMA_KB = str(Path(sys.executable).with_name("pragma-kb"))


def _profilers() -> dict:
    registry = get_registry()
    return {name: registry.profiler(name) for name in registry.profilers()}


@pytest.fixture(scope="module")
def offline_build(docs_mirror, tmp_path_factory):
    out = tmp_path_factory.mktemp("kb")
    return out, build(BuildSettings(out_dir=out, offline_mirror=docs_mirror, index=False), _profilers())


def test_an_offline_build_documents_the_default_metrics_of_every_plugin(offline_build):
    _out, result = offline_build
    assert {name: coverage.share for name, coverage in result.coverage.items()} == {
        "ncu": 1.0,
        "perf": 1.0,
        "rocprof": 1.0,
        "valgrind": 1.0,
    }
    # perf's generic events are documented by perf_event_open(2), under perf's names
    perf = result.compendia["perf"]
    cycles = perf.find("cycles")
    assert cycles is not None and cycles.meaning.startswith("Total cycles.")
    assert perf.find("cpu-cycles") is cycles and perf.find("PERF_COUNT_HW_CPU_CYCLES") is cycles
    assert cycles.source == "https://man7.org/linux/man-pages/man2/perf_event_open.2.html#DESCRIPTION"
    # the rate the plugin computes reads its terms from the page
    rate = perf.find("L1-dcache-load-miss-rate")
    assert rate is not None and rate.built_by == "formula" and "measures misses of read accesses" in rate.meaning
    # perf's own event beside the top-down metric of the same name in another case
    assert perf.find("instructions").meaning.startswith("Retired instructions.")
    assert perf.find("Instructions").name == "Instructions" and "instructions" not in perf.find("Instructions").aliases


def test_the_build_writes_json_markdown_and_a_report(offline_build):
    out, result = offline_build
    for name in ("ncu", "perf", "rocprof", "valgrind"):
        assert read_compendium(out / "compendium" / f"{name}.json") == result.compendia[name]
        assert (out / "compendium" / f"{name}.md").read_text().startswith(f"# {name}: metric compendium")
    report = json.loads((out / "build-report.json").read_text())
    assert report["profilers"]["valgrind"]["default_coverage"] == 1.0 and report["model"] is None
    assert all(entry.built_by in ("structural", "formula") for c in result.compendia.values() for entry in c.metrics)


def test_the_shipped_compendium_is_this_build(offline_build):
    """pragma-core ships what `make compendium` builds from the mirror: rebuild after changing the builder."""
    _out, result = offline_build
    shipped = packaged_compendia()
    for name, compendium in result.compendia.items():
        assert shipped[name].content_hash() == compendium.content_hash(), f"{name}: run `make compendium`"


def test_a_build_stores_its_vectors_and_a_second_build_embeds_nothing(docs_mirror, tmp_path):
    settings = BuildSettings(out_dir=tmp_path / "kb", offline_mirror=docs_mirror, profilers=("valgrind",))
    first = build(settings, _profilers())
    second = build(settings, _profilers())
    # the shipped vectors cover the entries of this build, which is the shipped compendium
    assert first.sync.reused == first.sync.total > 0 and first.sync.embedded == 0
    assert (second.sync.embedded, second.sync.removed, second.sync.unchanged) == (0, 0, first.sync.total)
    written = read_vectors(tmp_path / "kb" / "compendium" / VECTORS_FILE)
    assert set(written) == {entry_id(entry) for entry in first.compendia["valgrind"].entries}


def test_cli_build_and_stats(docs_mirror, tmp_path):
    run = subprocess.run(
        [
            PRAGMA_KB,
            "build",
            "--offline-mirror",
            str(docs_mirror),
            "--out",
            str(tmp_path / "kb"),
            "--profiler",
            "rocprof",
            "--no-index",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    assert "rocprof" in run.stdout and "26/26 (100%)" in run.stdout
    stats = subprocess.run(
        [PRAGMA_KB, "stats", "--out", str(tmp_path / "kb")], capture_output=True, text=True, timeout=600
    )
    assert stats.returncode == 0 and "structural" in stats.stdout and "formula" in stats.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--offline-mirror", "/no/such/folder"], "--offline-mirror /no/such/folder: no such folder"),
        (["--profiler", "vtune"], "no installed profiler plugin named vtune"),
        (["--url", "perf"], "--url 'perf': expected PROFILER=URL"),
        (["--folder", "cachegrind"], "--folder 'cachegrind': expected DIR=PROFILER"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(docs_mirror, tmp_path, args, message):
    args = [a if a != "MIRROR" else str(docs_mirror) for a in args]
    if "--offline-mirror" not in args:
        args += ["--offline-mirror", str(docs_mirror)]
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "keep.txt").write_text("earlier work")
    run = subprocess.run(
        [PRAGMA_KB, "build", "--out", str(tmp_path / "kb"), "--no-index", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 2 and message in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert (tmp_path / "kb" / "keep.txt").read_text() == "earlier work"
