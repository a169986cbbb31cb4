"""Building candidates' kernels ahead of their verifications, so a round's children compile at once.

A tree or beam round writes several children. Each is verified alone, because its timing needs the
machine, but their builds need not wait for one another: a compiler is busy for seconds (``nvcc``
for tens of them) while the cores around it idle. :class:`BuildsAhead` starts, for each candidate,
the sandboxed child a verification would start, hands it the candidate and waits until it has
imported and constructed it, which builds its kernels into the candidate's own build folder
(:func:`~pragma_core.sandbox.child_run.candidate_build_dir`); then it ends that child. The verification
that follows finds the kernels built.

Nothing a build ahead learns is trusted or reported: a build that fails is built again by the
verification, which reports it with its diagnostics. The child is contained as any verifier child
is, and holds the timing slot shared while it works, so no timing on the machine runs meanwhile.

    builds = BuildsAhead(task, settings)           # settings.threads decided (with_threads)
    done = builds.submit(source)                   # a module's source, or a function giving it
    ...
    done.result()                                  # when it began and ended, or None: not built
    builds.close()                                 # ends the builds still running
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from ..machine.timing_slot import busy_slot
from ..plugin_api.registry import get_registry
from ..records import Candidate, Task
from ._verdicts import refused_before_running
from .settings import VerifySettings
from .static_checks import read_candidate
from .warm_child import WarmChild

__all__ = ["BuildsAhead"]


class BuildsAhead:
    """Builds of candidates for ``task`` under ``settings``, each in a thread and a sandboxed child
    of its own, with ``backend``'s build environment."""

    def __init__(self, task: Task, settings: VerifySettings, *, backend: str, workers: int = 4) -> None:
        if settings.threads is None:
            raise ValueError("decide the thread count first: settings.with_threads()")
        self.task, self.settings, self.backend = task, settings, backend
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pragma-build")
        self._children: set[WarmChild] = set()
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, source: str | None | Callable[[], str | None]) -> Future[tuple[float, float] | None]:
        """Build the kernels of the module ``source`` (or of the source a function gives, called in
        the build's thread, so it may wait for a writer; None: nothing to build). The future gives
        when the build began and ended (``time.monotonic``), or None when it was not built (it does
        not parse, a static rule refuses it, its backend cannot run here, or the child ended
        without building: the verification finds out which)."""
        return self._pool.submit(self._build, source)

    def close(self) -> None:
        """End the builds still running (their children are killed) and take no more."""
        with self._lock:
            self._closed = True
            children = list(self._children)
        for child in children:
            child.session.process.stop()  # its thread reads the end, closes the child and returns
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _build(self, source: str | None | Callable[[], str | None]) -> tuple[float, float] | None:
        if callable(source):
            try:
                source = source()
            except Exception:  # noqa: BLE001 - the writer's failure is the attempt's to report
                return None
        if source is None or not self._worth_building(source):
            return None
        with busy_slot():
            started = time.monotonic()
            with self._lock:
                if self._closed:
                    return None
                child = WarmChild(self.task, self.settings)
                self._children.add(child)
            try:
                child.session.begin(Candidate(source=source, backend=self.backend), backend=self.backend)
                ready = child.session.receive("ready", within_s=self.settings.wall_limit_s)
            finally:
                with self._lock:
                    self._children.discard(child)
                child.close()
        if ready is None or ready.event != "ready":
            return None
        return started, time.monotonic()

    def _worth_building(self, source: str) -> bool:
        """Whether the verification would run the candidate at all: its source does not decide
        its verdict, and its backend can run here."""
        if refused_before_running(self.task, read_candidate(source)) is not None:
            return False
        return get_registry().backend(self.backend).probe().available
