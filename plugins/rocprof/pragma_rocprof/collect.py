"""Runs rocprofv3 on a target and returns the metrics of the candidate's kernels.

One run per counter pass (:mod:`pragma_rocprof.commands`), each writing its CSV, its command line
and a log under ``target.out_dir/rocprof/pass_<n>/``. Each run goes through
:func:`pragma_core.sandbox.tools.run_tool` with the target's environment and is stopped, with
the program, after ``target.timeout_s``; the passes after a run that timed out are not run (they
would wait as long). A pass the hardware cannot count at once (rocprofv3 says the request "exceeds
the capabilities of the hardware", or aborts) is split in two and run again, up to ``max_runs``
runs in all. The first run's kernel trace gives the durations; the counter files of
all runs are merged per kernel, then :func:`~pragma_rocprof.parse.derive` adds the hit rates and
bandwidth.

Attribution: with ``target.kernel_functions`` set, counters are collected only for kernels whose
name contains one of them (``--kernel-include-regex``) and only those kernels' metrics are kept;
the harness's kernels, runtime copies (``__amd_rocclr_*``) and PyTorch's own kernels are left out,
and a note says how many. rocprofv3 names kernels, not source files or libraries, so
``kernel_sources`` and ``kernel_libraries`` play no part. Every requested metric that is not in the
result is in ``Profile.not_collected`` with the reason.

The timed forwards: every run also records the ROCTx range ``pragma_forward`` the worker opens
around them (``--marker-trace``), and the files are cut to the dispatches inside it
(:mod:`pragma_rocprof.forward`), so durations and counters leave out the warm-up forwards, as
ncu's NVTX filter does. That happens for all runs or for none: only when each run recorded the
range, each of its files has timestamps, and a dispatch falls inside; otherwise a note says why
the metrics cover the whole run.

Library kernels: the first run's kernel trace holds every dispatch (the kernel filter applies to
counters), so a note names the kernels of libraries (PyTorch, rocBLAS/hipBLASLt, MIOpen...:
:mod:`pragma_core.profiling.library_kernels`) that ran, with their share of the kernel time.
"""

from __future__ import annotations

import re
import shlex
import signal
from collections import deque
from collections.abc import Sequence
from pathlib import Path

import attrs

from pragma_core.errors import ProfileParseError, ProfilerUnavailable
from pragma_core.plugin_api.components import ProfileTarget
from pragma_core.profiling.library_kernels import library_note
from pragma_core.records import Metric, Profile
from pragma_core.sandbox.tools import ToolRun, run_tool

from .commands import COUNTERS_PER_PASS, build_command, kernel_include_regex, split_passes
from .forward import RANGE, cut, dispatches, forward_windows, inside
from .metrics import counters_for, info, validate
from .parse import PROFILER, derive, parse
from .probe import find_rocprofv3, probe

__all__ = ["MAX_RUNS", "LOG_NAME", "COMMAND_NAME", "collect", "kernel_matches"]

LOG_NAME = "rocprofv3.log"
"""What rocprofv3 and the program printed in one run (stdout and stderr together)."""
COMMAND_NAME = "rocprofv3-command.txt"

MAX_RUNS = 12
"""Most rocprofv3 runs one collect makes, splits of over-full passes included."""

_EXCEEDS_HARDWARE = re.compile(r"EXCEEDS_HW_LIMIT|exceeds the capabilities of the hardware", re.IGNORECASE)
_ABORT_CODES = (-signal.SIGABRT, 128 + signal.SIGABRT)


@attrs.frozen(kw_only=True)
class _Run:
    """One rocprofv3 run: which counters, where its files are, how it ended."""

    number: int
    counters: tuple[str, ...]
    directory: Path
    tool: ToolRun
    output: str

    @property
    def ok(self) -> bool:
        return self.tool.ok

    def exceeds_hardware(self) -> bool:
        """True when this pass holds more than the hardware counts at once (older versions abort)."""
        return bool(_EXCEEDS_HARDWARE.search(self.output)) or self.tool.returncode in _ABORT_CODES

    def failure(self) -> str:
        if self.tool.timed_out:
            return f"rocprofv3 run {self.number} {self.tool.ending}"
        lines = [line.strip() for line in self.output.splitlines() if line.strip()]
        last = lines[-1][:200] if lines else "no output"
        return f"rocprofv3 run {self.number} {self.tool.ending}: {last}"

    def files(self, kind: str) -> list[Path]:
        return sorted(self.directory.rglob(f"*{kind}.csv"))


