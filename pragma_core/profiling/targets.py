"""Preparing what a profiler runs: a :class:`~pragma_core.plugin_api.components.ProfileTarget`.

For a candidate, the parent records the native calls of one forward in a sandboxed child; when the
candidate is on the native fast path, it builds a replay driver for them (once per distinct
source), so CPU profilers can watch the kernels with no Python around them. Every target also gets
a command that runs the forward in Python (the reference, or a candidate outside the fast path),
for profilers that can afford the interpreter.
"""

from __future__ import annotations

import sys
from pathlib import Path

import attrs

from ..plugin_api.components import DEFAULT_PROFILE_TIMEOUT_S, KernelReplay, ProfileTarget, RecordedCalls
from ..plugin_api.registry import get_registry
from ..records import Candidate, Task
from ..sandbox.child_run import JobFolder
from ..sandbox.process import SandboxedProcess, SandboxLimits, build_environment, child_environment
from .recordings import Recordings, recording_key

__all__ = ["prepare_target"]

_RECORDING = "recording"
"""The folder of the job where its recording is kept (the profiling child writes it)."""


def prepare_target(
    task: Task,
    candidate: Candidate | None,
    out_dir: Path,
    *,
    device: str = "cpu",
    repetitions: int = 3,
    threads: int | None = None,
    timeout_s: float = DEFAULT_PROFILE_TIMEOUT_S,
    recordings: Recordings | None = None,
) -> ProfileTarget:
    """Write the job into ``out_dir``, record and build the replay where the candidate's backend
    has one (``Backend.replay``).

    ``recordings``, the owner's memory of recordings made so far (a run's), gives a recording of
    the same candidate at the same sizes to copy instead of recording again, and keeps this one.

    ``timeout_s`` bounds the recording in the sandbox and, carried by the target, each run of the
    profiler's tool. The target's ``env`` is :func:`~pragma_core.sandbox.process.child_environment` for
    ``threads``: the complete environment of the profiled program.
    """
    from ..verifier.settings import VerifySettings

    threads = threads or VerifySettings().thread_count
    out_dir = Path(out_dir)
    job = {"threads": threads, "device": device, "backend": candidate.backend if candidate else None}
    folder = JobFolder(task, candidate, job, root=out_dir / "job")  # kept: the profiler runs it later
    job_dir = folder.root
    env = child_environment(threads) | build_environment(folder.build_dir)
    python_argv = (sys.executable, "-m", "pragma_core.profiling.worker", "run", str(job_dir), str(repetitions))
    target = ProfileTarget(
        task=task,
        candidate=candidate,
        out_dir=out_dir,
        device=device,
        python_argv=python_argv,
        repetitions=repetitions,
        env=env,
        timeout_s=timeout_s,
    )
    if candidate is None:
        return target

    replay = get_registry().backend(candidate.backend).replay
    if replay is None or device != "cpu":
        return target
    recording = _recorded(folder, candidate, threads, env, timeout_s, replay, recordings)
    if recording is None or not recording.calls:
        return target
    libraries = tuple(dict.fromkeys(call.library for call in recording.calls))
    return attrs.evolve(
        target,
        replay_argv=replay.command(job_dir / _RECORDING, repetitions),
        kernel_functions=tuple(dict.fromkeys(call.function for call in recording.calls)),
        kernel_sources=tuple(str(source) for library in libraries for source in _sources_of(Path(library))),
        kernel_libraries=libraries,
    )


def _recorded(
    folder: JobFolder,
    candidate: Candidate,
    threads: int,
    env: dict[str, str],
    timeout_s: float,
    replay: KernelReplay,
    recordings: Recordings | None,
) -> RecordedCalls | None:
    """The candidate's recording in ``folder``: copied from ``recordings`` when they hold one of
    the same candidate, task program and threads, else recorded in the sandbox (and kept there)."""
    key = recording_key(folder.task_program, candidate, threads)
    if recordings is not None:
        found, recording = recordings.recall(key, folder.root / _RECORDING, replay)
        if found:
            return recording
    recording = _record(folder, env, timeout_s, replay)
    if recordings is not None:
        recordings.remember(key, folder.root / _RECORDING if recording is not None and recording.calls else None)
    return recording


def _record(folder: JobFolder, env: dict[str, str], timeout_s: float, replay: KernelReplay) -> RecordedCalls | None:
    """Record one forward's kernel calls in the sandbox; None when the candidate made none."""
    from ..errors import PragmaError
    from .worker import WRONG_AT_THIS_SIZE

    recording_dir = folder.root / _RECORDING
    argv = [sys.executable, "-m", "pragma_core.profiling.worker", "record", str(folder.root), str(recording_dir)]
    limits = SandboxLimits(wall_s=timeout_s)
    recording_dir.mkdir(exist_ok=True)
    writable = [folder.build_dir, recording_dir]
    with SandboxedProcess(
        argv, cwd=folder.work, log_dir=folder.logs, limits=limits, env=env, writable=writable
    ) as child:
        outcome = child.finish()
    tail = (outcome.stderr.strip().splitlines()[-1:] or [""])[0]
    if not outcome.timed_out and not outcome.signal and outcome.returncode == WRONG_AT_THIS_SIZE:
        raise PragmaError(f"the candidate cannot be profiled at these sizes: {tail}")
    if outcome.timed_out or outcome.signal or outcome.returncode:
        reason = "timed out" if outcome.timed_out else (outcome.signal or f"exit code {outcome.returncode}")
        raise PragmaError(
            f"recording the candidate's kernel calls failed ({reason}): {tail}; run `pragma verify` on it first"
        )
    return replay.load(recording_dir)


def _sources_of(library: Path) -> list[Path]:
    """The source file the native build cache keeps next to each library."""
    return [path for path in (library.with_suffix(".cpp"), library.with_suffix(".c")) if path.exists()]
