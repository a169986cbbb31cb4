"""Running cachegrind on a candidate's replay program and keeping what belongs to its kernels.

Cachegrind runs the program on a simulated CPU, some 20 to 100 times slower than native, so it
runs ``target.replay_argv``: the C program pragma builds to replay one forward's kernel calls
``target.repetitions`` times with no Python around them (importing torch under valgrind takes
minutes). The counts are deterministic: the same program gives the same counts. The caches
simulated are pragma's choice, :func:`pragma_core.sizes.caches.simulated_caches` (this
machine's L1 and, as the last level, its L2), passed with ``--I1``, ``--D1`` and ``--LL``.

The raw ``cachegrind.out``, valgrind's log and the program's own output stay in ``target.out_dir``.
valgrind runs with the target's environment (one OpenMP thread added, see :func:`collect`) through
:func:`pragma_core.sandbox.tools.run_tool`, stopped after ``target.timeout_s``. The metrics are the
kernels' (:mod:`pragma_valgrind.attribution`) with ``kernel`` set to the kernel function's name
(names joined by ``+`` for several), plus one entry per function when there are several; the
whole program's totals, replay harness included, go into the notes.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from pathlib import Path

import attrs

from pragma_core.errors import ProfileParseError, ProfilerUnavailable
from pragma_core.plugin_api.components import ProfileTarget
from pragma_core.records import Metric, Profile
from pragma_core.sandbox.tools import ToolRun, run_tool, target_writable
from pragma_core.sizes.caches import SimulatedCaches, simulated_caches

from .attribution import Attribution, attribute, is_part_of
from .metrics import (
    DEFAULT_METRICS,
    EVENTS,
    KNOWN_METRICS,
    LEGACY_EVENTS,
    PROFILER_NAME,
    RATES,
    metrics_from_totals,
    rate_value,
)
from .outfile import CachegrindOut, read_outfile
from .probe import probe, valgrind_version

__all__ = ["collect", "command", "cache_options", "OUT_FILE", "LOG_FILE", "STDOUT_FILE", "STDERR_FILE", "NO_REPLAY"]

OUT_FILE = "cachegrind.out"
LOG_FILE = "cachegrind.log"
STDOUT_FILE = "cachegrind.stdout.txt"
STDERR_FILE = "cachegrind.stderr.txt"
"""What the replayed program itself printed (valgrind's own messages go to :data:`LOG_FILE`)."""

NO_REPLAY = (
    "cachegrind needs the native fast path (kernels loaded with pragma_core.native.load_library, "
    "which pragma replays without Python); importing torch under valgrind takes minutes; "
    "profile this candidate with perf instead"
)


def command(valgrind: str, target: ProfileTarget) -> list[str]:
    """The valgrind command line for ``target``: cache and branch simulation of the caches
    :func:`cache_options` gives, output in out_dir."""
    if target.replay_argv is None:
        raise ProfilerUnavailable(NO_REPLAY)
    out_dir = Path(target.out_dir)
    return [
        valgrind,
        "--tool=cachegrind",
        "--cache-sim=yes",
        "--branch-sim=yes",
        *cache_options(simulated_caches()),
        f"--cachegrind-out-file={out_dir / OUT_FILE}",
        f"--log-file={out_dir / LOG_FILE}",
        *target.replay_argv,
    ]


def cache_options(caches: SimulatedCaches) -> list[str]:
    """``--I1``, ``--D1`` and ``--LL`` as ``size,ways,line``. Left to itself, cachegrind sizes
    its LL from the host's cpuid, which in a VM can be far from what this machine reports (a
    256 MiB direct-mapped LL here, where data of 64 MiB never misses it again)."""
    options = [
        f"--{name}={geometry.size_bytes},{geometry.ways},{geometry.line_bytes}"
        for name, geometry in (("I1", caches.i1), ("D1", caches.d1), ("LL", caches.ll))
        if geometry is not None
    ]
    return options


def collect(target: ProfileTarget, metrics: Sequence[str]) -> Profile:
    """Run cachegrind on the replay program; metrics of the kernels, whole-program totals in notes."""
    if target.replay_argv is None:
        raise ProfilerUnavailable(NO_REPLAY)
    availability = probe()
    if not availability.available:
        raise ProfilerUnavailable(availability.reason)
    valgrind = shutil.which("valgrind") or "valgrind"
    requested = tuple(dict.fromkeys(metrics)) or DEFAULT_METRICS
    not_collected = {name: _unknown(name) for name in requested if name not in KNOWN_METRICS}
    wanted = tuple(name for name in requested if name in KNOWN_METRICS)

    target, isa_note = _without_avx512(target)
    # valgrind runs threads one at a time, interleaved by its scheduler: with several OpenMP threads
    # the simulated caches see a different interleaving each run. One thread keeps counts exact.
    target = attrs.evolve(target, env={**target.env, "OMP_NUM_THREADS": "1"})
    out = _run(valgrind, target)
    out_dir = Path(target.out_dir)
    raw_paths = tuple(
        str(out_dir / name) for name in (OUT_FILE, LOG_FILE, STDOUT_FILE, STDERR_FILE) if (out_dir / name).exists()
    )
    caches = simulated_caches()
    notes = [
        _setup_note(valgrind, out, caches),
        f"{caches.describe()} (pragma_core.sizes.caches.simulated_caches)",
        _repetitions_note(target),
        "whole program, replay harness included: " + _summary(out.totals()),
    ]
    notes += _log_warnings(out_dir / LOG_FILE)
    if isa_note:
        notes.append(isa_note)
    notes.append("run with OMP_NUM_THREADS=1 so the simulated counts are the same on every run")

    found = attribute(out, target.kernel_functions, target.kernel_sources)
    if not found.keys:
        notes.append(
            f"no kernel code found in the cachegrind output (functions {list(target.kernel_functions)}, "
            f"sources {list(target.kernel_sources)}); kernel metrics could not be separated from the harness"
        )
        for name in wanted:
            not_collected[name] = "no kernel code found in the cachegrind output; see the notes"
        return Profile(profiler=PROFILER_NAME, raw_paths=raw_paths, notes=notes, not_collected=not_collected)

    notes.append(_attribution_note(found))
    label = _label(target)
    kernel_totals = out.add_up(found.keys)
    collected = metrics_from_totals(kernel_totals, kernel=label, names=wanted)
    for name in wanted:
        if not any(metric.name == name for metric in collected):
            not_collected[name] = _missing(name, kernel_totals)
    collected += _per_function(out, found, target.kernel_functions, wanted)
    return Profile(
        profiler=PROFILER_NAME, metrics=collected, raw_paths=raw_paths, notes=notes, not_collected=not_collected
    )


def _host_has_avx512() -> bool:
    try:
        return " avx512f" in Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return False


def _without_avx512(target: ProfileTarget) -> tuple[ProfileTarget, str]:
    """valgrind decodes no AVX-512: on a CPU that has it, replay builds of the kernels without it.

    The replay driver loads another build of its i-th library from ``PRAGMA_REPLAY_LIBRARY_<i>``;
    the rebuilt sources join ``kernel_sources`` so attribution by file still works.
    """
    if not target.kernel_libraries or not _host_has_avx512():
        return target, ""
    from pragma_core.backends.cpu_cpp.native.replay import LIBRARY_OVERRIDE
    from pragma_core.native import rebuild

    env = dict(target.env)
    sources = list(target.kernel_sources)
    for index, library in enumerate(target.kernel_libraries):
        try:
            variant = rebuild(library, extra_flags=["-mno-avx512f"])
        except (OSError, ValueError, KeyError):
            return target, ""  # not from pragma's build cache: run it as it is
        env[f"{LIBRARY_OVERRIDE}{index}"] = str(variant)
        sources += [str(path) for path in (variant.with_suffix(".cpp"), variant.with_suffix(".c")) if path.exists()]
    note = (
        "this CPU has AVX-512, which valgrind cannot decode: cachegrind replays builds of the kernels "
        "with -mno-avx512f (same source and flags otherwise)"
    )
    return attrs.evolve(target, env=env, kernel_sources=tuple(sources)), note


def _run(valgrind: str, target: ProfileTarget) -> CachegrindOut:
    out_dir = Path(target.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    out_path, log_path = out_dir / OUT_FILE, out_dir / LOG_FILE
    for stale in (out_path, log_path):  # a file from an earlier run must not pass for this one's
        stale.unlink(missing_ok=True)
    run = run_tool(
        command(valgrind, target),
        tool="valgrind",
        env=target.env,
        timeout_s=target.timeout_s,
        cwd=out_dir,
        stdout_path=out_dir / STDOUT_FILE,
        stderr_path=out_dir / STDERR_FILE,
        writable=target_writable(target),  # the program runs candidate code: contain it
    )
    if run.timed_out:
        raise ProfilerUnavailable(
            f"cachegrind {run.ending} on the replay of {target.repetitions} forward(s); profile with perf "
            "instead, or with fewer repetitions, smaller sizes or a longer timeout_s"
        )
    log = log_path.read_text(errors="replace") if log_path.exists() else ""
    if not run.ok:
        raise ProfilerUnavailable(_failure(run, log))
    if not out_path.exists():
        tail = _last_line(log or run.stderr_tail)
        raise ProfilerUnavailable(f"cachegrind wrote no {out_path}; its log ends: {tail or 'nothing'}")
    try:
        return read_outfile(out_path.read_text(errors="replace"))
    except ProfileParseError as error:
        raise ProfilerUnavailable(f"cachegrind's output {out_path} cannot be read: {error}") from None


def _failure(run: ToolRun, log: str) -> str:
    """One line saying why the run failed, for the person who has to act on it."""
    unrecognised = re.search(r"Unrecognised instruction at address \S+\s*\n==\d+==\s+at \S+ (.+)", log)
    if unrecognised:
        return (
            f"valgrind cannot decode an instruction in {unrecognised[1].strip()}: most likely AVX-512, "
            "which valgrind does not support, from building with -march=native on this CPU; rebuild the "
            "kernel with -mno-avx512f or profile it with perf"
        )
    code = run.returncode
    how = run.ending.removeprefix("was ") if code is not None and code < 0 else f"exit code {code}"
    tail = _last_line(run.stderr_tail) or _last_line(log)
    return f"the replay program under cachegrind failed ({how}): {tail or 'no message'}"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not line.endswith("==")]  # "==PID== " separators
    return lines[-1][:200] if lines else ""


def _label(target: ProfileTarget) -> str:
    """``relu`` for one kernel function, ``gemm+bias`` for several, the source's name without any."""
    if target.kernel_functions:
        return "+".join(target.kernel_functions)
    return "+".join(Path(source).name for source in target.kernel_sources)


def _per_function(
    out: CachegrindOut, found: Attribution, functions: Sequence[str], wanted: tuple[str, ...]
) -> list[Metric]:
    """With several kernel functions, each one's metrics too (its compiler-made parts included)."""
    if len(functions) < 2:
        return []
    metrics: list[Metric] = []
    for function in functions:
        keys = [key for key in found.keys if is_part_of(key[1], function)]
        if keys:
            metrics += metrics_from_totals(out.add_up(keys), kernel=function, names=wanted)
    return metrics


def _unknown(name: str) -> str:
    if name in LEGACY_EVENTS:
        return f"valgrind 3.6 and later call this event {LEGACY_EVENTS[name]}; ask for {LEGACY_EVENTS[name]}"
    return (
        f"cachegrind has no metric {name!r}; it gives the events {', '.join(EVENTS)} and the rates {', '.join(RATES)}"
    )


def _missing(name: str, totals: dict[str, int]) -> str:
    if name in RATES:
        _numerator, denominator, _meaning = RATES[name]
        return f"the kernel code has no {' or '.join(denominator)} events, so {name} is undefined"
    return f"cachegrind recorded no {name} events in this run"


def _summary(totals: dict[str, int]) -> str:
    parts = [f"{event}={count}" for event, count in totals.items()]
    for name in RATES:
        value = rate_value(name, totals)
        if value is not None:
            parts.append(f"{name}={value:.3g}%")
    return ", ".join(parts)


def _setup_note(valgrind: str, out: CachegrindOut, caches: SimulatedCaches) -> str:
    """The tool's version; valgrind's own description of its caches only where it is not what pragma
    asked for (the next note says that in pragma's words, so the same caches are not said twice)."""
    _answered, version = valgrind_version(valgrind)
    if not out.desc:
        return f"{version} cachegrind, no cache simulation"
    asked = [("I1", caches.i1), ("D1", caches.d1), ("LL", caches.ll)]
    expected = [
        f"{name} cache: {cache.size_bytes} B, {cache.line_bytes} B, {cache.ways}-way associative"
        for name, cache in asked
        if cache is not None
    ]
    if all(any(line in desc for desc in out.desc) for line in expected):
        return f"{version} cachegrind"
    return f"{version} cachegrind, which simulated {'; '.join(out.desc)} (not what pragma asked for, below)"


def _repetitions_note(target: ProfileTarget) -> str:
    return (
        f"counts are totals over {target.repetitions} replayed forward(s); divide by {target.repetitions} "
        "for one forward (rates do not change)"
    )


def _attribution_note(found: Attribution) -> str:
    ways = []
    if found.by_source:
        ways.append("source file " + ", ".join(sorted(found.by_source)))
    if found.by_function:
        ways.append("function name " + ", ".join(sorted(found.by_function)))
    return f"kernel code found by {' and by '.join(ways)}: functions {', '.join(found.functions)}"


def _log_warnings(log_path: Path) -> list[str]:
    """Valgrind's own warnings (``--PID-- warning: ...``), but the one on how it would have sized the LL."""
    if not log_path.exists():
        return []
    warnings = re.findall(r"^--\d+-- warning: (.+)$", log_path.read_text(errors="replace"), re.MULTILINE)
    # "L3 cache found, using its data for the LL simulation": said even when --LL overrides it.
    warnings = [warning for warning in warnings if "using its data for the LL simulation" not in warning]
    return [f"valgrind: {' '.join(warning.split())}" for warning in warnings[:5]]
