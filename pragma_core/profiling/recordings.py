"""The kernel-call recordings a run has made, kept for the run's duration by whoever owns them.

A CPU profiler watches a candidate's kernels through its backend's replay (``Backend.replay``),
which needs one forward's calls recorded in a sandbox child. Recording costs a child that imports
torch (about 2 s), so a run keeps what it recorded: the verifier's child records the candidate at
each size a profiler will ask for (:meth:`Recordings.staging`), and each profile of that candidate
copies the recording instead of starting a child of its own. A :class:`Recordings` belongs to one
owner (the loop makes one per run, :class:`~pragma_core.profiling.session.ProfilingSession`); no
module keeps recordings behind its caller's back.

This module is the one that names the folders a recording is staged in.
"""

from __future__ import annotations

import hashlib
import shutil
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..plugin_api.components import KernelReplay, RecordedCalls
from ..records import Candidate, Task
from ..tasks.loading import task_program

__all__ = ["Recordings", "recording_key"]

_STAGED_PREFIX = "recording-"


def recording_key(program: str, candidate: Candidate, threads: int) -> str:
    """What makes two recordings the same: the task program run, the candidate, the threads."""
    parts = [program, candidate.backend, candidate.source, str(threads)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


class Recordings:
    """Recordings by :func:`recording_key`: the folder holding one, or None for a candidate that
    made no kernel call. The last ``memory`` are kept (a run profiles one candidate at a time,
    with a few profilers)."""

    def __init__(self, memory: int = 8) -> None:
        self._memory = memory
        self._kept: OrderedDict[str, Path | None] = OrderedDict()

    def remember(self, key: str, folder: Path | None) -> None:
        """Keep ``folder`` (None: the candidate made no call) as the recording for ``key``."""
        self._kept[key] = folder
        self._kept.move_to_end(key)
        while len(self._kept) > self._memory:
            self._kept.popitem(last=False)

    def recall(self, key: str, folder: Path, replay: KernelReplay) -> tuple[bool, RecordedCalls | None]:
        """Whether a recording for ``key`` is still here and, when the candidate made calls, that
        recording copied into ``folder`` (each profile keeps what it replayed, beside its own
        output). ``(False, None)`` when there is none, or its folder has gone: record again."""
        if key not in self._kept:
            return False, None
        earlier = self._kept[key]
        if earlier is None:
            return True, None
        if not earlier.is_dir():
            return False, None
        shutil.copytree(earlier, folder, ignore=shutil.ignore_patterns("replay.json"), dirs_exist_ok=True)
        return True, replay.load(folder)

    def staging(self, folder: Path, tasks: Sequence[Task]) -> dict[Path, Task]:
        """Where the verifier's child records a candidate at each of ``tasks`` (the sizes the
        run's profilers ask for): a folder per task inside ``folder``."""
        return {folder / f"{_STAGED_PREFIX}{index}": task for index, task in enumerate(tasks)}

    def keep_staged(self, staged: Mapping[Path, Task], candidate: Candidate, threads: int) -> None:
        """Remember the recordings the verifier wrote into the ``staged`` folders (it writes a
        folder only for a candidate it found correct and recorded)."""
        for folder, task in staged.items():
            if folder.is_dir():
                self.remember(recording_key(task_program(task), candidate, threads), folder)

    @staticmethod
    def clear_staging(folder: Path) -> None:
        """Remove the staged recordings in ``folder`` (each profile kept its own copy)."""
        for staged in folder.glob(f"{_STAGED_PREFIX}*"):
            shutil.rmtree(staged, ignore_errors=True)
