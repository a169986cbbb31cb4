"""Before attempt 1: the reference's time on this machine, the task's roofline floor, and the
reference's profiles (:func:`measure_baseline`), written to the run's ``baseline/``."""

from __future__ import annotations

import json

from ..files import atomic_write_text
from ..profiling.session import ProfilingSession
from ..records import Baseline, Task
from .profiles import profile_each
from .progress import PhaseClock
from .run_directory import RunDirectory
from .settings import OptimizeSettings

__all__ = ["measure_baseline"]


def measure_baseline(
    task: Task,
    settings: OptimizeSettings,
    run: RunDirectory,
    unavailable: dict[str, str],
    profiling: ProfilingSession | None = None,
) -> Baseline:
    """Before attempt 1: the reference's time here, the task's roofline floor (computed once per
    run), and the reference's profile from each profiler that can watch it (perf can, through
    Python; cachegrind needs a native kernel). ``unavailable`` profilers are not tried."""
    from ..machine.roofline import floor_ms, library_floor_ms, machine_peaks
    from ..serialization import to_dict
    from ..verifier.reference import reference_timing

    clock = PhaseClock()
    folder = run.root / "baseline"
    folder.mkdir(exist_ok=True)
    floor = library_floor = None
    if task.analysis is not None:
        clock.start("roofline")  # measures the machine's peaks the first time a thread count needs them
        peaks = machine_peaks(settings.verify.thread_count)
        floor, library_floor = floor_ms(task.analysis, peaks), library_floor_ms(task.analysis, peaks)
        floors = {"physical": to_dict(floor), "library": to_dict(library_floor)}
        atomic_write_text(folder / "roofline.json", json.dumps(floors, indent=2) + "\n")
    profilers = [name for name in settings.profilers if name not in unavailable] if settings.profile else []
    profiles, failed = profile_each(
        task,
        None,
        profilers,
        folder=folder,
        verify=settings.verify,
        on_profiler=lambda name: clock.start(f"profiling:{name}"),
        session=profiling,
    )
    skipped = {**unavailable, **failed}
    clock.start("timing")
    reference = reference_timing(task, settings.verify)
    seconds = clock.stop()
    baseline = Baseline(
        reference=reference,
        floor_ms=floor.floor_ms if floor else None,
        library_floor_ms=library_floor.floor_ms if library_floor else None,
        bound=floor.bound if floor else None,
        profiles=profiles,
        skipped=skipped,
    )
    run.write_baseline(baseline)
    run.append_event(
        "baseline",
        reference_ms=baseline.reference.median_ms if baseline.reference else None,
        floor_ms=baseline.floor_ms,
        library_floor_ms=baseline.library_floor_ms,
        bound=baseline.bound.value if baseline.bound else None,
        profiled=[p.profiler for p in profiles],
        skipped=skipped,
        seconds=round(sum(seconds.values()), 3),
        phase_seconds={name: round(value, 3) for name, value in seconds.items()},
    )
    return baseline
