"""Markdown reader: cuts a Markdown page into prose, table and definition chunks.

Written for Markdown conversions of vendor documentation sites (Nsight Compute's guides as
converted from docs.nvidia.com) and for Markdown kept in repositories (Intel perfmon's README,
rocprofiler-compute's MyST pages). What it does beyond plain Markdown:

* drops the front matter, the site navigation copied in front of the first heading, link-only
  lines and lists, images and their captions, thematic breaks and the legal "Notices";
* takes heading anchors from the page itself: MyST ``(label)=`` targets, the navigation menu's
  ``[2.4.2. Launch Metrics](#launch-metrics)`` entries, or same-page links to a heading's slug;
* reads pipe tables (also quoted with ``> ``, also with the first data row where the header
  should be and the table's caption glued in front, as the docs.nvidia.com conversion writes
  ``> Launch Metrics `launch__barrier_count` | Number of barriers...``, also with cells spilled
  over several lines) and MyST ``{list-table}`` blocks: one ``table`` chunk each, split by rows
  when longer than _MAX_TABLE;
* turns table rows into :class:`Definition` s by what names them: metric names
  (``launch__registers_per_thread``) are metrics; bare name parts (the units ``lts``, the
  roll-ups ``.avg``, the sub-metrics ``.pct_of_peak_sustained_elapsed`` of ncu's metrics
  decoder) are glossary; human labels in a table whose header says Metric or that has a Unit
  column are metrics named by their label (rocprofiler-compute's ``Grid Size``); human labels
  in a headerless table (the columns of ncu's memory tables: ``Hit Rate``) are glossary, as
  they name a column of the tool's display and not a metric;
* turns definition-like list runs (```unit__cycles_active` : The number of cycles...``,
  ``**Ridge Point** - ...``, ``quantity: What is being measured``) into definitions, and
  paragraphs that explain a part of metric names (``**Throughputs** indicate...``,
  ```launch__*` metrics are...``, ``Metrics with `sass_` in the name...``) into glossary
  definitions of that part.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

import attrs

from ..documents import Chunk, Definition, Page
from .sizing import SENTENCE_ENDS, pack, runs, split_long

__all__ = ["read"]

_MAX_PROSE = 3000
_MAX_TABLE = 6000
_LABEL_ALIAS_MAX = 60

_FRONT_MATTER = re.compile(r"\A---\s*\n.*?\n---\s*\n", re.S)
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*(.*?)\s*$")
_MYST_TARGET = re.compile(r"^\(([^()\s]+)\)=\s*$")
_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{1,}:?\s*)+\|?\s*$")
_THEMATIC_BREAK = re.compile(r"^\s*([*_-])(\s*\1){2,}\s*$")
_LIST_ITEM = re.compile(r"^(\s*)(?:[*+-]|\d+[.)])\s+(.*)$")
_NUMBERING = re.compile(r"^\d+(\.\d+)*\.?\s+")
_LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(([^()\s]*(?:\([^()]*\))?[^()\s]*)(?:\s+\"[^\"]*\")?\)")
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_IDENTIFIER = re.compile(r"^[A-Za-z0-9_.:*]+$")
_COMPUTED_AS = re.compile(r"\bComputed as:\s*(.+?)\s*$")
_BOLD_ENTITY = re.compile(r"^\*\*([A-Z][a-z]+)\*\*\s+([a-z].*)$", re.S)
# Paragraphs that say what a metric-name part means: "`launch__*` metrics are collected per
# kernel launch", "Metrics with `sass_` in the name are SASS metrics", "Counters using the term
# `cycles` in the name report the number of cycles".
_NAME_PART_PARAGRAPH = (
    re.compile(r"^`(?P<part>[a-z][a-z0-9_]*?)_*\*`\s+metrics\b"),
    re.compile(
        r"^(?:Metrics|Counters) (?:with|using the term|containing) "
        r"`(?P<part>[a-z][a-z0-9_]*?)_*` in the name\b"
    ),
)
_BOLD_CAPTION = re.compile(r"^\*\*([^*]+?):\*\*")
_DEFINITION_ITEM = (
    re.compile(r"^`(?P<term>[^`]+)`\s*(?::|\\?-|–)\s+(?P<text>.+)$", re.S),
    re.compile(r"^\*\*(?P<term>[^*]+?)\*\*\s*(?::|\\?-|–)\s+(?P<text>.+)$", re.S),
    re.compile(r"^\*\*(?P<term>[^*]+?):\*\*\s+(?P<text>.+)$", re.S),
    re.compile(r"^(?P<term>[A-Za-z][\w/&().-]*(?: [\w/&().-]+){0,4})\s*:\s+(?P<text>\S.*)$", re.S),
)
_ADMONITIONS = {
    "note",
    "warning",
    "seealso",
    "tip",
    "important",
    "attention",
    "caution",
    "hint",
    "danger",
    "error",
    "admonition",
}
_DROPPED_DIRECTIVES = {"figure", "image", "toctree", "raw", "eval_rst", "include"}
_METRIC_HEADER = re.compile(r"\b(metrics?|counters?|events?)( names?)?$", re.I)
_BOILERPLATE_START = {"Notices"}


# --------------------------------------------------------------------------------------------
# Blocks: the page as a sequence of headings, paragraphs, code, tables
# --------------------------------------------------------------------------------------------


@dataclass
class _Heading:
    level: int
    text: str
    anchor: str = ""


@dataclass
class _Paragraph:
    lines: list[str]


@dataclass
class _Code:
    text: str


@dataclass
class _Table:
    rows: list[list[str]]  # raw Markdown cells
    has_header: bool
    caption: str = ""


@dataclass
class _State:
    """What the walk over the blocks carries: the heading path and the section's pending prose."""

    page: Page
    headings: list[_Heading] = field(default_factory=list)
    prose: list[str] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)
    lead: str = ""  # last paragraph, when it introduces what follows (ends in ':')
    caption: str = ""  # a bold "**Caption:**" paragraph naming the next table
    entity: Definition | None = None  # "**Ratios** have three sub-metrics:", awaiting its table


