"""Reading what ncu prints: metrics per kernel launch, and the rule results of its details page.

Three layouts are understood, whatever surrounds them (``==PROF==`` lines, the profiled program's
own output before, between and even inside ncu's lines):

* the wide raw page, ``--csv --page raw``: a header row of fixed columns then one column per
  metric, a row of units, one row per launch;
* the long details page, ``--csv`` (``--page details``): one row per (launch, section, metric),
  rule results in rows of their own, rows of 16 and of 20 fields;
* the human-readable details page, in its 2019-era, 2021/2022 and 2023+ layouts: kernel lines,
  ``Section:`` tables and ``OPT``/``WRN``/``INF`` rule text.

:func:`parse` gives the numeric metrics, :func:`rules` the rule results. A kernel launched several
times is told apart by its ncu launch ID: ``vecAdd#0``, ``vecAdd#1``. Values that are not numbers
(``CachePreferNone``, ``(!) n/a``, per-instance lists ``32; 32; 4``) are not metrics.
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from collections.abc import Iterable

import attrs

from pragma_core.errors import ProfileParseError
from pragma_core.records import Metric

from .metrics import meaning_of
from .units import normalize, number

__all__ = ["PROFILER_NAME", "Rule", "Entry", "Reading", "read", "parse", "rules"]

PROFILER_NAME = "ncu"

# Columns of the CSV pages that describe the launch rather than measure it.
_FIXED_COLUMNS = frozenset(
    {
        "ID",
        "Process ID",
        "Process Name",
        "Host Name",
        "Kernel Name",
        "Kernel Time",
        "Context",
        "Stream",
        "Block Size",
        "Grid Size",
        "Device",
        "CC",
        "Section Name",
        "Metric Name",
        "Metric Unit",
        "Metric Value",
        "Rule Name",
        "Rule Type",
        "Rule Description",
        "Estimated Speedup Type",
        "Estimated Speedup",
    }
)
_KERNEL_LINE = re.compile(
    r"^  (?P<name>\S.*?)"
    r"(?: \(\d+, \d+, \d+\)x\(\d+, \d+, \d+\))?"  # grid x block, 2023 and later
    r"(?:, \d{4}-[A-Za-z]{3}-\d{1,2} \d{1,2}:\d{2}:\d{2})?"  # timestamp, 2022 and before
    r", Context \d+, Stream \d+\b"
)
_SECTION_LINE = re.compile(r"^ +Section: (?P<name>.+?)\s*$")
_SEPARATOR = re.compile(r"^ +-+(?: +-+)+\s*$")
_RULE_LINE = re.compile(r"^(?P<indent> +)(?P<kind>OPT|WRN|INF|ERR) {2,}(?P<text>.*?)\s*$")
_SPEEDUP = re.compile(r"^(?:Est\.|Estimated) +(?:(?P<type>Local|Global) +)?Speedup: *(?P<value>[0-9.,]+) *% *")
_TOOL_MESSAGE = re.compile(r"^==(?:ERROR|WARNING)==.*")


@attrs.frozen(kw_only=True)
class Rule:
    """One rule result of ncu's details page: advice on a kernel, with the speedup ncu expects.

    ``kind`` is ncu's tag: ``OPT`` (an optimization opportunity), ``WRN`` (a warning, before
    2023), ``INF`` (information) or ``ERR``. ``name`` is the rule's identifier (``SOLBottleneck``),
    printed by the CSV page only. ``speedup_pct`` is ncu's estimate of the time it would save, and
    ``speedup_type`` says over what: ``local`` (this part of the kernel) or ``global``.
    """

    kind: str
    text: str
    kernel: str = ""
    section: str = ""
    name: str = ""
    speedup_pct: float | None = None
    speedup_type: str = ""

    def describe(self) -> str:
        """One line for a profile's notes: ``OPT kernel (Occupancy): text [est. speedup 21.6% local]``."""
        kernel = self.kernel if len(self.kernel) <= 80 else self.kernel[:77] + "..."
        where = f" ({self.section})" if self.section else ""
        estimate = ""
        if self.speedup_pct is not None:
            kind = f" {self.speedup_type}" if self.speedup_type else ""
            estimate = f" [est. speedup {self.speedup_pct:g}%{kind}]"
        return f"{self.kind} {kernel}{where}: {self.text}{estimate}"


@attrs.frozen(kw_only=True)
class Entry:
    """One value ncu printed for a launch, as printed (numbers, strings, ``n/a`` alike)."""

    kernel: str
    name: str
    unit: str
    text: str
    section: str = ""


