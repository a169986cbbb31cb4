"""Preparing what a profiler runs: a :class:`~pragma_core.plugin_api.components.ProfileTarget`.

For a candidate, the parent records the native calls of one forward in a sandboxed child; when the
candidate is on the native fast path, it builds a replay driver for them (once per distinct
source), so CPU profilers can watch the kernels with no Python around them. Every target also gets
a command that runs the forward in Python (the reference, or a candidate outside the fast path),
for profilers that can afford the interpreter.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from ..plugin_api.components import DEFAULT_PROFILE_TIMEOUT_S, ProfileTarget
from ..records import Candidate, Task
from ..sandbox.child_run import JobFolder
from ..sandbox.process import SandboxedProcess, SandboxLimits, build_environment, child_environment

if TYPE_CHECKING:  # importing them imports torch, which profiler plugins must not pay for at load time
    from ..backends.cpu_cpp.native.recording import CallRecording

__all__ = ["prepare_target", "remember_recording"]


def prepare_target(
    task: Task,
    candidate: Candidate | None,
    out_dir: Path,
    *,
    device: str = "cpu",
    repetitions: int = 3,
    threads: int | None = None,
    timeout_s: float = DEFAULT_PROFILE_TIMEOUT_S,
) -> ProfileTarget:
    """Write the job into ``out_dir``, record and build the replay where it applies.

    ``timeout_s`` bounds the recording in the sandbox and, carried by the target, each run of the
    profiler's tool. The target's ``env`` is :func:`~pragma_core.sandbox.process.child_environment` for
    ``threads``: the complete environment of the profiled program.
    """
    from ..backends.cpu_cpp.native.replay import replay_command
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

    from ..plugin_api.registry import get_registry

    records = get_registry().backend(candidate.backend).records_calls
    recording = _recorded_once(folder, candidate, threads, env, timeout_s) if records and device == "cpu" else None
    if recording is None or not recording.calls:
        return target
    libraries = tuple(dict.fromkeys(call.library for call in recording.calls))
    return attrs.evolve(
        target,
        replay_argv=replay_command(job_dir / "recording", repetitions),
        kernel_functions=tuple(dict.fromkeys(call.function for call in recording.calls)),
        kernel_sources=tuple(str(source) for library in libraries for source in _sources_of(Path(library))),
        kernel_libraries=libraries,
    )


_MEMORY = 8  # recordings remembered: a run profiles one candidate at a time, with a few profilers
_RECORDINGS: OrderedDict[str, Path | None] = OrderedDict()
"""Recordings made in this process, by :func:`_recording_key`: the folder, or None for a candidate
that made no native call. A second profiler of the same candidate at the same size copies the
folder instead of starting another child, which would import torch again (about 2 s)."""


def _recording_key(program: str, candidate: Candidate, threads: int) -> str:
    parts = [program, candidate.backend, candidate.source, str(threads)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def remember_recording(task: Task, candidate: Candidate, threads: int, recording_dir: Path) -> None:
    """Use ``recording_dir`` (a recording of one forward of ``candidate`` on ``task``, made by the
    verifier's child: ``verify(..., keep_recording=...)``) for this process's next profiles of that
    candidate at the task's own sizes, instead of recording again in another child."""
    from ..tasks.loading import task_program

    if (Path(recording_dir) / "calls.json").is_file():
        _remember(_recording_key(task_program(task), candidate, threads), Path(recording_dir))


def _remember(key: str, recording_dir: Path | None) -> None:
    _RECORDINGS[key] = recording_dir
    while len(_RECORDINGS) > _MEMORY:
        _RECORDINGS.popitem(last=False)


def _recorded_once(
    folder: JobFolder, candidate: Candidate, threads: int, env: dict[str, str], timeout_s: float
) -> CallRecording | None:
    """The candidate's recording in ``folder``: copied from an earlier one of the same candidate,
    task program and threads in this process when it is still there, else recorded in the sandbox."""
    from ..backends.cpu_cpp.native.recording import CallRecording

    key = _recording_key(folder.task_file.read_text(), candidate, threads)
    if key in _RECORDINGS:
        earlier = _RECORDINGS[key]
        if earlier is None:
            return None
        if (earlier / "calls.json").exists():
            # A copy, not the folder itself: each profile keeps what it replayed with its output.
            skip = shutil.ignore_patterns("replay.json")
            shutil.copytree(earlier, folder.root / "recording", ignore=skip, dirs_exist_ok=True)
            return CallRecording.load(folder.root / "recording")
    recording = _record(folder, env, timeout_s)
    _remember(key, folder.root / "recording" if recording is not None and recording.calls else None)
    return recording


def _record(folder: JobFolder, env: dict[str, str], timeout_s: float) -> CallRecording | None:
    """Record one forward's native calls in the sandbox; None when the candidate made none."""
    from ..backends.cpu_cpp.native.recording import CallRecording
    from ..errors import PragmaError
    from .worker import WRONG_AT_THIS_SIZE

    argv = [sys.executable, "-m", "pragma_core.profiling.worker", "record", str(folder.root)]
    limits = SandboxLimits(wall_s=timeout_s)
    recording_dir = folder.root / "recording"
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
    return CallRecording.load(recording_dir) if (recording_dir / "calls.json").exists() else None


def _sources_of(library: Path) -> list[Path]:
    """The source file the native build cache keeps next to each library."""
    return [path for path in (library.with_suffix(".cpp"), library.with_suffix(".c")) if path.exists()]