def read(page: Page) -> list[Chunk]:
    """The page's chunks: prose per heading path, one chunk per table and per definition list."""
    text = _FRONT_MATTER.sub("", page.text.replace("\r\n", "\n"), count=1)
    lines = text.split("\n")
    blocks = _blocks(lines)
    blocks = _drop_preamble(blocks)
    _assign_anchors(blocks, lines, page.url)
    state = _State(page=page)
    _walk(blocks, state)
    _flush_entity(state)
    _flush_prose(state)
    return state.chunks


def _blocks(lines: list[str]) -> list[object]:
    """Tokenize Markdown lines into blocks; fenced MyST admonitions are read as their contents."""
    blocks: list[object] = []
    paragraph: list[str] = []
    pending_target = ""

    def end_paragraph() -> None:
        if paragraph:
            blocks.append(_Paragraph(list(paragraph)))
            paragraph.clear()

    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        if _is_preformatted_start(lines, i):
            end_paragraph()
            end = next((j for j in range(i, n) if not lines[j]), n)
            code = _dedent(lines[i:end]).strip("\n")
            if code.strip():
                blocks.append(_Code(code))
            i = end
            continue
        fence = _FENCE.match(line)
        if fence:
            end_paragraph()
            marker, info = fence.groups()
            body: list[str] = []
            i += 1
            while i < n and not lines[i].strip().startswith(marker):
                body.append(lines[i])
                i += 1
            i += 1
            blocks.extend(_fenced(info, body))
            continue
        if line.lstrip().startswith("<!--"):
            end_paragraph()
            while i < n and "-->" not in lines[i]:
                i += 1
            i += 1
            continue
        unquoted = _unquote(line)
        heading = _HEADING.match(line)
        if heading:
            end_paragraph()
            blocks.append(_Heading(len(heading.group(1)), _heading_text(heading.group(2)), pending_target))
            pending_target = ""
            i += 1
            continue
        target = _MYST_TARGET.match(line)
        if target:
            end_paragraph()
            pending_target = target.group(1)
            i += 1
            continue
        if _is_row(unquoted) and i + 1 < n and _SEPARATOR.match(_unquote(lines[i + 1])):
            end_paragraph()
            rows, i = _table_rows(lines, i)
            blocks.append(_pipe_table(rows))
            continue
        if not unquoted.strip() or _THEMATIC_BREAK.match(unquoted):
            end_paragraph()
            i += 1
            continue
        if paragraph and _LIST_ITEM.match(unquoted):
            end_paragraph()  # one block per list item, as the converted pages write them
        paragraph.append(unquoted)
        i += 1
    end_paragraph()
    return blocks


