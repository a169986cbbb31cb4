"""Profiling a task's reference or a candidate with any installed profiler.

    from pragma_core import load_task
    from pragma_core.profiling import profile

    result = profile(load_task("examples/tasks/level1/1_GELUTanh.py"), candidate, profiler="valgrind")
    for metric in result.metrics: print(metric.name, metric.value, metric.unit, metric.meaning)

pragma prepares the target (records the candidate's kernel calls in the sandbox and builds a
replay driver, see :mod:`pragma_core.profiling.targets`); the profiler plugin runs its tool on it
with :func:`pragma_core.sandbox.tools.run_tool`, within the target's ``timeout_s``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

import attrs

from ..backends import DEFAULT_BACKEND
from ..errors import ProfilerUnavailable
from ..machine.timing_slot import busy_slot
from ..plugin_api.components import DEFAULT_PROFILE_TIMEOUT_S
from ..plugin_api.registry import get_registry
from ..records import Candidate, Profile, Task
from ..sizes.profiling import profiler_working_set_bytes, profiling_task, size_note
from .session import ProfilingSession
from .targets import prepare_target

__all__ = ["profile", "prepare_target", "profiling_task", "ProfilingSession"]


def profile(
    task: Task,
    candidate: Candidate | str | None = None,
    *,
    profiler: str,
    metrics: Sequence[str] | None = None,
    selector: str = "default",
    out_dir: str | Path | None = None,
    repetitions: int | None = None,
    threads: int | None = None,
    timeout_s: float = DEFAULT_PROFILE_TIMEOUT_S,
    full_size: bool = False,
    working_set_bytes: int | None = None,
    session: ProfilingSession | None = None,
) -> Profile:
    """Run ``profiler`` on the candidate (the reference when None) and return its profile.

    ``metrics`` adds to the profiler's defaults as the selector gives them; names the tool does not
    know come back in ``Profile.not_collected`` with the reason. ``out_dir`` keeps the job and the
    raw tool output (default: a new temporary folder, kept, whose path is in ``raw_paths``).
    ``timeout_s`` bounds the recording of the candidate's kernel calls and each run of the
    profiler's tool; a run past it is stopped and reported (in ``not_collected``, or as
    :class:`~pragma_core.errors.ProfilerUnavailable` by profilers that cannot give a partial profile).

    A CPU task whose data (inputs, outputs, parameters) is above ``working_set_bytes`` (default
    :func:`~pragma_core.sizes.profiling.profiler_working_set_bytes`: twice the last-level cache
    the profiler sees, the simulated one for cachegrind, this machine's for perf) is profiled at
    smaller sizes that keep its access pattern (:mod:`pragma_core.sizes.profiling`); the sizes
    are in ``Profile.sizes`` and the first note. ``full_size`` profiles at the task's own sizes.
    ``repetitions`` (forwards replayed) defaults to one for a deterministic profiler (cachegrind)
    and three for the others.

    ``session``, a run's :class:`~pragma_core.profiling.session.ProfilingSession`, gives the task
    at this profiler's size as the run derived it once, and the recordings of the candidate's
    kernel calls made so far (copied, not recorded again).
    """
    registry = get_registry()
    chosen = registry.profiler(profiler)
    availability = chosen.probe()
    if not availability.available:
        still = f"; still works: {availability.still_works}" if availability.still_works else ""
        raise ProfilerUnavailable(f"profiler {profiler!r} cannot run here: {availability.reason}{still}")
    if isinstance(candidate, str):
        candidate = Candidate(source=candidate, backend=DEFAULT_BACKEND)
    device = chosen.devices[0]
    if candidate is not None:  # where the candidate's backend runs it, which the profiler must watch
        backend = registry.backend(candidate.backend)
        device = backend.execution_device()
        if device not in chosen.devices:
            raise ProfilerUnavailable(
                f"profiler {profiler!r} watches {', '.join(chosen.devices)} programs; this {candidate.backend} "
                f"candidate runs on {device} here"
            )
        refusal = backend.timing_refusal()
        if refusal:
            raise ProfilerUnavailable(f"profiling it would measure the interpreter, not its kernels: {refusal}")
    if repetitions is None:
        repetitions = 1 if chosen.deterministic else 3
    wanted = list(registry.metric_selector(selector).defaults(chosen, device))
    wanted += [name for name in (metrics or ()) if name not in wanted]
    # Absolute: the tools run in the job folder, where a relative path would name another place.
    folder = (
        Path(out_dir).resolve() if out_dir is not None else Path(tempfile.mkdtemp(prefix=f"pragma-profile-{profiler}-"))
    )
    shrunk = session.sized.get(profiler) if session is not None else None
    if shrunk is None or full_size or working_set_bytes is not None:
        shrunk = profiling_task(task, chosen, full_size=full_size, working_set_bytes=working_set_bytes)
    with busy_slot():  # recording and profiling keep cores busy: never during another task's timing
        target = prepare_target(
            shrunk.task,
            candidate,
            folder,
            device=device,
            repetitions=repetitions,
            threads=threads,
            timeout_s=timeout_s,
            recordings=session.recordings if session is not None else None,
        )
        result = chosen.collect(target, wanted)
    if working_set_bytes is None:
        note = size_note(shrunk, profiler_working_set_bytes(chosen), simulated=chosen.deterministic)
    else:
        note = size_note(shrunk, working_set_bytes)
    return attrs.evolve(result, sizes=shrunk.sizes, notes=(note, *result.notes) if note else result.notes)
