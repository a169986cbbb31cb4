"""HTML reader: cuts a documentation web page into prose, table and definition-list chunks.

Documentation sites wrap their text in navigation bars, sidebars, search forms, breadcrumbs and
scripts. The reader keeps the page's main content (``[role=main]``, ``<main>``, ``<article>``,
Sphinx's ``div.body`` / ``div.document``), drops that chrome, and walks what is left in document
order: headings give the heading path and the ``#anchor``; each ``<table>`` becomes a ``table``
chunk whose rows become :class:`~knowledge_builder.documents.Definition` s when they name metrics;
each ``<dl>`` whose terms are metric names becomes a ``definitions`` chunk; everything else is
prose, cut at paragraph boundaries into chunks of about 3000 characters. :func:`content_links`
gives the links of that same main content, which is what the crawler follows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from urllib.parse import urljoin

import attrs
from bs4 import BeautifulSoup, NavigableString, Tag
from bs4.element import PreformattedString

from ..documents import Chunk, Definition, Page
from .sizing import LINE_ENDS, SENTENCE_ENDS, cut_anywhere, pack, runs, split_long

__all__ = ["PROSE_CHARS", "TABLE_CHARS", "read", "content_links"]

PROSE_CHARS = 3000
"""Longest prose chunk; longer sections are cut at paragraph (then sentence, then line) boundaries."""

TABLE_CHARS = 12000
"""Longest table or definition-list chunk; longer ones are cut at row boundaries, each part
repeating the caption and header so it still stands on its own."""

_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_INLINE_TAGS = frozenset(
    (
        "a",
        "abbr",
        "b",
        "bdi",
        "bdo",
        "big",
        "cite",
        "code",
        "data",
        "del",
        "dfn",
        "em",
        "font",
        "i",
        "ins",
        "kbd",
        "label",
        "mark",
        "q",
        "s",
        "samp",
        "small",
        "span",
        "strike",
        "strong",
        "sub",
        "sup",
        "time",
        "tt",
        "u",
        "var",
        "wbr",
    )
)
_CODE_TAGS = ("code", "tt", "kbd", "samp", "var")
_DROPPED_TAGS = (
    "head",
    "script",
    "style",
    "noscript",
    "nav",
    "footer",
    "aside",
    "form",
    "svg",
    "img",
    "picture",
    "video",
    "audio",
    "canvas",
    "iframe",
    "object",
    "embed",
    "template",
    "button",
    "input",
    "select",
    "textarea",
)
_CHROME_ROLES = frozenset(("navigation", "banner", "contentinfo", "search"))
_CHROME_MARKERS = (
    "sidebar",
    "navbar",
    "nav-bar",
    "navheader",
    "navfooter",
    "wy-nav-side",
    "wy-nav-top",
    "md-nav",
    "breadcrumb",
    "footer",
    "headerlink",
    "related",
    "rst-versions",
    "top-link",
)
_CONTENT_SELECTORS = ("[role=main]", "main", "article", "div.body", "div.document")

_SECTION_NUMBER = re.compile(r"^(?:\d+(?:\.\d+)*\.|\d+(?:\.\d+)+)\s+(?=\S)")
_IDENTIFIER = re.compile(r"[A-Za-z_.%][\w.:/%<>()\[\]-]*")
_METRIC_HINT = re.compile(r"[_.]|\d|[a-z][A-Z]")
_TERM_HEADER = re.compile(r"(?:hardware |raw |derived )?(?:metric|counter|event|name)s?(?: names?)?", re.I)
_DESCRIPTION_HEADER = re.compile(r"description|meaning|definition|explanation", re.I)
_UNIT_HEADER = re.compile(r"units?", re.I)
_MEASURED_HEADER = re.compile(r"formula|expression|equation|computation|derivation", re.I)
_ALIAS_HEADER = re.compile(r"alias(?:es)?|legacy(?: name)?|label", re.I)
_GLOSSARY_CONTEXT = re.compile(
    r"\b(?:units|subunits|pipelines|quantities|glossary|terminology|naming|decoder|roll-?ups)\b", re.I
)
_COMPUTED_AS = re.compile(r"\bComputed as:\s*(.+?)\.?\s*$")
_METRIC_SHARE = 0.8


@attrs.frozen
class _Heading:
    level: int
    title: str
    anchor: str


@attrs.frozen
class _Cell:
    text: str
    is_code: bool


@attrs.frozen
class _Entry:
    """One rendered line of a table or definition list, and the metric it defines if any."""

    line: str
    definition: Definition | None = None


def read(page: Page) -> list[Chunk]:
    """The page's chunks, in document order: prose under its headings, tables, definition lists."""
    walker = _Walker(page)
    walker.walk(_main_content(BeautifulSoup(page.text, "html.parser")))
    return walker.finish()


