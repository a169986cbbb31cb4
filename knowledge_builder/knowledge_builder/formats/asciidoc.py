"""Reader for AsciiDoc-style plain text: the Linux perf manual pages (``tools/perf/Documentation``).

perf writes its documentation in AsciiDoc: two-line titles underlined with ``=``, ``-`` or ``~``,
``[[anchor]]`` lines, option lists (``-e::`` / ``--event=::`` followed by the option's text) and
literal blocks (indented, or between ``----`` lines). Sections become prose chunks; an options
section is cut between options, never inside one. Options are not metrics, so they stay prose.

Example ``perf stat`` output in a literal block (``313,163,853,778  instructions:u  #  1.36  insn
per cycle``) names the counters perf prints: besides the prose, each such block gives a
definitions chunk with one :class:`Definition` per counter, ``measured`` holding perf's comment.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..documents import Chunk, Definition, Page
from .sizing import runs

__all__ = ["read"]

_MAX_CHARS = 3000
_OMITTED_SECTIONS = {"see also"}
_STAT_OUTPUT_CONTEXT = "perf stat output"

_UNDERLINE = re.compile(r"([=\-~^+])\1+")
_ANCHOR = re.compile(r"\[\[([^\]]+)\]\]")
_DIRECTIVE = re.compile(r"(?:ifdef|ifndef|ifeval|endif|include)::.*\[.*\]")
_BLOCK_ATTRIBUTE = re.compile(r"\[[A-Za-z][\w-]*\]")
_DELIMITER = re.compile(r"-{4,}|\.{4,}")
_OPTION_TERM = re.compile(r"(?P<term>[^\s:](?:(?!::|\. ).){0,60}?)::(?:\s+(?P<text>\S.*))?")

_LINKPERF = re.compile(r"linkperf:([\w.-]+)\[(\w+)\]")
_XREF = re.compile(r"<<([\w:.-]+)(?:,\s*([^<>]+?))?>>")
_URL_WITH_TEXT = re.compile(r"(https?://[^\s\[]+)\[([^\]]+)\]")

# One counter line of `perf stat` output: value, event (with modifiers and an optional
# "(msec)"), then perf's comment after '#', and the share of time the counter ran.
_COUNTER_LINE = re.compile(
    r"\s+(?P<value>\d[\d,.]*)\s+(?P<event>[A-Za-z][\w.:/=,-]*)"
    r"(?:\s+\((?P<unit>[A-Za-z/]+)\))?"
    r"(?:\s+#\s+[\d.,]+\s*%?\s*(?P<comment>[^()]*?))?"
    r"(?:\s+\(\s*[\d.]+%\s*\))?\s*"
)
_MODIFIERS = re.compile(r":[ukhIGHpPSDWebR]+$")
_PMU_EVENT = re.compile(r"[\w-]+/(?P<event>[^/=,]+)/")


def read(page: Page) -> list[Chunk]:
    """The page's chunks: prose per section, and the counters its ``perf stat`` examples print."""
    chunks: list[Chunk] = []
    for headings, anchor, lines in _sections(page.text.splitlines()):
        if headings and headings[-1].lower() in _OMITTED_SECTIONS:
            continue
        source = f"{page.url}#{anchor}" if anchor else page.url
        units = list(_units(lines))
        for text in _pack(units):
            chunks.append(Chunk(profiler=page.profiler, source=source, headings=headings, kind="prose", text=text))
        for unit in units:
            chunk = _stat_output_chunk(unit, page, source, headings)
            if chunk is not None:
                chunks.append(chunk)
    return chunks


def _sections(lines: list[str]) -> Iterator[tuple[tuple[str, ...], str, list[str]]]:
    """(heading path, anchor, body lines) per section, with markup-only lines removed.

    perf's pages do not keep AsciiDoc's fixed title levels (topdown.txt underlines its title with
    dashes and its sections with equals signs), so a level is given to each underline character
    in order of first appearance, as reStructuredText does.
    """
    levels: dict[str, int] = {}
    headings: list[str] = []
    anchor = pending_anchor = ""
    body: list[str] = []
    delimiter = ""
    index = 0
    while index < len(lines):
        line = lines[index].expandtabs(8).rstrip()
        if delimiter:
            if line == delimiter:
                delimiter = ""
            else:
                body.append(line)
            index += 1
            continue
        following = lines[index + 1].rstrip() if index + 1 < len(lines) else ""
        if _is_title(line, following):
            if body or headings:
                yield tuple(headings), anchor, body
            level = levels.setdefault(following[0], len(levels))
            del headings[level:]
            headings.append(line.strip())
            anchor, pending_anchor, body = pending_anchor, "", []
            index += 2
            continue
        anchor_match = _ANCHOR.fullmatch(line)
        if anchor_match:
            # An anchor names the section whose title follows; elsewhere it names nothing we cut.
            after = [lines[i].rstrip() if i < len(lines) else "" for i in (index + 1, index + 2)]
            if _is_title(*after):
                pending_anchor = anchor_match.group(1).split(",")[0].strip()
        elif _DELIMITER.fullmatch(line) and (not body or not body[-1]):
            delimiter = line
        elif not (_DIRECTIVE.fullmatch(line) or _BLOCK_ATTRIBUTE.fullmatch(line)):
            body.append(line)
        index += 1
    if body:
        yield tuple(headings), anchor, body


