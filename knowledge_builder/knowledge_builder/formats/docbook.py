"""Reader for DocBook XML manuals: Valgrind's Cachegrind manual and its man pages.

Sections (``chapter``, ``sect1``..``sect5``, ``refentry``, ``refsect1``..) give the heading path,
their ``id`` the anchor. Each section's own paragraphs, lists, option lists (``variablelist``) and
program listings become prose chunks; options are not metrics, so they stay prose.

Two things the Cachegrind manual defines become :class:`Definition` s:

* the events, named in lists of the form "I cache reads (``<computeroutput>Ir</computeroutput>``,
  which equals the number of instructions executed), I1 cache read misses (...I1mr...)": one
  definition per parenthesised name, described by the words before it;
* the summary lines Valgrind prints (``==17942== I refs: 8,195,070``) in example output: one
  definition per label, described by the paragraph that names it, if any.

The files use entities defined in a file of their own (``vg-entities.xml``) that a page does not
carry: an unknown entity is kept as its literal text, so parsing never fails on it. ``xi:include``
elements (the man pages pull their option lists from the manual) are skipped.
"""

from __future__ import annotations

import html
import html.entities
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import attrs

from ..documents import Chunk, Definition, Page
from .sizing import pack

__all__ = ["read"]

_MAX_CHARS = 3000
_SECTIONS = {
    "book",
    "part",
    "chapter",
    "article",
    "preface",
    "appendix",
    "section",
    "simplesect",
    "sect1",
    "sect2",
    "sect3",
    "sect4",
    "sect5",
    "refentry",
    "refsynopsisdiv",
    "refsect1",
    "refsect2",
    "refsect3",
}
_NOT_TEXT = {"indexterm", "remark", "include"}
_SKIPPED = {"title", "titleabbrev", "refmeta", "refnamediv", "info"} | _NOT_TEXT
_VERBATIM = {"programlisting", "screen", "literallayout", "synopsis"}
_LISTS = {"itemizedlist", "orderedlist"}
_PARAGRAPHS = {"para", "simpara", "formalpara"}
_BLOCKS = (
    _VERBATIM
    | _LISTS
    | _PARAGRAPHS
    | {"variablelist", "note", "tip", "warning", "important", "caution", "blockquote", "example"}
)
_OMITTED_SECTIONS = {"see also", "author", "authors"}
_XML_ENTITIES = {"lt", "gt", "amp", "quot", "apos"}

_DOCTYPE = re.compile(r"<!DOCTYPE[^\[>]*(?:\[(?P<subset>.*?)\])?\s*>", re.DOTALL)
_ENTITY_DECLARATION = re.compile(
    r"<!ENTITY\s+(?!%)(?P<name>[\w.-]+)\s+(?P<quote>[\"'])(?P<value>.*?)(?P=quote)\s*>", re.DOTALL
)
# Entity references, and the CDATA sections and comments they must not be looked for in.
_ENTITY_REFERENCE = re.compile(r"<!\[CDATA\[.*?\]\]>|<!--.*?-->|&(?P<name>[A-Za-z_][\w.-]*);", re.DOTALL)
_TAG = re.compile(r"<[^>]*>")
# Markers around <computeroutput> text, so the event lists' parenthesised names can be found.
_CODE_START, _CODE_END = "\x01", "\x02"
_NAMED_EVENT = re.compile(r"\(\x01(?P<name>[A-Za-z][\w.+-]*)\x02(?:,\s*(?P<remark>[^)]*))?\)")
_LEADING_JOINERS = re.compile(r"^[\s,;.]*(?:and\s+)?")
_SUMMARY_LINE = re.compile(r"==\d+==\s+(?P<label>[A-Za-z][\w ]*?\w)\s*:\s+\d[\d,.]*%?.*")


@attrs.frozen
class _Section:
    """A section's place in the page: its heading path and the anchor its chunks cite."""

    headings: tuple[str, ...]
    source: str


def read(page: Page) -> list[Chunk]:
    """The page's chunks: prose per section, and definitions for events and summary lines."""
    try:
        root = ET.fromstring(_resolvable(page.text))
    except ET.ParseError:
        return _plain_text_chunks(page)
    chunks: list[Chunk] = []
    _read_section(root, _Section((), page.url), page, chunks)
    return chunks


def _resolvable(text: str) -> str:
    """The XML with its DOCTYPE removed and every entity replaced by what it stands for.

    Entities declared in the page's own DOCTYPE and HTML's named characters are expanded; any
    other (declared in a file the page only points to) stays as its literal ``&name;`` text.
    """
    doctype = _DOCTYPE.search(text)
    declared = {}
    if doctype and doctype.group("subset"):
        declared = {m.group("name"): m.group("value") for m in _ENTITY_DECLARATION.finditer(doctype.group("subset"))}
    text = _DOCTYPE.sub("", text, count=1)

    def expand(match: re.Match[str]) -> str:
        name = match.group("name")
        if name is None or name in _XML_ENTITIES:
            return match.group()
        if name in declared:
            return declared[name]
        character = html.entities.html5.get(name + ";")
        if character is not None:
            return character.replace("&", "&amp;").replace("<", "&lt;")
        return f"&amp;{name};"

    return _ENTITY_REFERENCE.sub(expand, text)


