"""What else the machine is doing while pragma times: readings of ``/proc`` around a timing, the
CPUs idle enough to time on, and the rules that call a timing noisy.

A busy machine slows a multithreaded reference (OpenMP waits for its slowest thread) far more than
a serial candidate, so a speedup measured beside other work is inflated, not just noisy. Linux
says how much CPU time everyone used; what pragma's own process tree used is subtracted, and the
rest is other processes' share of the CPUs the timing ran on. Where ``/proc`` is missing (macOS),
the readings are None and only the calibration kernels and the drift between blocks judge.

Two calibration kernels run before and after every timing: a matrix product that lives in the
caches (what compute-bound work depends on: the CPUs) and a copy well beyond the last-level cache
(what memory-bound work depends on: the memory bandwidth, which a virtual machine's neighbours take
and give back over minutes; a compute kernel does not see it).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs

from ..paths import cache_dir

__all__ = [
    "OTHER_CPU_LIMIT",
    "STEAL_LIMIT",
    "MIN_WINDOW_S",
    "CALIBRATION_SHIFT_LIMIT",
    "CALIBRATION_SLOWDOWN_LIMIT",
    "DRIFT_LIMIT",
    "CALIBRATION_SIZE",
    "MEMORY_PROBE_SHIFT_LIMIT",
    "MEMORY_PROBE_SLOWDOWN_LIMIT",
    "memory_probe_bytes",
    "Snapshot",
    "IdleCpus",
    "snapshot",
    "usage_between",
    "frequency_mhz",
    "idle_cpus",
    "block_drift",
    "noise_reasons",
    "best_calibration",
    "best_memory_probe",
    "synthetic_load",
]

OTHER_CPU_LIMIT = 0.10
"""Other processes may use this share of the timing's CPUs (0.2 of a core on two) before the
timing is noisy: a quiet machine's background stays under a few hundredths."""
STEAL_LIMIT = 0.05
"""Share of the timing's CPUs the hypervisor may take (steal time) before the timing is noisy."""
MIN_WINDOW_S = 0.5
"""CPU time is counted in ticks (a hundredth of a second): over a shorter timing, one tick more or
less per CPU moves the reading by a fifth of a core or more, so others' use and steal are reported
but not judged (measured: a 50 ms timing on a quiet machine read 0.22-0.32 of two CPUs)."""
CALIBRATION_SHIFT_LIMIT = 1.5
"""The calibration kernel's median after the timing over before (or the inverse) above this means
the machine's state changed while timing (a busy loop on one of two cores moves it 5-40x; an idle
machine after a long serial candidate, up to about 1.4x)."""
CALIBRATION_SLOWDOWN_LIMIT = 2.0
"""The calibration kernel's median over the fastest this machine has run it: above this, the CPUs
were shared (busy loops slowed it 2-40x; on the quiet virtual machine one verification in a dozen
ran it 1.6x slower than its best, both before and after the timing, which is the host's business)."""
DRIFT_LIMIT = 2.0
"""Highest over lowest speedup across consecutive blocks of the timing: above this, the reference
and the candidate drifted apart (busy loops moved it up to 10x; on a quiet machine a serial
candidate 50 times slower than a two-thread reference moved it up to 1.7x, its threads waking
from sleep between calls)."""

CALIBRATION_SIZE = 512
"""The calibration kernel is the product of two matrices of this size: about 2 ms on two cores,
long enough not to jitter, short enough to run nine times before and after every timing."""

MEMORY_PROBE_SHIFT_LIMIT = 1.3
"""The memory probe's median after the timing over before (or the inverse) above this means the
memory bandwidth changed while timing. Tighter than the compute calibration's: the issue it
answers saw a memory-bound kernel read 2x apart a minute later on a virtual machine whose
bandwidth moves with its neighbours, and a change of 1.3x is already beyond a timing's interval."""
MEMORY_PROBE_SLOWDOWN_LIMIT = 1.6
"""The memory probe's median over the fastest this machine has run it: above this, the timing ran
in a window of reduced memory bandwidth, where a memory-bound figure does not hold; a bench times
such a verdict again later. Wider than the change limit: on the quiet 2-core VM the probe ran at
1.31-1.57x its best in 14 of 24 verifications, the host's memory moving between two levels, and
every one of those figures reproduced within 10% in fresh processes (interleaved timing keeps the
ratio); the 2x windows that did move a figure are beyond it."""
_MEMORY_PROBE_MIN_BYTES = 32 * 1024**2
_MEMORY_PROBE_MAX_BYTES = 256 * 1024**2

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_BUSY_SHARE = 0.3  # a CPU busier than this (others' work) is not counted idle for the thread default


