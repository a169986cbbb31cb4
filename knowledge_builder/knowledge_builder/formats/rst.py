"""Reader for reStructuredText pages, such as the ROCm profiler guides (rocprofv3, rocprof-compute).

The page is cut at its section titles; the heading level of an adornment style is the order in
which the page first uses it, as docutils does. A ``.. _label:`` right before a section gives the
section's anchor (otherwise the anchor docutils derives from a unique title). ``list-table``,
``csv-table`` with inline rows and grid tables become table chunks; a table whose first column
names fields or metrics (``Field | Description``, ``Name | Description | Unit``) also carries one
:class:`~knowledge_builder.documents.Definition` per row. Definition lists and bullet lists of
the form ``- ``Name``: description`` carry definitions when their terms are metric names, and
read as prose otherwise. Code blocks and admonitions stay as prose; images, raw HTML, toctrees,
Sphinx-only directives (``jinja`` tables rendered from data files) and substitutions are dropped;
a ``csv-table`` or ``include`` that points at another file is noted by name, never resolved.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass

from ..documents import Chunk, Definition, Page
from .sizing import runs, split_long

__all__ = ["read", "inline_text", "is_metric_name"]

MAX_CHUNK_CHARS = 3000
"""Longest text a chunk gets; longer sections and tables are split, keeping their headings."""

_ADORNMENT_CHARS = "=-~^\"'`#*+:._<>!$%&(),/;?@[\\]{|}"
_DROPPED_DIRECTIVES = frozenset(
    {
        "image",
        "raw",
        "meta",
        "toctree",
        "jinja",
        "highlight",
        "contents",
        "index",
        "sectnum",
        "title",
        "default-role",
        "role",
        "spelling:word-list",
    }
)
_CODE_DIRECTIVES = frozenset({"code-block", "code", "sourcecode", "parsed-literal"})
_FILE_DIRECTIVES = frozenset({"include", "literalinclude", "file"})
_ADMONITIONS = frozenset(
    {
        "note",
        "warning",
        "tip",
        "important",
        "caution",
        "attention",
        "hint",
        "danger",
        "error",
        "seealso",
        "admonition",
    }
)
_NAME_HEADERS = frozenset(
    {
        "name",
        "field",
        "fields",
        "metric",
        "metrics",
        "counter",
        "counters",
        "column",
        "columns",
        "term",
        "memory type",
        "address space",
    }
)
_BULLET = re.compile(r"([-*+•]|#\.|\d+\.|\d+\)|\(\d+\))(?:\s+|$)")
_DIRECTIVE = re.compile(r"\.\.\s+(?:\|[^|]+\|\s+)?([\w:.+-]+)::(?:\s+(.*))?$")
_LABEL = re.compile(r"\.\.\s+_([^:`]+|`[^`]+`):\s*$")
_FOOTNOTE = re.compile(r"\.\.\s+\[(#?[\w.-]*)\]\s*(.*)$")
_SUBSTITUTION_DEF = re.compile(r"^\.\.\s+\|([^|]+)\|", re.M)
_OPTION = re.compile(r":([\w-]+):(?:\s+(.*))?$")
_FIELD_ITEM = re.compile(r"(?:``([^`]+)``|\*\*([^*]+)\*\*)\s*:\s+(.+)", re.S)

_CODE_SPAN = re.compile(r"``(.+?)``", re.S)
_ROLE = re.compile(r":([\w:+.-]+):`([^`]*)`")
_LINK = re.compile(r"`([^`<]*?)\s*<([^`>]*)>`__?")
_INTERPRETED = re.compile(r"`([^`]+)`_{0,2}")
_STRONG = re.compile(r"\*\*(.+?)\*\*", re.S)
_EMPHASIS = re.compile(r"(?<![\w*])\*(?![\s*])(.+?)(?<![\s*])\*(?![\w*])", re.S)
_FOOTNOTE_REF = re.compile(r"\s*\[#?[\w.-]*\]_")
_ESCAPE = re.compile(r"\\(.)")
_PLACEHOLDER = re.compile(r"\x00(\d+)\x00")
_METRIC_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[_.][A-Za-z0-9]+)*")


def is_metric_name(term: str) -> bool:
    """Whether a term is spelled like a tool's metric or column name (``VGPR_Count``, ``VALUBusy``).

    Such names are one identifier with capitals inside or underscores; plain words ("Wavefront")
    and lower-case option values (``per_wave``) are vocabulary, not metrics.
    """
    if not _METRIC_NAME.fullmatch(term) or not any(c.isupper() for c in term):
        return False
    return "_" in term or any(c.isupper() for c in term[1:])


def inline_text(
    text: str, substitutions: Collection[str] = ("br",), section_titles: Mapping[str, str] | None = None
) -> str:
    """Text with reStructuredText inline markup removed and whitespace collapsed.

    ``code`` keeps its content, roles (:ref:`text <target>`, :doc:`path`) and links keep
    their text, emphasis markers, footnote references and the named substitutions go. A bare
    :ref:`label` reads as the title of the section the label names, when ``section_titles``
    knows it.
    """
    titles = section_titles or {}
    literals: list[str] = []

    def _stash(match: re.Match[str]) -> str:
        literals.append(match.group(1))
        return f"\x00{len(literals) - 1}\x00"

    text = _CODE_SPAN.sub(_stash, text)
    text = _ESCAPE.sub(_stash, text)
    text = _ROLE.sub(lambda m: _role_text(m.group(1), m.group(2), titles), text)
    text = _LINK.sub(lambda m: m.group(1) or m.group(2), text)
    text = _INTERPRETED.sub(r"\1", text)
    text = _STRONG.sub(r"\1", text)
    text = _EMPHASIS.sub(r"\1", text)
    text = _FOOTNOTE_REF.sub("", text)
    for name in substitutions:
        text = text.replace(f"|{name}|", " ")
    text = _PLACEHOLDER.sub(lambda m: literals[int(m.group(1))], text)
    return " ".join(text.split())


def _role_text(role: str, content: str, section_titles: Mapping[str, str]) -> str:
    explicit = re.fullmatch(r"(.*?)\s*<([^>]*)>", content, re.S)
    if explicit:
        return explicit.group(1) or explicit.group(2)
    if role == "ref":
        return section_titles.get(content.strip(), content)
    return content.lstrip("~!")


@dataclass(frozen=True)
class _Section:
    style: tuple[str, bool]
    title: str


@dataclass(frozen=True)
class _Label:
    name: str


@dataclass(frozen=True)
class _Text:
    text: str


@dataclass(frozen=True)
class _Table:
    caption: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class _DefinitionList:
    """Terms with descriptions, built only when most terms are metric names."""

    items: tuple[tuple[str, str], ...]


def read(page: Page) -> list[Chunk]:
    """The page's chunks: prose per section, one chunk per table and per definition list."""
    substitutions = {"br", *(name.strip() for name in _SUBSTITUTION_DEF.findall(page.text))}
    lines = page.text.expandtabs(8).splitlines()
    # A first pass learns which section each label names, so that a bare :ref:`label` can
    # read as that section's title in the second.
    titles = _label_titles(_Parser(substitutions, {}).blocks(lines, top=True))
    return _Assembler(page).chunks(_Parser(substitutions, titles).blocks(lines, top=True))


