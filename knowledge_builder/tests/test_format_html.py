"""The HTML reader on doc-site pages built from the real text of the docs mirror.

The mirror holds no HTML, so each page here is assembled the way its site renders it: the Nsight
Compute Profiling Guide (``ncu/docs/ProfilingGuide.md``) in a Read-the-Docs layout, the Cachegrind
manual (``cachegrind/cg-manual.xml``) in DocBook's HTML layout, and rocprof-compute's definitions
(``rocprof/rocprofiler-compute/docs/conceptual/includes/*.rst``) in a Sphinx layout. Every word of
documentation comes from those files; only the markup and the site chrome are ours.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from knowledge_builder.documents import Page
from knowledge_builder.formats import read_page
from knowledge_builder.formats.html import PROSE_CHARS, content_links, read

NCU_URL = "https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html"
CG_URL = "https://valgrind.org/docs/manual/cg-manual.html"
ROCPROF_URL = "https://rocm.docs.amd.com/projects/rocprofiler-compute/en/latest/conceptual/definitions.html"

# --- turning mirror text into HTML -------------------------------------------------------------


def _md_inline(text: str) -> str:
    """Markdown inline markup as HTML: links, code spans."""
    text = html.escape(text, quote=False)
    text = re.sub(r"\[([^\]]*)\]\(([^)\s]+)\)", r'<a class="reference internal" href="\2">\1</a>', text)
    return re.sub(r"`([^`]+)`", r'<code class="docutils literal notranslate"><span class="pre">\1</span></code>', text)


def _md_plain(text: str) -> str:
    """What a reader should make of the same markdown: the words, without markup."""
    text = re.sub(r"\[([^\]]*)\]\([^)\s]+\)", r"\1", text)
    return " ".join(text.replace("`", "").split())


def _md_section(md: str, heading: str) -> str:
    """The body of a markdown section, up to the next heading."""
    start = md.index(heading + "\n") + len(heading) + 1
    following = re.search(r"^#{1,6} ", md[start:], re.M)
    return md[start : start + following.start()] if following else md[start:]


def _md_table_rows(section: str) -> list[tuple[str, str]]:
    """(name, description) rows of a converted two-column table: ``> Caption `name` | text``."""
    rows = []
    for line in section.splitlines():
        found = re.match(r"^(?:> )?(?:[A-Z][\w ()-]* )?`([^`]+)` \| (.*?)\s*$", line)
        if found:
            rows.append((found.group(1), found.group(2)))
    return rows


def _md_paragraphs(section: str) -> list[str]:
    return [
        block.strip()
        for block in section.split("\n\n")
        if block.strip()
        and not block.lstrip().startswith((">", "!", "*", "-"))
        and "|" not in block
        and not block.startswith("    ")
    ]


_CODE = '<code class="docutils literal notranslate"><span class="pre">{}</span></code>'


def _html_table(rows: list[tuple[str, str]], caption: str, table_id: str) -> str:
    """A two-column table as Sphinx renders it: names in code, no header row, an optional caption."""
    body = "".join(
        f'<tr class="row-odd"><td><p>{_CODE.format(html.escape(name))}</p></td>'
        f"<td><p>{_md_inline(text)}</p></td></tr>\n"
        for name, text in rows
    )
    if caption:
        caption = (
            f'<caption><span class="caption-text">{caption}</span>'
            f'<a class="headerlink" href="#{table_id}" title="Link to this table">¶</a></caption>'
        )
    return (
        f'<table class="table-no-stripes docutils align-default" id="{table_id}">{caption}<tbody>{body}</tbody></table>'
    )


def _paragraphs_html(paragraphs: list[str]) -> str:
    return "".join(f"<p>{_md_inline(paragraph)}</p>" for paragraph in paragraphs)


def _section(anchor: str, level: int, title: str, body: str) -> str:
    return (
        f'<section id="{anchor}">\n<h{level}>{html.escape(title)}<a class="headerlink" href="#{anchor}" '
        f'title="Link to this heading">¶</a></h{level}>\n{body}\n</section>\n'
    )


RTD_CHROME = """<!DOCTYPE html>
<html class="writer-html5" lang="en"><head><meta charset="utf-8" />
<title>2. Profiling Guide &mdash; NsightCompute 13.1 documentation</title>
<link rel="stylesheet" href="../_static/css/theme.css" type="text/css" />
<script src="../_static/jquery.js"></script>
<style>.wy-nav-content { max-width: none; }</style></head>
<body class="wy-body-for-nav">
<a class="skip-link" href="#main-content">Skip to main content</a>
<div class="wy-grid-for-nav">
<nav data-toggle="wy-nav-shift" class="wy-nav-side"><div class="wy-side-scroll">
<div class="wy-side-nav-search"><a href="../index.html">Nsight Compute</a>
<div role="search"><form id="rtd-search-form" class="wy-form" action="../search.html" method="get">
<input type="text" name="q" placeholder="Search docs" /></form></div></div>
<div class="wy-menu wy-menu-vertical" data-spy="affix" role="navigation" aria-label="Navigation menu">
<ul><li class="toctree-l1"><a class="reference internal" href="../ReleaseNotes/index.html">1. Release Notes</a></li>
<li class="toctree-l1 current"><a class="reference internal current" href="#">2. Profiling Guide</a></li>
<li class="toctree-l1"><a class="reference internal" href="../NsightComputeCli/index.html">4. Nsight Compute CLI</a></li></ul>
<p class="caption"><span class="caption-text">Developer Interfaces</span></p>
<ul><li class="toctree-l1"><a class="reference internal" href="../CustomizationGuide/index.html">1. Customization Guide</a></li></ul>
</div></div></nav>
<section data-toggle="wy-nav-shift" class="wy-nav-content-wrap">
<nav class="wy-nav-top" aria-label="Mobile navigation menu"><a href="../index.html">NsightCompute</a></nav>
<div class="wy-nav-content"><div class="rst-content">
<div role="navigation" aria-label="Page navigation"><ul class="wy-breadcrumbs">
<li><a href="../index.html" class="icon icon-home"></a> &raquo;</li><li>2. Profiling Guide</li>
<li class="wy-breadcrumbs-aside">v2026.1.0 | <a href="https://developer.nvidia.com/nsight-compute-history">Archive</a></li></ul><hr/></div>
<div role="main" class="document" itemscope="itemscope" itemtype="http://schema.org/Article">
<div itemprop="articleBody">
{content}
</div></div>
<footer><div class="rst-footer-buttons" role="navigation" aria-label="Footer">
<a href="../ReleaseNotes/index.html" class="btn btn-neutral float-left" rel="prev">Previous</a>
<a href="../NsightCompute/index.html" class="btn btn-neutral float-right" rel="next">Next</a></div>
<hr/><div role="contentinfo"><p>Notices</p></div></footer>
</div></div></section></div>
<script>jQuery(function () { SphinxRtdTheme.Navigation.enable(true); });</script>
</body></html>
"""


def _ncu_page(mirror: Path) -> tuple[Page, str]:
    """The Profiling Guide's intro, metrics structure, units and metrics reference, as its site shows them."""
    md = (mirror / "ncu/docs/ProfilingGuide.md").read_text(encoding="utf-8")
    entities = _md_section(md, "#### Metrics Entities")
    rollups = _md_table_rows(entities.split("Counter roll-ups have")[0])
    examples = _md_section(md, "#### Metrics Examples")
    code_block = "\n".join(line[4:] for line in examples.splitlines() if line.startswith("    ")).strip("\n")
    cycle_items = re.findall(r"^  \* `(unit__[^`]+)` : (.*?)\s*$", _md_section(md, "#### Cycle Metrics"), re.M)
    cycle_list = "".join(
        f"<dt>{_CODE.format(name)}</dt><dd><p>{_md_inline(text)}</p></dd>" for name, text in cycle_items
    )

    def table(heading: str, caption: str, table_id: str) -> str:
        return _html_table(_md_table_rows(_md_section(md, heading)), caption, table_id)

    structure = (
        _section(
            "metrics-entities",
            4,
            "Metrics Entities",
            _paragraphs_html(_md_paragraphs(entities)[1:2]) + _html_table(rollups, "", "id3"),
        )
        + _section(
            "metrics-examples",
            4,
            "Metrics Examples",
            f'<div class="highlight"><pre>{html.escape(code_block)}</pre></div>',
        )
        + _section("cycle-metrics", 4, "Cycle Metrics", f'<dl class="simple">{cycle_list}</dl>')
    )
    guide = _section("metrics-structure", 3, "2.3.2. Metrics Structure", structure) + _section(
        "units", 3, "2.3.4. Units", table("### 2.3.4. Units", "Units", "id6")
    )
    reference = (
        _section("id5", 3, "2.4.1. Overview", _paragraphs_html(_md_paragraphs(_md_section(md, "### 2.4.1. Overview"))))
        + _section(
            "launch-metrics", 3, "2.4.2. Launch Metrics", table("### 2.4.2. Launch Metrics", "Launch Metrics", "id11")
        )
        + _section(
            "source-metrics", 3, "2.4.9. Source Metrics", table("### 2.4.9. Source Metrics", "Source Metrics", "id18")
        )
    )
    content = _section(
        "profiling-guide",
        1,
        "2. Profiling Guide",
        (
            _paragraphs_html(_md_paragraphs(_md_section(md, "# 2\\. Profiling Guide")))
            + _section("metrics-guide", 2, "2.3. Metrics Guide", guide)
            + _section("metrics-reference", 2, "2.4. Metrics Reference", reference)
        ),
    )
    return Page(url=NCU_URL, profiler="ncu", format="html", text=RTD_CHROME.replace("{content}", content)), md


