"""Running ncu on a profile target and turning what it printed into a :class:`Profile`.

The raw tool output stays in ``target.out_dir``: ``ncu-raw.csv`` (stdout: the raw page as CSV,
with whatever the program printed), ``ncu-stderr.txt``, the report ``ncu-report.ncu-rep`` (open it
in Nsight Compute) and ``ncu-details.csv`` (its details page, with the rule results). The metrics
are the requested ones, per kernel launch inside the ``pragma_forward`` range, restricted to the
candidate's kernels when the target names them; ncu's rule results become the profile's notes.

A note also names the library kernels (PyTorch's, cuBLAS's, cuDNN's: :mod:`pragma_core.profiling.library_kernels`)
that ran inside the range, with their share of the kernel time, because a candidate whose forward
hands the work to a library is not the candidate's own kernel. ncu sees only the launches it
profiles: with a kernel-name filter (the target names the candidate's kernels) the other kernels
of the range, library kernels among them, are not profiled, and the note on the profiled launches
says so.

Both ncu commands run through :func:`pragma_core.sandbox.tools.run_tool` with the target's
environment, each stopped (with the program ncu profiles) after ``target.timeout_s``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path

from pragma_core.errors import ProfileParseError, ProfilerUnavailable
from pragma_core.plugin_api.components import ProfileTarget
from pragma_core.profiling.library_kernels import library_note
from pragma_core.records import Metric, Profile
from pragma_core.sandbox.tools import run_tool

from .command import NVTX_RANGE, REPORT_SUFFIX, details_command, kernel_regex, profile_command
from .metrics import ALTERNATIVES, rejection_reason
from .parse import PROFILER_NAME, Reading, Rule, read, rules
from .probe import find_ncu, probe

__all__ = ["PERMISSION_REASON", "DURATION", "collect", "launch_times"]

DURATION = "gpu__time_duration.sum"
"""Always asked of ncu (the default metrics have it already), so the library-kernel note can give
each kernel's share of the time; it is in the profile's metrics only when requested."""
_DURATION_NAMES = (DURATION, "gpu__time_duration", "Duration")  # raw page, older raw page, details page

PERMISSION_REASON = (
    "ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM): the driver restricts them "
    "to admin users; profile as root or allow all users (NVreg_RestrictProfilingToAdminUsers=0), "
    "see https://developer.nvidia.com/ERR_NVGPUCTRPERM"
)


def collect(target: ProfileTarget, metrics: Sequence[str]) -> Profile:
    """Profile the target's forwards with ncu and return the requested metrics per kernel launch.

    ncu replays each kernel once per pass of its counters: allow for that in ``target.timeout_s``.
    """
    availability = probe()
    if not availability.available:
        raise ProfilerUnavailable(availability.reason)
    ncu = find_ncu()
    if ncu is None:  # removed since the probe looked
        raise ProfilerUnavailable("ncu is not installed")
    if not target.python_argv:
        raise ProfilerUnavailable("nothing for ncu to run: the profile target has no python_argv")

    not_collected: dict[str, str] = {}
    accepted: list[str] = []
    for name in dict.fromkeys(metrics):
        reason = rejection_reason(name)
        if reason is None:
            accepted.append(name)
        else:
            not_collected[name] = reason
    if not accepted:
        return Profile(
            profiler=PROFILER_NAME,
            not_collected=not_collected,
            notes=("ncu was not run: no requested metric is an ncu metric name",),
        )

    out_dir = Path(target.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = out_dir / "ncu-report"
    asked = accepted if DURATION in accepted else [*accepted, DURATION]
    argv = profile_command(ncu, target.python_argv, asked, report=report, kernel_functions=target.kernel_functions)
    outputs = {
        "command": out_dir / "ncu-command.txt",
        "stdout": out_dir / "ncu-raw.csv",
        "stderr": out_dir / "ncu-stderr.txt",
    }
    outputs["command"].write_text(shlex.join(argv) + "\n")
    done = run_tool(
        argv,
        tool="ncu",
        env=target.env,
        timeout_s=target.timeout_s,
        stdout_path=outputs["stdout"],
        stderr_path=outputs["stderr"],
    )
    if done.timed_out:
        return _failed(accepted, not_collected, _existing(outputs.values()), f"ncu {done.ending}")
    stdout_text = outputs["stdout"].read_text(errors="replace")
    stderr_text = outputs["stderr"].read_text(errors="replace")
    if "ERR_NVGPUCTRPERM" in stdout_text or "ERR_NVGPUCTRPERM" in stderr_text:
        raise ProfilerUnavailable(PERMISSION_REASON)

    raw_paths = [outputs["stdout"], outputs["stderr"], outputs["command"]]
    try:
        reading = read(stdout_text)
    except ProfileParseError as error:
        said = _first_error(stderr_text)
        return _failed(
            accepted,
            not_collected,
            _existing(raw_paths),
            f"ncu (exit code {done.returncode}) gave no kernel results inside the NVTX "
            f"range {NVTX_RANGE!r}: {error}" + (f"; {said}" if said else ""),
        )

    notes: list[str] = []
    if done.returncode != 0:
        said = _first_error(stderr_text) or _first_error(stdout_text)
        notes.append(f"ncu exited with code {done.returncode}" + (f": {said}" if said else ""))
    kept = _candidate_kernels(reading, target.kernel_functions)
    names = ", ".join(target.kernel_functions)
    filtered = f", of kernels matching {names} (others, library kernels among them, were not profiled)" if names else ""
    notes.append(f"ncu profiled {len(kept)} kernel launch(es) in the NVTX range {NVTX_RANGE!r}{filtered}")
    library = library_note(launch_times(reading), target.kernel_functions)
    if library:
        notes.append(library)

    found = _requested(reading, accepted, kept)
    for name in accepted:
        if not any(metric.name == name for metric in found):
            not_collected[name] = _why_missing(reading, name, kept)

    report_file = report.with_name(report.name + REPORT_SUFFIX)
    if report_file.exists():
        raw_paths.insert(0, report_file)
        details = out_dir / "ncu-details.csv"
        advice, problem = _rules(ncu, report_file, details, kept, target)
        raw_paths.append(details)
        notes.extend(rule.describe() for rule in advice)
        if problem:
            notes.append(problem)
    return Profile(
        profiler=PROFILER_NAME, metrics=found, raw_paths=_existing(raw_paths), notes=notes, not_collected=not_collected
    )


def launch_times(reading: Reading) -> list[tuple[str, float | None]]:
    """(kernel name, duration in ns or None) of every launch ncu profiled, in profiling order.

    The name is the kernel's, without the ``#<launch ID>`` that tells repeated launches apart.
    """
    durations: dict[str, float] = {}
    for metric in reading.metrics():
        if metric.name in _DURATION_NAMES and metric.unit == "ns":
            durations.setdefault(metric.kernel, metric.value)
    return [(re.sub(r"#\d+$", "", label), durations.get(label)) for label in reading.kernels]


def _candidate_kernels(reading: Reading, kernel_functions: Sequence[str]) -> set[str]:
    """The launches that belong to the candidate: all in the range, or those the target names."""
    pattern = kernel_regex(kernel_functions)
    if not pattern:
        return set(reading.kernels)
    return {label for label in reading.kernels if re.search(pattern, re.sub(r"#\d+$", "", label))}


def _requested(reading: Reading, accepted: list[str], kept: set[str]) -> list[Metric]:
    """The requested metrics of the kept launches, launch by launch, each in the order asked."""
    order = {name: position for position, name in enumerate(accepted)}
    launch = {label: position for position, label in enumerate(reading.kernels)}
    chosen = [metric for metric in reading.metrics() if metric.name in order and metric.kernel in kept]
    return sorted(chosen, key=lambda metric: (launch[metric.kernel], order[metric.name]))


def _why_missing(reading: Reading, name: str, kept: set[str]) -> str:
    if not kept:
        return f"no kernel launch in the NVTX range {NVTX_RANGE!r} belongs to the candidate's kernels"
    printed = [entry.text for entry in reading.entries if entry.name == name and entry.kernel in kept]
    others = ALTERNATIVES.get(name, ())
    hint = f"; on this GPU try {' or '.join(others)}" if others else ""
    if printed and "n/a" in printed[0]:
        return f"ncu printed n/a: this GPU or ncu version has no such metric (see `ncu --query-metrics`){hint}"
    if printed:
        return f"ncu printed {printed[0][:60]!r}, not one number{hint}"
    return f"ncu did not report it for any profiled kernel (see `ncu --query-metrics`){hint}"


def _rules(ncu: str, report: Path, details: Path, kept: set[str], target: ProfileTarget) -> tuple[list[Rule], str]:
    """The report's rule results for the kept launches, once each, and a note when none came."""
    try:
        done = run_tool(
            details_command(ncu, report), tool="ncu", env=target.env, timeout_s=target.timeout_s, stdout_path=details
        )
    except ProfilerUnavailable as error:
        return [], f"ncu rule results unavailable: reading the report failed ({error})"
    if done.timed_out:
        return [], f"ncu rule results unavailable: `ncu --import` {done.ending}"
    try:
        found = rules(details.read_text(errors="replace"))
    except ProfileParseError as error:
        return [], f"ncu rule results unavailable: {error}"
    unique: dict[tuple[object, ...], Rule] = {}
    for rule in found:
        if rule.kernel in kept:  # repeated launches of one kernel give the same advice
            kernel = re.sub(r"#\d+$", "", rule.kernel)
            unique.setdefault((rule.kind, kernel, rule.section, rule.text, rule.speedup_pct), rule)
    return list(unique.values()), ""


def _first_error(text: str) -> str:
    for line in text.splitlines():
        if line.startswith(("==ERROR==", "==WARNING==")):
            return line.strip()[:200]
    return ""


def _existing(paths: Iterable[Path]) -> tuple[str, ...]:
    return tuple(str(path) for path in paths if Path(path).exists())


def _failed(accepted: list[str], not_collected: dict[str, str], raw_paths: tuple[str, ...], reason: str) -> Profile:
    return Profile(
        profiler=PROFILER_NAME,
        raw_paths=raw_paths,
        notes=(reason,),
        not_collected={**not_collected, **{name: reason for name in accepted}},
    )
