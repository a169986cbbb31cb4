"""What a run's profiles share, derived once when the run starts and handed to every profile.

Each profiler watches a CPU task at its own size (shrunk to the caches it sees,
:func:`~pragma_core.sizes.profiling.profiling_task`, which traces the task a few times): the
session shrinks the task once per profiler, and the verifier's child records each candidate's
kernel calls at those sizes ahead of the profiles (:meth:`ProfilingSession.recording_tasks`), which
then copy the recordings (:class:`~pragma_core.profiling.recordings.Recordings`). The loop makes
one per run and keeps it for the run's duration.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from ..plugin_api.registry import get_registry
from ..records import Task
from ..sizes.profiling import profiling_task
from ..sizes.shrinking import ShrunkTask
from ..tasks.loading import task_program
from .recordings import Recordings

__all__ = ["ProfilingSession"]


@attrs.define
class ProfilingSession:
    """The task at each profiler's size (by profiler name) and the run's recordings."""

    sized: dict[str, ShrunkTask] = attrs.field(factory=dict)
    recordings: Recordings = attrs.field(factory=Recordings)

    @classmethod
    def for_task(cls, task: Task, profilers: Sequence[str]) -> ProfilingSession:
        """The session of a run of ``task`` profiled by ``profilers`` (names of installed ones)."""
        registry = get_registry()
        return cls(sized={name: profiling_task(task, registry.profiler(name)) for name in profilers})

    def recording_tasks(self) -> tuple[Task, ...]:
        """The task at the sizes the profilers will profile a candidate at, once per distinct
        size: the verifier's child records the candidate's kernel calls at each."""
        distinct: dict[str, Task] = {}
        for shrunk in self.sized.values():
            distinct.setdefault(task_program(shrunk.task), shrunk.task)
        return tuple(distinct.values())