def _unquote(line: str) -> str:
    """The line without its blockquote marker (the guide quotes its metric tables)."""
    return re.sub(r"^>\s?", "", line)


def _is_preformatted_start(lines: list[str], i: int) -> bool:
    """The docs.nvidia.com conversion opens a preformatted block with two lines of four or more
    spaces and closes it at the first empty line."""
    return (
        i + 1 < len(lines)
        and len(lines[i]) >= 4
        and not lines[i].strip()
        and len(lines[i + 1]) >= 4
        and not lines[i + 1].strip()
    )


def _fenced(info: str, body: list[str]) -> list[object]:
    directive = re.match(r"^\{([\w-]+)\}\s*(.*)$", info)
    name = directive.group(1) if directive else info.split()[0] if info else ""
    if name == "list-table":  # ```{list-table} Title, or ```list-table Title
        return [_list_table(directive.group(2) if directive else info.partition(" ")[2], body)]
    if name in _ADMONITIONS:
        return _blocks([line for line in body if not re.match(r"^\s*:[\w-]+:", line)])
    if name in _DROPPED_DIRECTIVES:
        return []
    if directive:  # another directive (code-block, math...): its body is code
        body = [line for line in body if not re.match(r"^\s*:[\w-]+:", line)]
    code = "\n".join(body).strip("\n")
    return [_Code(code)] if code.strip() else []


def _heading_text(raw: str) -> str:
    return _NUMBERING.sub("", _inline(raw)).strip()


# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------


def _table_rows(lines: list[str], start: int) -> tuple[list[list[str]], int]:
    """The cells of the pipe table at ``start`` and the index after it. A row with fewer cells
    than the table has columns continues over the lines (lists, paragraphs) up to the line that
    carries its remaining cells, as the docs.nvidia.com conversion writes multi-paragraph cells."""
    columns = len(_split_cells(_unquote(lines[start + 1])))
    rows = [_split_cells(_unquote(lines[start]))]
    i = start + 2
    while i < len(lines):
        line = _unquote(lines[i])
        if line.strip() and _is_row(line):
            rows.append(_split_cells(line))
            i += 1
            continue
        end = _continuation_end(lines, i) if len(rows) > 1 and len(rows[-1]) < columns else None
        if end is None:
            break
        spilled = [line.strip() for line in lines[i:end] if line.strip()]
        spill = " ".join(re.sub(r"^(?:[*+-]|\d+[.)])\s+", "- ", line) for line in spilled)
        cells = _split_cells(lines[end], spaced=True)
        rows[-1][-1] = f"{rows[-1][-1]} {spill} {cells[0]}".strip()
        rows[-1].extend(cells[1:])
        i = end + 1
    return rows, i


def _continuation_end(lines: list[str], start: int) -> int | None:
    """Index of the line that completes a table row spilled over the lines from ``start``."""
    listed = False
    for j in range(start, min(len(lines), start + 40)):
        line = lines[j]
        if _HEADING.match(line) or _FENCE.match(line) or _SEPARATOR.match(line):
            return None
        listed = listed or bool(_LIST_ITEM.match(line))
        if re.match(r"^\s*\|\s", line) or (listed and len(_split_cells(line, spaced=True)) > 1):
            return j
    return None


def _is_row(line: str) -> bool:
    return bool(line.strip()) and len(_split_cells(line)) >= 2


