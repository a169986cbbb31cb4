"""Command building, the request plan, and real runs of perf stat on this machine."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from perf_data import DATA

import pragma_perf.collect as collect_module
from pragma_core import ProfileTarget, Task
from pragma_core.errors import ProfilerUnavailable
from pragma_perf.collect import OUTPUT_NAME, Plan, build_command, collect, plan_request
from pragma_perf.metrics import DEFAULT_METRICS, HARDWARE_EVENTS, SOFTWARE_EVENTS, TOPDOWN_L1
from pragma_perf.probe import HARDWARE_UNAVAILABLE_VM, PerfSetup, perf_setup

TASK = Task(name="loop", source="", category="other")
NO_PMU = PerfSetup(
    perf="/usr/bin/perf",
    runs=True,
    hardware=False,
    hardware_reason=HARDWARE_UNAVAILABLE_VM,
    topdown_reason="no TopdownL1",
)
WITH_PMU = PerfSetup(perf="/usr/bin/perf", runs=True, hardware=True, topdown_args=("-M", "TopdownL1"))


def target(tmp_path: Path, **fields) -> ProfileTarget:
    return ProfileTarget(task=TASK, candidate=None, out_dir=tmp_path / "out", **fields)


def never(name: str) -> tuple[str, str]:
    raise AssertionError(f"{name} should not need perf's opinion")


# -- planning and command lines -----------------------------------------------------------------


def test_default_plan_without_pmu_asks_for_events_and_refuses_topdown():
    plan = plan_request(DEFAULT_METRICS, NO_PMU, classify=never)
    assert plan.events == (
        "instructions",
        "cycles",
        "cache-references",
        "cache-misses",
        "branches",
        "branch-misses",
        "L1-dcache-loads",
        "L1-dcache-load-misses",
        *SOFTWARE_EVENTS,
    )
    assert set(plan.events) == set(HARDWARE_EVENTS) | set(SOFTWARE_EVENTS)
    assert plan.metric_args == ()
    assert plan.refused == {name: HARDWARE_UNAVAILABLE_VM for name in TOPDOWN_L1}


def test_plan_with_topdown_and_extra_names_sorted_by_what_perf_knows():
    answers = {
        "tma_memory_bound": ("metric", ""),
        "LLC-loads": ("event", ""),
        "no-such-thing": ("", "perf knows no event or metric named 'no-such-thing'"),
    }
    plan = plan_request([*DEFAULT_METRICS, *answers], WITH_PMU, classify=answers.__getitem__)
    assert plan.metric_args == ("-M", "TopdownL1,tma_memory_bound")
    assert plan.events[-1] == "LLC-loads"
    assert plan.refused == {"no-such-thing": "perf knows no event or metric named 'no-such-thing'"}


def test_replay_target_command(tmp_path):
    replay = target(tmp_path, replay_argv=("/job/replay", "3"), python_argv=(sys.executable, "-m", "worker"))
    plan = Plan(events=("task-clock", "cycles"), metric_args=("-M", "TopdownL1"))
    output = tmp_path / OUTPUT_NAME
    assert build_command("perf", replay, plan, output) == [
        "perf",
        "stat",
        "-x,",
        "-o",
        str(output),
        "-M",
        "TopdownL1",
        "-e",
        "task-clock,cycles",
        "--",
        "/job/replay",
        "3",
    ]


def test_python_target_command(tmp_path):
    worker = (sys.executable, "-m", "pragma_core.profiling.worker", "run", "job", "3")
    python = target(tmp_path, python_argv=worker)
    command = build_command("perf", python, Plan(events=("task-clock",)), tmp_path / OUTPUT_NAME)
    assert command[:6] == ["perf", "stat", "-x,", "-o", str(tmp_path / OUTPUT_NAME), "-e"]
    assert command[command.index("--") + 1 :] == list(python.python_argv)


def test_a_target_with_nothing_to_run_is_a_programming_error(tmp_path):
    with pytest.raises(ValueError, match="neither replay_argv nor python_argv"):
        build_command("perf", target(tmp_path), Plan(events=("task-clock",)), tmp_path / OUTPUT_NAME)


def test_collect_without_perf_raises_the_probe_reason(tmp_path, monkeypatch):
    missing = PerfSetup(perf=None, reason="perf is not installed (no `perf` on PATH)")
    monkeypatch.setattr(collect_module, "perf_setup", lambda: missing)
    with pytest.raises(ProfilerUnavailable, match="perf is not installed"):
        collect(target(tmp_path, replay_argv=("true",)), DEFAULT_METRICS)


def test_nothing_perf_can_count_is_refused_without_running(tmp_path, monkeypatch):
    monkeypatch.setattr(collect_module, "perf_setup", lambda: NO_PMU)
    monkeypatch.setattr(collect_module, "classify_name", lambda name: ("", f"perf knows no {name}"))
    profile = collect(target(tmp_path, replay_argv=("true",)), ["nonsense"])
    assert profile.metrics == () and profile.not_collected == {"nonsense": "perf knows no nonsense"}
    assert not (tmp_path / "out" / OUTPUT_NAME).exists()


# -- real runs on this machine ------------------------------------------------------------------

needs_perf = pytest.mark.skipif(shutil.which("perf") is None or not perf_setup().runs, reason="perf cannot count here")


@pytest.fixture(scope="module")
def loop_binary(tmp_path_factory) -> Path:
    """The small C loop of data/loop.c.txt, compiled."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler")
    folder = tmp_path_factory.mktemp("loop")
    source = folder / "loop.c"
    source.write_text((DATA / "loop.c.txt").read_text())
    subprocess.run([compiler, "-O2", "-o", str(folder / "loop"), str(source)], check=True, timeout=120)
    return folder / "loop"