@attrs.frozen
class Snapshot:
    """CPU time counters at one moment: per CPU (busy, steal) ticks, pragma's own process tree's
    CPU seconds, and the 1-minute load average."""

    wall: float
    cpus: dict[int, tuple[int, int, int]] | None  # cpu -> (busy, idle, steal) ticks
    own_s: float | None
    load1: float | None


def snapshot(child_pid: int | None = None) -> Snapshot:
    """Read the counters now. pragma's own work is this process's and the tree under
    ``child_pid`` (the sandbox child), not this process's other children: builds or timings of
    other tasks started beside this one are other work too."""
    parent = _process_seconds(os.getpid())
    child = _tree_seconds(child_pid) if child_pid is not None else 0.0
    return Snapshot(
        wall=time.monotonic(),
        cpus=_cpu_ticks(),
        own_s=None if parent is None or child is None else parent + child,
        load1=_load1(),
    )


def usage_between(before: Snapshot, after: Snapshot, cpus: Sequence[int]) -> tuple[float | None, float | None]:
    """Cores' worth of CPU time that other processes used on ``cpus``, and that was stolen from
    them, averaged between the snapshots; None where not readable. pragma's own tree may have run
    on other CPUs, so the first is a slight underestimate, never an overestimate of its own work."""
    seconds = after.wall - before.wall
    if before.cpus is None or after.cpus is None or seconds <= 0:
        return None, None
    busy = steal = 0
    for cpu in cpus:
        if cpu in before.cpus and cpu in after.cpus:
            busy += after.cpus[cpu][0] - before.cpus[cpu][0]
            steal += after.cpus[cpu][2] - before.cpus[cpu][2]
    busy_s, steal_s = busy / _CLOCK_TICKS, steal / _CLOCK_TICKS
    other = None
    if before.own_s is not None and after.own_s is not None:
        other = max(0.0, busy_s - (after.own_s - before.own_s)) / seconds
    return other, max(0.0, steal_s / seconds)