@pytest.fixture(scope="module")
def ncu(docs_mirror: Path) -> tuple[list, str]:
    page, md = _ncu_page(docs_mirror)
    return read(page), md


def _chunk_under(chunks: list, heading: str, kind: str):
    return next(chunk for chunk in chunks if chunk.headings and chunk.headings[-1] == heading and chunk.kind == kind)


def _definitions(chunks: list) -> dict:
    return {definition.term: definition for chunk in chunks for definition in chunk.definitions}


# --- Nsight Compute in a Read-the-Docs layout --------------------------------------------------


def test_site_chrome_is_dropped(ncu):
    chunks, _ = ncu
    text = "\n".join(chunk.text for chunk in chunks)
    for chrome in (
        "Skip to main content",
        "Search docs",
        "1. Release Notes",
        "Developer Interfaces",
        "Previous",
        "Archive",
        "Notices",
        "SphinxRtdTheme",
        "max-width",
        "¶",
    ):
        assert chrome not in text
    assert "Nsight Compute profiling guide." in text


def test_headings_give_the_path_and_the_section_anchor(ncu):
    chunks, md = ncu
    launch = _chunk_under(chunks, "Launch Metrics", "table")
    assert launch.headings == ("Profiling Guide", "Metrics Reference", "Launch Metrics")
    assert launch.source == NCU_URL + "#launch-metrics"
    overview = _chunk_under(chunks, "Overview", "prose")
    assert overview.headings == ("Profiling Guide", "Metrics Reference", "Overview")
    assert overview.source == NCU_URL + "#id5"
    assert "are collected per kernel launch, and do not require an additional replay pass" in overview.text
    intro = chunks[0]
    assert intro.kind == "prose" and intro.headings == ("Profiling Guide",)
    assert intro.source == NCU_URL + "#profiling-guide"