def _read_section(element: ET.Element, parent: _Section, page: Page, chunks: list[Chunk]) -> None:
    """Add the chunks of ``element`` (a section or the root) and of its subsections."""
    section = parent
    if _name(element) in _SECTIONS:
        title = _section_title(element)
        if title.lower() in _OMITTED_SECTIONS:
            return
        anchor = element.get("id", "")
        source = f"{page.url}#{anchor}" if anchor and "&" not in anchor else parent.source
        section = _Section(parent.headings + ((title,) if title else ()), source)
    blocks: list[str] = []
    definitions: list[Chunk] = []
    explanations = _explanations(element)
    for child in element:
        name = _name(child)
        if name in _SECTIONS or name in _SKIPPED:
            continue
        if name in _LISTS:
            events = _named_events(child, section, page, lead=blocks[-1] if blocks else "")
            if events is not None:
                definitions.append(events)
        blocks.extend(_blocks(child))
        for listing in (e for e in child.iter() if _name(e) in _VERBATIM):
            summary = _summary_lines(listing, section, page, explanations)
            if summary is not None:
                definitions.append(summary)
    for text in _pack(blocks):
        chunks.append(
            Chunk(profiler=page.profiler, source=section.source, headings=section.headings, kind="prose", text=text)
        )
    chunks.extend(definitions)
    for child in element:
        if _name(child) in _SECTIONS:
            _read_section(child, section, page, chunks)


def _name(element: ET.Element) -> str:
    """The element's tag without a namespace (``xi:include`` elements get ``include``)."""
    return element.tag.rsplit("}", 1)[-1]


def _section_title(element: ET.Element) -> str:
    """The section's title; a man page's is its name and purpose (``cg_annotate - ...``)."""
    title = element.find("title")
    if title is not None:
        return _inline(title)
    names = element.find("refnamediv")
    if names is not None:
        return " - ".join(_inline(part) for tag in ("refname", "refpurpose") if (part := names.find(tag)) is not None)
    return "Synopsis" if _name(element) == "refsynopsisdiv" else ""


def _blocks(element: ET.Element, indent: str = "") -> list[str]:
    """The element's text as blocks: paragraphs, lists, listings (kept verbatim)."""
    name = _name(element)
    if name in _SKIPPED:
        return []
    if name in _VERBATIM:
        text = "".join(element.itertext()).strip("\n")
        return [_dedent(text)] if text.strip() else []
    if name in _LISTS:
        items = [
            "\n".join(_blocks_of_children(item, indent + "  ")).strip() for item in element if _name(item) == "listitem"
        ]
        return ["\n".join(f"{indent}- {item.lstrip()}" for item in items if item)]
    if name == "variablelist":
        entries = []
        for entry in (child for child in element if _name(child) == "varlistentry"):
            terms = ", ".join(_inline(term) for term in entry.findall("term"))
            item = entry.find("listitem")
            body = "\n".join(_blocks_of_children(item, indent + "    ")) if item is not None else ""
            entries.append(f"{indent}{terms}\n{body}" if body else f"{indent}{terms}")
        return entries
    if name in _PARAGRAPHS or any(_name(child) in _BLOCKS for child in element):
        return _mixed_blocks(element, indent)
    text = _inline(element)
    return [indent + text] if text else []


def _blocks_of_children(element: ET.Element, indent: str) -> list[str]:
    """The blocks of an element that holds blocks (a list item, an option's description)."""
    return [block for child in element for block in _blocks(child, indent)]


def _mixed_blocks(element: ET.Element, indent: str) -> list[str]:
    """A paragraph (or block container) whose inline text is broken by nested blocks."""
    blocks: list[str] = []
    words = [element.text or ""]
    for child in element:
        if _name(child) in _BLOCKS:
            blocks.extend(_paragraph(words, indent))
            words = []
            blocks.extend(_blocks(child, indent))
        else:
            words.append(_inline_raw(child))
        words.append(child.tail or "")
    blocks.extend(_paragraph(words, indent))
    return blocks


def _paragraph(words: list[str], indent: str) -> list[str]:
    """The collapsed text of ``words`` as one block, or nothing when it is blank."""
    text = " ".join("".join(words).split())
    return [indent + text] if text else []


def _inline(element: ET.Element, mark_code: bool = False) -> str:
    """The element's text on one line; ``<computeroutput>`` wrapped in markers if ``mark_code``."""
    return " ".join(_inline_raw(element, mark_code, outer=True).split())