def frequency_mhz(cpus: Sequence[int]) -> tuple[float, float] | None:
    """Lowest and highest current frequency of ``cpus`` (cpufreq, else /proc/cpuinfo), or None."""
    values = []
    for cpu in cpus:
        try:
            values.append(int(Path(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq").read_text()) / 1e3)
        except (OSError, ValueError):
            break
    if len(values) != len(cpus):
        values = _cpuinfo_mhz(cpus)
    return (min(values), max(values)) if values else None


@attrs.frozen
class IdleCpus:
    """The CPUs to time on: all of this process's CPUs on a quiet machine, else those others left
    idle (at least one), with each allowed CPU's busy share over the sample."""

    cpus: tuple[int, ...]
    allowed: tuple[int, ...]
    busy_share: dict[int, float]

    @property
    def busy(self) -> bool:
        """True when other work kept some of the allowed CPUs busy."""
        return len(self.cpus) < len(self.allowed)

    def describe(self) -> str:
        shares = ", ".join(f"CPU {cpu} {share:.0%}" for cpu, share in sorted(self.busy_share.items()))
        return f"the machine was busy ({shares} used by other work)"


def idle_cpus(window_s: float = 0.25) -> IdleCpus:
    """Watch the CPUs this process may use for ``window_s`` and keep those others leave idle.

    Without ``/proc/stat`` (or affinity), every CPU counts as idle."""
    allowed = (
        tuple(sorted(os.sched_getaffinity(0)))
        if hasattr(os, "sched_getaffinity")
        else tuple(range(os.cpu_count() or 1))
    )
    before = _cpu_ticks()
    if before is None:
        return IdleCpus(cpus=allowed, allowed=allowed, busy_share={})
    time.sleep(window_s)
    after = _cpu_ticks() or {}
    shares = {}
    for cpu in allowed:
        if cpu in before and cpu in after:
            busy = after[cpu][0] - before[cpu][0]
            total = busy + after[cpu][1] - before[cpu][1] + after[cpu][2] - before[cpu][2]
            shares[cpu] = busy / total if total > 0 else 0.0
    idle = tuple(cpu for cpu in allowed if shares.get(cpu, 0.0) < _BUSY_SHARE)
    if not idle:
        idle = (min(allowed, key=lambda cpu: (shares.get(cpu, 0.0), -cpu)),)  # CPU 0 takes most interrupts
    return IdleCpus(cpus=idle, allowed=allowed, busy_share=shares)


def block_drift(reference_ms: Sequence[float], candidate_ms: Sequence[float]) -> float | None:
    """Highest over lowest speedup (median over median) across consecutive blocks of paired timed
    calls: 4 blocks, from 24 pairs on (None below: medians of fewer calls move by chance)."""
    pairs = min(len(reference_ms), len(candidate_ms))
    blocks = 4
    if pairs < 6 * blocks:
        return None
    size = pairs // blocks
    speedups = []
    for block in range(blocks):
        ref = statistics.median(reference_ms[block * size : (block + 1) * size])
        cand = statistics.median(candidate_ms[block * size : (block + 1) * size])
        if ref <= 0 or cand <= 0:
            return None
        speedups.append(ref / cand)
    return max(speedups) / min(speedups)


def memory_probe_bytes() -> int:
    """Size of each of the memory probe's two buffers: twice the last-level cache (all of it, every
    instance), so a copy streams from memory; at least 32 MiB, at most 256 MiB (a few milliseconds
    at tens of GB/s)."""
    from .hardware import describe_cpu

    hardware = describe_cpu()
    cache = hardware.l3_total_bytes or hardware.l2_bytes or 0
    return min(_MEMORY_PROBE_MAX_BYTES, max(_MEMORY_PROBE_MIN_BYTES, 2 * cache))


def noise_reasons(
    *,
    cpus: int,
    seconds: float,
    other_cpu: float | None,
    steal: float | None,
    calibration_ms: tuple[float, float] | None,
    calibration_best_ms: float | None,
    drift: float | None,
    memory_probe_ms: tuple[float, float] | None = None,
    memory_probe_best_ms: float | None = None,
    memory_bound: bool = True,
) -> tuple[str, ...]:
    """Why a timing of ``seconds`` cannot be trusted, by the limits above; empty when nothing says so.
    The memory probe's slowdown against its best counts only for a ``memory_bound`` task (a
    compute-bound one has the calibration kernel); its change during the timing, for every task."""
    reasons = []
    counted = seconds >= MIN_WINDOW_S
    if counted and other_cpu is not None and other_cpu > OTHER_CPU_LIMIT * cpus:
        reasons.append(f"other processes used {other_cpu:.2f} of the {cpus} CPU(s) timed on")
    if counted and steal is not None and steal > STEAL_LIMIT * cpus:
        reasons.append(f"the hypervisor stole {steal:.2f} of the {cpus} CPU(s) timed on")
    if calibration_ms is not None:
        before, after = calibration_ms
        if max(before, after) > CALIBRATION_SHIFT_LIMIT * min(before, after):
            reasons.append(f"a calibration kernel took {before:.3g} ms before the timing and {after:.3g} ms after")
        elif calibration_best_ms and min(before, after) > CALIBRATION_SLOWDOWN_LIMIT * calibration_best_ms:
            reasons.append(
                f"a calibration kernel ran {min(before, after) / calibration_best_ms:.1f}x slower than this "
                "machine's best"
            )
    if memory_probe_ms is not None:
        before, after = memory_probe_ms
        if max(before, after) > MEMORY_PROBE_SHIFT_LIMIT * min(before, after):
            reasons.append(
                f"the memory probe (a copy beyond the last-level cache) took {before:.3g} ms before the timing "
                f"and {after:.3g} ms after: the memory bandwidth changed"
            )
        elif (
            memory_bound
            and memory_probe_best_ms
            and min(before, after) > MEMORY_PROBE_SLOWDOWN_LIMIT * memory_probe_best_ms
        ):
            reasons.append(
                f"the memory probe ran {min(before, after) / memory_probe_best_ms:.2f}x slower than this machine's "
                "best: memory bandwidth was reduced"
            )
    if drift is not None and drift > DRIFT_LIMIT:
        reasons.append(f"the speedup moved by {drift:.2f}x between parts of the timing")
    return tuple(reasons)


def best_calibration(threads: int, fastest_ms: float | None) -> float | None:
    """The fastest calibration time this machine has recorded for ``threads`` threads, before
    ``fastest_ms`` (this timing's) is recorded in turn when it is faster."""
    return _fastest_recorded(f"{threads}t-mm{CALIBRATION_SIZE}", fastest_ms)


def best_memory_probe(threads: int, nbytes: int, fastest_ms: float | None) -> float | None:
    """The fastest memory probe (buffers of ``nbytes``) this machine has recorded for ``threads``
    threads, before ``fastest_ms`` (this timing's) is recorded in turn when it is faster."""
    return _fastest_recorded(f"{threads}t-copy{nbytes}", fastest_ms)


def _fastest_recorded(kind: str, fastest_ms: float | None) -> float | None:
    """The fastest time recorded for this machine (its CPU fingerprint) and ``kind``, before
    ``fastest_ms`` is recorded in turn when it is faster; None when none was."""
    from .hardware import describe_cpu

    path = cache_dir("calibration") / f"{describe_cpu().fingerprint()}-{kind}.json"
    best = None
    try:
        value = json.loads(path.read_text()).get("fastest_ms")
        if isinstance(value, (int, float)) and value > 0:
            best = float(value)
    except (OSError, ValueError, AttributeError):
        pass
    if fastest_ms is not None and fastest_ms > 0 and (best is None or fastest_ms < best):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_text(json.dumps({"fastest_ms": fastest_ms}))
            temporary.replace(path)
        except OSError:
            pass  # a read-only cache only costs the comparison next time
    return best


@contextlib.contextmanager
def synthetic_load(processes: int, *, cpus: Sequence[int] | None = None, limit_s: float = 600.0) -> Iterator[list[int]]:
    """Busy loops on the machine while the block runs, for tests and benchmarks of noise: each a
    process outside this one's tree (so pragma counts it as other work), pinned to ``cpus`` when
    given, killed when the block ends and ending itself after ``limit_s`` whatever happens."""
    spin = (
        "import os, sys, time\n"
        "cpus = [int(c) for c in sys.argv[1].split(',') if c]\n"
        "if cpus: os.sched_setaffinity(0, cpus)\n"
        "end = time.monotonic() + float(sys.argv[2])\n"
        "while time.monotonic() < end: pass\n"
    )
    launch = (
        "import subprocess, sys\n"
        "for _ in range(int(sys.argv[1])):\n"
        "    child = subprocess.Popen([sys.executable, '-c', sys.argv[2], sys.argv[3], sys.argv[4]],\n"
        "                             start_new_session=True, stdin=subprocess.DEVNULL,\n"
        "                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "    print(child.pid, flush=True)\n"
    )
    cpu_text = ",".join(map(str, cpus or ()))
    launcher = subprocess.run(
        [sys.executable, "-c", launch, str(processes), spin, cpu_text, str(limit_s)],
        capture_output=True,
        text=True,
        check=True,
    )  # the launcher exits at once: its children are orphans, adopted outside this tree
    pids = [int(line) for line in launcher.stdout.split()]
    try:
        time.sleep(0.2)  # let them start spinning
        yield pids
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# -- readings ---------------------------------------------------------------------------------


def _cpu_ticks() -> dict[int, tuple[int, int, int]] | None:
    try:
        text = Path("/proc/stat").read_text()
    except OSError:
        return None
    ticks = {}
    for line in text.splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        name, *fields = line.split()
        try:
            values = [int(field) for field in fields[:8]] + [0] * (8 - len(fields[:8]))
            cpu = int(name[3:])
        except ValueError:
            continue
        user, nice, system, idle, iowait, irq, softirq, steal = values
        ticks[cpu] = (user + nice + system + irq + softirq, idle + iowait, steal)
    return ticks or None


def _process_seconds(pid: int) -> float | None:
    """CPU seconds of the process ``pid`` itself (all its threads), not of its children."""
    fields = _stat_fields(pid)
    try:
        return sum(int(value) for value in fields[11:13]) / _CLOCK_TICKS if fields else None
    except ValueError:
        return None


def _stat_fields(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def _tree_seconds(root: int) -> float | None:
    """CPU seconds of ``root`` and its descendants (with their reaped children's), from /proc."""
    parents: dict[int, int] = {}
    seconds: dict[int, float] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    for entry in entries:
        if not entry.isdigit():
            continue
        fields = _stat_fields(entry)
        if fields is None:
            continue  # ended meanwhile
        try:
            parents[int(entry)] = int(fields[1])
            seconds[int(entry)] = sum(int(value) for value in fields[11:15]) / _CLOCK_TICKS
        except (IndexError, ValueError):
            continue
    if root not in seconds:
        return None
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        total += seconds.get(pid, 0.0)
        stack.extend(children.get(pid, ()))
    return total


def _load1() -> float | None:
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


def _cpuinfo_mhz(cpus: Sequence[int]) -> list[float]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    found: dict[int, float] = {}
    processor = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        try:
            if key == "processor":
                processor = int(value)
            elif key == "cpu MHz" and processor is not None:
                found[processor] = float(value)
        except ValueError:
            continue
    return [found[cpu] for cpu in cpus if cpu in found]