@attrs.frozen(kw_only=True)
class Reading:
    """Everything read from one ncu output: launches (as kernel labels), values and rule results."""

    layout: str
    kernels: tuple[str, ...]
    entries: tuple[Entry, ...]
    rules: tuple[Rule, ...] = ()

    def metrics(self) -> list[Metric]:
        """The entries that are one finite number, in base units, with their meaning."""
        found = []
        for entry in self.entries:
            value = number(entry.text)
            if value is None:
                continue
            amount, unit = normalize(value, entry.unit)
            found.append(
                Metric(
                    name=entry.name,
                    value=amount,
                    unit=unit,
                    kernel=entry.kernel,
                    profiler=PROFILER_NAME,
                    meaning=meaning_of(entry.name, unit),
                )
            )
        return found


def parse(raw: str) -> list[Metric]:
    """The numeric metrics of any ncu output pragma knows; ProfileParseError for anything else."""
    metrics = read(raw).metrics()
    if not metrics:
        raise ProfileParseError("ncu output holds kernel launches but no numeric metric value")
    return metrics


def rules(raw: str) -> list[Rule]:
    """The rule results (OPT/WRN/INF advice) of a details page; none on the raw page."""
    return list(read(raw).rules)


def read(raw: str) -> Reading:
    """Find the layout of ``raw`` and read it; ProfileParseError saying what was seen otherwise."""
    lines = raw.splitlines()
    header = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if header is not None:
        reading = _read_csv(lines[header:])
    else:
        reading = _read_details_text(lines)
    if not reading.kernels:
        raise ProfileParseError(_nothing_found(lines, csv_header=header is not None))
    return reading


# -- CSV pages ------------------------------------------------------------------------------------


def _read_csv(lines: list[str]) -> Reading:
    rows = csv.reader(line for line in lines if not line.startswith("=="))
    columns = next(rows)
    index = {name: position for position, name in enumerate(columns)}
    if "Kernel Name" not in index:
        raise ProfileParseError(f'ncu CSV header has no "Kernel Name" column: {lines[0][:120]!r}')

    def field(row: list[str], name: str) -> str:
        position = index.get(name)
        return row[position] if position is not None and position < len(row) else ""

    launches: dict[int, str] = {}
    units: list[str] = []
    pending: list[tuple[int, Entry]] = []
    found_rules: list[tuple[int, Rule]] = []
    long_form = "Metric Value" in index
    for row in rows:
        if not row:
            continue
        if not row[0].isdigit():
            if row[0] == "" and not launches and not long_form:
                units = row  # the raw page's second row
            continue
        launch = int(row[0])
        launches.setdefault(launch, field(row, "Kernel Name"))
        if not long_form:
            for position, name in enumerate(columns):
                if name in _FIXED_COLUMNS or position >= len(row):
                    continue
                unit = units[position] if position < len(units) else ""
                pending.append((launch, Entry(kernel="", name=name, unit=unit, text=row[position])))
            continue
        section = field(row, "Section Name")
        if field(row, "Metric Name"):
            pending.append(
                (
                    launch,
                    Entry(
                        kernel="",
                        name=field(row, "Metric Name"),
                        unit=field(row, "Metric Unit"),
                        text=field(row, "Metric Value"),
                        section=section,
                    ),
                )
            )
        if field(row, "Rule Type") or field(row, "Rule Name"):
            speedup = number(field(row, "Estimated Speedup"))
            found_rules.append(
                (
                    launch,
                    Rule(
                        kind=field(row, "Rule Type"),
                        text=" ".join(field(row, "Rule Description").split()),
                        section=section,
                        name=field(row, "Rule Name"),
                        speedup_pct=float(speedup) if speedup is not None else None,
                        speedup_type=field(row, "Estimated Speedup Type"),
                    ),
                )
            )
    return _finish("details-csv" if long_form else "raw-csv", launches, pending, found_rules)


# -- the human-readable details page ---------------------------------------------------------------


@attrs.define
class _RuleText:
    launch: int
    section: str
    kind: str
    indent: int
    lines: list[str]

    def rule(self) -> tuple[int, Rule]:
        text = " ".join(" ".join(self.lines).split())
        speedup, speedup_type = None, ""
        match = _SPEEDUP.match(text)
        if match:
            speedup = float(match["value"].replace(",", ""))
            speedup_type = (match["type"] or "").lower()
            text = text[match.end() :]
        return self.launch, Rule(
            kind=self.kind, text=text, section=self.section, speedup_pct=speedup, speedup_type=speedup_type
        )


