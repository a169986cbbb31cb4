"""Reading cachegrind's text reports: cg_annotate output and the summary valgrind prints on exit.

Both give event totals for the whole program; cg_annotate also gives them per function, for the
functions above its threshold and only for the events it was told to show. Layouts read here:

* Perl cg_annotate (valgrind 3.20 and older): a header block (``Events shown:`` ...), a totals row
  ending in ``PROGRAM TOTALS``, then a ``file:function`` table, one row per (file, function).
* Python cg_annotate (3.21 and newer): ``-- Metadata``, ``-- Summary`` (the ``PROGRAM TOTALS``
  row), ``-- File:function summary`` (``<`` rows) and ``-- Function:file summary``, whose ``>``
  rows hold each function's total over its files; that is the section read per function.
* The exit summary (``==PID== I   refs: 110,947``, ``D1  misses: 1,638 ( 1,180 rd + 458 wr)``,
  ``Branches:`` ...), from which the read/write and conditional/indirect parts give the events.

Numbers are comma-grouped and may be followed by ``(12.3%)`` or ``(own%, cumulative%)``.
Annotated source lines, which repeat the counts line by line, are not read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import attrs

from pragma_core.errors import ProfileParseError

from .metrics import LEGACY_EVENTS

__all__ = ["TextReport", "looks_like_annotate", "looks_like_exit_summary", "read_annotate", "read_exit_summary"]

_PERCENT = r"\(\s*\d+(?:\.\d+)?%(?:,\s*\d+(?:\.\d+)?%)?\s*\)"
_CELL = re.compile(rf"\s*(\d[\d,]*(?:\s*{_PERCENT})?|\.)(?=\s|$)")
_RULE = re.compile(r"^-{20,}\s*$")
_EXIT_LINE = re.compile(r"^==\d+==\s+(?P<label>[A-Za-z0-9 ]+?)\s*:\s+(?P<rest>\S.*)$")
# exit summary label -> the events its total (and its two parts in parentheses) stand for
_EXIT_EVENTS: dict[str, tuple[str, ...]] = {
    "I refs": ("Ir",),
    "I1 misses": ("I1mr",),
    "LLi misses": ("ILmr",),
    "L2i misses": ("ILmr",),
    "D refs": ("Dr", "Dw"),
    "D1 misses": ("D1mr", "D1mw"),
    "LLd misses": ("DLmr", "DLmw"),
    "L2d misses": ("DLmr", "DLmw"),
    "Branches": ("Bc", "Bi"),
    "Mispredicts": ("Bcm", "Bim"),
}


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class TextReport:
    """Event totals read from a text report: the program's, and per function where the report has them."""

    events: tuple[str, ...] = attrs.field(converter=_strings)
    totals: dict[str, int]
    functions: dict[str, dict[str, int]] = attrs.field(factory=dict)


def looks_like_annotate(raw: str) -> bool:
    return re.search(r"\sPROGRAM TOTALS\s*$", raw, re.MULTILINE) is not None


def looks_like_exit_summary(raw: str) -> bool:
    return re.search(r"^==\d+==\s+I\s+refs:", raw, re.MULTILINE) is not None


def read_annotate(raw: str) -> TextReport:
    """Totals and per-function counts from cg_annotate output (Perl or Python layout)."""
    lines = raw.splitlines()
    shown = _events_shown(lines)
    totals_row = next((line for line in lines if re.search(r"\sPROGRAM TOTALS\s*$", line)), None)
    if totals_row is None:
        raise ProfileParseError("cg_annotate output without a 'PROGRAM TOTALS' row")
    counts, _label = _row(totals_row, len(shown), "the PROGRAM TOTALS row")
    totals = dict(zip(shown, counts))

    functions: dict[str, dict[str, int]] = {}
    python_layout = any(line.startswith("-- Function:file summary") for line in lines)
    rows = _python_functions(lines, shown) if python_layout else _perl_functions(lines, shown)
    for function, counts in rows:
        sums = functions.setdefault(function, dict.fromkeys(shown, 0))
        for event, count in zip(shown, counts):
            sums[event] += count
    return TextReport(events=shown, totals=totals, functions=functions)


def read_exit_summary(raw: str) -> TextReport:
    """Totals from the summary valgrind's cachegrind prints on exit (stderr or ``--log-file``)."""
    totals: dict[str, int] = {}
    for line in raw.splitlines():
        match = _EXIT_LINE.match(line)
        if not match:
            continue
        label = " ".join(match["label"].split())
        events = _EXIT_EVENTS.get(label)
        if events is None:
            continue  # rates, LL refs and misses: derived, recomputed from the counts
        numbers = [int(text.replace(",", "")) for text in re.findall(r"\d[\d,]*", match["rest"])]
        if len(events) == 1 and numbers:
            totals[events[0]] = numbers[0]
        elif len(numbers) >= 3:  # total (first part + second part)
            totals.update(zip(events, numbers[1:3]))
        else:
            raise ProfileParseError(f"cachegrind summary line without its two parts in parentheses: {line.strip()!r}")
    if "Ir" not in totals:
        raise ProfileParseError("cachegrind exit summary without an 'I refs:' line")
    return TextReport(events=tuple(totals), totals=totals)


def _events_shown(lines: list[str]) -> tuple[str, ...]:
    for line in lines:
        if line.startswith("Events shown:"):
            names = line[len("Events shown:") :].split()
            if names:
                return tuple(LEGACY_EVENTS.get(name, name) for name in names)
    raise ProfileParseError("cg_annotate output without an 'Events shown:' line, so its columns are unknown")


def _row(line: str, columns: int, what: str) -> tuple[list[int], str]:
    """The counts of the first ``columns`` cells of a table row (``.`` is 0) and the label after them."""
    position = 0
    counts: list[int] = []
    for _ in range(columns):
        match = _CELL.match(line, position)
        if match is None:
            raise ProfileParseError(f"{what} has fewer than {columns} count columns: {line.strip()[:100]!r}")
        cell = match[1]
        counts.append(0 if cell == "." else int(cell.split("(")[0].strip().replace(",", "")))
        position = match.end()
    return counts, line[position:].strip()


def _perl_functions(lines: list[str], shown: tuple[str, ...]) -> Iterator[tuple[str, list[int]]]:
    """``(function, counts)`` from the ``file:function`` table: rows up to the first blank line."""
    try:
        start = next(index for index, line in enumerate(lines) if line.rstrip().endswith(" file:function"))
    except StopIteration:
        return
    index = start + 1
    if index < len(lines) and _RULE.match(lines[index]):
        index += 1
    while index < len(lines) and lines[index].strip() and not _RULE.match(lines[index]):
        counts, label = _row(lines[index], len(shown), "a file:function row")
        _file, _colon, function = label.partition(":")  # files rarely hold ':'; C++ names often do
        yield function or label, counts
        index += 1


def _python_functions(lines: list[str], shown: tuple[str, ...]) -> Iterator[tuple[str, list[int]]]:
    """``(function, counts)`` from the ``>`` rows of the ``-- Function:file summary`` section."""
    start = next(index for index, line in enumerate(lines) if line.startswith("-- Function:file summary"))
    for line in lines[start + 1 :]:
        if line.startswith("-- "):
            break
        if line.startswith(">"):
            counts, label = _row(line[1:], len(shown), "a function:file row")
            function = label.rpartition(":")[0]  # "name:file" or "name:" when files follow below
            yield function or label, counts