def _split_cells(line: str, spaced: bool = False) -> list[str]:
    """Cells of a pipe-table row; pipes inside code spans or escaped do not split, nor, when
    ``spaced``, pipes without a space on each side (``2|3|4`` in a spilled cell)."""
    text = line.strip()
    cells, current, in_code, i = [], [], False, 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] == "|":
            current.append("|")
            i += 2
            continue
        if ch == "`":
            in_code = not in_code
        separates = not spaced or i == 0 or (text[i - 1] == " " and text[i + 1 : i + 2] in (" ", ""))
        if ch == "|" and not in_code and separates:
            cells.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    cells.append("".join(current))
    if text.startswith("|"):
        # Outer pipes delimit the row only when it has both; "a | b |" ends with an empty cell.
        cells = cells[1:]
        if text.endswith("|") and len(text) > 1 and cells:
            cells = cells[:-1]
    return [cell.strip() for cell in cells]


def _pipe_table(rows: list[list[str]]) -> _Table:
    """A pipe table; the docs.nvidia.com conversion puts the first data row (and the caption)
    where the header belongs, recognisable by the code span that names the row."""
    named = re.fullmatch(r"([^`]*?)\s*(`[^`]+`)\s*", rows[0][0])
    if named:
        rows[0][0] = named.group(2)
        return _Table(rows=rows, has_header=False, caption=_inline(named.group(1)))
    return _Table(rows=rows, has_header=True)


def _list_table(title: str, body: list[str]) -> _Table:
    """A MyST ``{list-table}``: ``* -`` starts a row, ``  -`` a cell, deeper lines continue it."""
    header_rows = 0
    rows: list[list[str]] = []
    for line in body:
        option = re.match(r"^\s*:([\w-]+):\s*(.*)$", line)
        if option and not rows:
            if option.group(1) == "header-rows":
                header_rows = int(option.group(2) or 0)
            continue
        new_row = re.match(r"^\*\s+-(?:\s+(.*))?$", line)
        new_cell = re.match(r"^\s{1,3}-(?:\s+(.*))?$", line)
        if new_row:
            rows.append([new_row.group(1) or ""])
        elif new_cell and rows:
            rows[-1].append(new_cell.group(1) or "")
        elif rows and line.strip():
            rows[-1][-1] = f"{rows[-1][-1]} {line.strip()}".strip()
    return _Table(rows=rows, has_header=header_rows >= 1, caption=_inline(title))


# --------------------------------------------------------------------------------------------
# Navigation, anchors, boilerplate
# --------------------------------------------------------------------------------------------


def _is_link_only(raw: str) -> bool:
    """True for text that is nothing but links, images and list or breadcrumb punctuation."""
    rest = _IMAGE.sub("", raw)
    rest = _LINK.sub("", rest)
    rest = re.sub(r"<https?://[^>]+>", "", rest)
    return not re.search(r"[A-Za-z0-9]", re.sub(r"[*+\-»|•·>_\s]", "", rest))


def _drop_preamble(blocks: list[object]) -> list[object]:
    """Before the first heading a converted page holds the site's menu and breadcrumbs: keep only
    real prose there (a paragraph of a dozen words or more)."""
    first = next((k for k, block in enumerate(blocks) if isinstance(block, _Heading)), None)
    if first is None:
        return blocks
    kept = [
        block
        for block in blocks[:first]
        if isinstance(block, _Paragraph)
        and not _LIST_ITEM.match(block.lines[0])
        and len(_inline(" ".join(block.lines)).split()) >= 12
        and not _is_link_only(" ".join(block.lines))
    ]
    return kept + blocks[first:]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", _NUMBERING.sub("", _inline(text))).strip().lower()


