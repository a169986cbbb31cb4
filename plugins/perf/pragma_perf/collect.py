"""Running ``perf stat`` on a profiling target and turning its output into a Profile.

    from pragma_perf.collect import collect
    profile = collect(target, ["tma_backend_bound", "ipc", "task-clock"])

perf counts the native replay (``target.replay_argv``) when pragma built one: the candidate's kernel
calls with no Python around them. Otherwise it counts ``target.python_argv``, a Python process
running the forward, and the counts include the interpreter (``Profile.notes`` says so). perf writes
CSV to ``<out_dir>/perf-stat.csv``; the program's output and perf's messages go to
``perf-stat.log``. perf runs with the target's environment plus ``LC_ALL=C`` through
:func:`pragma_core.sandbox.tools.run_tool`, and is stopped, with the program, after
``target.timeout_s``. Each requested name missing from the profile is in ``Profile.not_collected``
with the reason: hardware counters absent, perf's ``<not supported>``, a name perf does not know, a
run that did not finish in time, ...
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import attrs

from pragma_core.errors import ProfileParseError, ProfilerUnavailable
from pragma_core.plugin_api.components import ProfileTarget
from pragma_core.records import Metric, Profile
from pragma_core.sandbox.tools import run_tool, target_writable

from .metrics import DERIVED, HARDWARE_EVENTS, SOFTWARE_EVENTS, TOPDOWN_L1, base_name, needs_hardware
from .parse import PROFILER, Reading, parse, read_rows, unsupported
from .probe import PerfSetup, classify_name, paranoid_text, perf_setup

__all__ = ["OUTPUT_NAME", "LOG_NAME", "Plan", "plan_request", "build_command", "collect"]

OUTPUT_NAME = "perf-stat.csv"
LOG_NAME = "perf-stat.log"

_MODIFIERS = re.compile(r":[ukhHGIpPSDWeb]+$")


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class Plan:
    """What to ask perf for: events (``-e``), metric options (``-M ...``), and names refused up front."""

    events: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    metric_args: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    refused: dict[str, str] = attrs.field(factory=dict)


def plan_request(
    metrics: Sequence[str], setup: PerfSetup, classify: Callable[[str], tuple[str, str]] | None = None
) -> Plan:
    """Map requested names to perf options; names perf does not know are refused with the reason.

    ``classify(name)`` says whether perf knows a name outside the defaults (default: ask perf)."""
    classify = classify or classify_name
    events: list[str] = []
    groups: list[str] = []
    refused: dict[str, str] = {}
    topdown = False
    for name in dict.fromkeys(metrics):
        if name in TOPDOWN_L1:
            if setup.topdown_args:
                topdown = True
            else:
                refused[name] = setup.hardware_reason or setup.topdown_reason
        elif name in DERIVED:
            events += DERIVED[name][:2]
        elif name in HARDWARE_EVENTS or name in SOFTWARE_EVENTS:
            events.append(name)
        else:
            kind, reason = classify(name)
            if kind == "event":
                events.append(name)
            elif kind == "metric":
                groups.append(name)
            else:
                refused[name] = reason
    metric_args: tuple[str, ...] = setup.topdown_args if topdown else ()
    if groups and metric_args[:1] == ("-M",):
        metric_args = ("-M", ",".join([metric_args[1], *groups]))
    elif groups:
        metric_args += ("-M", ",".join(groups))
    return Plan(events=tuple(dict.fromkeys(events)), metric_args=metric_args, refused=refused)


def build_command(perf: str, target: ProfileTarget, plan: Plan, output: Path) -> list[str]:
    """``perf stat -x, -o OUTPUT [-M ...] -e EVENTS -- PROGRAM``: the replay when set, else Python."""
    program = target.replay_argv or target.python_argv
    if not program:
        raise ValueError("the profiling target has neither replay_argv nor python_argv to run")
    command = [perf, "stat", "-x,", "-o", str(output), *plan.metric_args]
    if plan.events:
        command += ["-e", ",".join(plan.events)]
    return [*command, "--", *program]


def collect(target: ProfileTarget, metrics: Sequence[str]) -> Profile:
    """Run perf stat on the target; every requested name ends up in metrics or in not_collected."""
    setup = perf_setup()
    if not setup.runs or setup.perf is None:
        raise ProfilerUnavailable(setup.reason)
    requested = list(dict.fromkeys(metrics))
    plan = plan_request(requested, setup)
    if not plan.events and not plan.metric_args:
        return Profile(
            profiler=PROFILER,
            not_collected=plan.refused,
            notes=("perf was not run: it can count none of the requested names",),
        )

    out_dir = Path(target.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    output, log = out_dir / OUTPUT_NAME, out_dir / LOG_NAME
    output.unlink(missing_ok=True)
    run = run_tool(
        build_command(setup.perf, target, plan, output),
        tool="perf",
        env={**target.env, "LC_ALL": "C"},  # C locale: no digit grouping, a decimal point
        timeout_s=target.timeout_s,
        cwd=out_dir,
        stdout_path=log,
        stderr_to_stdout=True,
        writable=target_writable(target),  # the program runs candidate code: contain it
    )
    raw_paths = tuple(str(path) for path in (output, log) if path.exists())
    notes = [_target_note(target)]
    if not setup.hardware:
        notes.append(f"{setup.hardware_reason}: perf counted only software events")

    def nothing_counted(reason: str) -> Profile:
        return Profile(
            profiler=PROFILER,
            raw_paths=raw_paths,
            notes=(*notes, reason),
            not_collected={name: plan.refused.get(name, reason) for name in requested},
        )

    code = run.returncode
    if code is None:
        return nothing_counted(f"perf stat {run.ending}, with the program it counted; allow more with timeout_s")
    raw = output.read_text(encoding="utf-8", errors="replace") if output.exists() else ""
    try:
        readings = read_rows(raw)
    except ProfileParseError:
        return nothing_counted(f"perf stat wrote no counts (exit code {code}): {_log_error(log)}")

    kernel = "+".join(target.kernel_functions) if target.replay_argv else ""
    found = [attrs.evolve(metric, name=_MODIFIERS.sub("", metric.name), kernel=kernel) for metric in parse(raw)]
    kept = [metric for metric in found if _requested(metric, requested)]
    notes += _run_notes(code, log, readings, setup)
    return Profile(
        profiler=PROFILER,
        metrics=kept,
        raw_paths=raw_paths,
        notes=notes,
        not_collected=_not_collected(requested, found, unsupported(raw), plan.refused, setup),
    )


# -- helpers ------------------------------------------------------------------------------------


def _log_error(log: Path) -> str:
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no message"
    for line in lines:
        if any(word in line.lower() for word in ("error", "cannot", "failed", "denied", "not found")):
            return line
    return lines[-1] if lines else "no message"


def _target_note(target: ProfileTarget) -> str:
    if target.replay_argv:
        kernels = ", ".join(target.kernel_functions) or "the candidate's kernels"
        return (
            f"perf counted the native replay of {kernels} ({target.repetitions} repetitions, no Python); "
            "the counts include the replay driver's start-up and input loading"
        )
    return (
        f"perf counted the Python process running {target.repetitions} forwards (no native replay for "
        "this target): the counts include the interpreter, PyTorch and the warm-up, not only the kernels"
    )


def _run_notes(code: int, log: Path, readings: list[Reading], setup: PerfSetup) -> list[str]:
    notes = []
    if code != 0:
        notes.append(f"the profiled program exited with code {code}; the counts cover a failed run ({_log_error(log)})")
    if any(r.name.endswith(":u") for r in readings):
        notes.append(f"perf counted user space only (:u): {paranoid_text(setup.paranoid, setup.privileged)}")
    scaled = [
        f"{r.name} {r.running_pct:.0f}%"
        for r in readings
        if r.value is not None and r.running_pct is not None and r.running_pct < 100
    ]
    if scaled:
        notes.append(
            "perf multiplexed the counters, so these counts are scaled estimates (share of the "
            f"run each was counted): {', '.join(scaled)}"
        )
    return notes


def _requested(metric: Metric, requested: list[str]) -> bool:
    return metric.name in requested or base_name(metric.name) in requested


def _not_collected(
    requested: list[str], found: list[Metric], missing: dict[str, str], refused: dict[str, str], setup: PerfSetup
) -> dict[str, str]:
    """The reason for each requested name that is not among the metrics found."""
    counted = {metric.name for metric in found} | {base_name(metric.name) for metric in found}
    printed = {base_name(name): reason for name, reason in missing.items()}

    def why(name: str) -> str:
        return "counted" if name in counted else printed.get(name, "perf printed no value for it")

    reasons = {}
    for name in requested:
        if name in counted:
            continue
        if name in refused:
            reasons[name] = refused[name]
        elif needs_hardware(name) and not setup.hardware:
            reasons[name] = setup.hardware_reason
        elif name in DERIVED:
            numerator, denominator = DERIVED[name][:2]
            if numerator in counted and denominator in counted:
                reasons[name] = f"{denominator} is 0 or counted more than once, so the ratio is undefined"
            else:
                reasons[name] = f"needs {numerator} ({why(numerator)}) and {denominator} ({why(denominator)})"
        else:
            reasons[name] = why(name)
    return reasons
