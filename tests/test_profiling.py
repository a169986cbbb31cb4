"""Profiling targets: the candidate's calls recorded in the sandbox, replayed natively."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from pragma_core import Candidate, load_task
from pragma_core.backends.cpu_cpp.native.recording import CallRecording
from pragma_core.errors import PluginError, PragmaError, ProfilerUnavailable
from pragma_core.plugin_api.components import DEFAULT_PROFILE_TIMEOUT_S, ProfileTarget
from pragma_core.profiling import ProfilingSession, prepare_target, profile

from .conftest import EXAMPLES
from .test_verifier import CANDIDATES

LAYERNORM = EXAMPLES / "level1" / "4_LayerNorm.py"


def test_fast_path_candidate_gets_a_replay_of_its_kernel_calls(tmp_path):
    task = load_task(LAYERNORM, {"batch_size": 8, "dim": 256})
    candidate = Candidate(source=(CANDIDATES / "honest_layernorm_two_kernels.py").read_text(), backend="cpu-cpp")
    target = prepare_target(task, candidate, tmp_path / "run", repetitions=4, threads=1)
    assert target.kernel_functions == ("row_stats", "normalize", "affine_inplace")
    assert len(target.kernel_libraries) == 1 and target.kernel_sources[0].endswith(".cpp")
    assert target.replay_argv[1] == "4" and target.env["OMP_NUM_THREADS"] == "1"
    recording = CallRecording.load(tmp_path / "run" / "job" / "recording")
    assert [call.function for call in recording.calls] == ["row_stats", "normalize", "affine_inplace"]
    replay = subprocess.run(list(target.replay_argv), capture_output=True, text=True, env=target.env, timeout=60)
    assert replay.returncode == 0, replay.stderr
    run = subprocess.run(list(target.python_argv), capture_output=True, text=True, env=target.env, timeout=120)
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize("profiler", ["valgrind", "perf"])
def test_a_relative_output_folder_gets_the_tools_output(tmp_path, monkeypatch, profiler):
    """`pragma optimize --runs-dir runs/demo` profiles into a relative folder; the tools run elsewhere."""
    monkeypatch.chdir(tmp_path)
    task = load_task(EXAMPLES / "level1" / "1_GELUTanh.py", {"batch_size": 4, "dim": 1024})
    fast = (EXAMPLES.parent / "candidates" / "1_GELUTanh_fast.py").read_text()
    result = profile(task, fast, profiler=profiler, out_dir="runs/profile", threads=1)
    assert result.metrics, result.not_collected
    assert all(Path(path).is_absolute() and Path(path).exists() for path in result.raw_paths)


def test_the_reference_and_non_fast_path_candidates_run_through_python(tmp_path):
    task = load_task(LAYERNORM, {"batch_size": 8, "dim": 256})
    target = prepare_target(task, None, tmp_path / "ref", repetitions=2, threads=1)
    assert target.replay_argv is None and target.kernel_functions == ()
    run = subprocess.run(list(target.python_argv), capture_output=True, text=True, env=target.env, timeout=120)
    assert run.returncode == 0, run.stderr
    numpy_candidate = Candidate(source=(CANDIDATES / "cheat_no_kernel.py").read_text(), backend="cpu-cpp")
    gelu = load_task(EXAMPLES / "level1" / "1_GELUTanh.py", {"batch_size": 4, "dim": 64})
    assert prepare_target(gelu, numpy_candidate, tmp_path / "np").replay_argv is None


def test_a_crashing_candidate_fails_recording_with_one_line(tmp_path):
    gelu = load_task(EXAMPLES / "level1" / "1_GELUTanh.py", {"batch_size": 4, "dim": 64})
    crashing = Candidate(source=(CANDIDATES / "gelu_segfault.py").read_text(), backend="cpu-cpp")
    with pytest.raises(Exception, match=r"recording the candidate's kernel calls failed \(SIGSEGV\)"):
        prepare_target(gelu, crashing, tmp_path / "crash")


def test_unknown_profiler_is_a_clear_error():
    task = load_task(LAYERNORM, {"batch_size": 8, "dim": 256})
    with pytest.raises(PluginError, match="no profiler named 'nope'"):
        profile(task, profiler="nope")


def test_unavailable_profiler_says_why(monkeypatch):
    from pragma_core import Availability, Profile, Profiler
    from pragma_core.plugin_api.registry import get_registry

    missing = Profiler(
        name="missing",
        devices=("cpu",),
        default_metrics=("x",),
        description="d",
        probe=lambda: Availability(available=False, reason="missing-tool is not installed", still_works="perf"),
        collect=lambda target, metrics: Profile(profiler="missing"),
        parse=lambda raw: [],
    )
    registry = get_registry()
    registry.profilers()
    monkeypatch.setitem(registry._components["profilers"], "missing", missing)
    task = load_task(LAYERNORM, {"batch_size": 8, "dim": 256})
    with pytest.raises(
        ProfilerUnavailable,
        match="profiler 'missing' cannot run here: missing-tool is not installed; still works: perf",
    ):
        profile(task, profiler="missing")


def test_the_target_carries_the_timeout_and_the_programs_whole_environment(monkeypatch, tmp_path):
    from pragma_core import Availability, Profile, Profiler
    from pragma_core.plugin_api.registry import get_registry
    from pragma_core.sandbox.process import build_environment, child_environment

    targets = []

    def collect(target, metrics):
        targets.append(target)
        return Profile(profiler="watching")

    watching = Profiler(
        name="watching",
        devices=("cpu",),
        default_metrics=("x",),
        description="d",
        probe=lambda: Availability(available=True),
        collect=collect,
        parse=lambda raw: [],
    )
    registry = get_registry()
    registry.profilers()
    monkeypatch.setitem(registry._components["profilers"], "watching", watching)
    task = load_task(LAYERNORM, {"batch_size": 8, "dim": 256})
    profile(task, profiler="watching", out_dir=tmp_path, threads=1, timeout_s=42)
    assert targets[0].timeout_s == 42
    assert targets[0].env == child_environment(1) | build_environment(tmp_path / "job" / "work" / "build")
    profile(task, profiler="watching", out_dir=tmp_path, threads=1)
    assert targets[1].timeout_s == DEFAULT_PROFILE_TIMEOUT_S


def test_the_timeout_bounds_the_recording_too(tmp_path):
    gelu = load_task(EXAMPLES / "level1" / "1_GELUTanh.py", {"batch_size": 4, "dim": 64})
    hanging = Candidate(source=(CANDIDATES / "gelu_infinite_loop.py").read_text(), backend="cpu-cpp")
    started = time.monotonic()
    with pytest.raises(PragmaError, match=r"recording the candidate's kernel calls failed \(timed out\)"):
        profile(gelu, hanging, profiler="perf", out_dir=tmp_path, timeout_s=5)
    assert time.monotonic() - started < 20


def test_a_target_refuses_an_environment_no_process_can_have(tmp_path):
    task = load_task(LAYERNORM, {"batch_size": 8, "dim": 256})
    with pytest.raises(TypeError, match="'OMP_NUM_THREADS' is 4"):
        ProfileTarget(task=task, candidate=None, out_dir=tmp_path, env={"PATH": "/bin", "OMP_NUM_THREADS": 4})
    with pytest.raises(ValueError, match="timeout_s"):
        ProfileTarget(task=task, candidate=None, out_dir=tmp_path, timeout_s=0)
    by_hand = ProfileTarget(task=task, candidate=None, out_dir=tmp_path)
    assert by_hand.env == dict(os.environ) and by_hand.env is not os.environ
    secret = ProfileTarget(task=task, candidate=None, out_dir=tmp_path, env={"OPENAI_API_KEY": "sk-do-not-print"})
    assert "sk-do-not-print" not in repr(secret)


def test_a_recording_the_verifier_kept_is_profiled_without_another_child(tmp_path):
    from pragma_core.verifier import VerifySettings, verify

    task = load_task(EXAMPLES / "level1" / "1_GELUTanh.py", {"batch_size": 8, "dim": 1024})
    fast = Candidate(source=(EXAMPLES.parent / "candidates" / "1_GELUTanh_fast.py").read_text(), backend="cpu-cpp")
    settings = VerifySettings(reps=20, warmup=1, threads=1)
    verdict = verify(task, fast, settings, keep_recordings={tmp_path / "kept": task})
    assert verdict.ok, verdict.message
    kept = CallRecording.load(tmp_path / "kept")
    assert [call.function for call in kept.calls] == ["gelu_tanh"]
    session = ProfilingSession()
    session.recordings.keep_staged({tmp_path / "kept": task}, fast, 1)
    result = profile(
        task, fast, profiler="valgrind", out_dir=tmp_path / "profile", threads=1, full_size=True, session=session
    )
    assert result.metrics and not any((tmp_path / "profile" / "job" / "logs").iterdir())  # no child ran

    wrong = Candidate(source=(CANDIDATES / "gelu_wrong_values.py").read_text(), backend="cpu-cpp")
    verdict = verify(task, wrong, settings, keep_recordings={tmp_path / "wrong": task})
    assert not verdict.ok and not (tmp_path / "wrong").exists()


def test_the_verifier_records_at_each_profilers_size_and_refuses_a_candidate_fixed_to_its_own(tmp_path):
    """The loop's verifier records where the profilers will profile: the task's own sizes for
    one, a profiler's smaller sizes for another (there the output is checked first)."""
    from pragma_core.verifier import VerifySettings, verify

    task = load_task(EXAMPLES / "level1" / "1_GELUTanh.py", {"batch_size": 64, "dim": 1024})
    small = load_task(EXAMPLES / "level1" / "1_GELUTanh.py", {"batch_size": 8, "dim": 1024})
    fast = Candidate(source=(EXAMPLES.parent / "candidates" / "1_GELUTanh_fast.py").read_text(), backend="cpu-cpp")
    settings = VerifySettings(reps=20, warmup=1, threads=1)
    kept = {tmp_path / "own": task, tmp_path / "small": small}
    assert verify(task, fast, settings, keep_recordings=kept).ok
    own, reduced = CallRecording.load(tmp_path / "own"), CallRecording.load(tmp_path / "small")
    assert [call.function for call in own.calls] == [call.function for call in reduced.calls] == ["gelu_tanh"]
    sizes = [[arg.shape for arg in call.arguments if hasattr(arg, "shape")] for call in (*own.calls, *reduced.calls)]
    assert sizes[0][0] == (64, 1024) and sizes[1][0] == (8, 1024)
    session = ProfilingSession()
    session.recordings.keep_staged({tmp_path / "small": small}, fast, 1)
    result = profile(
        task,
        fast,
        profiler="valgrind",
        out_dir=tmp_path / "profile",
        threads=1,
        working_set_bytes=64 << 10,
        session=session,
    )
    assert result.sizes == {"batch_size": 8} and not any((tmp_path / "profile" / "job" / "logs").iterdir())

    fixed = fast.source.replace("x.numel()", "(64 * 1024)")  # assumes the task's own size
    assert fixed != fast.source
    fixed_candidate = Candidate(source=fixed, backend="cpu-cpp")
    verdict = verify(task, fixed_candidate, settings, keep_recordings={tmp_path / "fixed": small})
    assert verdict.ok and not (tmp_path / "fixed").exists(), verdict.message
    assert any(note.startswith("not recorded for profiling at other sizes") for note in verdict.notes)


