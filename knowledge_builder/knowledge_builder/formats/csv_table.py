"""Reader for CSV files: metric tables with descriptions, or sample tables to show as they are.

The header decides. A table with a metric-name column and a description column defines metrics
(Intel's TMA spreadsheets ``TMA_Metrics-full.csv``, ``E-core_TMA_Metrics.csv``, ``Atom_TMA.csv``):
each named row becomes a :class:`Definition`. Such a file may open with rows of its own before the
header (a title and a version), so the header is the first row that has both columns.

The TMA spreadsheets name a node of the TMA tree in the column of its level (``Level1`` to
``Level6``), group rows by a ``Key`` (``FE``, ``BE/Mem``, ``Info.Thread``), and give one formula
column per CPU model between the names and the description, newest model first. Rows in the
``Aux`` group, and names starting with ``#``, are helper quantities the formulas use: they become
glossary terms when described.

Any other CSV (a tool's output sample, a CPU map) becomes one table chunk: its header and first
rows.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import PurePosixPath

from ..documents import Chunk, Definition, Page
from .sizing import runs

__all__ = ["read"]

_MAX_CHARS = 3000
_SAMPLE_ROWS = 20
_HEADER_SEARCH_ROWS = 10
_LEVEL_COLUMN = re.compile(r"level\s*\d+", re.IGNORECASE)
_NAME_HEADERS = {
    "name",
    "metric",
    "metric name",
    "metricname",
    "metric_name",
    "counter",
    "counter name",
    "counter_name",
    "event",
    "event name",
    "eventname",
}
_GROUP_HEADERS = {"key", "category", "group"}
_ATTRIBUTE_HEADERS = {"locate-with", "count domain"}
# Spreadsheet bookkeeping (revision, release flavor, tool routing) that tells a reader nothing.
_BOOKKEEPING_HEADERS = {"version", "flavor", "level", "tool;bot;", "toolalias", "attribute"}
_NOT_AVAILABLE = {"", "#na", "n/a", "-"}
_SECTION_MARKER = "."
_HELPER_GROUP = "aux"


def read(page: Page) -> list[Chunk]:
    """Definitions chunks for a metric table; a single table chunk for any other CSV."""
    reader = csv.reader(io.StringIO(page.text.lstrip("\ufeff")))
    rows = [row for row in reader if any(cell.strip() for cell in row)]
    if not rows:
        return []
    for index, row in enumerate(rows[:_HEADER_SEARCH_ROWS]):
        layout = _Layout.of(row)
        if layout is not None:
            return _definition_chunks(page, layout, rows[index + 1 :])
    return [_sample_chunk(page, rows)]


class _Layout:
    """Where a metric table keeps names, description, group, per-model formulas and other facts."""

    def __init__(self, header: list[str], names: list[int], description: int) -> None:
        self.header = [cell.strip() for cell in header]
        self.names = names
        self.description = description
        lowered = [cell.lower() for cell in self.header]
        self.group = next((i for i, cell in enumerate(lowered) if cell in _GROUP_HEADERS), None)
        self.formulas = [
            i for i in range(names[-1] + 1, description) if lowered[i] not in _ATTRIBUTE_HEADERS and self.header[i]
        ]
        self.facts = [
            i
            for i, cell in enumerate(self.header)
            if cell
            and lowered[i] not in _BOOKKEEPING_HEADERS
            and i not in names
            and i not in self.formulas
            and i not in (description, self.group)
        ]

    @classmethod
    def of(cls, header: list[str]) -> _Layout | None:
        """The layout a header row gives, or None when it has no name or no description column."""
        lowered = [cell.strip().lower() for cell in header]
        description = next((i for i, cell in enumerate(lowered) if "description" in cell), None)
        levels = [i for i, cell in enumerate(lowered) if _LEVEL_COLUMN.fullmatch(cell)]
        names = levels or [i for i, cell in enumerate(lowered) if cell in _NAME_HEADERS][:1]
        if description is None or not names or names[-1] > description:
            return None
        return cls(header, names, description)

    def cell(self, row: list[str], index: int | None) -> str:
        """The row's cell at ``index``, whitespace collapsed ("" when absent)."""
        return " ".join(row[index].split()) if index is not None and index < len(row) else ""

    def name(self, row: list[str]) -> tuple[int, str]:
        """(depth, name): the row's name and the index of the name column that holds it."""
        return next(
            ((depth, self.cell(row, column)) for depth, column in enumerate(self.names) if self.cell(row, column)),
            (0, ""),
        )


