"""Profiling a task's reference or a candidate with any installed profiler.

    from pragma_core import load_task
    from pragma_core.profiling import profile

    result = profile(load_task("examples/tasks/level1/1_GELUTanh.py"), candidate, profiler="valgrind")
    for metric in result.metrics: print(metric.name, metric.value, metric.unit, metric.meaning)

pragma prepares the target (records the candidate's kernel calls in the sandbox and builds a
replay driver, see :mod:`pragma_core.profiling.targets`); the profiler plugin runs its tool on it
with :func:`pragma_core.profiling.tools.run_tool`, within the target's ``timeout_s``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..components import DEFAULT_PROFILE_TIMEOUT_S
from ..errors import ProfilerUnavailable
from ..plugins import get_registry
from ..records import Candidate, Profile, Task
from .targets import prepare_target

__all__ = ["profile", "prepare_target"]


def profile(
    task: Task,
    candidate: Candidate | str | None = None,
    *,
    profiler: str,
    metrics: Sequence[str] | None = None,
    selector: str = "default",
    out_dir: str | Path | None = None,
    repetitions: int = 3,
    threads: int | None = None,
    timeout_s: float = DEFAULT_PROFILE_TIMEOUT_S,
) -> Profile:
    """Run ``profiler`` on the candidate (the reference when None) and return its profile.

    ``metrics`` adds to the profiler's defaults as the selector gives them; names the tool does not
    know come back in ``Profile.not_collected`` with the reason. ``out_dir`` keeps the job and the
    raw tool output (default: a new temporary folder, kept, whose path is in ``raw_paths``).
    ``timeout_s`` bounds the recording of the candidate's kernel calls and each run of the
    profiler's tool; a run past it is stopped and reported (in ``not_collected``, or as
    :class:`~pragma_core.errors.ProfilerUnavailable` by profilers that cannot give a partial profile).
    """
    registry = get_registry()
    chosen = registry.profiler(profiler)
    availability = chosen.probe()
    if not availability.available:
        still = f"; still works: {availability.still_works}" if availability.still_works else ""
        raise ProfilerUnavailable(f"profiler {profiler!r} cannot run here: {availability.reason}{still}")
    device = chosen.devices[0]
    wanted = list(registry.metric_selector(selector).defaults(chosen, device))
    wanted += [name for name in (metrics or ()) if name not in wanted]
    if isinstance(candidate, str):
        candidate = Candidate(source=candidate, backend="cpu-cpp")
    # Absolute: the tools run in the job folder, where a relative path would name another place.
    folder = (
        Path(out_dir).resolve() if out_dir is not None else Path(tempfile.mkdtemp(prefix=f"pragma-profile-{profiler}-"))
    )
    target = prepare_target(
        task, candidate, folder, device=device, repetitions=repetitions, threads=threads, timeout_s=timeout_s
    )
    return chosen.collect(target, wanted)
