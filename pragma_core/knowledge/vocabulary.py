"""One vocabulary for bottlenecks across profilers.

Nsight Compute speaks of memory-bound kernels and achieved occupancy, perf of backend-bound slots,
rocprof of VALU busy and wavefront occupancy, cachegrind of miss rates. The compendium tags every
metric with the standard terms of :data:`TERMS` it reveals, so the Conductor reads one language
whatever the profiler, and each term maps to the :class:`~pragma_core.records.BoundClass` the
rules use. :func:`terms_in` finds the terms a text speaks of; :func:`standard_term` maps a free
phrase (a model's, a page's) to its term.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..records import BoundClass

__all__ = ["TERMS", "BOUND_TERMS", "terms_in", "standard_term", "bound_of"]

TERMS: dict[str, tuple[tuple[str, ...], BoundClass | None]] = {
    # term: (patterns of the phrases that mean it, case-insensitive regular expressions; its bound)
    "memory bound": (
        (
            r"memory[ -]bound",
            r"bandwidth[ -]bound",
            r"memory bandwidth",
            r"dram bandwidth",
            r"dram throughput",
            r"hbm bandwidth",
            r"memory throughput",
            r"memory traffic",
            r"bytes (read|written)",
            r"fetched from the video memory",
            r"written to the video memory",
            r"memory hierarchy",
            r"stalled on memory",
            r"\bdram\b",
        ),
        BoundClass.MEMORY,
    ),
    "compute bound": (
        (
            r"compute[ -]bound",
            r"core[ -]bound",
            r"\b[vs]?alu\b",
            r"pipe(line)? utilization",
            r"execution (units?|ports?)",
            r"sm throughput",
            r"compute \(sm\)",
            r"\bflops?\b",
        ),
        BoundClass.COMPUTE,
    ),
    "latency bound": ((r"latency[ -]bound", r"\bstall", r"dependenc(y|ies)", r"long scoreboard"), BoundClass.LATENCY),
    "occupancy": (
        (
            r"occupancy",
            r"active warps",
            r"warps per",
            r"wavefronts? resident",
            r"resident wavefronts?",
            r"waves per",
            r"blocks per sm",
            r"workgroups per cu",
        ),
        BoundClass.LATENCY,
    ),
    "front-end bound": (
        (r"front[ -]?end", r"instruction fetch", r"\bdecod", r"instruction cache", r"\bi-?cache", r"\bitlb"),
        BoundClass.FRONTEND,
    ),
    "bad speculation": (
        (r"bad speculation", r"mispredict", r"speculat", r"machine clear", r"branch[ -]miss"),
        BoundClass.BAD_SPECULATION,
    ),
    "retiring": ((r"\bretiring\b", r"useful work"), None),
    "cache misses": (
        (
            r"cache\b[\w ]{0,30}\bmiss",
            r"\b(d1|i1|ll|lld|lli|l1|l2|llc|tlb)\b[\w ]{0,12}\bmiss",
            r"hit rate",
            r"cache hits?\b",
            r"sector hit",
            r"dcache[\w-]*miss",
            r"cache-miss",
        ),
        BoundClass.MEMORY,
    ),
    "register pressure": ((r"register", r"\b[vsa]gprs?\b", r"\bspill", r"scratch"), BoundClass.LATENCY),
    "shared memory": ((r"shared memory", r"\blds\b", r"local data share", r"bank conflict"), BoundClass.LATENCY),
    "tensor cores": ((r"tensor (core|pipe|op)", r"\bhmma", r"\bmfma", r"matrix (core|math|fused)"), BoundClass.COMPUTE),
    # threads of a warp (wavefront) that take different branches run one path after the other,
    # the others' lanes idle: the SM issues more instructions for the same work
    "divergence": ((r"diverg", r"branch efficiency", r"uniform branch"), BoundClass.COMPUTE),
    "launch overhead": (
        (
            r"launch overhead",
            r"kernel launch",
            r"dispatch overhead",
            r"launch latency",
            r"context[ -]switch",
            r"page[ -]fault",
            r"migration",
        ),
        BoundClass.OVERHEAD,
    ),
}
"""Each standard term, the phrases of the profilers' documentation that mean it (as patterns), and
the bound class it points to."""

BOUND_TERMS: dict[BoundClass, tuple[str, ...]] = {}
for _term, (_phrases, _bound) in TERMS.items():
    if _bound is not None:
        BOUND_TERMS.setdefault(_bound, ())
        BOUND_TERMS[_bound] += (_term,)
"""The standard terms of each bound class, for searching the entries that match a diagnosis."""

_PATTERNS = {
    term: re.compile("|".join(f"(?:{p})" for p in patterns), re.I) for term, (patterns, _bound) in TERMS.items()
}


def terms_in(text: str) -> tuple[str, ...]:
    """The standard terms ``text`` speaks of, in the order of :data:`TERMS`."""
    return tuple(term for term, pattern in _PATTERNS.items() if pattern.search(text))


def standard_term(phrase: str) -> str | None:
    """The standard term a phrase means (``"Backend-bound (memory)"`` -> ``memory bound``), or None."""
    lowered = " ".join(phrase.lower().replace("_", " ").split())
    if lowered in TERMS:
        return lowered
    found = terms_in(lowered)
    return found[0] if found else None


def bound_of(terms: Iterable[str]) -> BoundClass | None:
    """The bound class of the first term that has one."""
    for term in terms:
        entry = TERMS.get(term)
        if entry is not None and entry[1] is not None:
            return entry[1]
    return None