def collect(
    target: ProfileTarget,
    metrics: Sequence[str],
    *,
    per_pass: int = COUNTERS_PER_PASS,
    max_runs: int = MAX_RUNS,
) -> Profile:
    """Profile ``target.python_argv`` under rocprofv3; ProfilerUnavailable where it cannot run.

    Each run may take ``target.timeout_s``; a collect makes one run per pass of ``per_pass``
    counters, more when the hardware refuses a pass, at most ``max_runs``.
    """
    availability = probe()
    if not availability.available:
        raise ProfilerUnavailable(availability.reason)
    if target.device != "rocm":
        raise ProfilerUnavailable(f"rocprof profiles AMD GPUs (device 'rocm'); this target runs on {target.device!r}")
    if not target.python_argv:
        raise ValueError("the ProfileTarget has no python_argv to run under rocprofv3")
    tool = find_rocprofv3()
    if tool is None:  # removed since the cached probe ran
        raise ProfilerUnavailable("rocprofv3 is no longer on PATH nor in /opt/rocm*/bin")

    wanted, rejected = validate(metrics)
    regex = kernel_include_regex(target.kernel_functions)
    root = Path(target.out_dir) / "rocprof"
    runs, failed, notes = _run_passes(tool, counters_for(wanted), root, target, regex, per_pass, max_runs)

    files, range_note = _forward_files(runs)
    merged, parse_notes = _merge(files)
    kept, attribution_note = _attribute(merged, target.kernel_functions)
    library = _library_note(files, target.kernel_functions)
    notes += parse_notes + [note for note in (attribution_note, range_note, library) if note]
    found = {metric.name for metric in kept}
    not_collected = dict(rejected)
    for name in wanted:
        if name not in found:
            not_collected[name] = _why_missing(name, found, failed, bool(merged), root)
    return Profile(
        profiler=PROFILER,
        metrics=_ordered(kept, wanted),
        raw_paths=[str(path) for path in sorted(root.rglob("*")) if path.is_file()],
        notes=notes,
        not_collected=not_collected,
    )


