r"""Reader for manual pages in roff with the man(7) macros, such as perf_event_open(2).

The page's title (``.TH perf_event_open 2`` gives ``perf_event_open(2)``) heads the heading path,
and the sections (``.SH``) and subsections (``.SS``) follow it. A section's name is its anchor,
as man7.org writes it (``RETURN VALUE`` becomes ``#RETURN_VALUE``). Paragraphs are filled into
lines. Examples (``.EX``/``.EE``, ``.nf``/``.fi``) keep their lines. A tagged paragraph (``.TP``,
``.IP`` with a tag, more tags with ``.TQ``) keeps its tag and its body, and whatever ``.RS`` and
``.RE`` indent under it belongs to it. Roff markup becomes plain text:

* font macros lose their fonts: ``.B``/``.I`` join their arguments with spaces, and
  ``.BR``/``.IR``/``.RB``/``.RI``/``.BI``/``.IB`` join them with nothing between;
* font, size and motion escapes (``\fB``, ``\fP``, ``\s-1``) are dropped;
* special characters become what they print (``\-``, ``\[aq]``, ``\(em``, ``\e``);
* comments (``.\"``, ``\"``) are dropped.

A section is cut into chunks between its paragraphs and whole tagged paragraphs. A tagged
paragraph longer than a chunk is cut between the parts of its body. Those parts take its tag as
one more heading (``DESCRIPTION > Arguments > config``). See also is left out.

Tagged paragraphs can define constants that name events. perf names the generic events of
perf_event_open(2) (``PERF_COUNT_HW_CPU_CYCLES``: "Total cycles") otherwise, so they become
definitions under perf's names (:mod:`.perf_event_names`: ``cycles``, ``L1-dcache-load-misses``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..documents import Chunk, Definition, Page
from .perf_event_names import event_definitions
from .sizing import pack, runs, split_long

__all__ = ["read"]

_MAX_CHARS = 3000
_OMITTED_SECTIONS = {"see also", "colophon"}
_BODY_INDENT = "    "

_CONTROL = re.compile(r"^[.']\s*(?P<name>\S*)\s*(?P<rest>.*)$")
_ARGUMENT = re.compile(r'"(?P<quoted>(?:[^"]|"")*)"?|(?P<bare>(?:\\.|[^\s\\])+)')
_ESCAPE = re.compile(
    r"""\\(?:
        (?P<font>f(?:\[[^\]]*\]|\(..|.))
      | (?P<size>s(?:[-+]?\d|\([-+]?\d\d|\[[^\]]*\]|'[^']*'))
      | (?P<motion>[hvwoDlLNbxXZ]'[^']*')
      | (?P<register>[n*$](?:\[[^\]]*\]|\(..|.))
      | \((?P<two>..)
      | \[(?P<bracket>[^\]]*)\]
      | (?P<one>.)
    )""",
    re.X | re.S,
)
_CONSTANT = re.compile(r"[A-Z][A-Z0-9]*_[A-Z0-9_]+")
_BULLET = re.compile(r"|[^\w\s]|\d{1,2}[.)]?|\(?[a-z\d]\)")

# Font macros whose arguments are joined with spaces, and those whose alternate fonts meet.
_SPACED_FONTS = {"B", "I", "SM", "SB"}
_ALTERNATING_FONTS = {"BR", "RB", "BI", "IB", "IR", "RI"}
_PARAGRAPH_MACROS = {"PP", "LP", "P", "HP"}
_VERBATIM_START, _VERBATIM_END = {"EX", "nf"}, {"EE", "fi"}
# Macros and requests that carry no text (indentation, spacing, hyphenation, index entries).
_SILENT = {"in", "PD", "ad", "na", "hy", "nh", "ne", "ft", "ll", "ti", "IX", "ds", "nr", "so", "ps", "vs", "ta", "ss"}
_SPECIAL = {
    "aq": "'",
    "dq": '"',
    "lq": '"',
    "rq": '"',
    "oq": "'",
    "cq": "'",
    "em": "\u2014",
    "en": "\u2013",
    "hy": "-",
    "mi": "-",
    "bu": "\u2022",
    "ha": "^",
    "ti": "~",
    "rs": "\\",
    "ga": "`",
    "ul": "_",
    "at": "@",
    "sh": "#",
    "Do": "$",
    "sl": "/",
    "ba": "|",
    "lB": "[",
    "rB": "]",
    "lC": "{",
    "rC": "}",
    "mu": "\u00d7",
    "di": "\u00f7",
    "pl": "+",
    "eq": "=",
    "+-": "\u00b1",
    ">=": "\u2265",
    "<=": "\u2264",
    "!=": "\u2260",
    "->": "\u2192",
    "<-": "\u2190",
    "co": "\u00a9",
    "rg": "\u00ae",
    "tm": "\u2122",
    "de": "\u00b0",
    "sc": "\u00a7",
    "Fo": "\u00ab",
    "Fc": "\u00bb",
    "R": "\u00ae",
    "Tm": "\u2122",
}
_ONE_CHARACTER = {
    "-": "-",
    "e": "\\",
    "E": "\\",
    "\\": "\\",
    " ": " ",
    "~": " ",
    "0": " ",
    "t": " ",
    "'": "'",
    "`": "`",
    ".": ".",
    "&": "",
    "%": "",
    "|": "",
    "^": "",
    "c": "",
    ")": "",
    ":": "",
    "d": "",
    "u": "",
    "p": "",
    "r": "",
    "\n": "",
}


# --------------------------------------------------------------------------------------------
# The page as a tree: sections of paragraphs, examples and tagged paragraphs
# --------------------------------------------------------------------------------------------


@dataclass
class _Paragraph:
    lines: list[list[str]] = field(default_factory=lambda: [[]])

    def text(self) -> str:
        return "\n".join(" ".join(words) for words in self.lines if words)


@dataclass
class _Example:
    lines: list[str] = field(default_factory=list)


@dataclass
class _Tagged:
    tags: list[str] = field(default_factory=list)
    blocks: list[_Block] = field(default_factory=list)

    @property
    def tag(self) -> str:
        return ", ".join(tag for tag in self.tags if tag)


_Block = _Paragraph | _Example | _Tagged


@dataclass
class _Section:
    headings: tuple[str, ...]
    anchor: str
    blocks: list[_Block] = field(default_factory=list)


@dataclass
class _Level:
    """One ``.RS`` level: where its blocks go, and whether the last tagged paragraph there is open
    (``.IP`` with no tag continues it; ``.PP`` closes it)."""

    blocks: list[_Block]
    tagged_open: bool = False


class _Parser:
    """Reads the page's lines into sections of blocks."""

    def __init__(self) -> None:
        self.title = ""
        self.sections: list[_Section] = [_Section(headings=(), anchor="")]
        self.levels = [_Level(self.sections[0].blocks)]
        self.paragraph: _Paragraph | None = None
        self.example: _Example | None = None
        self.pending: str = ""  # what the next text line is: "heading:SH", "heading:SS", "tag"
        self.link: list[str] = []

    # -- where text goes ------------------------------------------------------------------

    @property
    def level(self) -> _Level:
        return self.levels[-1]

    def _container(self) -> list[_Block]:
        """The blocks new text joins: the open tagged paragraph's body, else the level's."""
        last = self.level.blocks[-1] if self.level.blocks else None
        if self.level.tagged_open and isinstance(last, _Tagged):
            return last.blocks
        return self.level.blocks

    def _break(self) -> None:
        self.paragraph = None

    def text(self, text: str) -> None:
        """One line of text (from a text line or a font macro)."""
        if self.pending.startswith("heading:"):
            self._heading(self.pending.split(":")[1], text)
            return
        if self.pending == "tag":
            self.pending = ""
            item = self.level.blocks[-1] if self.level.blocks else None
            if isinstance(item, _Tagged):
                item.tags.append(" ".join(text.split()))
            return
        if self.example is not None:
            self.example.lines.append(text.rstrip())
            return
        if not text.strip():
            self._break()
            return
        if self.paragraph is None:
            self.paragraph = _Paragraph()
            self._container().append(self.paragraph)
        self.paragraph.lines[-1].extend(text.split())

    # -- macros ------------------------------------------------------------------------------

    def macro(self, name: str, arguments: list[str]) -> None:
        if name in _SPACED_FONTS or name in _ALTERNATING_FONTS:
            if arguments:
                self.text((" " if name in _SPACED_FONTS else "").join(arguments))
        elif name in ("SH", "SS"):
            self._end_example()
            if arguments:
                self._heading(name, " ".join(arguments))
            else:
                self.pending = f"heading:{name}"
        elif name == "TH":
            if arguments:
                self.title = f"{arguments[0]}({arguments[1]})" if len(arguments) > 1 else arguments[0]
        elif name in _PARAGRAPH_MACROS:
            self._break()
            self.level.tagged_open = False
        elif name == "TP":
            self._tagged(None)
        elif name == "TQ":
            self._break()
            self.pending = "tag"
        elif name == "IP":
            self._tagged(arguments[0] if arguments and arguments[0].strip() else "")
        elif name == "RS":
            self._break()
            last = self.level.blocks[-1] if self.level.blocks else None
            blocks = last.blocks if isinstance(last, _Tagged) else self.level.blocks
            self.levels.append(_Level(blocks))
        elif name == "RE":
            self._break()
            if len(self.levels) > 1:
                self.levels.pop()
        elif name in _VERBATIM_START:
            self._break()
            self.example = _Example()
            self._container().append(self.example)
        elif name in _VERBATIM_END:
            self._end_example()
        elif name in ("br", "sp"):
            if name == "sp" or self.paragraph is None:
                self._break()
            else:
                self.paragraph.lines.append([])
        elif name in ("UR", "MT"):
            self.link.append(arguments[0] if arguments else "")
        elif name in ("UE", "ME"):
            target = self.link.pop() if self.link else ""
            if target:
                self.text(f"<{target}>" + "".join(arguments))
        # other requests (.in, .PD, .ad, ...) carry no text

    def _tagged(self, tag: str | None) -> None:
        """``.TP`` (tag on the next line), ``.IP tag``, or ``.IP`` alone (continues the open one)."""
        self._break()
        self._end_example()
        if tag == "":
            return  # the next paragraph joins the open tagged paragraph, or the level
        self.level.blocks.append(_Tagged(tags=[tag] if tag else []))
        self.level.tagged_open = True
        if tag is None:
            self.pending = "tag"

    def _heading(self, macro: str, text: str) -> None:
        self.pending = ""
        self._break()
        self._end_example()
        title = " ".join(text.split())
        top = self.sections[-1].headings[:1] if macro == "SS" and self.sections[-1].headings else ()
        anchor = self.sections[-1].anchor if macro == "SS" else re.sub(r"\s+", "_", title)
        self.sections.append(_Section(headings=(*top, title), anchor=anchor))
        self.levels = [_Level(self.sections[-1].blocks)]

    def _end_example(self) -> None:
        self.example = None


def _parse(text: str) -> tuple[str, list[_Section]]:
    parser = _Parser()
    lines = _joined_lines(text)
    index = 0
    while index < len(lines):
        line = _without_comment(lines[index])
        index += 1
        control = _CONTROL.match(line) if line[:1] in (".", "'") else None
        if control is None:
            parser.text(_plain(line))
            continue
        name = control.group("name")
        if name in ("de", "ig"):  # a macro definition or ignored block runs to ".."
            while index < len(lines) and lines[index].strip() != "..":
                index += 1
            index += 1
            continue
        if not name or name in _SILENT:
            continue
        parser.macro(name, [_plain(argument) for argument in _arguments(control.group("rest"))])
    title = parser.title
    sections = [s for s in parser.sections if s.blocks]
    return title, sections


def _joined_lines(text: str) -> list[str]:
    """The page's lines, a line ending in an escaped newline joined to the next."""
    lines: list[str] = []
    carry = ""
    for line in text.splitlines():
        line = carry + line
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            carry = line[:-1]
            continue
        carry = ""
        lines.append(line)
    if carry:
        lines.append(carry)
    return lines


def _without_comment(line: str) -> str:
    r"""The line up to a ``\"`` comment (an escaped backslash before a quote is no comment)."""
    for escape in re.finditer(r"\\(.)", line):
        if escape.group(1) == '"':
            return line[: escape.start()]
    return line


def _arguments(rest: str) -> list[str]:
    """A macro's arguments: words, or double-quoted strings (``""`` inside is one quote)."""
    found = []
    for match in _ARGUMENT.finditer(rest):
        quoted = match.group("quoted")
        found.append(quoted.replace('""', '"') if quoted is not None else match.group("bare"))
    return found


def _plain(text: str) -> str:
    """The text as roff prints it, without fonts: escapes replaced by the characters they stand for."""
    return _ESCAPE.sub(_replacement, text)


def _replacement(escape: re.Match[str]) -> str:
    if escape.group("two") is not None:
        return _SPECIAL.get(escape.group("two"), "")
    bracket = escape.group("bracket")
    if bracket is not None:
        if re.fullmatch(r"u[0-9A-Fa-f]{4,6}", bracket):
            return chr(int(bracket[1:], 16))
        return _SPECIAL.get(bracket, "")
    register = escape.group("register")
    if register is not None:
        name = register[1:].strip("[]()")
        return _SPECIAL.get(name, "") if register[0] == "*" else ""
    one = escape.group("one")
    if one is not None:
        return _ONE_CHARACTER.get(one, one)
    return ""  # fonts, sizes, motions


# --------------------------------------------------------------------------------------------
# Chunks
# --------------------------------------------------------------------------------------------


def read(page: Page) -> list[Chunk]:
    """The page's chunks: prose per section, and definitions for the generic events perf names."""
    title, sections = _parse(page.text)
    chunks: list[Chunk] = []
    described: dict[str, tuple[str, tuple[str, ...], str]] = {}
    for section in sections:
        if section.headings and section.headings[0].lower() in _OMITTED_SECTIONS:
            continue
        headings = ((title,) if title else ()) + section.headings
        source = f"{page.url}#{section.anchor}" if section.anchor else page.url
        for path, texts in _by_headings(_units(section.blocks, headings)):
            for text in pack(texts, _MAX_CHARS, "\n\n"):
                chunks.append(Chunk(profiler=page.profiler, source=source, headings=path, kind="prose", text=text))
        for item, where in _tagged_paragraphs(section.blocks, headings):
            constant = _CONSTANT.match(item.tag)
            if constant and constant.group() not in described:
                described[constant.group()] = (_description(item), where, source)
    chunks.extend(_event_chunks(page, described))
    return chunks


def _units(blocks: list[_Block], headings: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], str]]:
    """(heading path, text) of each block that fits in a chunk; a longer tagged paragraph gives
    the units of its body under its tag, a longer paragraph or example its pieces."""
    for block in blocks:
        text = _render(block)
        if not text.strip():
            continue
        if len(text) <= _MAX_CHARS:
            yield headings, text
        elif isinstance(block, _Tagged) and block.blocks:
            yield from _units(block.blocks, (*headings, block.tag or "(untitled)"))
        else:
            for piece in pack(split_long(text, _MAX_CHARS), _MAX_CHARS, "\n"):
                yield headings, piece


