"""Reading a ``cachegrind.out`` file: event names, cost per (source file, function), and totals.

The format (cachegrind manual, "Cachegrind Output File Format")::

    desc: I1 cache:         32768 B, 64 B, 8-way associative      (only with cache simulation)
    cmd: ./a.out
    events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw Bc Bcm Bi Bim   (four variants; read, never assume)
    fl=/path/as/compiled.c
    fn=relu
    2 1474770 1 1 196608 12291 0 196608 12291 4096 393219 8682     (line, counts; trailing zeros omitted)
    summary: 2652545 1315 1296 ...

What varies between versions and tools, all handled here: a trailing space after the events and
count lines; several spaces after the line number (valgrind 3.5); the legacy names ``I2mr D2mr
D2mw`` (renamed to ``ILmr DLmr DLmw``, see :data:`~pragma_valgrind.metrics.LEGACY_EVENTS`);
``fl=`` repeated before every ``fn=`` (cg_merge); ``#`` comment lines (valgrind's own tests). The
``summary:`` line must equal the column sums, which catches a truncated or edited file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import attrs

from pragma_core.errors import ProfileParseError

from .metrics import LEGACY_EVENTS

__all__ = ["CachegrindOut", "looks_like_outfile", "read_outfile"]

_COUNT_LINE = re.compile(r"\d+(?:[ \t]+\d+)*[ \t]*")


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _totals(value: Iterable[int]) -> tuple[int, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class CachegrindOut:
    """One cachegrind.out file: what was simulated, what ran, and the cost of each function per file.

    ``events`` use today's names. ``costs`` maps (source file, function) to one total per event,
    added over all lines; ``???`` stands for an unknown file or function, as cachegrind writes it.
    """

    events: tuple[str, ...] = attrs.field(converter=_strings)
    desc: tuple[str, ...] = attrs.field(converter=_strings, default=())
    cmd: str = ""
    costs: dict[tuple[str, str], tuple[int, ...]] = attrs.field(factory=dict)
    summary: tuple[int, ...] = attrs.field(converter=_totals, default=())
    legacy_names: bool = False

    def totals(self) -> dict[str, int]:
        """The program's total per event (the ``summary:`` line)."""
        return dict(zip(self.events, self.summary))

    def add_up(self, keys: Iterable[tuple[str, str]]) -> dict[str, int]:
        """The totals per event over the given (file, function) keys."""
        sums = [0] * len(self.events)
        for key in keys:
            for index, count in enumerate(self.costs[key]):
                sums[index] += count
        return dict(zip(self.events, sums))

    def functions(self) -> dict[str, dict[str, int]]:
        """Totals per function name, over every file it has lines in (as cg_annotate's function view)."""
        keys_by_function: dict[str, list[tuple[str, str]]] = {}
        for key in self.costs:
            keys_by_function.setdefault(key[1], []).append(key)
        return {function: self.add_up(keys) for function, keys in keys_by_function.items()}


def looks_like_outfile(raw: str) -> bool:
    """Whether ``raw`` has an ``events:`` line, as cachegrind.out (and callgrind) files have."""
    return re.search(r"^events:", raw, re.MULTILINE) is not None


def read_outfile(raw: str) -> CachegrindOut:
    """Read a cachegrind.out (or cg_merge output); raises ProfileParseError saying what was wrong."""
    if re.search(r"^(?:# callgrind format|positions:|version:)", raw, re.MULTILINE):
        raise ProfileParseError(
            "this is a callgrind profile (it has a 'positions:' or 'version:' header), not a cachegrind.out "
            "file; run valgrind with --tool=cachegrind, or read it with callgrind_annotate"
        )
    events: tuple[str, ...] | None = None
    desc: list[str] = []
    cmd = ""
    legacy = False
    costs: dict[tuple[str, str], list[int]] = {}
    current_file = current_function = "???"
    summary: list[int] | None = None

    for number, line in enumerate(raw.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("desc:"):
            desc.append(" ".join(line[len("desc:") :].split()))
        elif line.startswith("cmd:"):
            cmd = line[len("cmd:") :].strip()
        elif line.startswith("events:"):
            names = line[len("events:") :].split()
            if not names:
                raise ProfileParseError(f"line {number}: the events: line names no events")
            legacy = any(name in LEGACY_EVENTS for name in names)
            events = tuple(LEGACY_EVENTS.get(name, name) for name in names)
        elif line.startswith("fl="):
            current_file = line[len("fl=") :]
        elif line.startswith("fn="):
            current_function = line[len("fn=") :]
        elif line.startswith("summary:"):
            summary = _counts(line[len("summary:") :].split(), events, number, line)
        elif _COUNT_LINE.fullmatch(line):
            counts = _counts(line.split()[1:], events, number, line)
            sums = costs.setdefault((current_file, current_function), [0] * len(counts))
            for index, count in enumerate(counts):
                sums[index] += count
        else:
            raise ProfileParseError(f"line {number} is not part of a cachegrind.out file: {line[:80]!r}")

    if events is None:
        raise ProfileParseError("no 'events:' line: this is not a cachegrind.out file")
    if summary is None:
        raise ProfileParseError(
            "the cachegrind.out file has no 'summary:' line: it is cut short (did the program or valgrind "
            "die before exiting?)"
        )
    sums = [sum(counts[index] for counts in costs.values()) for index in range(len(events))]
    if sums != summary:
        raise ProfileParseError(
            f"the summary line ({' '.join(map(str, summary))}) is not the sum of the count lines "
            f"({' '.join(map(str, sums))}): the file is damaged or was edited"
        )
    return CachegrindOut(
        events=events,
        desc=desc,
        cmd=cmd,
        summary=summary,
        legacy_names=legacy,
        costs={key: tuple(value) for key, value in costs.items()},
    )


def _counts(fields: list[str], events: tuple[str, ...] | None, number: int, line: str) -> list[int]:
    """Counts padded with zeros to one per event (cachegrind omits trailing zeros)."""
    if events is None:
        raise ProfileParseError(f"line {number} has counts before any 'events:' line: {line[:80]!r}")
    if len(fields) > len(events):
        raise ProfileParseError(
            f"line {number} has {len(fields)} counts but the events line names {len(events)}: {line[:80]!r}"
        )
    try:
        counts = [int(field) for field in fields]
    except ValueError:
        raise ProfileParseError(f"line {number}: counts must be whole numbers, got {line[:80]!r}") from None
    return counts + [0] * (len(events) - len(counts))