def kernel_matches(kernel: str, function: str) -> bool:
    """True when a rocprof kernel name is that function: ``void relu_kernel<float>(float*)``,
    ``relu_kernel_0d1d`` (Triton) and ``ns::relu_kernel(...)`` are ``relu_kernel``;
    ``my_relu_kernel`` is not."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(function)}(?![A-Za-z0-9])", kernel) is not None


def _run_passes(
    tool: str,
    counters: Sequence[str],
    root: Path,
    target: ProfileTarget,
    regex: str | None,
    per_pass: int,
    max_runs: int,
) -> tuple[list[_Run], dict[str, str], list[str]]:
    """Run the passes in order, splitting those the hardware refuses; the runs, why counters
    failed, and notes."""
    queue: deque[tuple[str, ...]] = deque(split_passes(counters, per_pass) or [()])
    runs: list[_Run] = []
    failed: dict[str, str] = {}
    notes: list[str] = []
    while queue:
        pass_counters = queue.popleft()
        stop = ""
        if len(runs) == max_runs:
            stop = f"not run: pragma stops after {max_runs} rocprofv3 runs"
        elif runs and runs[-1].tool.timed_out:
            stop = f"not run: run {runs[-1].number} did not finish within {target.timeout_s:g} s, and this one would wait as long"
        if stop:
            skipped = [counter for group in (pass_counters, *queue) for counter in group]
            failed.update(dict.fromkeys(skipped, stop))
            notes.append(f"{stop}; {len(skipped)} counters left: {', '.join(skipped)}")
            break
        run = _run(tool, pass_counters, root / f"pass_{len(runs) + 1}", len(runs) + 1, target, regex)
        runs.append(run)
        if run.ok:
            continue
        if len(pass_counters) > 1 and run.exceeds_hardware():
            half = len(pass_counters) // 2
            queue.extendleft([pass_counters[half:], pass_counters[:half]])
            notes.append(
                f"run {run.number}: the hardware cannot count {', '.join(pass_counters)} at once; split into two runs"
            )
            continue
        failed.update(dict.fromkeys(pass_counters, run.failure()))
        notes.append(run.failure())
    return runs, failed, notes


def _run(
    tool: str,
    counters: tuple[str, ...],
    directory: Path,
    number: int,
    target: ProfileTarget,
    regex: str | None,
) -> _Run:
    directory.mkdir(parents=True, exist_ok=True)
    command = build_command(tool, counters, directory, target.python_argv, kernel_regex=regex)
    (directory / COMMAND_NAME).write_text(shlex.join(command) + "\n")
    log_path = directory / LOG_NAME
    tool_run = run_tool(
        command,
        tool="rocprofv3",
        env=target.env,
        timeout_s=target.timeout_s,
        stdout_path=log_path,
        stderr_to_stdout=True,
    )
    output = log_path.read_text(encoding="utf-8", errors="replace")
    return _Run(number=number, counters=counters, directory=directory, tool=tool_run, output=output)


@attrs.frozen(kw_only=True)
class _Files:
    """The runs' CSV files as pragma reads them: each path with its text, cut to the forward range
    when ``in_range``."""

    traces: list[tuple[Path, str]]
    counters: list[tuple[Path, str]]
    in_range: bool


def _forward_files(runs: Sequence[_Run]) -> tuple[_Files, str]:
    """The runs' kernel traces and counter files, cut to the ``pragma_forward`` range where every
    run allows it; and a note saying which was done."""
    read = [
        (
            run,
            [(path, _text(path)) for path in run.files("kernel_trace")],
            [(path, _text(path)) for path in run.files("counter_collection")],
        )
        for run in runs
    ]
    read = [(run, traces, counters) for run, traces, counters in read if traces or counters]
    every_trace = [file for _, traces, _ in read for file in traces]
    every_counter = [file for _, _, counters in read for file in counters]
    whole = _Files(traces=every_trace, counters=every_counter, in_range=False)
    if not read:
        return whole, ""
    windows: dict[int, list[tuple[int, int]]] = {}
    for run, traces, counters in read:
        found, why = _windows(run, traces + counters)
        if why:
            where = f"run {run.number}: " if len(read) > 1 else ""
            return whole, f"{where}{why}; the metrics cover every dispatch of the run, warm-up forwards included"
        windows[run.number] = found

    def cut_all(files: list[tuple[Path, str]], number: int) -> list[tuple[Path, str]]:
        return [(path, cut(text, windows[number]) or "") for path, text in files]

    return _Files(
        traces=[file for run, traces, _ in read for file in cut_all(traces, run.number)],
        counters=[file for run, _, counters in read for file in cut_all(counters, run.number)],
        in_range=True,
    ), f"kept the dispatches inside the ROCTx range {RANGE!r} (the timed forwards), by rocprofv3's marker trace"


def _windows(run: _Run, files: list[tuple[Path, str]]) -> tuple[list[tuple[int, int]], str]:
    """The run's ``pragma_forward`` windows, or why its files cannot be cut to them."""
    markers = run.files("marker_api_trace")
    if not markers:
        return [], f"rocprofv3 wrote no marker trace, so the ROCTx range {RANGE!r} is unknown"
    try:
        windows = forward_windows(_text(markers[0]))
    except ProfileParseError as error:
        return [], f"the marker trace could not be read ({error})"
    if not windows:
        return [], f"the marker trace has no ROCTx range {RANGE!r}"
    timed = False
    for path, text in files:
        try:
            if cut(text, windows) is None:
                return [], f"{path.name} has no timestamps to cut it to the ROCTx range {RANGE!r}"
            timed = timed or bool(inside(dispatches(text), windows))
        except ProfileParseError as error:
            return [], f"{path.name} could not be cut to the ROCTx range {RANGE!r} ({error})"
    if not timed:
        return [], f"by rocprofv3's timestamps no dispatch ran inside the ROCTx range {RANGE!r}"
    return windows, ""


