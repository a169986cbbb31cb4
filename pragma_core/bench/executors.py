"""Where a bench's tasks run: ``local`` worker processes on this machine, or Ray tasks on a cluster.

Both run :func:`~pragma_core.bench._task_run.run_task` for each job and hand every progress event and
every finished row to the driver, which alone writes ``bench.json``. On one machine the timing
slot (:mod:`pragma_core.machine.timing_slot`) lets one verification time at a time while the other tasks'
model calls, builds and profiling go on, and one task start at a time; on a Ray cluster each node
has its own slot and turn.

``local`` runs each task in a process of its own (never in the driver: a parent timing its child
must not share an interpreter lock with other work), at most ``workers`` at once; a worker dies
with the driver. The workers are forked from a server process that imported pragma and torch (and
litellm, when a model answers) once, for the whole bench: importing them is seconds of a core for
each task otherwise (litellm alone about 6 s), and that work would run beside another task's
timing, which the timing slot cannot see.

``ray`` submits each task as a Ray task with its resource request; a task whose node sees the bench
directory (one machine, or a shared filesystem) writes its run folder there, as a local worker
does; elsewhere it works in a folder of its node, which receives the task's run folder first when
there is one (a task resumed, or its best timed again), and ships the run folder back with its row,
for the driver to unpack.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import queue as queues
import secrets
import shutil
import tarfile
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from ..errors import PragmaError
from ._task_run import Reporter, TaskJob, run_task

__all__ = ["RowHandler", "LocalExecutor", "RayExecutor", "RAY_INSTALL_HINT"]

RowHandler = Callable[[str, dict[str, Any]], None]
"""Hears ``(key, row)`` when a task ends (a row with ``status: crashed`` when its worker died)."""

RAY_INSTALL_HINT = "pip install 'pragma-core[ray]' (or pip install ray)"

_POLL_S = 0.25


@attrs.define
class LocalExecutor:
    """Up to ``workers`` tasks at once, each in a process of its own (one starting at a time:
    :func:`~pragma_core.machine.timing_slot.start_turn`)."""

    workers: int = attrs.field(default=1, validator=attrs.validators.ge(1))

    def run(self, jobs: Sequence[TaskJob], on_event: Reporter, on_row: RowHandler) -> None:
        context = _worker_context(jobs)
        messages = context.Queue()
        waiting = list(jobs)
        running: dict[str, Any] = {}
        try:
            while waiting or running:
                while waiting and len(running) < self.workers:
                    job = waiting.pop(0)
                    process = context.Process(
                        target=_local_worker,
                        args=(job, messages, dict(os.environ), os.getcwd()),
                        name=f"pragma-bench {job.key}",
                    )
                    process.start()
                    running[job.key] = process
                    on_event({"key": job.key, "phase": "starting", "attempt": 0, "detail": ""})
                _drain(messages, on_event, on_row, running)
                for key, process in list(running.items()):
                    if not process.is_alive():
                        _drain(messages, on_event, on_row, running, wait_s=0.5)  # its last row may be in flight
                        if key in running:
                            running.pop(key)
                            on_row(key, _crashed(f"its worker process ended with exit code {process.exitcode}"))
        except KeyboardInterrupt:
            _stop(running.values())  # they saw the Ctrl-C too: each saves its complete attempts
            raise
        finally:
            messages.close()


_PRELOADED = ["pragma_core.bench._task_run"]
"""What the worker server imports once: everything a task's run imports (pragma, torch, plugins)."""


def _worker_context(jobs: Sequence[TaskJob]) -> Any:
    """Workers forked from a server that imported :data:`_PRELOADED` (and litellm when a job names
    a model: its provider set litellm's offline switches in this process's environment); spawned
    where there is no fork server."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    preload = list(_PRELOADED)
    if any(job.settings.loop.model for job in jobs):
        from ..providers.litellm_import import set_offline_switches

        set_offline_switches()  # in the environment the server starts with, before it imports litellm
        preload.append("litellm")
    context.set_forkserver_preload(preload)  # once per process: a running server keeps its imports
    return context


def _local_worker(job: TaskJob, messages: Any, environment: dict[str, str], folder: str) -> None:
    """A worker process: one task, its events and row sent to the driver. Its environment and
    working folder are the driver's as the task starts (the fork server kept those it started with)."""
    _die_with_driver()
    os.environ.clear()
    os.environ.update(environment)
    os.chdir(folder)

    def report(event: dict[str, Any]) -> None:
        messages.put(("event", event))

    try:
        row = run_task(job, report)
    except KeyboardInterrupt:
        return
    except Exception:  # noqa: BLE001 - a bug must reach the driver as this task's failure, not vanish
        messages.put(("row", job.key, _crashed(traceback.format_exc(limit=8))))
        return
    messages.put(("row", job.key, row))


def _die_with_driver() -> None:
    """End this worker at once when the driver ends, killed or not (its sandboxed children die with
    it). The driver started it, but through the fork server, which outlives the driver while any
    worker lives: a parent-death signal would not come."""
    driver = multiprocessing.parent_process()
    if driver is None:
        return

    def watch() -> None:
        driver.join()  # returns when the driver's end of the worker's sentinel pipe closes
        os._exit(1)

    threading.Thread(target=watch, name="pragma-driver-watch", daemon=True).start()