def _label_titles(blocks: list) -> dict[str, str]:
    titles: dict[str, str] = {}
    labels: list[str] = []
    for block in blocks:
        if isinstance(block, _Label):
            labels.append(block.name)
            continue
        if isinstance(block, _Section):
            titles.update((label, block.title) for label in labels)
        labels = []
    return titles


class _Parser:
    """Turns lines of reStructuredText into a flat sequence of blocks."""

    def __init__(self, substitutions: Collection[str], section_titles: Mapping[str, str]) -> None:
        self._substitutions = substitutions
        self._section_titles = section_titles

    def _clean(self, text: str) -> str:
        return inline_text(text, self._substitutions, self._section_titles)

    def blocks(self, lines: list[str], *, top: bool = False) -> list:
        """The blocks of ``lines`` (dedented); section titles are recognised only at the top."""
        out: list = []
        i, count = 0, len(lines)
        while i < count:
            line = lines[i]
            if not line.strip():
                i += 1
                continue
            if _indent(line) > 0:
                end = _indented_end(lines, i, 0)
                out.extend(self.blocks(_dedent(lines[i:end])))
                i = end
                continue
            section = self._section_at(lines, i) if top else None
            if section:
                block, i = section
                out.append(block)
            elif line.startswith(".."):
                end = _indented_end(lines, i + 1, 0)
                out.extend(self._explicit_markup(line, _dedent(lines[i + 1 : end])))
                i = end
            elif line.startswith(("+-", "+=")):
                end = i
                while end < count and lines[end].strip() and lines[end].lstrip()[0] in "+|":
                    end += 1
                out.append(_grid_table(lines[i:end], "", self._clean))
                i = end
            elif _BULLET.match(line):
                i = self._bullet_list(lines, i, out)
            elif i + 1 < count and lines[i + 1].strip() and _indent(lines[i + 1]) > 0:
                i = self._definition_list(lines, i, out)
            else:
                i = self._paragraph(lines, i, out)
        return out

    def _section_at(self, lines: list[str], i: int) -> tuple[_Section, int] | None:
        line, count = lines[i], len(lines)
        if _is_adornment(line) and i + 2 < count and lines[i + 1].strip() and lines[i + 2].strip() == line.strip():
            return _Section((line.strip()[0], True), self._clean(lines[i + 1])), i + 3
        if (
            i + 1 < count
            and _is_adornment(lines[i + 1])
            and not _is_adornment(line)
            and (i == 0 or not lines[i - 1].strip() or lines[i - 1].startswith(".."))
        ):
            return _Section((lines[i + 1].strip()[0], False), self._clean(line)), i + 2
        return None

    def _explicit_markup(self, line: str, body: list[str]) -> list:
        label = _LABEL.match(line)
        if label:
            return [_Label(label.group(1).strip("`"))]
        footnote = _FOOTNOTE.match(line)
        if footnote:
            text = self._clean(" ".join([footnote.group(2), *body]))
            return [_Text(f"[{footnote.group(1).lstrip('#')}] {text}")] if text else []
        directive = _DIRECTIVE.match(line)
        if not directive or line.startswith(".. |"):
            return []  # a comment or a substitution definition
        return self._directive(directive.group(1).lower(), (directive.group(2) or "").strip(), body)

    def _directive(self, name: str, argument: str, body: list[str]) -> list:
        options, content = _split_options(body)
        if name in _DROPPED_DIRECTIVES:
            return []
        if name in _CODE_DIRECTIVES:
            code = "\n".join(_dedent(content)).strip("\n")
            return [_Text(code)] if code else []
        if name in _FILE_DIRECTIVES:
            return [_Text(f"[The file {argument} is included here.]")]
        if name == "csv-table":
            return self._csv_table(argument, options, content)
        if name == "list-table":
            return [self._list_table(argument, options, content)]
        if name == "table":
            grid = [line for line in content if line.strip()]
            if grid and grid[0].lstrip().startswith("+"):
                return [_grid_table(grid, self._clean(argument), self._clean)]
            return self.blocks(content)
        if name in _ADMONITIONS:
            inner = self.blocks(([argument, ""] if argument else []) + content)
            prefix = "See also" if name == "seealso" else name.capitalize()
            if inner and isinstance(inner[0], _Text):
                return [_Text(f"{prefix}: {inner[0].text}"), *inner[1:]]
            return [_Text(f"{prefix}:"), *inner]
        inner = self.blocks(content)
        if argument and (name == "rubric" or (name == "tab-item" and inner)):
            return [_Text(self._clean(argument)), *inner]
        return inner

    def _csv_table(self, caption: str, options: dict[str, str], content: list[str]) -> list:
        title = self._clean(caption)
        if "file" in options:
            where = f"its rows are in the file {options['file']}"
            return [_Text(f"Table {title!r}: {where}." if title else f"A table; {where}.")]
        rows = "\n".join(line.strip() for line in content if line.strip())
        return [_Text(piece) for piece in (title, rows) if piece]

    def _list_table(self, caption: str, options: dict[str, str], content: list[str]) -> _Table:
        rows = [tuple(self._cell(cell) for cell in cells) for cells in _list_table_rows(content)]
        header_rows = int(options.get("header-rows", "0") or 0)
        header = rows[0] if header_rows and rows else ()
        return _Table(self._clean(caption), header, tuple(rows[header_rows:] if header_rows else rows))

    def _cell(self, lines: list[str]) -> str:
        return " ".join(_as_text(self.blocks(lines)).split())

    def _bullet_list(self, lines: list[str], i: int, out: list) -> int:
        items: list[tuple[str, list[str]]] = []
        count = len(lines)
        while i < count:
            marker = _BULLET.match(lines[i])
            if not marker:
                break
            end = _indented_end(lines, i + 1, marker.end() - 1)
            first = lines[i][marker.end() :]
            items.append((marker.group(1), _dedent([" " * marker.end() + first, *lines[i + 1 : end]])))
            i = end
            while i < count and not lines[i].strip():
                i += 1
            if i < count and _indent(lines[i]) == 0 and not _same_list(items[0][0], lines[i]):
                break
        matches = [_FIELD_ITEM.fullmatch(" ".join(" ".join(body).split())) for _, body in items]
        fields = [field for field in matches if field is not None]
        if (
            len(items) >= 2
            and len(fields) == len(items)
            and _mostly_metric_names(self._clean(field.group(1) or field.group(2)) for field in fields)
        ):
            out.append(
                _DefinitionList(
                    tuple(
                        (self._clean(field.group(1) or field.group(2)), self._clean(field.group(3))) for field in fields
                    )
                )
            )
            return i
        rendered = "\n".join(filter(None, (_bulleted(marker, self.blocks(body)) for marker, body in items)))
        if rendered:
            out.append(_Text(rendered))
        return i

    def _definition_list(self, lines: list[str], i: int, out: list) -> int:
        items: list[tuple[str, str]] = []
        count = len(lines)
        while (
            i + 1 < count
            and lines[i].strip()
            and _indent(lines[i]) == 0
            and not lines[i].startswith("..")
            and not _BULLET.match(lines[i])
            and lines[i + 1].strip()
            and _indent(lines[i + 1]) > 0
        ):
            end = _indented_end(lines, i + 1, 0)
            term = self._clean(lines[i].split(" : ")[0])
            items.append((term, _as_text(self.blocks(_dedent(lines[i + 1 : end])))))
            i = end
            while i < count and not lines[i].strip():
                i += 1
        if _mostly_metric_names(term for term, _ in items):
            out.append(_DefinitionList(tuple((term, " ".join(text.split())) for term, text in items)))
        else:
            out.extend(_Text(_described(term, text)) for term, text in items)
        return i

    def _paragraph(self, lines: list[str], i: int, out: list) -> int:
        start, count = i, len(lines)
        while i < count and lines[i].strip() and _indent(lines[i]) == 0:
            if i > start and lines[i].startswith(".. "):
                break
            i += 1
        paragraph = lines[start:i]
        if paragraph[0].startswith("|"):
            text = "; ".join(filter(None, (self._clean(entry) for entry in _line_block(paragraph))))
        else:
            text = self._clean(" ".join(paragraph))
        if text.endswith("::"):
            text = text[:-2].rstrip() + (":" if not text[:-2].endswith(" ") else "")
            next_line = i
            while next_line < count and not lines[next_line].strip():
                next_line += 1
            if next_line < count and _indent(lines[next_line]) > 0:
                end = _indented_end(lines, next_line, 0)
                literal = "\n".join(_dedent(lines[next_line:end])).strip("\n")
                out.extend(_Text(piece) for piece in (text, literal) if piece)
                return end
        if text:
            out.append(_Text(text))
        return i