def _library_note(files: _Files, functions: Sequence[str]) -> str:
    """The note naming the library kernels of the first kernel trace, or ''."""
    if not files.traces:
        return ""
    _, text = files.traces[0]
    try:
        found = dispatches(text)
    except ProfileParseError:
        return ""
    where = "inside the candidate's forward" if files.in_range else "in the profiled run (warm-up forwards included)"
    return library_note([(dispatch.kernel, float(dispatch.duration)) for dispatch in found], functions, where=where)


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _merge(files: _Files) -> tuple[list[Metric], list[str]]:
    """The first kernel trace, then every pass's counters; each (name, kernel) once; then derived."""
    chosen: dict[tuple[str, str], Metric] = {}
    notes = []
    for path, text in files.traces[:1] + files.counters:
        try:
            metrics = parse(text)
        except ProfileParseError as error:
            notes.append(f"could not read {path}: {error}")
            continue
        for metric in metrics:
            known = info(metric.name)
            if known is None or known.kind != "derived":  # derived again below, from merged values
                chosen.setdefault((metric.name, metric.kernel), metric)
    merged = list(chosen.values())
    return merged + derive(merged), notes


def _attribute(metrics: list[Metric], functions: Sequence[str]) -> tuple[list[Metric], str]:
    kernels = list(dict.fromkeys(metric.kernel for metric in metrics))
    functions = [name for name in functions if name.strip()]
    if not functions or not kernels:
        return metrics, ""
    ours = [kernel for kernel in kernels if any(kernel_matches(kernel, name) for name in functions)]
    if not ours:
        return metrics, (
            f"none of the candidate's kernels ({', '.join(functions)}) appeared under rocprofv3; "
            f"the metrics are of all {len(kernels)} kernels that ran"
        )
    others = len(kernels) - len(ours)
    note = f"kept the candidate's {len(ours)} kernel(s); left out {others} other kernel(s) of the run" if others else ""
    return [metric for metric in metrics if metric.kernel in ours], note


def _ordered(metrics: list[Metric], wanted: Sequence[str]) -> list[Metric]:
    """Longest-running kernel first; within a kernel, the requested metrics in request order."""
    time = {metric.kernel: metric.value for metric in metrics if metric.name == "TotalDurationNs"}
    rank = {name: position for position, name in enumerate(wanted)}
    order = {metric: position for position, metric in enumerate(metrics)}
    return sorted(
        metrics,
        key=lambda metric: (
            -time.get(metric.kernel, -1.0),
            metric.kernel,
            rank.get(metric.name, len(rank)),
            order[metric],
        ),
    )


def _why_missing(name: str, found: set[str], failed: dict[str, str], any_kernel: bool, root: Path) -> str:
    known = info(name)
    if known is not None and known.kind == "derived":
        absent = [counter for counter in known.inputs if counter not in found]
        if absent:
            causes = {failed[counter] for counter in absent if counter in failed}
            because = f" ({'; '.join(sorted(causes))})" if causes else ""
            return f"computed from {', '.join(known.inputs)}; {', '.join(absent)} not collected{because}"
        return f"{', '.join(known.inputs)} were collected but give no valid {name} (zero time or zero accesses)"
    if name in failed:
        return failed[name]
    if not any_kernel:
        return f"no kernel ran under rocprofv3 (see the logs under {root})"
    if known is not None and known.kind == "dispatch":
        return f"rocprofv3 reported no {name} for the candidate's kernels (older versions give it only with counters)"
    return (
        "rocprofv3 returned no value for the candidate's kernels: the counter may not exist on this GPU "
        "(see `rocprofv3 --list-avail`), or none of their dispatches was counted"
    )