def _read_details_text(lines: list[str]) -> Reading:
    launches: dict[int, str] = {}
    pending: list[tuple[int, Entry]] = []
    found_rules: list[tuple[int, Rule]] = []
    launch: int | None = None
    section = ""
    after_section = False
    widths: list[int] | None = None  # set while inside a metric table
    header_seen, rows_seen = False, 0
    rule: _RuleText | None = None

    def end_rule() -> None:
        nonlocal rule
        if rule is not None:
            found_rules.append(rule.rule())
            rule = None

    for line in lines:
        stripped = line.strip()
        if widths is not None:  # inside a table: rows until the closing separator
            if _SEPARATOR.match(line):
                if not (header_seen and rows_seen == 0):
                    widths = None
                continue
            if not stripped or not line.startswith("  "):
                continue  # program output interleaved with the table
            if rows_seen == 0 and stripped.startswith("Metric Name") and "Metric Value" in stripped:
                header_seen = True
                continue
            cells = _cells(line, widths)
            if cells is not None and launch is not None:
                name, unit, text = cells
                pending.append((launch, Entry(kernel="", name=name, unit=unit, text=text, section=section)))
            rows_seen += 1
            continue

        if kernel := _KERNEL_LINE.match(line):
            end_rule()
            launch = len(launches)
            launches[launch] = kernel["name"]
            section, after_section = "", False
        elif heading := _SECTION_LINE.match(line):
            end_rule()
            section, after_section = heading["name"], True
        elif separator := _SEPARATOR.match(line):
            end_rule()  # between rule blocks ncu prints a two-column separator
            runs = separator.group().split()
            if after_section and len(runs) >= 3:
                widths = [len(run) for run in runs]
                header_seen, rows_seen, after_section = False, 0, False
        elif tagged := _RULE_LINE.match(line):
            end_rule()
            if launch is not None:
                rule = _RuleText(launch, section, tagged["kind"], len(tagged["indent"]), [tagged["text"]])
        elif rule is not None and stripped and _indent(line) > rule.indent:
            rule.lines.append(stripped)
        else:
            end_rule()  # a blank line, [pid] line, ==PROF== line or program output
    end_rule()
    return _finish("details", launches, pending, found_rules)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _cells(line: str, widths: list[int]) -> tuple[str, str, str] | None:
    """(name, unit, value) of a table row; the columns are as wide as the separator's dashes.

    Rows may sit deeper than their separator (6 spaces against 4 in some 2022 files), so columns
    are counted from the row's own indentation. When a cell overflows its column, fall back to
    splitting on runs of two or more spaces; single spaces occur inside names and values.
    """
    position = _indent(line)
    cells = []
    for column, width in enumerate(widths):
        if column == len(widths) - 1:
            cells.append(line[position:].strip())
            break
        if line[position + width : position + width + 1] not in ("", " "):
            return _split_cells(line, len(widths))
        cells.append(line[position : position + width].strip())
        position += width + 1
    if not cells[0] or not cells[-1]:
        return _split_cells(line, len(widths))
    return cells[0], cells[1], cells[-1]


def _split_cells(line: str, columns: int) -> tuple[str, str, str] | None:
    parts = re.split(r" {2,}", line.strip())
    if len(parts) == columns:
        return parts[0], parts[1], parts[-1]
    if len(parts) == columns - 1:  # no unit
        return parts[0], "", parts[-1]
    return None


# -- common ---------------------------------------------------------------------------------------


def _finish(
    layout: str, launches: dict[int, str], pending: Iterable[tuple[int, Entry]], found_rules: Iterable[tuple[int, Rule]]
) -> Reading:
    """Name each launch by its kernel, adding ``#<launch ID>`` where a kernel ran several times."""
    repeated = Counter(launches.values())
    labels = {launch: name if repeated[name] == 1 else f"{name}#{launch}" for launch, name in launches.items()}
    return Reading(
        layout=layout,
        kernels=tuple(labels.values()),
        entries=tuple(attrs.evolve(entry, kernel=labels[launch]) for launch, entry in pending),
        rules=tuple(attrs.evolve(rule, kernel=labels[launch]) for launch, rule in found_rules),
    )


def _nothing_found(lines: list[str], *, csv_header: bool) -> str:
    messages = [line.strip() for line in lines if _TOOL_MESSAGE.match(line)]
    if messages:
        return f"ncu printed no kernel results; it said: {messages[0][:200]}"
    progress = [line.strip() for line in lines if line.startswith("==PROF==")]
    if progress:
        return (
            "ncu printed no kernel results (no kernel was profiled, or the results went "
            f"elsewhere); its last message: {progress[-1][:200]}"
        )
    if csv_header:
        return "ncu CSV has a header but no kernel launch rows"
    if not any(line.strip() for line in lines):
        return "empty ncu output: nothing to parse"
    first = next(line for line in lines if line.strip())
    return (
        'not ncu output: no CSV header starting with "ID", and no kernel line of a details '
        f"page; it starts with {first.strip()[:80]!r}"
    )