def content_links(page: Page) -> list[str]:
    """Absolute targets of the links in the page's main content (navigation and chrome left out),
    in document order, as written (fragments and queries kept)."""
    soup = BeautifulSoup(page.text, "html.parser")
    base_tag = soup.find("base", href=True)
    base = urljoin(page.url, str(base_tag.get("href"))) if isinstance(base_tag, Tag) else page.url
    return [urljoin(base, str(anchor.get("href")).strip()) for anchor in _main_content(soup).find_all("a", href=True)]


def _main_content(soup: BeautifulSoup) -> Tag:
    """The element holding the page's own text, with navigation and site chrome removed."""
    root = next((found for selector in _CONTENT_SELECTORS if (found := soup.select_one(selector))), None)
    root = root or soup.body or soup
    for tag in root.find_all(True):
        if not tag.decomposed and _is_chrome(tag):
            tag.decompose()
    return root


def _is_chrome(tag: Tag) -> bool:
    if tag.name in _DROPPED_TAGS:
        return True
    # A header inside the content may carry the page title; a header without a heading is a banner.
    if tag.name == "header" and tag.find(_HEADINGS) is None:
        return True
    if str(tag.get("role", "")).lower() in _CHROME_ROLES:
        return True
    # Valgrind's manual marks its prev/up/next tables only by class "nav" and a summary.
    if "navigation" in str(tag.get("summary", "")).lower():
        return True
    names = [str(name).lower() for name in tag.get("class") or ()]
    names.append(str(tag.get("id", "")).lower())
    if "nav" in names:
        return True
    for name in names:
        if any(marker in name for marker in _CHROME_MARKERS):
            return True
        # Short markers match whole name parts only: "toc" must not catch "protocol".
        for part in re.split(r"[-_\s]+", name):
            if part.endswith("toc") or part.startswith("toctree") or part.startswith("skip"):
                return True
    return False