class _Assembler:
    """Groups blocks into chunks under their heading path."""

    def __init__(self, page: Page) -> None:
        self._page = page
        self._styles: list[tuple[str, bool]] = []
        self._stack: list[tuple[int, str, str]] = []  # (level, title, anchor)
        self._pending_labels: list[str] = []
        self._paragraphs: list[str] = []
        self._chunks: list[Chunk] = []
        self._unique_titles: set[str] = set()

    def chunks(self, blocks: list) -> list[Chunk]:
        """The chunks of the page's blocks, in page order."""
        titles = [block.title for block in blocks if isinstance(block, _Section)]
        self._unique_titles = {title for title in titles if titles.count(title) == 1}
        for block in blocks:
            if isinstance(block, _Label):
                self._pending_labels.append(block.name)
                continue
            if isinstance(block, _Section):
                self._flush()
                self._enter(block)
            elif isinstance(block, _Text):
                self._paragraphs.append(block.text)
            elif isinstance(block, _Table):
                self._flush()
                self._emit_table(block)
            else:
                self._flush()
                self._emit_definitions(block)
            self._pending_labels = []
        self._flush()
        return self._chunks

    @property
    def _headings(self) -> tuple[str, ...]:
        return tuple(title for _, title, _ in self._stack)

    def _source(self, anchor: str = "") -> str:
        anchor = anchor or (self._stack[-1][2] if self._stack else "")
        return f"{self._page.url}#{anchor}" if anchor else self._page.url

    def _block_anchor(self) -> str:
        return _make_id(self._pending_labels[0]) if len(self._pending_labels) == 1 else ""

    def _enter(self, section: _Section) -> None:
        if section.style not in self._styles:
            self._styles.append(section.style)
        level = self._styles.index(section.style)
        while self._stack and self._stack[-1][0] >= level:
            self._stack.pop()
        if self._pending_labels:
            anchor = _make_id(self._pending_labels[0])
        elif section.title in self._unique_titles and _make_id(section.title):
            anchor = _make_id(section.title)
        else:
            anchor = self._stack[-1][2] if self._stack else ""
        self._stack.append((level, section.title, anchor))

    def _flush(self) -> None:
        pieces = [piece for paragraph in self._paragraphs for piece in _pieces(paragraph)]
        self._paragraphs = []
        for group in runs(pieces, len, MAX_CHUNK_CHARS, gap=len("\n\n")):
            text = "\n\n".join(group)
            self._chunks.append(
                Chunk(
                    profiler=self._page.profiler,
                    source=self._source(),
                    headings=self._headings,
                    kind="prose",
                    text=text,
                )
            )

    def _emit_table(self, table: _Table) -> None:
        if not table.rows and not table.header:
            return
        definitions = self._table_definitions(table)
        lead = "\n".join(filter(None, [table.caption, " | ".join(table.header)]))
        rendered = [" | ".join(row) for row in table.rows]
        source = self._source(self._block_anchor())
        start = 0
        for group in runs(rendered, len, MAX_CHUNK_CHARS - len(lead) - 1, gap=len("\n")):
            text = "\n".join([lead, *group] if lead else group)
            chosen = [d for row, d in definitions if start <= row < start + len(group)]
            self._chunks.append(
                Chunk(
                    profiler=self._page.profiler,
                    source=source,
                    headings=self._headings,
                    kind="table",
                    text=text,
                    definitions=chosen,
                )
            )
            start += len(group)

    def _table_definitions(self, table: _Table) -> list[tuple[int, Definition]]:
        header = [h.lower() for h in table.header]
        if len(header) < 2 or header[0] not in _NAME_HEADERS or "description" not in header[1:]:
            return []
        described = header.index("description", 1)
        unit = header.index("unit", 1) if "unit" in header[1:] else None
        rows = [(index, row) for index, row in enumerate(table.rows) if len(row) > described and row[0]]
        role = "metric" if _mostly_metric_names(row[0] for _, row in rows) else "glossary"
        context = " > ".join(self._headings) or table.caption
        return [
            (
                index,
                Definition(
                    term=row[0],
                    text=row[described],
                    unit=row[unit] if unit is not None and len(row) > unit and row[unit] != "N/A" else "",
                    context=context,
                    role=role,
                ),
            )
            for index, row in rows
        ]

    def _emit_definitions(self, block: _DefinitionList) -> None:
        context = " > ".join(self._headings)
        definitions = [Definition(term=term, text=text, context=context) for term, text in block.items if term]
        rendered = [f"{d.term}: {d.text}" for d in definitions]
        source = self._source(self._block_anchor())
        start = 0
        for group in runs(rendered, len, MAX_CHUNK_CHARS, gap=len("\n")):
            self._chunks.append(
                Chunk(
                    profiler=self._page.profiler,
                    source=source,
                    headings=self._headings,
                    kind="definitions",
                    text="\n".join(group),
                    definitions=definitions[start : start + len(group)],
                )
            )
            start += len(group)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _dedent(lines: list[str]) -> list[str]:
    margin = min((_indent(line) for line in lines if line.strip()), default=0)
    return [line[margin:].rstrip() for line in lines]