def _by_headings(units: Iterator[tuple[tuple[str, ...], str]]) -> Iterator[tuple[tuple[str, ...], list[str]]]:
    """Consecutive units of one heading path, together."""
    path: tuple[str, ...] | None = None
    texts: list[str] = []
    for headings, text in units:
        if texts and headings != path:
            yield path or (), texts
            texts = []
        path = headings
        texts.append(text)
    if texts:
        yield path or (), texts


def _render(block: _Block, indent: str = "") -> str:
    if isinstance(block, _Paragraph):
        return "\n".join(indent + line for line in block.text().split("\n") if line)
    if isinstance(block, _Example):
        return "\n".join(indent + line if line else "" for line in _dedent(block.lines))
    body = "\n".join(text for child in block.blocks if (text := _render(child, indent + _BODY_INDENT)))
    tag = block.tag
    if _BULLET.fullmatch(tag) and body:  # a bullet or a number: the item's text follows it on its line
        return f"{indent}{tag} {body.lstrip()}" if tag else body
    return f"{indent}{tag}\n{body}" if body else indent + tag


def _dedent(lines: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    indent = min((len(line) - len(line.lstrip()) for line in lines if line.strip()), default=0)
    return [line[indent:] for line in lines]


def _tagged_paragraphs(blocks: list[_Block], headings: tuple[str, ...]) -> Iterator[tuple[_Tagged, tuple[str, ...]]]:
    """Every tagged paragraph, however deep, with the heading path of the tags it sits under."""
    for block in blocks:
        if isinstance(block, _Tagged):
            yield block, headings
            yield from _tagged_paragraphs(block.blocks, (*headings, block.tag))


def _description(item: _Tagged) -> str:
    """What a tagged paragraph's own paragraphs say, on one line (examples and nested tags left out)."""
    return " ".join(" ".join(block.text().split()) for block in item.blocks if isinstance(block, _Paragraph))


def _event_chunks(page: Page, described: dict[str, tuple[str, tuple[str, ...], str]]) -> list[Chunk]:
    """Definitions chunks for the events perf names, grouped where their constants are described."""
    texts = {constant: text for constant, (text, _where, _source) in described.items()}
    grouped: dict[tuple[tuple[str, ...], str], list[Definition]] = {}
    for constant, definition in event_definitions(texts):
        _text, where, source = described[constant]
        grouped.setdefault((where, source), []).append(definition)
    chunks = []
    for (where, source), definitions in grouped.items():
        for part in runs(definitions, lambda d: len(_line(d)) + 1, _MAX_CHARS):
            chunks.append(
                Chunk(
                    profiler=page.profiler,
                    source=source,
                    headings=where,
                    kind="definitions",
                    text="\n".join(_line(d) for d in part),
                    definitions=tuple(part),
                )
            )
    return chunks


def _line(definition: Definition) -> str:
    aliases = f" ({', '.join(definition.aliases)})" if definition.aliases else ""
    return f"{definition.term}{aliases}: {definition.text} [{definition.measured}]"
