"""What CPU this is: cores, caches and the instruction-set features kernels care about.

:func:`describe_cpu` reads ``lscpu`` (run with ``LC_ALL=C`` so the keys are English) and falls
back to ``/proc/cpuinfo`` with cache sizes from sysfs, then to :func:`os.cpu_count`, so it answers on
any machine. The parsers are pure and take the text a tool printed, so they are tested on output
captured from real machines (``tests/data/``)::

    cpu = describe_cpu()
    cpu.physical_cores, cpu.l2_bytes, "avx512f" in cpu.features
    cpu.fingerprint()   # 'x86_64-3f09c2d41a': names this machine kind in cache keys

Cache sizes are those of one instance (what one core, or one core complex for the L3, sees);
``l3_total_bytes`` adds up all L3 instances, which is what a buffer must exceed to reach memory.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import re
import subprocess
from pathlib import Path
from typing import Any

import attrs
from attrs import validators as v

__all__ = [
    "KERNEL_FEATURES",
    "HardwareDescription",
    "describe_cpu",
    "parse_lscpu",
    "parse_cpuinfo",
    "read_sysfs_caches",
]

KERNEL_FEATURES = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512_vnni",
    "amx_tile",
    "neon",
    "asimd",
    "sve",
)
"""The ISA flags a kernel writer chooses code paths by, as Linux names them (``asimd`` is NEON on
aarch64; 32-bit ARM says ``neon``)."""

_SOURCES = ("lscpu", "cpuinfo", "os")
_SYSFS_CPU = Path("/sys/devices/system/cpu")
_LSCPU_TIMEOUT_S = 10


def _positive_int(_instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{attribute.name} must be a positive integer, got {value!r}")


_optional_bytes = v.optional([v.instance_of(int), v.ge(1)])


def _known_features(value: Any) -> tuple[str, ...]:
    """Keep the kernel-relevant flags, in :data:`KERNEL_FEATURES` order, so equal CPUs compare equal."""
    present = set(value)
    return tuple(flag for flag in KERNEL_FEATURES if flag in present)


@attrs.frozen(kw_only=True)
class HardwareDescription:
    """One machine's CPU as the operating system reports it.

    ``source`` says where the facts came from: ``lscpu``, ``cpuinfo`` (``/proc/cpuinfo`` and sysfs)
    or ``os`` (only a CPU count; cores are then assumed to be logical CPUs).
    """

    model_name: str = attrs.field(validator=v.and_(v.instance_of(str), v.min_len(1)))
    architecture: str = attrs.field(validator=v.and_(v.instance_of(str), v.min_len(1)))
    sockets: int = attrs.field(validator=_positive_int)
    physical_cores: int = attrs.field(validator=_positive_int)
    logical_cpus: int = attrs.field(validator=_positive_int)
    threads_per_core: int = attrs.field(validator=_positive_int)
    l1d_bytes: int | None = attrs.field(default=None, validator=_optional_bytes)
    l2_bytes: int | None = attrs.field(default=None, validator=_optional_bytes)
    l3_bytes: int | None = attrs.field(default=None, validator=_optional_bytes)
    l3_total_bytes: int | None = attrs.field(default=None, validator=_optional_bytes)
    features: tuple[str, ...] = attrs.field(default=(), converter=_known_features)
    source: str = attrs.field(default="lscpu", validator=v.in_(_SOURCES))

    def fingerprint(self) -> str:
        """``x86_64-3f09c2d41a``: the same for every machine of this kind, whichever tool described it."""
        identity = attrs.asdict(self, filter=lambda attribute, _value: attribute.name != "source")
        digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
        return f"{re.sub(r'[^A-Za-z0-9_.]+', '-', self.architecture)}-{digest[:10]}"


@functools.cache
def describe_cpu() -> HardwareDescription:
    """This machine's CPU, from ``lscpu``, else ``/proc/cpuinfo`` and sysfs, else :func:`os.cpu_count`.

    Read once per process (the CPU does not change under a running program); ``describe_cpu.cache_clear()``
    reads it again."""
    description = _from_lscpu() or _from_cpuinfo() or _from_os()
    if description.l1d_bytes is None and description.l2_bytes is None and description.l3_bytes is None:
        caches: dict[str, Any] = read_sysfs_caches(_SYSFS_CPU)
        description = attrs.evolve(description, **caches)
    return description


# -- lscpu --------------------------------------------------------------------------------------

_KEY_VALUE = re.compile(r"^(?P<indent>\s*)(?P<key>[^:\s][^:]*):(?P<gap>\s*)(?P<value>.*)$")
# "64 KiB (2 instances)" (util-linux >= 2.34), "65536 (2 instances)" (lscpu -B), "32K" (older).
_CACHE_SIZE = re.compile(
    r"^(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[KMGT]?)(?:i?B)?(?:\s*\((?P<count>\d+) instances?\))?$",
    re.IGNORECASE,
)
_UNIT = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
# Plain output says "L1d cache"; on a terminal, lscpu >= 2.37 nests "L1d" under "Caches (sum of all)".
_CACHE_KEYS = {"l1d": ("L1d cache", "L1d"), "l2": ("L2 cache", "L2"), "l3": ("L3 cache", "L3")}


def parse_lscpu(text: str) -> HardwareDescription:
    """Describe the CPU from ``lscpu``'s plain output (piped, or as a terminal shows it).

    Raises :class:`ValueError` when the text has no ``CPU(s):`` line, as it then is not lscpu's.
    """
    entries = _lscpu_entries(text)
    first: dict[str, str] = {}
    for key, value in entries:
        first.setdefault(key, value)
    logical = _int(first.get("CPU(s)"))
    if logical is None:
        raise ValueError("no 'CPU(s):' line: this is not the output of lscpu")

    # A heterogeneous CPU (big.LITTLE) lists one section per core type, each opened by "Model name".
    sections: list[dict[str, str]] = [{}]
    for key, value in entries:
        if key == "Model name" and "Model name" in sections[-1]:
            sections.append({})
        sections[-1].setdefault(key, value)
    models = list(dict.fromkeys(s["Model name"] for s in sections if s.get("Model name")))
    threads = max((_int(s.get("Thread(s) per core")) or 0 for s in sections), default=0)
    sockets = max((_int(s.get("Socket(s)")) or 0 for s in sections), default=0) or 1
    cores = _sum_or_none(_section_cores(s) for s in sections)
    if cores is None:
        cores = max(1, logical // max(threads, 1))
    flags = {flag for key, value in entries if key == "Flags" for flag in value.split()}

    caches: dict[str, int | None] = {}
    for name, keys in _CACHE_KEYS.items():
        raw = next((first[key] for key in keys if key in first), None)
        one, total = _cache_size(raw)
        caches[f"{name}_bytes"] = one
        if name == "l3":
            caches["l3_total_bytes"] = total
    return HardwareDescription(
        model_name=" + ".join(models) or first.get("Vendor ID") or "unknown",
        architecture=first.get("Architecture") or "unknown",
        sockets=sockets,
        physical_cores=cores,
        logical_cpus=logical,
        threads_per_core=threads or max(1, logical // cores),
        features=flags,
        source="lscpu",
        **caches,
    )


def _lscpu_entries(text: str) -> list[tuple[str, str]]:
    """``(key, value)`` in order; values a terminal wrapped onto following lines are joined back."""
    entries: list[tuple[str, str]] = []
    value_column = None
    for line in text.splitlines():
        match = _KEY_VALUE.match(line)
        if match:
            entries.append((match["key"].strip(), match["value"]))
            value_column = match.start("value")
        elif entries and value_column is not None and line[:value_column].isspace():
            # A terminal cuts a long value at a fixed width, even inside a word: glue the pieces.
            key, value = entries[-1]
            entries[-1] = (key, value + line[value_column:])
    return [(key, value.strip()) for key, value in entries]


def _section_cores(section: dict[str, str]) -> int | None:
    for per, count in (("Core(s) per socket", "Socket(s)"), ("Core(s) per cluster", "Cluster(s)")):
        cores, groups = _int(section.get(per)), _int(section.get(count))
        if cores is not None and groups is not None:
            return cores * groups
    return None


def _cache_size(raw: str | None) -> tuple[int | None, int | None]:
    """One instance's size and the total of all instances, in bytes; the total is None when the
    text gives no instance count (older lscpu printed one instance's size, ``32K``)."""
    match = _CACHE_SIZE.match(raw.strip()) if raw else None
    if not match:
        return None, None
    unit = _UNIT[match["unit"].upper()]
    size = float(match["number"]) * unit
    if match["count"] is None:
        return round(size), None
    count = int(match["count"])
    one = size / count
    if unit > 1:
        # The human form is rounded to one decimal ("1.3 MiB"); caches come in whole KiB.
        one = max(1, round(one / 1024)) * 1024
    return round(one), round(one) * count


# -- /proc/cpuinfo and sysfs --------------------------------------------------------------------


def parse_cpuinfo(text: str, *, architecture: str) -> HardwareDescription:
    """Describe the CPU from ``/proc/cpuinfo`` (which does not name the architecture: pass it).

    Cache sizes stay None: ``cache size`` there is the L2 on AMD and the L3 on Intel, so they come
    from :func:`read_sysfs_caches` instead. Raises :class:`ValueError` when no processor is listed.
    """
    blocks = []
    for chunk in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in chunk.splitlines():
            key, colon, value = line.partition(":")
            if colon:
                fields.setdefault(key.strip(), value.strip())
        if "processor" in fields:
            blocks.append(fields)
    if not blocks:
        raise ValueError("no 'processor' entries: this is not /proc/cpuinfo")
    logical = len(blocks)
    sockets = len({b["physical id"] for b in blocks if "physical id" in b}) or 1
    core_ids = {(b.get("physical id"), b["core id"]) for b in blocks if "core id" in b}
    cores = len(core_ids) or logical
    first = blocks[0]
    model = first.get("model name") or first.get("Processor") or first.get("cpu model")
    if not model and "CPU implementer" in first:
        model = f"implementer {first['CPU implementer']} part {first.get('CPU part', '?')}"
    flags = {flag for b in blocks for flag in (b.get("flags") or b.get("Features") or "").split()}
    return HardwareDescription(
        model_name=model or "unknown",
        architecture=architecture or "unknown",
        sockets=sockets,
        physical_cores=cores,
        logical_cpus=logical,
        threads_per_core=max(1, logical // cores),
        features=flags,
        source="cpuinfo",
    )


def read_sysfs_caches(root: Path) -> dict[str, int | None]:
    """``l1d_bytes``, ``l2_bytes``, ``l3_bytes`` and ``l3_total_bytes`` from
    ``root/cpu*/cache/index*`` (``root`` is ``/sys/devices/system/cpu`` on Linux); None where absent.

    An instance is one distinct ``shared_cpu_list``: the L3 of two core complexes counts twice.
    """
    sizes: dict[str, int] = {}
    sharing: dict[str, set[str]] = {}
    wanted = {("1", "data"): "l1d", ("2", "unified"): "l2", ("3", "unified"): "l3"}
    for index in sorted(Path(root).glob("cpu[0-9]*/cache/index[0-9]*")):
        try:
            level, kind, size, shared = (
                (index / name).read_text().strip() for name in ("level", "type", "size", "shared_cpu_list")
            )
        except OSError:
            continue
        name = wanted.get((level, kind.lower()))
        bytes_, _total = _cache_size(size)
        if name is None or bytes_ is None:
            continue
        sizes.setdefault(name, bytes_)
        sharing.setdefault(name, set()).add(shared)
    caches: dict[str, int | None] = {f"{name}_bytes": sizes.get(name) for name in ("l1d", "l2", "l3")}
    caches["l3_total_bytes"] = sizes["l3"] * len(sharing["l3"]) if "l3" in sizes else None
    return caches


# -- running the tools --------------------------------------------------------------------------


def _from_lscpu() -> HardwareDescription | None:
    try:
        result = subprocess.run(
            ["lscpu"],
            capture_output=True,
            text=True,
            timeout=_LSCPU_TIMEOUT_S,
            check=False,
            env={**os.environ, "LC_ALL": "C"},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if result.returncode != 0:
        return None
    try:
        return parse_lscpu(result.stdout)
    except ValueError:
        return None


def _from_cpuinfo() -> HardwareDescription | None:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        return parse_cpuinfo(text, architecture=platform.machine())
    except (OSError, ValueError):
        return None


def _from_os() -> HardwareDescription:
    count = os.cpu_count() or 1
    return HardwareDescription(
        model_name=platform.processor() or "unknown",
        architecture=platform.machine() or "unknown",
        sockets=1,
        physical_cores=count,
        logical_cpus=count,
        threads_per_core=1,
        source="os",
    )


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.strip().isdigit() else None


def _sum_or_none(values: Any) -> int | None:
    values = list(values)
    return sum(values) if values and all(value is not None for value in values) else None