def _definition_chunks(page: Page, layout: _Layout, rows: list[list[str]]) -> list[Chunk]:
    """One definitions chunk (or several, for a large group) per group of named rows."""
    groups: dict[str, list[tuple[Definition, str]]] = {}
    ancestors: list[str] = []
    for row in rows:
        group = layout.cell(row, layout.group)
        depth, name = layout.name(row)
        if not name or group == _SECTION_MARKER:
            continue
        del ancestors[depth:]
        path = [group, *ancestors] if group else ancestors
        ancestors.append(name)
        description = layout.cell(row, layout.description)
        if description.lower() in _NOT_AVAILABLE:
            description = ""
        helper = group.lower() == _HELPER_GROUP or name.startswith("#")
        if helper and not description:
            continue
        formulas = [
            (layout.header[i], layout.cell(row, i))
            for i in layout.formulas
            if layout.cell(row, i).lower() not in _NOT_AVAILABLE
        ]
        definition = Definition(
            term=name,
            text=description,
            measured=formulas[0][1] if formulas else "",
            context=" > ".join(path),
            role="glossary" if helper else "metric",
        )
        facts = [(layout.header[i], layout.cell(row, i)) for i in layout.facts if layout.cell(row, i)]
        if formulas:
            facts.insert(0, (f"Formula ({formulas[0][0]})", formulas[0][1]))
        groups.setdefault(group, []).append((definition, _render(definition, facts)))
    title = _file_name(page)
    chunks: list[Chunk] = []
    for group, members in groups.items():
        headings = (title, group) if group else (title,)
        # Each row's text counts with the blank line that follows it.
        for run in runs(members, lambda member: len(member[1]) + 2, _MAX_CHARS):
            chunks.append(
                Chunk(
                    profiler=page.profiler,
                    source=page.url,
                    headings=headings,
                    kind="definitions",
                    text="\n\n".join(text for _, text in run),
                    definitions=tuple(definition for definition, _ in run),
                )
            )
    return chunks


def _render(definition: Definition, facts: list[tuple[str, str]]) -> str:
    """One row as text a model reads: its name, description and the table's other facts."""
    lines = [definition.term]
    if definition.context:
        lines[0] += f" ({definition.context})"
    if definition.text:
        lines.append(f"  {definition.text}")
    lines += [f"  {label}: {value}" for label, value in facts]
    return "\n".join(lines)


def _sample_chunk(page: Page, rows: list[list[str]]) -> Chunk:
    """The table's header and first rows, rendered ``a | b``, within about ``_MAX_CHARS``."""
    lines = [" | ".join(cell.strip() for cell in rows[0])]
    shown = 0
    for row in rows[1 : _SAMPLE_ROWS + 1]:
        line = " | ".join(cell.strip() for cell in row)
        if len("\n".join(lines)) + len(line) > _MAX_CHARS:
            break
        lines.append(line)
        shown += 1
    if shown < len(rows) - 1:
        lines.append(f"({len(rows) - 1 - shown} more rows)")
    return Chunk(
        profiler=page.profiler, source=page.url, headings=(_file_name(page),), kind="table", text="\n".join(lines)
    )


def _file_name(page: Page) -> str:
    """The file's name, as the heading of its chunks."""
    return PurePosixPath(page.path or page.url.split("#")[0]).name