class _Walker:
    """Walks the main content in document order and collects chunks."""

    def __init__(self, page: Page) -> None:
        self._page = page
        self._url = page.url.split("#", 1)[0]
        self._headings: list[_Heading] = []
        self._blocks: list[str] = []
        self._inline: list[str] = []
        self._bullet_pending = False
        self._chunks: list[Chunk] = []

    def finish(self) -> list[Chunk]:
        self._end_paragraph()
        self._flush_prose()
        return self._chunks

    def walk(self, node: Tag) -> None:
        for child in node.children:
            if isinstance(child, NavigableString):
                if not isinstance(child, PreformattedString):  # comments, doctypes, CDATA
                    self._inline.append(str(child))
            elif not isinstance(child, Tag):
                continue
            elif child.name in _HEADINGS:
                self._heading(child)
            elif child.name == "table":
                self._table(child)
            elif child.name == "dl":
                self._definition_list(child)
            elif child.name == "pre":
                self._end_paragraph()
                self._add_block(_preformatted_text(child))
            elif child.name in ("br", "hr"):
                self._inline.append(" ")
            elif child.name in _INLINE_TAGS:
                self.walk(child)
            else:
                self._block(child)

    def _block(self, tag: Tag) -> None:
        self._end_paragraph()
        if tag.name == "li":
            self._bullet_pending = True
        self.walk(tag)
        self._end_paragraph()
        self._bullet_pending = False

    def _end_paragraph(self) -> None:
        text = _collapse("".join(self._inline))
        self._inline.clear()
        self._add_block(text)

    def _add_block(self, text: str) -> None:
        if not text:
            return
        if self._bullet_pending:
            text = f"- {text}"
            self._bullet_pending = False
        self._blocks.append(text)

    @property
    def _source(self) -> str:
        anchor = next((heading.anchor for heading in reversed(self._headings) if heading.anchor), "")
        return f"{self._url}#{anchor}" if anchor else self._url

    @property
    def _heading_path(self) -> tuple[str, ...]:
        return tuple(heading.title for heading in self._headings)

    def _flush_prose(self) -> None:
        pieces = (piece for block in self._blocks for piece in _pieces(block, PROSE_CHARS))
        for text in pack(pieces, PROSE_CHARS, "\n\n"):
            self._chunks.append(
                Chunk(
                    profiler=self._page.profiler,
                    source=self._source,
                    headings=self._heading_path,
                    kind="prose",
                    text=text,
                )
            )
        self._blocks.clear()

    def _heading(self, tag: Tag) -> None:
        self._end_paragraph()
        self._flush_prose()
        title = _SECTION_NUMBER.sub("", _flat_text(tag).rstrip("¶#").strip())
        if not title:
            return
        level = int(tag.name[1])
        while self._headings and self._headings[-1].level >= level:
            self._headings.pop()
        self._headings.append(_Heading(level, title, _anchor_of(tag)))

    def _table(self, table: Tag) -> None:
        rows = [tr for tr in table.find_all("tr") if tr.find_parent("table") is table]
        cells = [[_cell(cell) for cell in tr.find_all(("td", "th"), recursive=False)] for tr in rows]
        header_count = _header_row_count(rows)
        body = [row for row in cells[header_count:] if any(cell.text for cell in row)]
        if not body or max(len(row) for row in cells) < 2:
            self._block(table)  # a layout table or a one-column list reads as prose
            return
        self._end_paragraph()
        self._flush_prose()
        header = [cell.text for cell in cells[header_count - 1]] if header_count else []
        caption_tag = table.find("caption", recursive=False)
        caption = _flat_text(caption_tag) if caption_tag else ""
        context = caption or (self._headings[-1].title if self._headings else "")
        definitions = _table_definitions(header, body, context)
        preamble = [line for line in (caption, " | ".join(header)) if line]
        entries = [
            _Entry(" | ".join(cell.text for cell in row), definitions.get(index)) for index, row in enumerate(body)
        ]
        self._emit_entries("table", preamble, entries)

    def _definition_list(self, dl: Tag) -> None:
        items = _dl_items(dl)
        metric_like = [_looks_like_metric(terms[0]) for terms, _ in items]
        if not items or sum(metric_like) < _METRIC_SHARE * len(items):
            self._block(dl)
            return
        self._end_paragraph()
        self._flush_prose()
        context = self._headings[-1].title if self._headings else ""
        entries = []
        for (terms, description), is_metric in zip(items, metric_like):
            names = [term.text for term in terms]
            line = f"{' / '.join(names)}: {description}" if description else " / ".join(names)
            definition = _definition(names[0], description, context, aliases=names[1:]) if is_metric else None
            entries.append(_Entry(line, definition))
        self._emit_entries("definitions", [], entries)

    def _emit_entries(self, kind: str, preamble: list[str], entries: list[_Entry]) -> None:
        """Chunks of the entries, each within TABLE_CHARS with the preamble repeated at its top."""
        budget = TABLE_CHARS - sum(len(line) + 1 for line in preamble)
        for part in runs(entries, lambda entry: len(entry.line) + 1, budget):
            self._chunks.append(
                Chunk(
                    profiler=self._page.profiler,
                    source=self._source,
                    headings=self._heading_path,
                    kind=kind,
                    text="\n".join(preamble + [entry.line for entry in part]),
                    definitions=[entry.definition for entry in part if entry.definition is not None],
                )
            )


def _anchor_of(heading: Tag) -> str:
    """The heading's id, an empty anchor inside it, or the id of the section it opens."""
    if heading.get("id"):
        return str(heading["id"])
    marker = heading.find(lambda tag: tag.name in ("a", "span") and (tag.get("id") or tag.get("name")))
    if marker is not None:
        return str(marker.get("id") or marker.get("name"))
    for ancestor in heading.parents:
        if ancestor.name in ("body", "html", "[document]"):
            break
        if ancestor.get("id"):
            # A wrapper whose first heading is an earlier one belongs to that heading, not this one.
            return str(ancestor["id"]) if ancestor.find(_HEADINGS) is heading else ""
    return ""


def _header_row_count(rows: Sequence[Tag]) -> int:
    count = 0
    for tr in rows:
        cells = tr.find_all(("td", "th"), recursive=False)
        if tr.find_parent("thead") is not None or (cells and all(cell.name == "th" for cell in cells)):
            count += 1
        else:
            break
    return count


def _cell(cell: Tag) -> _Cell:
    text = _flat_text(cell)
    code = "".join(part.get_text() for part in cell.find_all(_CODE_TAGS) if part.find_parent(_CODE_TAGS) is None)
    return _Cell(text, bool(text) and _collapse(code) == text)


