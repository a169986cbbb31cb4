"""Profiling in a run: which of the named profilers can run on this machine
(:func:`unavailable_profilers`), and each one's profile of the reference or of a candidate within
the run's thread count and time limit (:func:`profile_each`). A profiler that fails gives no
profile and says why; a broken plugin neither ends the run nor passes unseen.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from ..errors import PragmaError
from ..files import atomic_write_text
from ..plugin_api.components import DEFAULT_PROFILE_TIMEOUT_S
from ..plugin_api.registry import get_registry
from ..profiling.session import ProfilingSession
from ..records import Candidate, Profile, Task
from ..verifier import VerifySettings

__all__ = ["unavailable_profilers", "profile_each"]


def unavailable_profilers(names: Sequence[str]) -> dict[str, str]:
    """Of the named profilers, those that cannot run on this machine, each with its probe's reason.

    A name no installed plugin registers raises :class:`~pragma_core.errors.PluginError`: a typo
    must not turn into a run without its profiler."""
    registry = get_registry()
    profilers = [registry.profiler(name) for name in names]
    unavailable = {}
    for profiler in profilers:
        availability = profiler.probe()
        if not availability.available:
            unavailable[profiler.name] = availability.reason
    return unavailable


def profile_each(
    task: Task,
    candidate: Candidate | None,
    profilers: Sequence[str],
    *,
    folder: Path,
    verify: VerifySettings,
    metrics: Sequence[str] | None = None,
    on_profiler: Callable[[str], None],
    session: ProfilingSession | None = None,
) -> tuple[list[Profile], dict[str, str]]:
    """Each profiler's profile of ``candidate`` (the reference when None), in ``profile-NAME`` under
    ``folder``, and why each of the others gave none; ``on_profiler`` hears each profiler start.
    ``session`` is the run's: the sizes it derived and the recordings it keeps."""
    from ..profiling import profile

    profiles, skipped = [], {}
    for name in profilers:
        on_profiler(name)
        out_dir = folder / f"profile-{name}"
        try:
            profiles.append(
                profile(
                    task,
                    candidate,
                    profiler=name,
                    metrics=metrics,
                    out_dir=out_dir,
                    threads=verify.thread_count,
                    timeout_s=_profile_limit(verify),
                    session=session,
                )
            )
        except PragmaError as error:
            skipped[name] = str(error)
        except Exception as error:  # a broken plugin must neither end the run nor pass unseen
            skipped[name] = _plugin_failure(name, error, out_dir)
    return profiles, skipped


def _profile_limit(verify: VerifySettings) -> float:
    """A profile's time limit in a run: the run's --timeout when one is set, else the default."""
    return verify.timeout_s if verify.timeout_s is not None else DEFAULT_PROFILE_TIMEOUT_S


def _plugin_failure(name: str, error: Exception, folder: Path) -> str:
    """Keep the traceback of a profiler plugin's own failure next to its output; say where."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "plugin-error.txt"
    atomic_write_text(path, "".join(traceback.format_exception(type(error), error, error.__traceback__)))
    return f"the {name} plugin failed ({type(error).__name__}: {error}); a bug in the plugin, traceback in {path}"