def _indented_end(lines: list[str], start: int, margin: int) -> int:
    """Index after the block of lines that are blank or indented deeper than ``margin``."""
    end = start
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > margin):
        end += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return end


def _is_adornment(line: str) -> bool:
    stripped = line.rstrip()
    return (
        len(stripped) >= 3
        and not line.startswith(" ")
        and stripped[0] in _ADORNMENT_CHARS
        and stripped == stripped[0] * len(stripped)
    )


def _same_list(marker: str, line: str) -> bool:
    other = _BULLET.match(line)
    if not other:
        return False
    if marker in "-*+•":
        return other.group(1) == marker
    return other.group(1) not in "-*+•"


def _split_options(body: list[str]) -> tuple[dict[str, str], list[str]]:
    """A directive body's ``:option: value`` lines and the content after them."""
    options: dict[str, str] = {}
    i = 0
    while i < len(body):
        match = _OPTION.match(body[i])
        if not match:
            break
        end = _indented_end(body, i + 1, 0)
        options[match.group(1)] = " ".join([match.group(2) or "", *body[i + 1 : end]]).strip()
        i = end
    return options, body[i:]


def _line_block(lines: list[str]) -> list[str]:
    entries: list[str] = []
    for line in lines:
        if line.startswith("|"):
            entries.append(line[1:].strip())
        elif entries:
            entries[-1] += " " + line.strip()
    return entries