def _drain(messages: Any, on_event: Reporter, on_row: RowHandler, running: dict[str, Any], wait_s: float = _POLL_S):
    """Pass on what the workers said, waiting at most ``wait_s`` for the first message."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            message = messages.get(timeout=max(0.0, deadline - time.monotonic()))
        except queues.Empty:
            return
        if message[0] == "event":
            on_event(message[1])
        else:
            _, key, row = message
            process = running.pop(key, None)
            if process is not None:
                process.join(timeout=10)
            on_row(key, row)
        deadline = time.monotonic()  # then take whatever else is there, without waiting


def _stop(processes: Any, grace_s: float = 60.0) -> None:
    deadline = time.monotonic() + grace_s
    for process in processes:
        process.join(timeout=max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()


def _crashed(reason: str) -> dict[str, Any]:
    return {"status": "crashed", "error": reason}


# -- Ray ------------------------------------------------------------------------------------------


def import_ray() -> Any:
    """The ray module, or a clear error saying how to install it."""
    try:
        import ray
    except ImportError:
        raise PragmaError(f"--executor ray needs Ray, which is not installed: {RAY_INSTALL_HINT}") from None
    return ray


@attrs.define
class RayExecutor:
    """Each task a Ray task asking for ``cpus`` CPUs and ``gpus`` GPUs, at most ``workers`` in flight
    (None: as many as the cluster schedules). ``address`` is ``auto`` (a running cluster), a
    ``HOST:PORT``, or None (start a Ray instance on this machine for the bench). ``ship`` forces
    run folders to travel back with their rows even where the node sees the bench directory."""

    address: str | None = None
    workers: int | None = None
    cpus: float = 1.0
    gpus: float = 0.0
    ship: bool = False

    def run(self, jobs: Sequence[TaskJob], on_event: Reporter, on_row: RowHandler) -> None:
        ray = import_ray()
        from ray.util.queue import Empty, Queue

        started_here = not ray.is_initialized()
        if started_here:
            ray.init(
                address=self.address,
                runtime_env={"env_vars": _forwarded_environment()},
                include_dashboard=False,
                logging_level="WARNING",
                log_to_driver=False,
            )
        events = Queue()
        token = _bench_token(jobs)
        remote = ray.remote(num_cpus=self.cpus, num_gpus=self.gpus, max_retries=0)(_ray_task)
        waiting = list(jobs)
        pending: dict[Any, TaskJob] = {}
        limit = self.workers or len(jobs) or 1
        try:
            while waiting or pending:
                while waiting and len(pending) < limit:
                    job = waiting.pop(0)
                    inbound = _pack(job.runs_dir)  # a task resumed or timed again goes on from its run folder
                    pending[remote.remote(job, events, token, self.ship, inbound)] = job
                    on_event({"key": job.key, "phase": "queued", "attempt": 0, "detail": ""})
                done, _ = ray.wait(list(pending), num_returns=1, timeout=_POLL_S)
                while True:
                    try:
                        on_event(events.get_nowait())
                    except Empty:
                        break
                for reference in done:
                    job = pending.pop(reference)
                    try:
                        row, packed = ray.get(reference)
                    except Exception as error:  # noqa: BLE001 - a lost node or a worker crash
                        on_row(job.key, _crashed(f"the Ray task failed: {type(error).__name__}: {error}"))
                        continue
                    if packed is not None:
                        row = _unpack(row, packed, job.runs_dir)
                    on_row(job.key, row)
        except KeyboardInterrupt:
            for reference in pending:
                ray.cancel(reference)
            raise
        finally:
            events.shutdown()
            if started_here:
                ray.shutdown()


def _forwarded_environment() -> dict[str, str]:
    """The PRAGMA_* settings of the driver, for the Ray workers (model keys stay with each node)."""
    return {name: value for name, value in os.environ.items() if name.startswith("PRAGMA_")}


def _bench_token(jobs: Sequence[TaskJob]) -> str:
    """A random token written in the bench directory: a node that reads it there sees the directory."""
    if not jobs:
        return ""
    root = jobs[0].runs_dir.parents[2]  # DIR/runs/<variant>/<task>
    path = root / ".bench-token"
    token = secrets.token_hex(8)
    path.write_text(token)
    return token


def _ray_task(
    job: TaskJob, events: Any, token: str, ship: bool, inbound: bytes | None = None
) -> tuple[dict[str, Any], bytes | None]:
    """On a Ray worker: the task run where the bench directory is, or in a folder of this node (with
    ``inbound``, the task's run folders as the driver has them: a task resumed, or timed again)."""
    root = job.runs_dir.parents[2]
    try:
        visible = (root / ".bench-token").read_text() == token
    except OSError:
        visible = False

    def report(event: dict[str, Any]) -> None:
        events.put(event)

    if visible and not ship:
        return run_task(job, report), None
    scratch = Path(tempfile.mkdtemp(prefix="pragma-bench-"))
    try:
        if inbound is not None:
            with tarfile.open(fileobj=io.BytesIO(inbound), mode="r:gz") as archive:
                archive.extractall(scratch / "runs", filter="data")
        row = run_task(attrs.evolve(job, runs_dir=scratch / "runs"), report)
        return row, _pack(scratch / "runs")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _pack(folder: Path) -> bytes | None:
    if not folder.is_dir():
        return None
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(folder, arcname=".")
    return buffer.getvalue()


def _unpack(row: dict[str, Any], packed: bytes, runs_dir: Path) -> dict[str, Any]:
    """The shipped run folder put where the bench keeps the task's run; the row pointed there."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(packed), mode="r:gz") as archive:
        archive.extractall(runs_dir, filter="data")
    if row.get("run_dir"):
        row = row | {"run_dir": str(runs_dir / Path(row["run_dir"]).name)}
    return row