def _is_title(line: str, underline: str) -> bool:
    """True when ``line`` is a section title underlined by ``underline`` (lengths within 3)."""
    return (
        bool(line)
        and not line[0].isspace()
        and _UNDERLINE.fullmatch(underline) is not None
        and _UNDERLINE.fullmatch(line) is None
        and _DELIMITER.fullmatch(line) is None
        and abs(len(line.strip()) - len(underline)) <= 3
    )


def _units(lines: list[str]) -> Iterator[str]:
    """The section's text in units that must not be cut: paragraphs, or whole option entries.

    An option entry runs from its term lines (``-e::``, ``--event=::``) to the next term, across
    blank lines, since an option's text often has several paragraphs and examples.
    """
    unit: list[str] = []
    in_option = False
    terms: list[str] = []
    for line in lines:
        term = _OPTION_TERM.fullmatch(line)
        if term:
            if not terms:
                yield from _flush(unit)
                unit = []
            terms.append(term.group("term").strip())
            in_option = True
            if term.group("text"):
                unit.append(", ".join(terms) + ": " + term.group("text"))
                terms = []
            continue
        if terms:
            unit.append(", ".join(terms))
            terms = []
        if not line and not in_option:
            yield from _flush(unit)
            unit = []
            continue
        unit.append(line)
    if terms:
        unit.append(", ".join(terms))
    yield from _flush(unit)


def _flush(lines: list[str]) -> Iterator[str]:
    """The unit's text without markup or surrounding blank lines; nothing for an empty unit."""
    text = _clean_inline("\n".join(lines)).strip("\n")
    text = re.sub(r"\n{3,}", "\n\n", text)
    if text.strip():
        yield text


def _clean_inline(text: str) -> str:
    """The text without AsciiDoc inline markup: man-page links, cross references, escapes."""
    text = _LINKPERF.sub(r"\1(\2)", text)
    text = _XREF.sub(lambda match: " ".join((match.group(2) or match.group(1)).split()), text)
    text = _URL_WITH_TEXT.sub(r"\2 (\1)", text)
    return text.replace("\\--", "--")


def _pack(units: list[str]) -> Iterator[str]:
    """Units joined into texts of at most about ``_MAX_CHARS`` characters."""
    pieces = (pair for unit in units for pair in _pieces(unit))
    for run in runs(pieces, lambda pair: len(pair[1]), _MAX_CHARS, gap=lambda pair: len(pair[0])):
        yield run[0][1] + "".join(separator + piece for separator, piece in run[1:])


def _pieces(unit: str) -> Iterator[tuple[str, str]]:
    """(separator, text): the unit whole when it fits, else its paragraphs, a long one by lines."""
    if len(unit) <= _MAX_CHARS:
        yield "\n\n", unit
        return
    for paragraph in unit.split("\n\n"):
        if len(paragraph) <= _MAX_CHARS:
            yield "\n\n", paragraph
            continue
        for number, line in enumerate(paragraph.split("\n")):
            yield ("\n\n" if number == 0 else "\n"), line


def _stat_output_chunk(unit: str, page: Page, source: str, headings: tuple[str, ...]) -> Chunk | None:
    """A definitions chunk for the counters a ``perf stat`` output example prints, if any."""
    lines: list[str] = []
    printed_as: dict[str, list[re.Match[str]]] = {}
    for line in unit.split("\n"):
        match = _COUNTER_LINE.fullmatch(line)
        if match is not None:
            lines.append(line)
            printed_as.setdefault(_event_name(match.group("event")), []).append(match)
    if not lines:
        return None
    indent = min(len(line) - len(line.lstrip()) for line in lines)
    text = "Counters in the perf stat output example:\n" + "\n".join(line[indent:] for line in lines)
    definitions = tuple(_counter_definition(term, matches) for term, matches in printed_as.items())
    return Chunk(
        profiler=page.profiler, source=source, headings=headings, kind="definitions", text=text, definitions=definitions
    )


def _event_name(printed: str) -> str:
    """The event a printed counter name stands for: without modifiers (``:u``) or PMU (``cpu_core/../``)."""
    unmodified = _MODIFIERS.sub("", printed)
    pmu_event = _PMU_EVENT.fullmatch(unmodified)
    return pmu_event.group("event") if pmu_event else unmodified


def _counter_definition(term: str, matches: list[re.Match[str]]) -> Definition:
    """The definition of one counter from the example lines that print it.

    A PMU-qualified spelling (``cpu_core/cycles/`` on hybrid CPUs) is kept as an alias.
    """
    spellings = (_MODIFIERS.sub("", match.group("event")) for match in matches)
    aliases = tuple(dict.fromkeys(spelling for spelling in spellings if spelling != term))
    measured = next((m.group("comment").strip() for m in matches if m.group("comment")), "")
    unit = next((m.group("unit") for m in matches if m.group("unit")), "")
    return Definition(term=term, aliases=aliases, measured=measured, unit=unit, context=_STAT_OUTPUT_CONTEXT)
