"""Reading ``perf stat`` output: CSV (``-x,``), JSON lines (``-j``) and the human-readable default.

    from pragma_perf.parse import parse, unsupported

    metrics = parse(text)        # counted events, named metrics (tma_*), ratios computed from counts
    missing = unsupported(text)  # {"cycles": "perf printed <not supported>: ..."}

Every layout is first read into :class:`Reading` rows (:func:`read_rows`): one per event count or
named metric, with perf's ``<not supported>``/``<not counted>``/``nan`` kept as a status. The
layouts and their quirks are described in ``fixtures/FORMATS.md`` (section 3); in short:

* CSV is not quoted, so an event such as ``cpu/UOPS_DECODED.DEC0,cmask=1/`` spans two fields. Rows
  are anchored on ``value,unit,event,run-time,percent``; whatever precedes is the interval or the
  aggregation prefix, whatever follows is ``[variance,]metric-value,metric-unit[,threshold]``.
* A named metric is the text ``<unit>  <name>`` (``%  tma_retiring``); the other metric texts perf
  prints (``insn per cycle``, ``/sec``, ``CPUs utilized``) are comments on a count and are skipped:
  the ratios that matter are computed here from the counts (``ipc``, ``branch-miss-rate``, ...).
* Hybrid CPUs: the core type stays in the name, the way perf writes events: ``cpu_core/cycles/``,
  and metrics of the group ``TopdownL1 (cpu_core)`` become ``cpu_core/tma_retiring/``.
* Human output groups digits by locale (``1,176,204,955``, ``739 505 378``, decimal ``164,40``);
  the decimal mark is read from the ``msec`` and ``seconds`` lines.
* Interval output (``-I``) is summed over intervals for counts and averaged for metrics.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable

import attrs

from pragma_core.errors import ProfileParseError
from pragma_core.records import Metric

from .metrics import DERIVED, base_name, meaning_of, pmu_of

__all__ = ["PROFILER", "NOT_SUPPORTED", "NOT_COUNTED", "Reading", "read_rows", "parse", "unsupported"]

PROFILER = "perf"
NOT_SUPPORTED = "<not supported>"
NOT_COUNTED = "<not counted>"
NAN = "nan"

REASONS = {
    NOT_SUPPORTED: "perf printed <not supported>: this kernel or CPU cannot count it",
    NOT_COUNTED: "perf printed <not counted>: it was never scheduled on a counter while the program ran",
    NAN: "perf printed nan: the counts it is computed from are missing",
}

_UNITS = {"msec": "ms"}
_CLOCKS = ("task-clock", "cpu-clock")
_THRESHOLDS = {"good", "less good", "nearly bad", "bad"}
_LEGACY_TOPDOWN = {
    "retiring": "tma_retiring",
    "bad speculation": "tma_bad_speculation",
    "frontend bound": "tma_frontend_bound",
    "backend bound": "tma_backend_bound",
}


@attrs.frozen(kw_only=True)
class Reading:
    """One count or named metric perf printed; ``value`` is None when perf printed no number."""

    name: str
    value: float | None
    unit: str = ""
    status: str = ""
    is_metric: bool = False
    running_pct: float | None = None
    interval: float | None = None


def parse(raw: str) -> list[Metric]:
    """Metrics in perf's order, then the ratios computed from the counts.

    Rows without a number (``<not supported>``, ``<not counted>``, ``nan``) are not metrics:
    :func:`unsupported` reports them.
    """
    readings = _combine_intervals(read_rows(raw))
    metrics = [
        Metric(name=r.name, value=r.value, unit=r.unit, profiler=PROFILER, meaning=meaning_of(r.name))
        for r in readings
        if r.value is not None
    ]
    return metrics + _derived(readings)


def unsupported(raw: str) -> dict[str, str]:
    """Each name perf printed without a number, and why; a name counted elsewhere is left out."""
    readings = _combine_intervals(read_rows(raw))
    counted = {r.name for r in readings if r.value is not None}
    return {r.name: REASONS[r.status] for r in readings if r.status and r.name not in counted}


def read_rows(raw: str) -> list[Reading]:
    """Every reading in the output, in order; ProfileParseError when it is not perf stat output."""
    lines = [line for line in raw.lstrip("\ufeff").splitlines() if not line.startswith("# started on")]
    meaningful = [line for line in lines if line.strip()]
    if not meaningful:
        raise ProfileParseError("perf stat output is empty")
    if meaningful[0].lstrip().startswith("{"):
        rows = _read_json(lines)
    elif any("Performance counter stats for" in line for line in lines):
        rows = _read_human(lines)
    else:
        rows = _read_csv(lines) or _read_human(lines)
    if not rows:
        raise ProfileParseError(
            f"not perf stat output (CSV, JSON or the default layout): the first line is {meaningful[0].strip()[:80]!r}"
        )
    return rows


# -- shared pieces ------------------------------------------------------------------------------

_NAMED_METRIC = re.compile(r"\s*(?:(?P<unit>\S+)\s{2,})?(?P<name>[A-Za-z][\w.]*)\s*")
_GROUP = re.compile(r"\s*(?P<group>[A-Za-z]\w*)(?:\s+\((?P<pmu>\w+)\))?\s*")


def _named_metric(text: str) -> tuple[str, str] | None:
    """(name, unit) for ``%  tma_retiring`` or a bare ``tma_info_ipc``; None for comments."""
    match = _NAMED_METRIC.fullmatch(text)
    if not match or (not match["unit"] and "_" not in match["name"]):
        return None
    return match["name"], _UNITS.get(match["unit"] or "", match["unit"] or "")


def _group_pmu(text: str) -> str:
    """``cpu_core`` for the group header ``TopdownL1 (cpu_core)``; empty otherwise."""
    match = _GROUP.fullmatch(text)
    return (match["pmu"] or "") if match else ""


def _event(
    name: str, value: float | None, status: str, unit: str, pct: float | None, interval: float | None
) -> Reading:
    if not unit and base_name(name) in _CLOCKS:
        unit = "msec"  # perf prints clocks in msec; perf 4.x left the unit field empty
    return Reading(
        name=name,
        value=None if status else value,
        unit=_UNITS.get(unit, unit),
        status=status,
        running_pct=pct,
        interval=interval,
    )


def _metric(
    text: str, value: float | None, pmu: str, interval: float | None, pct: float | None = None
) -> Reading | None:
    """A named-metric reading from its unit text, or None when the text is only a comment."""
    named = _named_metric(text)
    if named is None:
        return None
    name, unit = named
    finite = value is not None and math.isfinite(value)
    return Reading(
        name=f"{pmu}/{name}/" if pmu else name,
        value=value if finite else None,
        unit=unit,
        status="" if finite else NAN,
        is_metric=True,
        running_pct=pct,
        interval=interval,
    )


def _float(text: str) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


# -- CSV ----------------------------------------------------------------------------------------

_INT = re.compile(r"\d+")
_PCT = re.compile(r"\d+(?:\.\d+)?")
_UNIT = re.compile(r"[A-Za-z%][\w/%.-]*")
_BRACKETED = re.compile(r"[\w.-]+/.*/\w*")


def _is_value(text: str) -> bool:
    return text.startswith("<not ") or (_float(text) is not None and text.strip() == text != "")


def _is_event(text: str) -> bool:
    return bool(text) and not text[0].isspace() and not text.startswith("<") and _float(text) is None


def _csv_counter(fields: list[str]) -> tuple[list[str], str, str, str, float, list[str]] | None:
    """(prefix, value, unit, event, percent, rest) of a counter row, or None for other rows."""
    for e in range(2, len(fields) - 2):
        value, unit = fields[e - 2], fields[e - 1]
        if not (_is_value(value) and (unit == "" or _UNIT.fullmatch(unit)) and _is_event(fields[e])):
            continue
        for end in range(e, len(fields) - 2):
            if end > e and "/" not in fields[e]:
                break  # only a pmu/.../ term can hold the separator
            event = ",".join(fields[e : end + 1])
            if (
                _INT.fullmatch(fields[end + 1])
                and _PCT.fullmatch(fields[end + 2])
                and (end == e or _BRACKETED.fullmatch(event))
            ):
                return fields[: e - 2], value, unit, event, float(fields[end + 2]), fields[end + 3 :]
    return None


def _metric_fields(rest: list[str]) -> tuple[str, str]:
    """(metric-value, metric-unit) from the fields after the counter, dropping the threshold."""
    rest = list(rest)
    if rest and rest[-1].strip() in _THRESHOLDS:
        rest.pop()
    elif len(rest) >= 3 and rest[-1] == "" and _named_metric(rest[-2]):
        rest.pop()
    return (rest[-2], rest[-1]) if len(rest) >= 2 else ("", "")


def _csv_value(text: str) -> tuple[float | None, str]:
    """(number, status) of a counter-value field."""
    if text.startswith("<"):
        return None, text
    return _float(text), ""


def _read_csv(lines: list[str]) -> list[Reading]:
    rows: list[Reading] = []
    pmu = ""
    header: list[str] | None = None
    for line in lines:
        if not line.strip():
            continue
        fields = line.split(",")
        counter = _csv_counter(fields)
        if counter is not None:
            prefix, value_text, unit, event, pct, rest = counter
            interval = _float(prefix[0]) if prefix else None
            value, status = _csv_value(value_text)
            rows.append(_event(event, value, status, unit, pct, interval))
            pmu = pmu_of(event)
            metric_value, metric_unit = _metric_fields(rest)
            metric = _metric(metric_unit, _float(metric_value) if metric_value else math.nan, pmu, interval)
            if metric is not None:
                rows.append(metric)
            continue
        cells = [cell.strip() for cell in fields]
        if cells[-1] == "":
            cells.pop()  # the old --topdown table ends every row with the separator
        if header is not None and cells and all(_float(cell) is not None for cell in cells):
            rows.extend(_legacy_table(header, cells))
            header = None
            continue
        if (
            cells
            and cells[0]
            and all(_float(cell) is None for cell in cells if cell)
            and any(cell.lower() in _LEGACY_TOPDOWN or _named_metric(cell) for cell in cells)
        ):
            header = cells  # the old --topdown (metric-only) table: names, then values
            continue
        interval = _float(fields[0]) if fields[0] else None
        metric_value, metric_unit = _metric_fields(fields[1:])
        metric = _metric(metric_unit, _float(metric_value) if metric_value else math.nan, pmu, interval)
        if metric is not None:
            rows.append(metric)
        elif not metric_value and metric_unit.strip():
            pmu = _group_pmu(metric_unit)  # metric-group header: ,run-time,percent,,,,TopdownL1
    return rows


def _legacy_table(header: list[str], values: list[str]) -> Iterable[Reading]:
    for title, value in zip(header, values):
        named = _named_metric(title)
        if named is None:
            legacy = _LEGACY_TOPDOWN.get(title.lower())
            named = (legacy, "%") if legacy else (title, "")
        yield Reading(name=named[0], value=float(value), unit=named[1], is_metric=True)


# -- JSON lines ---------------------------------------------------------------------------------


def _json_number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return _float(value) if isinstance(value, str) else None


def _read_json(lines: list[str]) -> list[Reading]:
    rows: list[Reading] = []
    pmu = ""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue  # early perf put a blank line between records
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            raise ProfileParseError(f"perf stat JSON: line {number} is not JSON: {line.strip()[:80]!r}") from None
        if not isinstance(record, dict):
            raise ProfileParseError(f"perf stat JSON: line {number} is not an object: {line.strip()[:80]!r}")
        interval = _json_number(record.get("interval", record.get("timestamp")))
        pct = _json_number(record.get("pcnt-running"))
        if "metricgroup" in record:
            pmu = _group_pmu(str(record["metricgroup"]))
            continue
        if "event" in record:
            event = str(record["event"])
            text = str(record.get("counter-value", "")).strip()
            status = text if text.startswith("<") else ""
            rows.append(_event(event, _float(text), status, str(record.get("unit", "")), pct, interval))
            pmu = pmu_of(event)
        metric_value = _json_number(record.get("metric-value"))
        metric = _metric(
            str(record.get("metric-unit", "")),
            math.nan if metric_value is None else metric_value,
            pmu,
            interval,
            None if "event" in record else pct,
        )
        if metric is not None:
            rows.append(metric)
    return rows


# -- human-readable default ---------------------------------------------------------------------

_HNUM = r"[0-9](?:[0-9.,\u00a0\u202f ]*[0-9])?"
_HUMAN_COUNTER = re.compile(
    rf"\s*(?P<value><not [a-z ]+>|{_HNUM})\s+(?:(?P<unit>[A-Za-z]+)\s+)?"
    r"(?P<event>[A-Za-z_{][^\s#]*)\s*(?:#\s*(?P<comment>.*))?"
)
_HUMAN_METRIC = re.compile(r"\s*(?P<group>[A-Za-z]\w*(?:\s+\(\w+\))?)?\s*#\s*(?P<comment>.*)")
_COMMENT = re.compile(rf"(?P<value>[-+]?nan|-?{_HNUM})\s*(?P<text>.*)")
_TRAILER = re.compile(r"seconds (?:time elapsed|user|sys)\b")
_RUNNING = re.compile(r"\(\s*(?P<pct>\d[\d.,]*)%\s*\)$")
_VARIANCE = re.compile(r"\(\s*\+-\s*[\d.,]+%\s*\)$")
_DECIMAL = re.compile(r"\d([.,])\d+\s+(?:msec|seconds|\+-)")


def _decimal_mark(lines: list[str]) -> str:
    """``.`` or ``,``: what the locale perf ran in used, read from the msec and seconds figures."""
    for line in lines:
        match = _DECIMAL.search(line)
        if match:
            return match[1]
    return "."


def _human_number(text: str, decimal: str) -> float:
    if "nan" in text.lower():
        return math.nan
    kept = "".join(ch for ch in text if ch.isdigit() or ch in (decimal, "-"))
    return float(kept.replace(decimal, "."))


def _read_human(lines: list[str]) -> list[Reading]:
    starts = [i for i, line in enumerate(lines) if "Performance counter stats for" in line]
    body_lines = lines[starts[0] + 1 :] if starts else lines  # before it: the program's own output
    decimal = _decimal_mark(body_lines)
    rows: list[Reading] = []
    pmu = ""
    for line in body_lines:
        if not line.strip() or _TRAILER.search(line):
            continue
        body, pct = line.rstrip(), None
        running = _RUNNING.search(body)
        if running:
            pct, body = _human_number(running["pct"], decimal), body[: running.start()].rstrip()
        variance = _VARIANCE.search(body)
        if variance:
            body = body[: variance.start()].rstrip()
        counter = _HUMAN_COUNTER.fullmatch(body)
        if counter:
            text = counter["value"]
            status = text if text.startswith("<") else ""
            value = None if status else _human_number(text, decimal)
            event = counter["event"]
            rows.append(_event(event, value, status, counter["unit"] or "", pct, None))
            pmu = pmu_of(event)
            comment = counter["comment"]
        else:
            metric_line = _HUMAN_METRIC.fullmatch(body)
            if not metric_line:
                continue
            if metric_line["group"]:
                pmu = _group_pmu(metric_line["group"])
            comment = metric_line["comment"]
        parts = _COMMENT.fullmatch(comment.strip()) if comment else None
        if parts:
            metric = _metric(parts["text"], _human_number(parts["value"], decimal), pmu, None, None if counter else pct)
            if metric is not None:
                rows.append(metric)
    return rows


# -- combining ----------------------------------------------------------------------------------


def _combine_intervals(readings: list[Reading]) -> list[Reading]:
    """One reading per name and position: counts summed over intervals, metrics averaged."""
    if len({r.interval for r in readings}) <= 1:
        return readings
    groups: dict[tuple[str, int], list[Reading]] = {}
    seen: dict[tuple[float | None, str], int] = {}
    for reading in readings:
        nth = seen[(reading.interval, reading.name)] = seen.get((reading.interval, reading.name), -1) + 1
        groups.setdefault((reading.name, nth), []).append(reading)
    combined = []
    for items in groups.values():
        values = [r.value for r in items if r.value is not None]
        if not values:
            combined.append(attrs.evolve(items[0], interval=None))
            continue
        total = sum(values) / len(values) if items[0].is_metric else sum(values)
        counted = next(r for r in items if r.value is not None)
        combined.append(attrs.evolve(counted, value=total, interval=None))
    return combined


def _derived(readings: list[Reading]) -> list[Metric]:
    """IPC and miss rates, per hybrid PMU, where each count they need occurs exactly once."""
    counts: dict[tuple[str, str], list[float]] = {}
    for r in readings:
        if not r.is_metric and r.value is not None:
            counts.setdefault((pmu_of(r.name), base_name(r.name)), []).append(r.value)
    pmus = list(dict.fromkeys(pmu for pmu, _ in counts))
    derived = []
    for name, (numerator, denominator, scale, unit) in DERIVED.items():
        for pmu in pmus:
            top, bottom = counts.get((pmu, numerator), []), counts.get((pmu, denominator), [])
            if len(top) == 1 and len(bottom) == 1 and bottom[0] > 0:
                full = f"{pmu}/{name}/" if pmu else name
                derived.append(
                    Metric(
                        name=full,
                        value=scale * top[0] / bottom[0],
                        unit=unit,
                        profiler=PROFILER,
                        meaning=meaning_of(name),
                    )
                )
    return derived