def test_a_metric_table_becomes_definitions(ncu):
    chunks, md = ncu
    rows = _md_table_rows(_md_section(md, "### 2.4.2. Launch Metrics"))
    launch = _chunk_under(chunks, "Launch Metrics", "table")
    assert [definition.term for definition in launch.definitions] == [name for name, _ in rows]
    by_term = _definitions([launch])
    assert by_term["launch__grid_size"].text == "Maximum total number of blocks for the kernel launch."
    assert by_term["launch__cluster_max_active"].text == _md_plain(dict(rows)["launch__cluster_max_active"])
    assert all(d.role == "metric" and d.context == "Launch Metrics" for d in launch.definitions)
    assert launch.text.splitlines()[0] == "Launch Metrics"
    assert "launch__block_size | Maximum total number of threads per block for the kernel launch." in launch.text


def test_a_table_too_long_for_one_chunk_is_cut_at_rows(docs_mirror, monkeypatch):
    from knowledge_builder.formats import html as html_reader

    monkeypatch.setattr(html_reader, "TABLE_CHARS", 2000)
    page, md = _ncu_page(docs_mirror)
    parts = [chunk for chunk in read(page) if chunk.kind == "table" and chunk.headings[-1] == "Launch Metrics"]
    assert len(parts) >= 4
    assert all(len(part.text) <= 2000 and part.text.startswith("Launch Metrics\nlaunch__") for part in parts)
    assert all(part.source == NCU_URL + "#launch-metrics" for part in parts)
    rows = _md_table_rows(_md_section(md, "### 2.4.2. Launch Metrics"))
    assert [definition.term for part in parts for definition in part.definitions] == [name for name, _ in rows]