def test_the_replay_driver_is_built_once_per_distinct_source(tmp_path, monkeypatch):
    from pragma_core.backends.cpu_cpp.native import replay

    gelu = EXAMPLES / "level1" / "1_GELUTanh.py"
    fast = Candidate(source=(EXAMPLES.parent / "candidates" / "1_GELUTanh_fast.py").read_text(), backend="cpu-cpp")
    task = load_task(gelu, {"batch_size": 4, "dim": 256})
    first = prepare_target(task, fast, tmp_path / "a", threads=1)
    source = replay.replay_source(CallRecording.load(tmp_path / "a" / "job" / "recording"))
    assert str(tmp_path) not in source and ".so" not in source  # folders and libraries are arguments

    compiled = []
    monkeypatch.setattr(replay, "_compile", lambda *arguments: compiled.append(arguments))
    second = prepare_target(task, fast, tmp_path / "b", threads=1)  # same calls, another folder
    assert not compiled and second.replay_argv[0] == first.replay_argv[0]
    assert second.replay_argv[1:3] == ("3", str(tmp_path / "b" / "job" / "recording"))  # 3 forwards by default
    assert second.replay_argv[3:] == second.kernel_libraries
    run = subprocess.run(list(second.replay_argv), capture_output=True, text=True, env=second.env, timeout=60)
    assert run.returncode == 0, run.stderr
    usage = subprocess.run(list(second.replay_argv[:2]), capture_output=True, text=True, env=second.env, timeout=60)
    assert usage.returncode == 2 and "usage:" in usage.stderr and "(1 libraries)" in usage.stderr

    monkeypatch.undo()
    other = prepare_target(load_task(gelu, {"batch_size": 8, "dim": 256}), fast, tmp_path / "c", threads=1)
    assert other.replay_argv[0] != first.replay_argv[0]  # another element count in the call: another driver
