"""perf's names for the generic events that perf_event_open(2) defines by constant.

The manual page perf_event_open(2) says what each generic event counts, under its constant
(``PERF_COUNT_HW_CPU_CYCLES``: "Total cycles."). perf names the same events otherwise
(``cycles``, ``cpu-cycles``), and its own pages show those names only in sample output. The
tables below copy perf's names, as tools/perf of Linux 6.1 spells them. The docs mirror holds
perf's documentation but not these source files, so the tables are written out here. Nothing is
added to them:

* ``util/evsel.c``: ``evsel__hw_names`` and ``evsel__sw_names`` (what ``perf stat`` prints). For
  hardware-cache events: ``evsel__hw_cache`` (caches), ``evsel__hw_cache_op`` (operations) and
  ``evsel__hw_cache_result`` (results), and ``evsel__hw_cache_stat`` (the operations each cache
  supports). ``__evsel__hw_cache_type_op_res_name`` joins them into names:
  ``L1-dcache-loads`` for accesses, ``L1-dcache-load-misses`` for misses.
* ``util/parse-events.c``: ``event_symbols_hw`` and ``event_symbols_sw`` (the other spellings
  ``perf stat -e`` accepts: ``cpu-cycles``, ``branch-instructions``, ``cs``).

:func:`event_definitions` turns the page's descriptions of the constants into one
:class:`~knowledge_builder.documents.Definition` per event, named as perf names it. A
hardware-cache event is described by the page's words for its three parts (cache, operation,
result). ``measured`` gives the ``type`` and ``config`` that perf_event_open(2) takes for it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ..documents import Definition

__all__ = ["HARDWARE", "SOFTWARE", "CACHES", "OPERATIONS", "RESULTS", "event_definitions"]

HARDWARE: dict[str, tuple[str, ...]] = {
    "PERF_COUNT_HW_CPU_CYCLES": ("cycles", "cpu-cycles"),
    "PERF_COUNT_HW_INSTRUCTIONS": ("instructions",),
    "PERF_COUNT_HW_CACHE_REFERENCES": ("cache-references",),
    "PERF_COUNT_HW_CACHE_MISSES": ("cache-misses",),
    "PERF_COUNT_HW_BRANCH_INSTRUCTIONS": ("branches", "branch-instructions"),
    "PERF_COUNT_HW_BRANCH_MISSES": ("branch-misses",),
    "PERF_COUNT_HW_BUS_CYCLES": ("bus-cycles",),
    "PERF_COUNT_HW_STALLED_CYCLES_FRONTEND": ("stalled-cycles-frontend", "idle-cycles-frontend"),
    "PERF_COUNT_HW_STALLED_CYCLES_BACKEND": ("stalled-cycles-backend", "idle-cycles-backend"),
    "PERF_COUNT_HW_REF_CPU_CYCLES": ("ref-cycles",),
}
"""Generic hardware events (``PERF_TYPE_HARDWARE``): constant -> perf's printed name, then the other
spellings it accepts."""

SOFTWARE: dict[str, tuple[str, ...]] = {
    "PERF_COUNT_SW_CPU_CLOCK": ("cpu-clock",),
    "PERF_COUNT_SW_TASK_CLOCK": ("task-clock",),
    "PERF_COUNT_SW_PAGE_FAULTS": ("page-faults", "faults"),
    "PERF_COUNT_SW_CONTEXT_SWITCHES": ("context-switches", "cs"),
    "PERF_COUNT_SW_CPU_MIGRATIONS": ("cpu-migrations", "migrations"),
    "PERF_COUNT_SW_PAGE_FAULTS_MIN": ("minor-faults",),
    "PERF_COUNT_SW_PAGE_FAULTS_MAJ": ("major-faults",),
    "PERF_COUNT_SW_ALIGNMENT_FAULTS": ("alignment-faults",),
    "PERF_COUNT_SW_EMULATION_FAULTS": ("emulation-faults",),
    "PERF_COUNT_SW_DUMMY": ("dummy",),
    "PERF_COUNT_SW_BPF_OUTPUT": ("bpf-output",),
    "PERF_COUNT_SW_CGROUP_SWITCHES": ("cgroup-switches",),
}
"""Software events the kernel counts (``PERF_TYPE_SOFTWARE``), in the same form."""

_READ, _WRITE, _PREFETCH = (
    "PERF_COUNT_HW_CACHE_OP_READ",
    "PERF_COUNT_HW_CACHE_OP_WRITE",
    "PERF_COUNT_HW_CACHE_OP_PREFETCH",
)

CACHES: dict[str, tuple[str, tuple[str, ...]]] = {
    "PERF_COUNT_HW_CACHE_L1D": ("L1-dcache", (_READ, _WRITE, _PREFETCH)),
    "PERF_COUNT_HW_CACHE_L1I": ("L1-icache", (_READ, _PREFETCH)),
    "PERF_COUNT_HW_CACHE_LL": ("LLC", (_READ, _WRITE, _PREFETCH)),
    "PERF_COUNT_HW_CACHE_DTLB": ("dTLB", (_READ, _WRITE, _PREFETCH)),
    "PERF_COUNT_HW_CACHE_ITLB": ("iTLB", (_READ,)),
    "PERF_COUNT_HW_CACHE_BPU": ("branch", (_READ,)),
    "PERF_COUNT_HW_CACHE_NODE": ("node", (_READ, _WRITE, _PREFETCH)),
}
"""Hardware caches (``PERF_TYPE_HW_CACHE``): id constant -> perf's name, the operations it counts."""

