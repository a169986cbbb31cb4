"""``cpu-cpp``'s kernel replay: one forward's native calls recorded in the sandbox child, replayed by
a small C driver built for them, the target CPU profilers watch (no interpreter around the kernels).

The backend registers :data:`KERNEL_REPLAY`; profiling and the verifier's child reach it through
the backend (``Backend.replay``), never through this package. The machinery is in
:mod:`pragma_core.backends.cpu_cpp.native` (``recording``, ``replay``), imported only when used:
it imports torch, which a profiler plugin must not pay for when it loads.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path

from ...plugin_api.components import KernelReplay, RecordedCalls

__all__ = ["KERNEL_REPLAY"]


def _record() -> AbstractContextManager[RecordedCalls]:
    from .native.recording import record_calls

    return record_calls()


def _load(folder: Path) -> RecordedCalls | None:
    from .native.recording import saved_recording

    return saved_recording(folder)


def _command(folder: Path, repetitions: int) -> tuple[str, ...]:
    from .native.replay import replay_command

    return replay_command(folder, repetitions)


KERNEL_REPLAY = KernelReplay(record=_record, load=_load, command=_command)
"""What :mod:`pragma_core.backends.cpu_cpp` registers as its ``replay``."""