def _assign_anchors(blocks: list[object], lines: list[str], url: str) -> None:
    """Give each heading the anchor the page itself shows for it: its MyST target, the matching
    entry of the page's own navigation menu (in order, so repeated titles get their own ids), or
    its slug when a same-page link uses that slug."""
    page_name = url.split("#")[0].rstrip("/").split("/")[-1]
    menu: list[tuple[str, str]] = []
    anchors_linked: set[str] = set()
    for line in lines:
        for match in _LINK.finditer(line):
            target = match.group(2)
            path, _, anchor = target.partition("#")
            if not anchor or (path and path != page_name):
                continue
            anchors_linked.add(anchor)
            if not path and _LIST_ITEM.match(line) and _is_link_only(line):
                menu.append((_normal(match.group(1)), anchor))
    position = 0
    used = {block.anchor for block in blocks if isinstance(block, _Heading) and block.anchor}
    for block in blocks:
        if not isinstance(block, _Heading) or block.anchor:
            continue
        wanted = _normal(block.text)
        for k in range(position, len(menu)):
            if menu[k][0] == wanted:
                block.anchor, position = menu[k][1], k + 1
                break
        else:
            slug = _slug(block.text)
            if slug in anchors_linked and slug not in used:
                block.anchor = slug
        used.add(block.anchor)


# --------------------------------------------------------------------------------------------
# Inline markup
# --------------------------------------------------------------------------------------------


def _inline(raw: str) -> str:
    """Plain text of a Markdown fragment: links to their text, markup and escapes removed."""
    codes: list[str] = []

    def keep_code(match: re.Match) -> str:
        codes.append(match.group(2).strip())
        return f"\x00{len(codes) - 1}\x00"

    text = re.sub(r"\{[\w-]+\}`([^`]*)`", r"\1", raw)  # MyST roles: {sup}`1`
    text = _CODE_SPAN.sub(keep_code, text)
    text = _IMAGE.sub("", text)
    text = re.sub(r"\b\d+\((\[\d+\]\(#[^)]*\),?)+\)", "", text)  # footnote back-references
    text = re.sub(r"\[\d+\]\(#[^)]*\)", "", text)  # footnote markers
    for _ in range(3):  # nested [ ![img](..) ](..)
        text = _LINK.sub(lambda m: m.group(1), text)
    text = re.sub(r"<(https?://[^>\s]+)>", r"\1", text)
    text = re.sub(r"<br\s*/?>", " ", text, flags=re.I)
    text = re.sub(r"</?[A-Za-z][^<>]*>", "", text)
    text = re.sub(r"\*\*(.+?)\*\*", r"\1", text)
    text = re.sub(r"(?<![\w*])\*(?!\s)([^*]+?)(?<!\s)\*(?![\w*])", r"\1", text)
    text = re.sub(r"(?<![\w])_(?!\s)([^_]+?)(?<!\s)_(?![\w])", r"\1", text)
    text = re.sub(r"\\([\\`*_{}\[\]()#+\-.!|>~])", r"\1", text)
    text = re.sub(r"\x00(\d+)\x00", lambda m: codes[int(m.group(1))], text)
    text = re.sub(r"\s+", " ", html.unescape(text)).strip()
    return re.sub(r"\s+([,;:])(?=\s|$)", r"\1", text)  # "_Kernel Replay_ , all" as converted


def _render_paragraph(lines: list[str]) -> str:
    """A paragraph or list block as plain text: list items on their own '- ' lines."""
    if all(line.startswith("    ") for line in lines) and not _LIST_ITEM.match(lines[0]):
        return _dedent(lines)
    items: list[str] = []
    for line in lines:
        item = _LIST_ITEM.match(line)
        if item or not items:
            items.append(("- " if item else "") + (item.group(2) if item else line))
        else:
            items[-1] += " " + line.strip()
    return "\n".join(("- " + _inline(item[2:])) if item.startswith("- ") else _inline(item) for item in items).strip()


def _dedent(lines: list[str]) -> str:
    indent = min((len(line) - len(line.lstrip()) for line in lines if line.strip()), default=0)
    return "\n".join(line[indent:].rstrip() for line in lines)


# --------------------------------------------------------------------------------------------
# The walk: headings, prose, tables and definition lists into chunks
# --------------------------------------------------------------------------------------------