def _list_table_rows(content: list[str]) -> list[list[list[str]]]:
    """The cells (each a list of dedented lines) of a ``list-table``'s two-level bullet list."""
    content = _dedent(content)
    rows: list[list[str]] = []
    for line in content:
        if line.startswith("*") and (len(line) == 1 or line[1] == " "):
            rows.append([" " + line[1:]] if line[1:].strip() else [])
        elif rows:
            rows[-1].append(line)
    table: list[list[list[str]]] = []
    for row in rows:
        cells: list[list[str]] = []
        for line in _dedent(row):
            if line.startswith("-") and (len(line) == 1 or line[1] == " "):
                cells.append([" " + line[1:]])
            elif cells:
                cells[-1].append(line)
        table.append([_dedent(cell) for cell in cells])
    return table


def _grid_table(lines: list[str], caption: str, clean: Callable[[str], str]) -> _Table:
    """A grid table (``+---+---+``); a cell spanning several rows reads as empty in later rows."""
    lines = _dedent(lines)
    border = lines[0]
    edges = [index for index, char in enumerate(border) if char == "+"]
    header: tuple[str, ...] = ()
    rows: list[tuple[str, ...]] = []
    current: list[list[str]] = [[] for _ in edges[1:]]
    for line in lines[1:]:
        if line.startswith("+"):
            row = tuple(clean(" ".join(cell)) for cell in current)
            if any(row):
                rows.append(row)
            if "=" in line and not header and rows:
                header, rows = rows[0], []
            current = [[] for _ in edges[1:]]
            continue
        # Wide characters (emoji) shift the columns of a line, so split at its bars when it has
        # one per column; only lines crossed by a spanning cell's border need the positions.
        if line.count("|") == len(edges):
            segments = line.split("|")[1:-1]
        else:
            segments = [line[left + 1 : right] for left, right in zip(edges, edges[1:])]
        for column, segment in enumerate(segments):
            if not set(segment.strip()) <= set("-+="):
                current[column].append(segment.strip())
    return _Table(caption, header, tuple(rows))


