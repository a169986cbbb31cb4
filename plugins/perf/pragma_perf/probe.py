"""Whether perf runs here, what it may count, and how to ask it for top-down level 1.

    from pragma_perf.probe import probe, perf_setup

    probe()              # Availability: True when perf counts at least software events
    setup = perf_setup() # the details collect uses: perf's path, hardware events, top-down options

Each fact comes from running ``perf stat`` on ``true`` (milliseconds each) or reading
``/proc/sys/kernel/perf_event_paranoid``; the answers are cached for the life of the process. The
pure helpers (:func:`read_setup`, :func:`paranoid_text`) turn perf's own messages into the record, so
tests feed them perf output recorded on real machines.
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

import attrs

from pragma_core.errors import ProfileParseError, ProfilerUnavailable
from pragma_core.plugin_api.components import Availability
from pragma_core.sandbox.tools import run_tool

from .metrics import base_name
from .parse import Reading, read_rows

__all__ = [
    "HARDWARE_UNAVAILABLE_VM",
    "PerfSetup",
    "probe",
    "perf_setup",
    "read_setup",
    "paranoid_text",
    "classify_name",
]

HARDWARE_UNAVAILABLE_VM = "hardware counters are unavailable on this machine (a virtual machine without a PMU)"
HARDWARE_UNAVAILABLE = "hardware counters are unavailable on this machine (perf reports them <not supported>)"
PROBE_TIMEOUT_S = 5.0
STILL_WORKS_SOFTWARE = (
    "software events (task-clock, page-faults, context-switches, cpu-migrations); the valgrind "
    "profiler (cachegrind) simulates caches and branches without a PMU"
)
STILL_WORKS_WITHOUT_PERF = "the valgrind profiler (cachegrind) simulates caches and branches without perf"

_PARANOID_ALLOWS = {
    -1: "every event, CPU-wide and kernel included",
    0: "CPU-wide and kernel events, but not raw tracepoints",
    1: "kernel and user space of their own processes, but no CPU-wide (-a) events",
    2: "only the user space of their own processes (perf adds :u to every event)",
}

Runner = Callable[[list[str]], tuple[int | None, str]]


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class PerfSetup:
    """What perf can do on this machine, as :func:`perf_setup` found it."""

    perf: str | None
    version: str = ""
    runs: bool = False
    reason: str = ""
    hardware: bool = False
    hardware_reason: str = ""
    paranoid: int | None = None
    privileged: bool = False
    user_only: bool = False
    topdown_args: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    topdown_reason: str = ""


def probe() -> Availability:
    """Available when perf counts software events; the reason tells what hardware is missing."""
    setup = perf_setup()
    if not setup.runs:
        return Availability(available=False, reason=setup.reason, still_works=STILL_WORKS_WITHOUT_PERF)
    limits = []
    if not setup.hardware:
        limits.append(f"{setup.hardware_reason}: perf counts only software events here")
    elif not setup.topdown_args:
        limits.append(setup.topdown_reason)
    if setup.user_only:
        limits.append(paranoid_text(setup.paranoid, setup.privileged))
    return Availability(
        available=True, reason="; ".join(limits), still_works=STILL_WORKS_SOFTWARE if not setup.hardware else ""
    )


@functools.cache
def perf_setup() -> PerfSetup:
    """Probe perf once: is it installed, does it count, hardware events, top-down options."""
    perf = shutil.which("perf")
    paranoid = _read_paranoid()
    privileged = _privileged()
    if perf is None:
        return PerfSetup(
            perf=None,
            paranoid=paranoid,
            privileged=privileged,
            reason="perf is not installed (no `perf` on PATH): install the linux-perf "
            "package (Debian) or linux-tools-$(uname -r) (Ubuntu)",
        )
    return read_setup(perf, _run, paranoid=paranoid, privileged=privileged, virtual_machine=_virtual_machine())


def read_setup(perf: str, run: Runner, *, paranoid: int | None, privileged: bool, virtual_machine: bool) -> PerfSetup:
    """Build the setup from ``run(argv) -> (exit code, stderr)``; pure apart from ``run``."""
    version_code, version = run([perf, "--version"])
    code, text = run([perf, "stat", "-x,", "-e", "task-clock,instructions", "true"])
    rows = _rows(text)
    software = [r for r in rows if base_name(r.name) in ("task-clock", "cpu-clock") and r.value is not None]
    known = PerfSetup(
        perf=perf, version=version.strip() if version_code == 0 else "", paranoid=paranoid, privileged=privileged
    )
    if code != 0 or not software:
        return attrs.evolve(known, reason=_failure(code, text, paranoid, privileged))
    instructions = [r for r in rows if base_name(r.name) == "instructions"]
    hardware = bool(instructions) and instructions[0].value is not None
    hardware_reason = ""
    if not hardware:
        hardware_reason = HARDWARE_UNAVAILABLE_VM if virtual_machine else HARDWARE_UNAVAILABLE
    topdown_args, topdown_reason = _topdown(perf, run)
    return attrs.evolve(
        known,
        runs=True,
        hardware=hardware,
        hardware_reason=hardware_reason,
        user_only=any(r.name.endswith(":u") for r in rows),
        topdown_args=topdown_args,
        topdown_reason=topdown_reason,
    )


def paranoid_text(level: int | None, privileged: bool) -> str:
    """What ``perf_event_paranoid`` allows users without CAP_PERFMON, and whether it applies here."""
    if level is None:
        return "perf_event_paranoid is unknown (/proc/sys/kernel/perf_event_paranoid is unreadable)"
    allows = (
        _PARANOID_ALLOWS.get(level)
        if level <= 2
        else ("no perf events at all (a Debian/Ubuntu extension of the setting)")
    )
    text = f"perf_event_paranoid is {level}: users without CAP_PERFMON may count {allows}"
    if privileged:
        return text + (
            "; this process is root or has CAP_PERFMON, so the setting does not limit it, but programs "
            "profiled in pragma's sandbox run without capabilities, and for them it applies"
        )
    return text


@functools.cache
def classify_name(name: str) -> tuple[str, str]:
    """("event", "") or ("metric", "") when perf knows the name, else ("", why not)."""
    setup = perf_setup()
    if setup.perf is None:
        return "", setup.reason
    return read_classification(setup.perf, name, _run)


def read_classification(perf: str, name: str, run: Runner) -> tuple[str, str]:
    """Ask perf about ``name`` as an event (``-e``), then as a metric or group (``-M``)."""
    code, event_text = run([perf, "stat", "-x,", "-e", name, "true"])
    if code == 0:
        return "event", ""
    code, metric_text = run([perf, "stat", "-x,", "-M", name, "true"])
    if code == 0 and not _metric_failed(metric_text):
        return "metric", ""
    if "event syntax error" in event_text and (
        "Cannot find metric or group" in metric_text or _counted_defaults_only(metric_text)
    ):
        return "", f"perf knows no event or metric named {name!r} (`perf list` shows what it knows)"
    detail = _metric_error(metric_text) if _metric_failed(metric_text) else _first_error(event_text)
    return "", f"perf cannot count {name!r} here: {detail}"


# -- helpers ------------------------------------------------------------------------------------


def _run(argv: list[str]) -> tuple[int | None, str]:
    """Exit code and stderr (stdout for ``--version``) of a short perf command."""
    try:
        run = run_tool(argv, tool="perf", env={**os.environ, "LC_ALL": "C"}, timeout_s=PROBE_TIMEOUT_S)
    except ProfilerUnavailable as error:
        return None, str(error)
    if run.timed_out:
        return None, f"`{' '.join(argv)}` {run.ending}"
    return run.returncode, run.stdout_tail if argv[1:] == ["--version"] else run.stderr_tail


def _rows(text: str) -> list[Reading]:
    try:
        return read_rows(text)
    except ProfileParseError:
        return []


def _metric_failed(text: str) -> bool:
    return any(
        marker in text for marker in ("Cannot find metric or group", "event syntax error", "Cannot find PMU")
    ) or _counted_defaults_only(text)


_DEFAULT_EVENTS = frozenset(
    {
        "task-clock",
        "context-switches",
        "cpu-migrations",
        "page-faults",
        "cycles",
        "instructions",
        "branches",
        "branch-misses",
        "stalled-cycles-frontend",
        "stalled-cycles-backend",
    }
)
"""The events of perf stat's default set (perf 6.1, one program)."""