def _walk(blocks: list[object], state: _State) -> None:
    k = 0
    boilerplate = False
    while k < len(blocks):
        block = blocks[k]
        if not isinstance(block, _Table):
            _flush_entity(state)
        if isinstance(block, _Heading):
            _flush_prose(state)
            boilerplate = block.text in _BOILERPLATE_START
            while state.headings and state.headings[-1].level >= block.level:
                state.headings.pop()
            state.headings.append(block)
            state.lead = state.caption = ""
        elif boilerplate:
            pass
        elif isinstance(block, _Code):
            _add_prose(state, block.text)
            state.lead = ""
        elif isinstance(block, _Table):
            _emit_table(block, state)
            state.lead = state.caption = ""
        elif isinstance(block, _Paragraph):
            raw = "\n".join(block.lines).strip()
            if raw in _BOILERPLATE_START:
                boilerplate = True
            elif _is_link_only(raw):
                pass
            elif _is_caption(block, blocks[k - 1] if k else None):
                pass
            elif _LIST_ITEM.match(block.lines[0]) and _definition_item(block) is not None:
                run = [block]
                while k + 1 < len(blocks):
                    following = blocks[k + 1]
                    if not (
                        isinstance(following, _Paragraph)
                        and _LIST_ITEM.match(following.lines[0])
                        and _definition_item(following)
                    ):
                        break
                    k += 1
                    run.append(following)
                if len(run) >= 2:
                    _emit_definition_list(run, state)
                else:
                    _add_prose(state, _render_paragraph(block.lines))
                state.lead = ""
            else:
                _paragraph(block, raw, state)
        k += 1


def _is_caption(block: _Paragraph, previous: object) -> bool:
    """The one-line caption the converted pages put under an image, which is dropped with it."""
    return (
        isinstance(previous, _Paragraph)
        and len(block.lines) == 1
        and len(block.lines[0]) <= 150
        and bool(_IMAGE.search(" ".join(previous.lines)))
        and _is_link_only(" ".join(previous.lines))
    )


def _paragraph(block: _Paragraph, raw: str, state: _State) -> None:
    text = _render_paragraph(block.lines)
    if not text:
        return
    _add_prose(state, text)
    caption = _BOLD_CAPTION.match(raw)
    state.caption = _inline(caption.group(1)) if caption else ""
    state.lead = text if text.endswith(":") else ""
    entity = _BOLD_ENTITY.match(raw)
    if entity:
        word = entity.group(1)
        term = word[:-1].lower() if word.endswith("s") and len(word) > 4 else word.lower()
        state.entity = Definition(
            term=term, text=text, aliases=(word,) if word != term else (), context=_context(state), role="glossary"
        )
    for pattern in _NAME_PART_PARAGRAPH:
        part = pattern.match(raw)
        if part:
            code = re.match(r"^[^`]*`([^`]+)`", raw)
            written = code.group(1) if code else part.group("part")
            state.entity = Definition(
                term=part.group("part"),
                text=text,
                aliases=(written,) if written != part.group("part") else (),
                context=_context(state),
                role="glossary",
            )


def _flush_entity(state: _State) -> None:
    """An entity paragraph no table follows is a definition chunk of its own."""
    if state.entity is not None:
        _emit(state, "definitions", state.entity.text, (state.entity,))
        state.entity = None


def _add_prose(state: _State, text: str) -> None:
    """Append a paragraph; list items the page spaces out are kept together as one list."""
    if state.prose and text.startswith("- ") and state.prose[-1].split("\n")[-1].startswith("- "):
        state.prose[-1] += "\n" + text
    else:
        state.prose.append(text)


def _flush_prose(state: _State) -> None:
    """The section's prose as chunks of at most _MAX_PROSE characters, cut between paragraphs; a
    longer paragraph is cut at sentence ends (then at spaces), its sentences packed like paragraphs."""
    paragraphs = [p for p in state.prose if p.strip()]
    state.prose = []
    units = [unit for paragraph in paragraphs for unit in split_long(paragraph, _MAX_PROSE, at=SENTENCE_ENDS)]
    for piece in pack(units, _MAX_PROSE, "\n\n"):
        _emit(state, "prose", piece, ())