def _table_definitions(header: list[str], body: list[list[_Cell]], context: str) -> dict[int, Definition]:
    """The definitions of a metric table, by body row index: empty when the table names no metrics.

    The term column is the one headed like ``Name`` / ``Metric`` / ``Counter`` / ``Event`` (any term
    it holds is taken), else the first column when most of its cells are metric identifiers.
    """
    term_column = _column(header, _TERM_HEADER)
    trusted = term_column is not None
    if term_column is None:
        names = [row[0] for row in body if row and row[0].text]
        if not names or sum(_looks_like_metric(cell) for cell in names) < _METRIC_SHARE * len(names):
            return {}
        term_column = 0
    description_column = _column(header, _DESCRIPTION_HEADER, search=True)
    if description_column is None:
        widths = {
            index: sum(len(row[index].text) for row in body if index < len(row))
            for index in range(max(len(row) for row in body))
            if index != term_column
        }
        description_column = max(widths, key=lambda index: (widths[index], -index))
    unit_column = _column(header, _UNIT_HEADER)
    measured_column = _column(header, _MEASURED_HEADER, search=True)
    alias_column = _column(header, _ALIAS_HEADER)

    def text_at(row: list[_Cell], index: int | None) -> str:
        return row[index].text if index is not None and index < len(row) else ""

    definitions = {}
    for index, row in enumerate(body):
        term = text_at(row, term_column)
        if not term or term.startswith("-") or not (trusted or _looks_like_metric(row[term_column])):
            continue
        aliases = [alias.strip() for alias in text_at(row, alias_column).split(",") if alias.strip()]
        definitions[index] = _definition(
            term,
            text_at(row, description_column),
            context,
            aliases=aliases,
            unit=text_at(row, unit_column),
            measured=text_at(row, measured_column),
        )
    return definitions


def _column(header: list[str], pattern: re.Pattern[str], *, search: bool = False) -> int | None:
    for index, name in enumerate(header):
        if pattern.search(name) if search else pattern.fullmatch(name.strip()):
            return index
    return None


def _definition(
    term: str, text: str, context: str, *, aliases: Iterable[str] = (), unit: str = "", measured: str = ""
) -> Definition:
    computed = _COMPUTED_AS.search(text)
    # Sub-metric suffixes (".pct_of_peak_sustained_elapsed") and unit/pipeline vocabulary name parts
    # of metric names, not metrics.
    glossary = term.startswith(".") or bool(_GLOSSARY_CONTEXT.search(context))
    return Definition(
        term=term,
        text=text,
        aliases=tuple(aliases),
        unit=unit,
        context=context,
        measured=measured or (computed.group(1) if computed else ""),
        role="glossary" if glossary else "metric",
    )


def _dl_items(dl: Tag) -> list[tuple[list[_Cell], str]]:
    """(terms, description) pairs of a definition list: consecutive ``dt`` s share the ``dd`` s after them."""
    items: list[tuple[list[_Cell], list[str]]] = []
    for item in dl.find_all(("dt", "dd")):
        if item.find_parent("dl") is not dl:
            continue
        if item.name == "dt":
            if not items or items[-1][1]:
                items.append(([], []))
            items[-1][0].append(_cell(item))
        elif items:
            items[-1][1].append(_flat_text(item))
    return [
        (terms, " ".join(text for text in descriptions if text))
        for terms, descriptions in items
        if terms and terms[0].text
    ]


def _looks_like_metric(cell: _Cell) -> bool:
    """Whether a term reads like a metric's name: one identifier, not an option, and either set in
    code or shaped like a tool's metric name (underscores, dots, digits, inner capitals)."""
    name = cell.text
    if not name or len(name) > 160 or name.startswith("-") or not _IDENTIFIER.fullmatch(name):
        return False
    return cell.is_code or bool(_METRIC_HINT.search(name))


def _flat_text(node: Tag) -> str:
    """The element's text on one line: blocks separated by a space, whitespace collapsed."""
    parts: list[str] = []
    for descendant in node.descendants:
        if isinstance(descendant, NavigableString):
            if not isinstance(descendant, PreformattedString):
                parts.append(str(descendant))
        elif isinstance(descendant, Tag) and descendant.name not in _INLINE_TAGS:
            parts.append(" ")
    return _collapse("".join(parts))


def _preformatted_text(pre: Tag) -> str:
    lines = [line.rstrip() for line in pre.get_text().splitlines()]
    return "\n".join(lines).strip("\n")


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _pieces(block: str, limit: int) -> Iterator[str]:
    """A block cut to ``limit``: at line ends for preformatted text, else at sentence ends (joined
    back by a space); a line or sentence longer than ``limit`` is cut wherever the limit falls."""
    separator, at = ("\n", LINE_ENDS) if "\n" in block else (" ", SENTENCE_ENDS)
    return pack(split_long(block, limit, at=at, then=cut_anywhere), limit, separator)
