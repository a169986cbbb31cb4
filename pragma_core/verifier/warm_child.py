"""A verifier child started before its candidate exists, so torch is imported while other work runs.

Starting the sandbox child costs about two seconds of importing Python and torch, every
verification. :class:`WarmChild` starts that child now, for a task and settings, and
:func:`~pragma_core.verifier.verify` hands it the candidate later (``verify(..., warm=child)``):
the loop starts the next attempt's child while it profiles the current one. The child runs nothing
but pragma's and torch's code until it has its candidate, and makes its world read-only before
it reads it (:class:`~pragma_core.sandbox.child_run.ChildSession`), so a warm child is contained exactly as
a cold one. A child serves one verification; one that does not fit the verification (another task,
other threads or limits), or that ended, is closed and a cold one started instead.

    from pragma_core.verifier import VerifySettings, WarmChild, verify

    settings, _note = VerifySettings().with_threads()
    with WarmChild(task, settings) as child:
        ...                                    # anything else: write the candidate, profile
        verdict = verify(task, source, settings, warm=child)

A child's import keeps a core busy for a couple of seconds, which would disturb another task's
timing on the same machine. :class:`ChildAhead` starts a warm child in the background only when
no timing holds or waits for the machine's timing slot
(:func:`~pragma_core.machine.timing_slot.busy_slot_when_free`), and shares the slot until the child has
imported; the loop starts the next attempt's child this way.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from ..machine.timing_slot import busy_slot_when_free
from ..records import Task
from ..sandbox.child_run import ChildSession, JobFolder
from ..sandbox.process import SandboxLimits
from ..tasks.loading import task_program
from .settings import VerifySettings

__all__ = ["WarmChild", "ChildAhead"]

WORKER_MODULE = "pragma_core.verifier.worker"
_MESSAGE_MARGIN = 64 << 20
IMPORT_LIMIT_S = 120.0
"""The longest a child started ahead holds the timing slot waiting for its imports."""


class _Starters:
    """Daemon threads that start children ahead, one job at a time each. They live as long as the
    process, since a sandboxed child is killed when the thread that started it ends
    (:func:`~pragma_core.sandbox.process.die_with_parent`), and do not keep it from exiting while a start
    still waits for the timing slot (a thread pool's threads would: it joins them at exit)."""

    def __init__(self, count: int) -> None:
        self._count = count
        self._jobs: queue.SimpleQueue[tuple[Future, Callable[[], Any]]] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def submit(self, job: Callable[[], Any]) -> Future:
        future: Future = Future()
        with self._lock:
            if len(self._threads) < self._count:
                thread = threading.Thread(target=self._serve, name="pragma-child-ahead", daemon=True)
                thread.start()
                self._threads.append(thread)
        self._jobs.put((future, job))
        return future

    def _serve(self) -> None:
        while True:
            future, job = self._jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(job())
            except BaseException as error:  # noqa: BLE001 - the taker decides what a failed start means
                future.set_exception(error)


_STARTERS = _Starters(4)


class WarmChild:
    """The sandbox child of one verification of ``task`` under ``settings`` (whose ``threads`` must
    be decided: :meth:`VerifySettings.with_threads`), started now. ``root`` keeps the job's folder
    there (``verify``'s ``job_dir``). Close it (or use it as a context manager) when it may not be
    used: its process is killed and its folder removed; ``verify`` closes the child it used."""

    def __init__(self, task: Task, settings: VerifySettings, *, root: Path | None = None) -> None:
        if settings.threads is None:
            raise ValueError("decide the thread count first: settings.with_threads()")
        self.settings = settings
        self.folder = JobFolder(
            task, None, {"threads": settings.threads, "cpus": settings.cpus and list(settings.cpus)}, root
        )
        try:
            self.session = ChildSession(
                self.folder,
                WORKER_MODULE,
                threads=settings.threads,
                limits=limits_of(settings),
                max_message_bytes=_message_limit(task),
            )
        except BaseException:
            self.folder.remove()
            raise
        self.closed = False

    @property
    def files_isolated(self) -> bool:
        """Whether the OS contains the child (its world is made read-only when it begins)."""
        return self.session.process.files_isolated

    def fits(self, task: Task, settings: VerifySettings) -> bool:
        """Whether this child can verify on ``task`` under ``settings``: not used yet, still
        running, and started for the same task program, threads, CPUs and limits."""
        return (
            not self.closed
            and not self.session.begun
            and self.session.process.running()
            and self.folder.task_program == task_program(task)
            and settings.threads == self.settings.threads
            and settings.cpus == self.settings.cpus
            and limits_of(settings) == limits_of(self.settings)
        )

    def wait_imported(self, limit_s: float = IMPORT_LIMIT_S, poll_s: float = 0.02) -> bool:
        """Wait until the child has imported what it needs (it then waits for its candidate);
        False when it ended or ``limit_s`` passed first."""
        deadline = time.monotonic() + limit_s
        while not self.folder.imported_marker.exists():
            if self.closed or not self.session.process.running() or time.monotonic() >= deadline:
                return False
            time.sleep(poll_s)
        return True

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.session.__exit__(None, None, None)
            self.folder.remove()

    def __enter__(self) -> WarmChild:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class ChildAhead:
    """A :class:`WarmChild` for ``task`` and ``settings``, started in the background as soon as no
    timing holds or waits for the machine's timing slot, which it then shares until the child has
    imported torch: a child started ahead never disturbs a timing, this run's or another's.

    :meth:`take` gives the child when it is needed: at once if it is ready, after the rest of its
    imports if they are under way, None if the slot never came free (a verification then starts
    its own child while it holds the slot). Close what is not taken."""

    def __init__(self, task: Task, settings: VerifySettings) -> None:
        self._wanted = threading.Event()
        self._started = _STARTERS.submit(lambda: self._start(task, settings))

    def _start(self, task: Task, settings: VerifySettings) -> WarmChild | None:
        with busy_slot_when_free(self._wanted) as shared:
            if not shared:
                return None
            child = WarmChild(task, settings)
            child.wait_imported()
            return child

    def take(self) -> WarmChild | None:
        """The child, once imported (waiting for the rest of its imports if they are under way);
        None when it was not started (or could not be)."""
        self._wanted.set()
        if self._started.cancel():
            return None
        try:
            return self._started.result()
        except Exception:  # noqa: BLE001 - the verification starts its own child and reports why it cannot
            return None

    def close(self) -> None:
        child = self.take()
        if child is not None:
            child.close()


def limits_of(settings: VerifySettings) -> SandboxLimits:
    """The sandbox limits of a verification under ``settings``."""
    return SandboxLimits(
        wall_s=settings.wall_limit_s,
        address_space_bytes=int(settings.memory_gb * 1024**3),
        isolate_network=settings.isolate_network,
    )


def _message_limit(task: Task) -> int:
    """The most the child may send in one message: a few times the task's inputs or outputs (a
    sample of a timed call carries both of each contender), plus a margin."""
    analysis = task.analysis
    if analysis is None or not analysis.outputs:
        return 1 << 36
    inputs = sum(spec.nbytes for spec in analysis.inputs)
    outputs = sum(spec.nbytes for spec in analysis.outputs)
    return 4 * max(inputs, outputs) + _MESSAGE_MARGIN