def test_a_formula_in_the_description_is_kept_as_measured(ncu):
    chunks, _ = ncu
    source = _definitions([_chunk_under(chunks, "Source Metrics", "table")])
    assert source["derived__avg_thread_executed"].measured == "thread_inst_executed / inst_executed"
    assert source["derived__avg_thread_executed"].text.startswith("Average number of thread-level executed")
    assert source["inst_executed"].measured == ""


def test_unit_vocabulary_and_submetric_suffixes_are_glossary(ncu):
    chunks, _ = ncu
    units = _definitions([_chunk_under(chunks, "Units", "table")])
    assert units["lts"].role == "glossary"
    assert "A Level 2 (L2) Cache Slice is a sub-partition of the Level 2 cache." in units["lts"].text
    rollups = _definitions([_chunk_under(chunks, "Metrics Entities", "table")])
    assert set(rollups) == {".sum", ".avg", ".min", ".max"}
    assert all(definition.role == "glossary" for definition in rollups.values())


def test_a_definition_list_of_metric_names_becomes_definitions(ncu):
    chunks, _ = ncu
    cycles = _chunk_under(chunks, "Cycle Metrics", "definitions")
    by_term = _definitions([cycles])
    assert list(by_term) == [
        "unit__cycles_elapsed",
        "unit__cycles_active",
        "unit__cycles_stalled",
        "unit__cycles_idle",
        "unit__(interface)_active",
        "unit__(interface)_stalled",
    ]
    assert by_term["unit__cycles_idle"].text == "The number of cycles where the unit was idle."
    assert cycles.source == NCU_URL + "#cycle-metrics"
    assert "unit__cycles_active: The number of cycles where the unit was processing data." in cycles.text


def test_preformatted_text_keeps_its_lines(ncu):
    chunks, _ = ncu
    examples = _chunk_under(chunks, "Metrics Examples", "prose")
    assert "sm__inst_executed.sum\nsm__inst_executed.avg\nsm__inst_executed.min" in examples.text


def test_read_page_dispatches_html_to_this_reader(docs_mirror):
    page, _ = _ncu_page(docs_mirror)
    assert read_page(page) == read(page)


