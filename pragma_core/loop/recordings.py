"""The candidate's kernel calls, recorded by the verifier's child for the profilers to replay.

When a run profiles, the verifier's child records one forward of the candidate at each size the
run's profilers profile at (:func:`recording_tasks`), into ``recording-N`` folders of the attempt's
staging folder (:func:`recording_folders`); after the verification they are remembered for this
process's profiles (:func:`remember_recordings`), so profiling starts no child of its own to import
torch again, and once every profile has copied what it needs they are removed
(:func:`discard_recordings`). All of the loop's handling of recordings is here.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from ..plugin_api.registry import get_registry
from ..records import Candidate, Task

__all__ = ["recording_tasks", "recording_folders", "remember_recordings", "discard_recordings"]


def recording_tasks(task: Task, profilers: Sequence[str]) -> tuple[Task, ...]:
    """The task at the sizes each profiler will profile a candidate at, once per distinct size:
    the verifier's child records the candidate's kernel calls at each."""
    from ..profiling import profiling_task
    from ..tasks.loading import task_program

    registry = get_registry()
    sized: dict[str, Task] = {}
    for name in profilers:
        shrunk = profiling_task(task, registry.profiler(name)).task
        sized.setdefault(task_program(shrunk), shrunk)
    return tuple(sized.values())


def recording_folders(staging: Path, tasks: Sequence[Task]) -> dict[Path, Task]:
    """Where the verifier's child records the candidate at each of ``tasks``' sizes: the
    ``keep_recordings`` of :func:`~pragma_core.verifier.verify`."""
    return {staging / f"recording-{index}": sized for index, sized in enumerate(tasks)}


def remember_recordings(folders: dict[Path, Task], candidate: Candidate, threads: int) -> None:
    """Offer each recording the verification made to this process's next profiles of ``candidate``."""
    from ..profiling.targets import remember_recording

    for folder, sized in folders.items():
        remember_recording(sized, candidate, threads, folder)


def discard_recordings(staging: Path) -> None:
    """Remove the recordings from the attempt's staging folder: each profile kept its own copy."""
    for recording in staging.glob("recording-*"):  # each profile kept its own copy
        shutil.rmtree(recording, ignore_errors=True)