@needs_perf
def test_real_collect_of_a_native_replay(tmp_path, loop_binary):
    setup = perf_setup()
    replay = target(tmp_path, replay_argv=(str(loop_binary),), kernel_functions=("loop",), repetitions=1)
    profile = collect(replay, [*DEFAULT_METRICS, "no-such-event-here"])

    clock = profile.get("task-clock")
    assert clock is not None and clock.value > 0 and clock.unit == "ms" and clock.kernel == "loop"
    for name in SOFTWARE_EVENTS:
        assert profile.get(name) is not None, name
    assert profile.not_collected["no-such-event-here"].startswith("perf knows no event or metric")
    assert Path(profile.raw_paths[0]).name == OUTPUT_NAME and Path(profile.raw_paths[0]).exists()
    assert "native replay of loop" in profile.notes[0]
    every = {metric.name for metric in profile.metrics} | set(profile.not_collected)
    assert set(DEFAULT_METRICS) <= every  # nothing requested disappears
    if not setup.hardware:
        hardware = [name for name in DEFAULT_METRICS if name not in SOFTWARE_EVENTS]
        assert {name: profile.not_collected[name] for name in hardware} == {
            name: setup.hardware_reason for name in hardware
        }
        assert any(note.startswith(setup.hardware_reason) for note in profile.notes)


@needs_perf
def test_real_collect_of_a_python_target_says_the_interpreter_is_counted(tmp_path):
    python = target(tmp_path, python_argv=(sys.executable, "-c", "sum(range(100000))"), repetitions=2)
    profile = collect(python, ["task-clock", "page-faults"])
    assert profile.get("task-clock").kernel == ""
    assert profile.get("page-faults").value > 0
    assert "include the interpreter" in profile.notes[0]


@needs_perf
def test_a_failing_program_is_noted(tmp_path):
    profile = collect(target(tmp_path, replay_argv=("false",)), ["task-clock"])
    assert profile.get("task-clock") is not None
    assert any("exited with code 1" in note for note in profile.notes)


@needs_perf
def test_a_program_that_overruns_the_timeout_is_killed(tmp_path):
    started = time.monotonic()
    profile = collect(target(tmp_path, replay_argv=("sleep", "30"), timeout_s=0.5), ["task-clock", "cycles"])
    assert time.monotonic() - started < 10
    assert profile.metrics == ()
    assert set(profile.not_collected) == {"task-clock", "cycles"}
    timeout = profile.not_collected["task-clock"]
    assert (
        timeout
        == "perf stat did not finish within 0.5 s and was stopped, with the program it counted; allow more with timeout_s"
    )
    if perf_setup().hardware:  # without a PMU, cycles was refused before perf ran
        assert profile.not_collected["cycles"] == timeout


@needs_perf
def test_perf_and_the_program_run_with_the_targets_environment_and_the_c_locale(tmp_path, monkeypatch):
    monkeypatch.setenv("PRAGMA_PERF_TEST_OUTSIDE", "not for the program")
    seen = tmp_path / "out" / "env.txt"  # the profiled program may write only out_dir
    program = ("sh", "-c", f'echo "$LC_ALL ${{PRAGMA_PERF_TEST_GIVEN-}} ${{PRAGMA_PERF_TEST_OUTSIDE-unset}}" > {seen}')
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "uk_UA.UTF-8", "PRAGMA_PERF_TEST_GIVEN": "given"}
    profile = collect(target(tmp_path, replay_argv=program, env=env), ["task-clock"])
    assert profile.get("task-clock") is not None
    assert seen.read_text() == "C given unset\n"