def test_links_come_from_the_content_only(docs_mirror):
    page, _ = _ncu_page(docs_mirror)
    links = content_links(page)
    assert "https://docs.nvidia.com/nsight-compute/ReleaseNotes/index.html" not in links  # sidebar and footer
    # The intro's CUDA guide links sit in a bullet list the page builder leaves out.
    assert "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#programming-model" not in links
    assert "https://docs.nvidia.com/nsight-compute/NsightComputeCli/index.html#command-line-options-profile" in links


# --- long sections -----------------------------------------------------------------------------


def test_long_sections_are_cut_at_paragraphs_within_the_limit(docs_mirror):
    md = (docs_mirror / "ncu/docs/ProfilingGuide.md").read_text(encoding="utf-8")
    collection = md[md.index("## 2.2. Metric Collection") : md.index("## 2.3. Metrics Guide")]
    paragraphs = [_md_plain(p) for p in _md_paragraphs(collection) if not p.startswith("#")]
    assert sum(map(len, paragraphs)) > 3 * PROSE_CHARS
    body = _section(
        "metric-collection", 2, "2.2. Metric Collection", "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
    )
    chunks = read(Page(url=NCU_URL, profiler="ncu", format="html", text=RTD_CHROME.replace("{content}", body)))
    assert len(chunks) >= 3
    assert all(chunk.kind == "prose" and len(chunk.text) <= PROSE_CHARS for chunk in chunks)
    assert all(chunk.headings == ("Metric Collection",) for chunk in chunks)
    assert all(chunk.source == NCU_URL + "#metric-collection" for chunk in chunks)
    assert [block for chunk in chunks for block in chunk.text.split("\n\n")] == paragraphs


# --- Cachegrind in DocBook's HTML layout -------------------------------------------------------


