"""The metrics cachegrind gives: its raw event counts, the miss rates derived from them, and meanings.

Event names are cachegrind's own (``Ir``, ``D1mr``, ``Bcm`` ...); the rates carry the names of the
summary cachegrind prints on exit (``D1 miss rate``, ``LL miss rate``, ``Mispred rate``) and are
computed the same way, from the counts, so a rate never depends on how a report rounded it.
:func:`metrics_from_totals` turns one set of event totals (a program's, a function's, a kernel's)
into :class:`~pragma_core.records.Metric` records.
"""

from __future__ import annotations

from collections.abc import Mapping

from pragma_core.records import Metric

__all__ = [
    "PROFILER_NAME",
    "EVENTS",
    "LEGACY_EVENTS",
    "RATES",
    "FORMULAS",
    "DEFAULT_METRICS",
    "KNOWN_METRICS",
    "COUNT_UNIT",
    "meaning_of",
    "metrics_from_totals",
    "rate_value",
]

PROFILER_NAME = "valgrind"

COUNT_UNIT = "count"

EVENTS: dict[str, str] = {
    "Ir": "instructions executed (I cache reads)",
    "I1mr": "instruction fetches that missed the simulated first-level instruction cache (I1)",
    "ILmr": "instruction fetches that missed the simulated last-level cache (LL)",
    "Dr": "memory reads (D cache reads)",
    "D1mr": "memory reads that missed the simulated first-level data cache (D1)",
    "DLmr": "memory reads that missed the simulated last-level cache (LL)",
    "Dw": "memory writes (D cache writes)",
    "D1mw": "memory writes that missed the simulated first-level data cache (D1)",
    "DLmw": "memory writes that missed the simulated last-level cache (LL)",
    "Bc": "conditional branches executed",
    "Bcm": "conditional branches mispredicted by the simulated predictor",
    "Bi": "indirect branches executed (jumps and calls through a register or memory)",
    "Bim": "indirect branches mispredicted by the simulated predictor",
}
"""Cachegrind's thirteen events, in the order it writes them, with their meanings."""

LEGACY_EVENTS: dict[str, str] = {"I2mr": "ILmr", "D2mr": "DLmr", "D2mw": "DLmw"}
"""Valgrind before 3.6 simulated two levels and called the last one L2; same events, old names."""

RATES: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    # name: (numerator events, denominator events, meaning)
    "D1 miss rate": (
        ("D1mr", "D1mw"),
        ("Dr", "Dw"),
        "share of memory accesses that missed the simulated D1 cache, (D1mr + D1mw) / (Dr + Dw)",
    ),
    "LLd miss rate": (
        ("DLmr", "DLmw"),
        ("Dr", "Dw"),
        "share of memory accesses that missed the simulated last-level cache, "
        "(DLmr + DLmw) / (Dr + Dw): traffic beyond the simulated last level (the profile's notes say which cache)",
    ),
    "LL miss rate": (
        ("ILmr", "DLmr", "DLmw"),
        ("Ir", "Dr", "Dw"),
        "last-level misses (instruction and data) per instruction fetch and memory access, "
        "(ILmr + DLmr + DLmw) / (Ir + Dr + Dw), as cachegrind's own summary computes it",
    ),
    "I1 miss rate": (("I1mr",), ("Ir",), "share of instruction fetches that missed the simulated I1 cache, I1mr / Ir"),
    "LLi miss rate": (
        ("ILmr",),
        ("Ir",),
        "share of instruction fetches that missed the simulated last-level cache, ILmr / Ir",
    ),
    "Mispred rate": (
        ("Bcm", "Bim"),
        ("Bc", "Bi"),
        "branch mispredict rate: mispredicted branches per branch, (Bcm + Bim) / (Bc + Bi)",
    ),
}
"""Rates in percent, named as in cachegrind's exit summary, computed from the event counts."""

FORMULAS: dict[str, str] = {
    name: f"100 * ({' + '.join(numerator)}) / ({' + '.join(denominator)})"
    for name, (numerator, denominator, _meaning) in RATES.items()
}
"""Each rate as the formula over cachegrind's events that computes it, in percent."""

DEFAULT_METRICS: tuple[str, ...] = (*RATES, *EVENTS)
"""What the valgrind profiler collects by default: the rates first (they fit a prompt), then counts."""

KNOWN_METRICS: frozenset[str] = frozenset(DEFAULT_METRICS)


def meaning_of(name: str) -> str:
    """The one-line meaning of a metric name, or "" for an event cachegrind added after this table."""
    if name in EVENTS:
        return EVENTS[name]
    if name in RATES:
        return RATES[name][2]
    return ""


def rate_value(name: str, totals: Mapping[str, int]) -> float | None:
    """The rate ``name`` in percent, or None when an event it needs is missing or it divides by zero."""
    numerator, denominator, _meaning = RATES[name]
    if not all(event in totals for event in (*numerator, *denominator)):
        return None
    below = sum(totals[event] for event in denominator)
    if below == 0:
        return None
    return 100.0 * sum(totals[event] for event in numerator) / below


def metrics_from_totals(
    totals: Mapping[str, int], *, kernel: str = "", names: tuple[str, ...] | None = None
) -> list[Metric]:
    """Metrics of one set of event totals: every event, then each rate it allows.

    ``names`` keeps only those metrics, in that order. A rate whose events are absent, or whose
    denominator is zero (a function that touches no memory has no D1 miss rate), is left out.
    """
    wanted = names if names is not None else (*totals, *RATES)
    metrics: list[Metric] = []
    for name in wanted:
        if name in RATES:
            value = rate_value(name, totals)
            if value is not None:
                metrics.append(
                    Metric(
                        name=name,
                        value=value,
                        unit="%",
                        kernel=kernel,
                        profiler=PROFILER_NAME,
                        meaning=meaning_of(name),
                    )
                )
        elif name in totals:
            metrics.append(
                Metric(
                    name=name,
                    value=totals[name],
                    unit=COUNT_UNIT,
                    kernel=kernel,
                    profiler=PROFILER_NAME,
                    meaning=meaning_of(name),
                )
            )
    return metrics
