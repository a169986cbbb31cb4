"""The caches a simulating profiler (cachegrind) is told to simulate: this machine's, made simulable.

:func:`simulated_caches` reads this CPU's cache geometries from sysfs and gives I1 and D1 (this
machine's L1) and the last level (this machine's L2, one core's own), each rounded where a
simulator needs a power-of-two number of sets (:func:`simulable`), with a sentence saying where
each came from and what was changed. :mod:`pragma_core.sizes.profiling` sizes a profiled task by
that last level.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import attrs
from attrs import validators as v

from ..machine.hardware import describe_cpu
from .shrinking import format_bytes

__all__ = [
    "FALLBACK_SIMULATED_LL",
    "CacheGeometry",
    "SimulatedCaches",
    "read_cache_geometries",
    "simulable",
    "simulated_caches",
]

_SYSFS_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")
_MIN_LINE_BYTES = 16  # cachegrind refuses smaller lines (an access could straddle three of them)


@attrs.frozen(kw_only=True)
class CacheGeometry:
    """One cache as a simulator takes it: total size, ways (associativity) and line size, in bytes."""

    size_bytes: int = attrs.field(validator=[v.instance_of(int), v.ge(1)])
    ways: int = attrs.field(validator=[v.instance_of(int), v.ge(1)])
    line_bytes: int = attrs.field(validator=[v.instance_of(int), v.ge(1)])

    @property
    def sets(self) -> int:
        return self.size_bytes // (self.ways * self.line_bytes)

    def describe(self) -> str:
        """``512 KiB, 8-way, 64 B lines``."""
        return f"{format_bytes(self.size_bytes)}, {self.ways}-way, {self.line_bytes} B lines"


FALLBACK_SIMULATED_LL = CacheGeometry(size_bytes=2**20, ways=16, line_bytes=64)
"""The last level simulated when this machine reports no L2 nor L3 geometry (a common L2 size)."""


@attrs.frozen(kw_only=True)
class SimulatedCaches:
    """The caches a simulating profiler is given: ``i1`` and ``d1`` (None: the simulator's own
    choice), the last level ``ll``, and in words where each came from (``origin``) and what was
    changed to make it simulable (``adjustments``)."""

    i1: CacheGeometry | None
    d1: CacheGeometry | None
    ll: CacheGeometry
    origin: str
    adjustments: tuple[str, ...] = ()

    def describe(self) -> str:
        """One sentence for a profile's notes: what was simulated, from what, and what was not."""
        text = self.origin
        if self.adjustments:
            text += "; " + "; ".join(self.adjustments)
        return text


def read_cache_geometries(folder: Path = _SYSFS_CACHES) -> dict[str, tuple[int, int, int]]:
    """This CPU's caches from sysfs (``folder`` is ``/sys/devices/system/cpu/cpu0/cache``):
    ``{"L1d": (size, ways, line), "L1i": ..., "L2": ..., "L3": ...}`` in bytes, for the levels
    that state all three (a fully associative cache says 0 ways: its size over its line)."""
    found: dict[str, tuple[int, int, int]] = {}
    for index in sorted(folder.glob("index[0-9]*")):
        try:
            level, kind, size, ways, line = (
                (index / name).read_text().strip()
                for name in ("level", "type", "size", "ways_of_associativity", "coherency_line_size")
            )
        except OSError:
            continue
        name = f"L{level}" + {"Data": "d", "Instruction": "i"}.get(kind, "")
        size_bytes = _size_bytes(size)
        if size_bytes is None or not ways.isdigit() or not line.isdigit() or int(line) < 1:
            continue
        found.setdefault(name, (size_bytes, int(ways) or size_bytes // int(line), int(line)))
    return found


def simulable(size_bytes: int, ways: int, line_bytes: int) -> tuple[CacheGeometry, str]:
    """The nearest cache a simulator such as cachegrind accepts, and what was changed ('' if
    nothing): its line must be a power of two of at least 16 bytes, and its sets (size over ways
    times line) a power of two. The line is kept; when the sets are not a power of two they are
    rounded down to one and the ways raised to keep the size (30 MiB 20-way becomes 16384 sets of
    30 ways); where the size then is not a whole number of ways, it is rounded down to one."""
    wanted = f"{format_bytes(size_bytes)}, {ways}-way, {line_bytes} B lines"
    line = line_bytes
    if line < _MIN_LINE_BYTES or line & (line - 1):
        line = 64
    ways = max(1, min(ways, size_bytes // line))
    sets = max(1, size_bytes // (ways * line))
    if sets & (sets - 1) == 0 and sets * ways * line == size_bytes and line == line_bytes:
        return CacheGeometry(size_bytes=size_bytes, ways=ways, line_bytes=line), ""
    sets = 1 << (sets.bit_length() - 1)
    ways = max(1, size_bytes // (sets * line))
    geometry = CacheGeometry(size_bytes=sets * ways * line, ways=ways, line_bytes=line)
    return geometry, f"{wanted} simulated as {geometry.describe()} ({geometry.sets} sets, a power of two)"


@functools.cache
def simulated_caches() -> SimulatedCaches:
    """The caches a simulating profiler describes on this machine (read once per process).

    I1 and D1 are this machine's L1 caches. The last level is this machine's L2, the last level
    one core has to itself: cachegrind simulates two levels, and the replay it runs stays small
    when the data need only be twice the L2 to stream through it. Without an L2 it is the L3
    (one instance); without either, :data:`FALLBACK_SIMULATED_LL`. Geometries come from sysfs
    (:func:`read_cache_geometries`), made simulable with :func:`simulable`."""
    caches = read_cache_geometries()
    adjustments = []

    def level(name: str) -> CacheGeometry | None:
        if name not in caches:
            return None
        geometry, change = simulable(*caches[name])
        if change:
            adjustments.append(f"{name} {change}")
        return geometry

    i1, d1 = level("L1i"), level("L1d")
    l1 = "this machine's L1 (" + "; ".join(
        f"{name}: {geometry.describe()}" for name, geometry in (("I1", i1), ("D1", d1)) if geometry is not None
    )
    l1 = l1 + ")" if i1 or d1 else "cachegrind's own choice of I1 and D1"
    ll = level("L2")
    if ll is not None:
        l3 = describe_cpu().l3_total_bytes or describe_cpu().l3_bytes
        beyond = f"; its L3 ({format_bytes(l3)}) is not simulated" if l3 else ""
        origin = f"{l1} and, as the last level, this machine's L2 ({ll.describe()}: one core's own){beyond}"
    elif (ll := level("L3")) is not None:
        origin = f"{l1} and, as the last level, this machine's L3 ({ll.describe()}: one instance)"
    else:
        ll = FALLBACK_SIMULATED_LL
        origin = f"{l1} and, as the last level, an assumed {ll.describe()} (this machine does not say its L2)"
    return SimulatedCaches(i1=i1, d1=d1, ll=ll, origin="simulated " + origin, adjustments=tuple(adjustments))


def _size_bytes(text: str) -> int | None:
    """``32K`` (sysfs), ``1024 KiB``, ``8M`` -> bytes."""
    match = re.fullmatch(r"(\d+)\s*([KMG]?)i?B?", text.strip(), re.IGNORECASE)
    if match is None:
        return None
    return int(match[1]) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[match[2].upper()]