def _as_text(blocks: list) -> str:
    """Blocks nested in a list item, a table cell or a definition, as lines of text."""
    lines: list[str] = []
    for block in blocks:
        if isinstance(block, _Text):
            lines.append(block.text)
        elif isinstance(block, _DefinitionList):
            lines += [_described(term, text) for term, text in block.items]
        elif isinstance(block, _Table):
            lines += [" | ".join(row) for row in (block.header, *block.rows) if row]
    return "\n".join(lines)


def _bulleted(marker: str, blocks: list) -> str:
    body = _as_text(blocks)
    return f"{marker} {body.replace(chr(10), chr(10) + '  ')}" if body else ""


def _described(term: str, text: str) -> str:
    if not text:
        return term
    if "\n" in text or _BULLET.match(text):
        return term + "\n  " + text.replace("\n", "\n  ")
    return f"{term}: {text}"


def _mostly_metric_names(terms: Iterable[str]) -> bool:
    flags = [is_metric_name(term) for term in terms]
    return bool(flags) and sum(flags) * 2 > len(flags)


def _make_id(name: str) -> str:
    """The HTML id docutils gives a label or a section title."""
    return re.sub(r"^[^a-z]+", "", re.sub(r"[^a-z0-9]+", "-", name.lower())).strip("-")


def _pieces(text: str) -> list[str]:
    """``text`` as pieces of at most MAX_CHUNK_CHARS, cut at line ends, then at spaces."""
    lines = split_long(text, MAX_CHUNK_CHARS)
    # Runs rather than sizing.pack: a blank line right after a cut stays at the piece's start.
    return ["\n".join(group) for group in runs(lines, len, MAX_CHUNK_CHARS, gap=len("\n"))]