def _inline_raw(element: ET.Element, mark_code: bool = False, outer: bool = False) -> str:
    """The element's inline text, whitespace kept, its tail excluded."""
    name = _name(element)
    if name in _NOT_TEXT:
        return ""
    parts = [element.text or ""]
    for child in element:
        parts.append(_inline_raw(child, mark_code))
        parts.append(child.tail or "")
    text = "".join(parts)
    url = element.get("url", "") if name == "ulink" else ""
    if url.startswith(("http://", "https://")) and url not in text:
        text = f"{text} ({url})"
    if mark_code and name == "computeroutput" and not outer:
        text = f"{_CODE_START}{' '.join(text.split())}{_CODE_END}"
    return text


def _dedent(text: str) -> str:
    """Verbatim text without its common indentation or trailing blanks."""
    lines = [line.rstrip() for line in text.expandtabs(8).split("\n")]
    indent = min((len(line) - len(line.lstrip()) for line in lines if line.strip()), default=0)
    return "\n".join(line[indent:] for line in lines).strip("\n")


def _named_events(element: ET.Element, section: _Section, page: Page, lead: str) -> Chunk | None:
    """A definitions chunk for a list naming a metric in parentheses in every item, else None.

    "D cache reads (Dr, which equals the number of memory reads), D1 cache read misses (D1mr)":
    each name is described by the words before its parenthesis, and by the remark inside it.
    """
    items = [
        _inline(para, mark_code=True)
        for item in element
        if _name(item) == "listitem"
        for para in item
        if _name(para) in _PARAGRAPHS
    ]
    found = [list(_NAMED_EVENT.finditer(item)) for item in items]
    if not items or not all(found):
        return None
    context = section.headings[-1] if section.headings else ""
    definitions = []
    for item, matches in zip(items, found):
        start = 0
        for match in matches:
            words = _plain(_LEADING_JOINERS.sub("", item[start : match.start()]))
            description = ", ".join(part for part in (words, _plain(match.group("remark") or "")) if part)
            definitions.append(
                Definition(term=match.group("name"), context=context, text=description[:1].upper() + description[1:])
            )
            start = match.end()
    listing = "\n".join(f"- {_plain(item)}" for item in items)
    text = f"{lead}\n{listing}" if lead else listing
    return Chunk(
        profiler=page.profiler,
        source=section.source,
        headings=section.headings,
        kind="definitions",
        text=text,
        definitions=tuple(definitions),
    )


def _plain(text: str) -> str:
    """Marked text without its markers."""
    return text.replace(_CODE_START, "").replace(_CODE_END, "").strip()


def _explanations(section: ET.Element) -> list[str]:
    """The section's own paragraphs with ``<computeroutput>`` marked, to explain summary lines."""
    paragraphs: list[str] = []
    for child in section:
        if _name(child) in _SECTIONS:
            continue
        paragraphs.extend(_inline(para, mark_code=True) for para in child.iter() if _name(para) in _PARAGRAPHS)
    return paragraphs


def _summary_lines(listing: ET.Element, section: _Section, page: Page, explanations: list[str]) -> Chunk | None:
    """A definitions chunk for the summary lines Valgrind prints in an example, if it has any.

    A label's text is the section's paragraph that names it (``The <computeroutput>I
    refs</computeroutput> number is short for ...``).
    """
    lines = [line.strip() for line in "".join(listing.itertext()).split("\n")]
    matches = [match for line in lines if (match := _SUMMARY_LINE.fullmatch(line))]
    if not matches:
        return None
    definitions = []
    for match in matches:
        label = " ".join(match.group("label").split())
        marked = f"{_CODE_START}{label}{_CODE_END}"
        text = next((_plain(paragraph) for paragraph in explanations if marked in paragraph), "")
        definitions.append(Definition(term=label, text=text, context=f"{page.profiler} summary output"))
    text = "Summary lines in the example output:\n" + "\n".join(match.group() for match in matches)
    return Chunk(
        profiler=page.profiler,
        source=section.source,
        headings=section.headings,
        kind="definitions",
        text=text,
        definitions=tuple(definitions),
    )


def _pack(blocks: list[str]) -> Iterator[str]:
    """Blocks joined into texts of at most about ``_MAX_CHARS``; a longer block is cut between
    lines (a single longer line stays whole)."""
    pieces = (piece for block in blocks for piece in pack(block.split("\n"), _MAX_CHARS, "\n"))
    return pack(pieces, _MAX_CHARS, "\n\n")


def _plain_text_chunks(page: Page) -> list[Chunk]:
    """Prose chunks of the page's text without tags, for XML too broken to parse."""
    text = html.unescape(_TAG.sub(" ", _DOCTYPE.sub("", page.text)))
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text)]
    return [
        Chunk(profiler=page.profiler, source=page.url, kind="prose", text=chunk)
        for chunk in _pack([p for p in paragraphs if p])
    ]
