"""Preparing what a profiler runs: a :class:`~pragma_core.components.ProfileTarget`.

For a candidate, the parent records the native calls of one forward in a sandboxed child; when the
candidate is on the native fast path, it compiles a replay driver for them, so CPU profilers can
watch the kernels with no Python around them. Every target also gets a command that runs the
forward in Python (the reference, or a candidate outside the fast path), for profilers that can
afford the interpreter.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from ..child_run import JobFolder
from ..components import DEFAULT_PROFILE_TIMEOUT_S, ProfileTarget
from ..records import Candidate, Task
from ..sandbox import SandboxedProcess, SandboxLimits, build_environment, child_environment

if TYPE_CHECKING:  # importing them imports torch, which profiler plugins must not pay for at load time
    from ..native.recording import CallRecording

__all__ = ["prepare_target"]


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
    profiler's tool. The target's ``env`` is :func:`~pragma_core.sandbox.child_environment` for
    ``threads``: the complete environment of the profiled program.
    """
    from ..native.replay import build_replay
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

    recording = _record(folder, env, timeout_s) if device == "cpu" else None
    if recording is None or not recording.calls:
        return target
    libraries = tuple(dict.fromkeys(call.library for call in recording.calls))
    return attrs.evolve(
        target,
        replay_argv=(str(build_replay(job_dir / "recording")), str(repetitions)),
        kernel_functions=tuple(dict.fromkeys(call.function for call in recording.calls)),
        kernel_sources=tuple(str(source) for library in libraries for source in _sources_of(Path(library))),
        kernel_libraries=libraries,
    )


def _record(folder: JobFolder, env: dict[str, str], timeout_s: float) -> CallRecording | None:
    """Record one forward's native calls in the sandbox; None when the candidate made none."""
    from ..errors import PragmaError
    from ..native.recording import CallRecording

    argv = [sys.executable, "-m", "pragma_core.profiling.worker", "record", str(folder.root)]
    limits = SandboxLimits(wall_s=timeout_s)
    recording_dir = folder.root / "recording"
    recording_dir.mkdir(exist_ok=True)
    writable = [folder.build_dir, recording_dir]
    with SandboxedProcess(
        argv, cwd=folder.work, log_dir=folder.logs, limits=limits, env=env, writable=writable
    ) as child:
        outcome = child.finish()
    if outcome.timed_out or outcome.signal or outcome.returncode:
        reason = "timed out" if outcome.timed_out else (outcome.signal or f"exit code {outcome.returncode}")
        tail = outcome.stderr.strip().splitlines()[-1:] or [""]
        raise PragmaError(
            f"recording the candidate's kernel calls failed ({reason}): {tail[0]}; run `pragma verify` on it first"
        )
    return CallRecording.load(recording_dir) if (recording_dir / "calls.json").exists() else None


def _sources_of(library: Path) -> list[Path]:
    """The source file the native build cache keeps next to each library."""
    return [path for path in (library.with_suffix(".cpp"), library.with_suffix(".c")) if path.exists()]