def _emit(state: _State, kind: str, text: str, definitions: tuple[Definition, ...]) -> None:
    anchor = next((h.anchor for h in reversed(state.headings) if h.anchor), "")
    source = f"{state.page.url.split('#')[0]}#{anchor}" if anchor else state.page.url
    state.chunks.append(
        Chunk(
            profiler=state.page.profiler,
            source=source,
            headings=tuple(h.text for h in state.headings),
            kind=kind,
            text=text,
            definitions=definitions,
        )
    )


def _context(state: _State, caption: str = "") -> str:
    """Where a definition sits: the heading path, then the caption of its table."""
    path = [h.text for h in state.headings]
    if caption and (not path or caption.lower() != path[-1].lower()):
        path.append(caption)
    return " > ".join(path)


# --------------------------------------------------------------------------------------------
# Tables into definitions
# --------------------------------------------------------------------------------------------


def _emit_table(table: _Table, state: _State) -> None:
    """One table chunk, or several of at most _MAX_TABLE characters for a long table, each with
    the caption, the sentence leading to the table and the header row."""
    if not table.rows:
        return
    header = table.rows[0] if table.has_header else None
    body = [row for row in (table.rows[1:] if header else table.rows) if any(_inline(c) for c in row)]
    if not body:
        return
    caption = table.caption or state.caption
    head = [state.lead] if caption and state.lead.startswith(caption) else [x for x in (caption, state.lead) if x]
    if header:
        head.append(" | ".join(_inline(cell) for cell in header))
    context = _context(state, caption)
    entity, state.entity = state.entity, None
    # Each row's line counts with its newline, after the lines of the head.
    budget = _MAX_TABLE - sum(len(line) + 1 for line in head)
    for part in runs(body, lambda row: len(" | ".join(_inline(cell) for cell in row)) + 1, budget):
        definitions = _table_definitions(header, part, context)
        if entity is not None:
            # "**Ratios** have three sub-metrics:" and its table define the entity together.
            names = ", ".join(_cell_name(row[0])[0] for row in body)
            found = {entity.term: attrs.evolve(entity, text=f"{entity.text} {names}.")}
            for definition in definitions:
                _add(found, definition)
            definitions, entity = tuple(found.values()), None
        lines = head + [" | ".join(_inline(cell) for cell in row) for row in part]
        _emit(state, "table", "\n".join(lines), definitions)


def _table_definitions(header: list[str] | None, body: list[list[str]], context: str) -> tuple[Definition, ...]:
    """The definitions a table's rows give, by what names the rows (see the module docstring)."""
    if not body or (header is None and len(body[0]) < 2):
        return ()  # a single column names things without saying what they are
    labels = [_inline(cell) for cell in header] if header else []
    description_column = next((k for k, h in enumerate(labels) if "description" in h.lower()), 1)
    unit_column = next((k for k, h in enumerate(labels) if h.lower() in ("unit", "units")), None)
    names = [_cell_name(row[0]) for row in body]
    identifiers = [name for name, coded in names if coded and _is_identifier(name)]
    if any("__" in name for name in identifiers):
        kind = "metric names"
    elif labels and (_METRIC_HEADER.search(labels[0]) or unit_column is not None):
        kind = "metric labels"
    elif len(identifiers) == len(names):
        kind = "name parts"
    elif not labels and all(coded for _, coded in names):
        kind = "display labels"
    else:
        return ()
    found: dict[str, Definition] = {}
    for row, (name, coded) in zip(body, names):
        if not name or (kind == "metric names" and not (coded and _is_identifier(name))):
            continue
        if kind == "display labels" and name.startswith("(") and name.endswith(")"):
            continue  # "(Access Types)" stands for the rows, it names nothing
        if labels:
            description = _inline(row[description_column]) if description_column < len(row) else ""
        else:
            description = " ".join(_inline(cell) for cell in row[1:])
        unit = _inline(row[unit_column]) if unit_column is not None and unit_column < len(row) else ""
        _add(found, _row_definition(kind, name, description, unit, context))
    return tuple(found.values())


def _cell_name(cell: str) -> tuple[str, bool]:
    """The name a row gives in its first cell, and whether the page wrote it as code."""
    code = re.fullmatch(r"\s*`([^`]+)`\s*", cell)
    if code:
        return code.group(1).strip(), True
    return _inline(cell), False