def _xml_text(fragment: str) -> str:
    fragment = re.sub(r"<!\[CDATA\[(.*?)\]\]>", lambda m: html.escape(m.group(1)), fragment, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


@pytest.fixture(scope="module")
def cachegrind(docs_mirror: Path) -> list:
    xml = (docs_mirror / "cachegrind/cg-manual.xml").read_text(encoding="utf-8")
    options = xml[xml.index('<variablelist id="cg.opts.list">') : xml.index("</variablelist>")]
    entries = re.findall(r'<varlistentry id="([^"]+)".*?<term>(.*?)</term>.*?<listitem>(.*?)</listitem>', options, re.S)
    simulation = xml[
        xml.index("<title>Cache and Branch Simulation</title>") : xml.index('<sect1 id="cg-manual.cgopts"')
    ]
    cache_events = simulation[: simulation.index("When simulating the branch")]
    events = re.findall(r"<listitem>(.*?)</listitem>", cache_events, re.S)
    dl = "".join(
        f'<dt><span class="term"><a name="{anchor}"></a>'
        f'<code class="option">{html.escape(_xml_text(term))}</code></span></dt>'
        f"<dd><p>{html.escape(_xml_text(text))}</p></dd>"
        for anchor, term, text in entries
    )
    ul = "".join(f'<li class="listitem"><p>{html.escape(_xml_text(item))}</p></li>' for item in events)
    text = f"""<html><head><title>5. Cachegrind: a high-precision tracing profiler</title>
<link rel="stylesheet" href="vg_basic.css" type="text/css"></head><body bgcolor="white">
<div><table class="nav" width="100%" cellspacing="3" cellpadding="3" border="0" summary="Navigation header"><tr>
<td width="22px" align="center" valign="middle"><a accesskey="p" href="mc-manual.html"><img src="images/prev.png" width="18" height="21" border="0" alt="Prev"></a></td>
<td width="25px" align="center" valign="middle"><a accesskey="u" href="manual.html"><img src="images/up.png" alt="Up"></a></td>
<th align="center" valign="middle">Valgrind User Manual</th>
<td width="22px" align="center" valign="middle"><a accesskey="n" href="cl-manual.html"><img src="images/next.png" alt="Next"></a></td>
</tr></table></div>
<div class="chapter"><div class="titlepage"><div><div><h1 class="title"><a name="cg-manual"></a>5. Cachegrind: a high-precision tracing profiler</h1></div></div></div>
<div class="sect1"><div class="titlepage"><div><div><h2 class="title" style="clear: both"><a name="cg-manual.cache-sim"></a>5.7. Cache and Branch Simulation</h2></div></div></div>
<div class="itemizedlist"><ul class="itemizedlist" style="list-style-type: disc; ">{ul}</ul></div></div>
<div class="sect1"><div class="titlepage"><div><div><h2 class="title" style="clear: both"><a name="cg-manual.cgopts"></a>5.8. Cachegrind Command-line Options</h2></div></div></div>
<div class="variablelist"><a name="cg.opts.list"></a><dl class="variablelist">{dl}</dl></div></div></div>
<div><br><table class="nav" width="100%" cellspacing="3" cellpadding="2" border="0" summary="Navigation footer">
<tr><td rowspan="2" width="40%" align="left"><a accesskey="p" href="mc-manual.html">&lt;&lt;&#160;4. Memcheck: a memory error detector</a>&#160;</td>
<td width="20%" align="center"><a accesskey="u" href="manual.html">Up</a></td>
<td rowspan="2" width="40%" align="right">&#160;<a accesskey="n" href="cl-manual.html">6. Callgrind: a call-graph generating cache and branch prediction profiler&#160;&gt;&gt;</a></td></tr>
<tr><td width="20%" align="center"><a accesskey="h" href="index.html">Home</a></td></tr></table></div>
</body></html>"""
    return read(Page(url=CG_URL, profiler="cachegrind", format="html", text=text))


def test_an_option_list_stays_prose(cachegrind):
    options = _chunk_under(cachegrind, "Cachegrind Command-line Options", "prose")
    assert options.headings == ("Cachegrind: a high-precision tracing profiler", "Cachegrind Command-line Options")
    assert options.source == CG_URL + "#cg-manual.cgopts"
    assert "--cache-sim=no|yes [no]\n\nEnables or disables collection of cache access and miss counts." in options.text
    assert not any(chunk.kind == "definitions" for chunk in cachegrind)


def test_docbook_lists_and_navigation(cachegrind):
    simulation = _chunk_under(cachegrind, "Cache and Branch Simulation", "prose")
    assert simulation.source == CG_URL + "#cg-manual.cache-sim"
    assert (
        "- I cache reads (Ir, which equals the number of instructions executed), I1 cache read misses (I1mr)"
    ) in simulation.text
    text = "\n".join(chunk.text for chunk in cachegrind)
    for chrome in ("Valgrind User Manual", "Memcheck: a memory error detector", "Callgrind", "Home"):
        assert chrome not in text


# --- rocprof-compute in a Sphinx layout --------------------------------------------------------


def _rst_plain(text: str) -> str:
    text = re.sub(r":(?:doc|ref):`([^`<]*?)\s*<[^>]*>`", r"\1", text)
    text = re.sub(r":(?:doc|ref):`([^`]*)`", r"\1", text)
    return " ".join(text.replace("``", "").replace("*", "").split())


def _list_table(rst: str) -> list[list[str]]:
    """Rows of the first ``list-table`` in ``rst``, each cell as its rst source on one line."""
    rows: list[list[str]] = []
    for line in rst[rst.index(".. list-table::") :].splitlines()[1:]:
        if line and not line.startswith(" "):
            break
        if found := re.match(r"^   \* - (.*)", line):
            rows.append([found.group(1)])
        elif found := re.match(r"^     - (.*)", line):
            rows[-1].append(found.group(1))
        elif line.startswith("       ") and rows:
            rows[-1][-1] += " " + line.strip()
    return rows


def _sphinx_table(rows: list[list[str]]) -> str:
    def cell(text: str, tag: str) -> str:
        text = _CODE.format(html.escape(_rst_plain(text))) if "``" in text else html.escape(_rst_plain(text))
        return f'<{tag} class="head"><p>{text}</p></{tag}>' if tag == "th" else f"<td><p>{text}</p></td>"

    head = "".join(cell(text, "th") for text in rows[0])
    body = "".join("<tr>" + "".join(cell(text, "td") for text in row) + "</tr>" for row in rows[1:])
    return (
        f'<table class="docutils align-default"><thead><tr class="row-odd">{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )


@pytest.fixture(scope="module")
def rocprof(docs_mirror: Path) -> tuple[list, list, list]:
    includes = docs_mirror / "rocprof/rocprofiler-compute/docs/conceptual/includes"
    terms = _list_table((includes / "terms.rst").read_text(encoding="utf-8"))
    units = _list_table((includes / "normalization-units.rst").read_text(encoding="utf-8"))
    text = f"""<!DOCTYPE html><html><head><title>Definitions — ROCm Compute Profiler</title></head><body>
<div class="related" role="navigation" aria-label="Related"><ul><li><a href="../genindex.html">General Index</a></li></ul></div>
<div class="document"><div class="documentwrapper"><div class="bodywrapper"><div class="body" role="main">
<section id="definitions"><h1>Definitions</h1>{_sphinx_table(terms)}
<section id="normalization-units"><h2>Normalization units</h2>{_sphinx_table(units)}</section></section>
</div></div></div>
<div class="sphinxsidebar" role="navigation" aria-label="Main"><div class="sphinxsidebarwrapper"><h3>Navigation</h3>
<ul><li class="toctree-l1"><a href="performance-model.html">Performance model</a></li></ul></div></div></div>
<div class="footer">&#169; Copyright Advanced Micro Devices, Inc.</div></body></html>"""
    return read(Page(url=ROCPROF_URL, profiler="rocprof", format="html", text=text)), terms, units


def test_a_table_headed_name_and_description_defines_its_rows(rocprof):
    chunks, terms, _ = rocprof
    table = _chunk_under(chunks, "Definitions", "table")
    by_term = _definitions([table])
    assert list(by_term) == [_rst_plain(row[0]) for row in terms[1:]]
    kernel_time = by_term["Kernel time"]
    assert kernel_time.unit == "Seconds"
    assert kernel_time.text.startswith(
        "The number of seconds the accelerator was executing a kernel, from the command processor's (CP)"
    )
    assert table.text.splitlines()[0] == "Name | Description | Unit"
    assert table.source == ROCPROF_URL + "#definitions"


def test_normalization_units_are_glossary(rocprof):
    chunks, _, units = rocprof
    table = _chunk_under(chunks, "Normalization units", "table")
    by_term = _definitions([table])
    assert list(by_term) == ["per_wave", "per_cycle", "per_kernel", "per_second"]
    assert all(definition.role == "glossary" for definition in by_term.values())
    text = "\n".join(chunk.text for chunk in chunks)
    assert "General Index" not in text and "Performance model" not in text and "Copyright" not in text


def test_a_table_of_plain_words_defines_nothing(docs_mirror):
    rst = (docs_mirror / "rocprof/rocprofiler-compute/docs/conceptual/definitions.rst").read_text(encoding="utf-8")
    table = _sphinx_table(_list_table(rst))
    chunks = read(
        Page(
            url=ROCPROF_URL,
            profiler="rocprof",
            format="html",
            text=f'<main><h2 id="memory-spaces">Memory spaces</h2>{table}</main>',
        )
    )
    assert [chunk.kind for chunk in chunks] == ["table"]
    assert chunks[0].definitions == ()
    assert chunks[0].text.splitlines()[:2] == [
        "LLVM Address Space | Hardware Memory Space | HIP Terminology",
        "Generic | Flat | N/A",
    ]