OPERATIONS: dict[str, tuple[str, str]] = {
    _READ: ("load", "loads"),
    _WRITE: ("store", "stores"),
    _PREFETCH: ("prefetch", "prefetches"),
}
"""Cache operations: constant -> perf's word before ``-misses``, and its word for accesses."""

RESULTS: dict[str, str] = {"PERF_COUNT_HW_CACHE_RESULT_ACCESS": "", "PERF_COUNT_HW_CACHE_RESULT_MISS": "misses"}
"""Cache results: constant -> perf's suffix (accesses have none)."""

_HARDWARE_CONTEXT = "perf_event_open(2): generalized hardware events (PERF_TYPE_HARDWARE)"
_SOFTWARE_CONTEXT = "perf_event_open(2): software events (PERF_TYPE_SOFTWARE)"
_CACHE_CONTEXT = "perf_event_open(2): hardware cache events (PERF_TYPE_HW_CACHE)"
# How the page phrases a cache, an operation or a result: "for measuring Level 1 Data Cache",
# "for read accesses", "to measure misses".
_LEADS = ("for measuring ", "to measure ", "for ")


def event_definitions(described: Mapping[str, str]) -> Iterator[tuple[str, Definition]]:
    """(constant, definition) for every generic event whose constants ``described`` (constant ->
    the page's text for it) explains. A cache event comes with the constant of its cache."""
    for table, event_type, context in (
        (HARDWARE, "PERF_TYPE_HARDWARE", _HARDWARE_CONTEXT),
        (SOFTWARE, "PERF_TYPE_SOFTWARE", _SOFTWARE_CONTEXT),
    ):
        for constant, (name, *spellings) in table.items():
            if described.get(constant):
                yield (
                    constant,
                    Definition(
                        term=name,
                        text=described[constant],
                        aliases=(*spellings, constant),
                        measured=f"{event_type}, config {constant}",
                        context=context,
                    ),
                )
    for cache, (cache_name, operations) in CACHES.items():
        for operation in operations:
            for result, suffix in RESULTS.items():
                parts = [described.get(constant, "") for constant in (cache, operation, result)]
                if all(parts):
                    yield cache, _cache_definition(cache_name, cache, operation, result, suffix, parts)


def _cache_definition(
    cache_name: str, cache: str, operation: str, result: str, suffix: str, parts: list[str]
) -> Definition:
    word_before_suffix, word_for_accesses = OPERATIONS[operation]
    name = f"{cache_name}-{word_before_suffix}-{suffix}" if suffix else f"{cache_name}-{word_for_accesses}"
    what, how, counted = (_phrase(part) for part in parts)
    measures = f"{counted} of {how}" if suffix else how
    return Definition(
        term=name,
        text=f"Hardware cache event for {what}: measures {measures}.",
        measured=f"PERF_TYPE_HW_CACHE, config {cache} | ({operation} << 8) | ({result} << 16)",
        context=_CACHE_CONTEXT,
    )


def _phrase(text: str) -> str:
    """The page's words for a cache part without their lead and full stop: ``read accesses``."""
    text = " ".join(text.split()).rstrip(".")
    for lead in _LEADS:
        if text.lower().startswith(lead):
            return text[len(lead) :]
    return text