def _is_identifier(name: str) -> bool:
    """A name as it appears inside metric names (``lts``, ``.avg``, ``sm__throughput``), as
    opposed to a human label (``Hit Rate``, ``Instructions``)."""
    return bool(_IDENTIFIER.match(name)) and (name == name.lower() or bool(re.search(r"[_.:]", name)))


def _row_definition(kind: str, name: str, description: str, unit: str, context: str) -> Definition:
    if kind == "display labels":
        return Definition(term=name, text=description, context=context, role="glossary")
    if kind == "name parts" or "*" in name:
        term = name.lstrip(".")  # ".avg" appears in metric names as the part "avg"
        return Definition(
            term=term, text=description, aliases=(name,) if term != name else (), context=context, role="glossary"
        )
    measured = _COMPUTED_AS.search(description)
    label = kind == "metric names" and _looks_like_label(description)
    return Definition(
        term=name,
        text=description,
        aliases=(description,) if label else (),
        unit=unit,
        measured=measured.group(1) if measured else "",
        context=context,
    )


def _looks_like_label(text: str) -> bool:
    """A description that is only a display label ("Theoretical Occupancy")."""
    words = text.split()
    return (
        0 < len(text) <= _LABEL_ALIAS_MAX
        and not text.endswith(".")
        and all(w[0].isupper() or not w[0].isalpha() for w in words)
    )


def _add(found: dict[str, Definition], definition: Definition) -> None:
    """Keep one definition per term in a chunk, joining the texts a repeated term gets."""
    known = found.get(definition.term)
    if known is None:
        found[definition.term] = definition
        return
    text = known.text if definition.text in known.text else f"{known.text} {definition.text}".strip()
    found[definition.term] = attrs.evolve(
        known,
        text=text,
        aliases=tuple(dict.fromkeys(known.aliases + definition.aliases)),
        measured=known.measured or definition.measured,
        unit=known.unit or definition.unit,
    )


# --------------------------------------------------------------------------------------------
# Definition lists
# --------------------------------------------------------------------------------------------


def _definition_item(block: _Paragraph) -> tuple[str, str, bool] | None:
    """(term, raw description, written as code) of a list item shaped like a definition."""
    item = _LIST_ITEM.match(block.lines[0])
    if item is None:
        return None
    content = " ".join([item.group(2)] + [line.strip() for line in block.lines[1:]]).strip()
    for pattern in _DEFINITION_ITEM:
        match = pattern.match(content)
        if match:
            term = match.group("term").strip()
            if pattern is _DEFINITION_ITEM[-1] and re.search(r"[.!?,;]$", term):
                return None
            return term, match.group("text"), pattern is _DEFINITION_ITEM[0]
    return None


def _emit_definition_list(run: list[_Paragraph], state: _State) -> None:
    context = _context(state)
    found: dict[str, Definition] = {}
    lines = [state.lead] if state.lead else []
    for block in run:
        item = _definition_item(block)
        if item is None:  # the run holds only definition items; this keeps the types honest
            continue
        term, raw_text, coded = item
        term = term if coded else _inline(term)
        text = _inline(raw_text)
        lines.append(f"{term}: {text}")
        _add(found, _list_definition(term, text, coded, context))
    _emit(state, "definitions", "\n".join(lines), tuple(found.values()))


def _list_definition(term: str, text: str, coded: bool, context: str) -> Definition:
    """A metric when the item names a whole metric; otherwise a glossary term. A name pattern
    written with the ``unit__`` placeholder documents the part after it (``cycles_elapsed``)."""
    if coded and "__" in term and _is_identifier(term) and not term.startswith("unit__"):
        return Definition(term=term, text=text, context=context)
    placeholder = re.match(r"^unit__([A-Za-z0-9_]+)$", term)
    if placeholder:
        return Definition(term=placeholder.group(1), text=text, aliases=(term,), context=context, role="glossary")
    return Definition(term=term, text=text, context=context, role="glossary")