def _counted_defaults_only(text: str) -> bool:
    """Whether ``perf stat -M NAME`` ignored the name and counted only its default events: perf 6.1
    does so on a CPU it has no metric table for (a virtual machine naming its CPU "AMD EPYC")
    without saying "Cannot find metric or group", and exits 0. A metric group counts events of
    its own (``slots``, ``topdown-*``, ...)."""
    names = {base_name(reading.name) for reading in _rows(text)}
    return bool(names) and names <= _DEFAULT_EVENTS


def _metric_error(text: str) -> str:
    if _counted_defaults_only(text) and "Cannot find" not in text:
        return "perf ignored the name and counted its default events (no metric table for this CPU)"
    return _first_error(text)


def _first_error(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if any(word in line.lower() for word in ("error", "cannot", "not supported", "requires", "denied")):
            return line
    return lines[0] if lines else "no message"


def _failure(code: int | None, text: str, paranoid: int | None, privileged: bool) -> str:
    """One line on why ``perf stat`` counted nothing."""
    if any(
        marker in text
        for marker in ("perf_event_paranoid", "Access to performance monitoring", "Permission denied", "No permission")
    ):
        return (
            f"perf may not open events for this user: {paranoid_text(paranoid, privileged)}; run as root, "
            "grant CAP_PERFMON, or lower it with `sysctl kernel.perf_event_paranoid=2`"
        )
    if code is None:
        return text
    return f"`perf stat` counted nothing (exit code {code}): {_first_error(text)}"


def _topdown(perf: str, run: Runner) -> tuple[tuple[str, ...], str]:
    """The options that give top-down level 1 for one program here, or () and why none does."""
    code, metric_text = run([perf, "stat", "-x,", "-M", "TopdownL1", "true"])
    if code == 0 and not _metric_failed(metric_text):
        return ("-M", "TopdownL1"), ""
    flag = ("--topdown", "--no-metric-only")
    code, flag_text = run([perf, "stat", "-x,", *flag, "true"])
    if code == 0 and "requires" not in flag_text:
        return flag, ""
    return (), (
        "perf has no top-down level 1 for one program on this CPU: `-M TopdownL1` says "
        f"{_metric_error(metric_text)!r} and `--topdown` says {_first_error(flag_text)!r}"
    )


def _read_paranoid() -> int | None:
    try:
        return int(Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip())
    except (OSError, ValueError):
        return None


def _privileged() -> bool:
    """Root, or CAP_PERFMON (38) or CAP_SYS_ADMIN (21) in the effective capabilities."""
    if os.geteuid() == 0:
        return True
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                caps = int(line.split()[1], 16)
                return bool(caps & (1 << 38) or caps & (1 << 21))
    except (OSError, ValueError, IndexError):
        pass
    return False


def _virtual_machine() -> bool:
    """A hypervisor flag in /proc/cpuinfo and no CPU PMU in /sys/bus/event_source/devices."""
    try:
        flagged = " hypervisor" in Path("/proc/cpuinfo").read_text()
    except OSError:
        flagged = False
    devices = Path("/sys/bus/event_source/devices")
    try:
        names = [path.name for path in devices.iterdir()]
    except OSError:
        names = []
    has_cpu_pmu = any(name in ("cpu", "cpu_core", "cpu_atom") or name.startswith("armv") for name in names)
    return flagged and not has_cpu_pmu
