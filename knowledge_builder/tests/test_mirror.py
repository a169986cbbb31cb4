"""Offline mode: the mirror's folders go to the right profiler plugins, and files to their addresses."""

from __future__ import annotations

from knowledge_builder.mirror import read_mirror, url_stem
from pragma_core.plugin_api.registry import get_registry


def _doc_sources() -> dict[str, tuple[str, ...]]:
    registry = get_registry()
    return {name: registry.profiler(name).doc_sources for name in registry.profilers()}


def test_url_stems_match_a_page_to_its_mirrored_file():
    assert (
        url_stem("https://man7.org/linux/man-pages/man1/perf-stat.1.html") == url_stem("perf-stat.txt") == "perf-stat"
    )
    assert url_stem("https://valgrind.org/docs/manual/cg-manual.html#cg-manual.annopts") == url_stem("cg-manual.xml")
    assert url_stem("https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html") == "index"
    assert url_stem("https://man7.org/linux/man-pages/man2/perf_event_open.2.html") == url_stem("perf_event_open.2")


def test_each_mirror_folder_goes_to_the_plugin_whose_doc_sources_name_its_files(docs_mirror):
    selection = read_mirror(docs_mirror, _doc_sources())
    # the cachegrind folder is valgrind's: its cg-manual.xml is the plugin's cg-manual.html
    assert selection.folders == {"cachegrind": "valgrind", "ncu": "ncu", "perf": "perf", "rocprof": "rocprof"}
    assert {page.profiler for page in selection.pages} == {"valgrind", "ncu", "perf", "rocprof"}


def test_every_page_cites_a_real_address(docs_mirror):
    pages = {page.path: page for page in read_mirror(docs_mirror, _doc_sources()).pages}
    # a doc source of the same name wins, with the same kind of file where there is one
    assert pages["cachegrind/cg-manual.xml"].url == "https://valgrind.org/docs/manual/cg-manual.html"
    assert pages["perf/upstream/perf-stat.txt"].url.endswith("/tools/perf/Documentation/perf-stat.txt")
    # a manual page in roff is read as one, and cites the page the plugin names
    manual = pages["perf/man-pages-6.03/perf_event_open.2"]
    assert manual.format == "man" and manual.url == "https://man7.org/linux/man-pages/man2/perf_event_open.2.html"
    # the page's own front matter
    assert pages["ncu/docs/ProfilingGuide.md"].url == "https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html"
    # the origin SOURCES.md records: a GitHub file, or the kernel release a Debian package holds
    assert (
        pages["ncu/sections/Occupancy.section"].url
        == "https://github.com/singularitti/nsight-compute/blob/HEAD/src/nsight_compute/Occupancy.section"
    )
    assert pages["perf/linux-6.1.192/tools/perf/pmu-events/arch/x86/skylake/skl-metrics.json"].url == (
        "https://git.kernel.org/pub/scm/linux/kernel/git/stable/linux.git/tree/"
        "tools/perf/pmu-events/arch/x86/skylake/skl-metrics.json?h=v6.1.192"
    )
    assert all(not page.url.startswith("mirror:") for page in pages.values())


def test_licences_and_files_no_reader_knows_are_skipped_and_said(docs_mirror):
    selection = read_mirror(docs_mirror, _doc_sources())
    assert selection.skipped["perf/intel-perfmon/LICENSE"] == "licence or notes file"
    assert selection.skipped["cachegrind/concord.cgout"] == "no reader for this kind of file"
    assert not any(page.path.endswith(("LICENSE", "COPYING.DOCS", "SOURCES.md")) for page in selection.pages)


def test_a_folder_no_plugin_names_is_left_out_unless_mapped(tmp_path):
    (tmp_path / "vtune").mkdir()
    (tmp_path / "vtune" / "cookbook.md").write_text("# Cookbook\n\nMemory bound analysis.\n")
    selection = read_mirror(tmp_path, _doc_sources())
    assert selection.pages == () and selection.skipped == {"vtune/": "no profiler plugin names a page of this folder"}
    mapped = read_mirror(tmp_path, _doc_sources(), folders={"vtune": "perf"})
    assert [(p.profiler, p.url) for p in mapped.pages] == [("perf", "mirror:vtune/cookbook.md")]
