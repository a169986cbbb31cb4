"""Running a task and a candidate in a sandbox child: the layer the verifier and profiling share.

Parent side: :class:`JobFolder` is a private folder per run holding what the parent wrote
(``task.py`` with sizes applied, ``candidate.py``, ``job.json``), the child's ``work/`` folder
(its working directory and temporary folder, the only place it may write besides its build
folder) and ``logs/``. :class:`ChildSession` starts a worker module on that folder in the sandbox
with a pipe to report over (:mod:`pragma_core.sandbox.channel`) and sends it requests, one JSON line each.

Child side: :func:`load_task` and :func:`load_candidate` run the task file and build the
candidate with its backend, the same way in every worker.

Each candidate gets a build folder of its own, named by its source's hash, where its kernels are
compiled; the shared kernel cache is only read. A later child for the same candidate (profiling
after verifying) reuses the build, and no candidate can plant a library another one loads. Job
folders are removed when the run ends; folders of a process that was killed are swept by the next
run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..files import atomic_write_text
from ..paths import cache_dir
from ..records import Candidate, Task
from ..tasks.loading import task_program
from .channel import EVIDENCE_FD_VARIABLE, ChannelError, Message, MessageReader, widen_pipe
from .process import SandboxedProcess, SandboxLimits, SandboxOutcome, build_environment, child_environment

__all__ = [
    "ChildSession",
    "JobFolder",
    "candidate_build_dir",
    "load_candidate",
    "load_task",
    "IMPORTED_MARKER",
]

_JOBS_ROOT_NAME = "pragma-jobs"

IMPORTED_MARKER = "imported"
"""The file, in a job's folder, a verifier child started ahead leaves once it has imported torch."""


def jobs_root() -> Path:
    """Where job folders live: ``pragma-jobs/`` in the system's temporary folder."""
    return Path(tempfile.gettempdir()) / _JOBS_ROOT_NAME


def candidate_build_dir(candidate: Candidate) -> Path:
    """The folder a candidate's kernels are built in: ``candidates/<hash of its source>``."""
    digest = hashlib.sha256(f"{candidate.backend}\n{candidate.source}".encode()).hexdigest()[:24]
    return cache_dir("candidates", digest)


class JobFolder:
    """A run's folder; use as a context manager so it is removed however the run ends.

    ``root`` given keeps the folder there afterwards (for inspection); otherwise a fresh folder
    under :func:`jobs_root` is made, named by this process's id so a later run can sweep it if this
    process is killed before it cleans up.
    """

    def __init__(self, task: Task, candidate: Candidate | None, job: Mapping[str, Any], root: Path | None = None):
        self.keep = root is not None
        if root is None:
            _sweep_stale_jobs()
            jobs_root().mkdir(parents=True, exist_ok=True)
            root = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=jobs_root()))
        self.root = Path(root)
        self.work.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        self.task_program = task_program(task)
        atomic_write_text(self.task_file, self.task_program)
        self.job = dict(job)
        self.build_dir = self.work / "build"
        self.assign(candidate)

    def assign(self, candidate: Candidate | None, **job: Any) -> None:
        """Write ``candidate`` (None: none yet) and the job's settings, with ``job`` added: a folder
        made for a child started ahead of its candidate gets it here."""
        if candidate is not None:
            atomic_write_text(self.candidate_file, candidate.source)
            self.build_dir = candidate_build_dir(candidate)
        self.build_dir.mkdir(parents=True, exist_ok=True)
        self.job = {**self.job, **job, "writable": [str(self.work), str(self.build_dir)]}
        atomic_write_text(self.job_file, json.dumps(self.job, indent=1))

    @property
    def task_file(self) -> Path:
        return self.root / "task.py"

    @property
    def candidate_file(self) -> Path:
        return self.root / "candidate.py"

    @property
    def job_file(self) -> Path:
        return self.root / "job.json"

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def imported_marker(self) -> Path:
        """The file a verifier child leaves once its imports are done (it then waits for ``begin``)."""
        return self.root / IMPORTED_MARKER

    def remove(self) -> None:
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> JobFolder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.remove()


def _sweep_stale_jobs() -> None:
    """Remove job folders whose process no longer runs (it was killed before it cleaned up)."""
    root = jobs_root()
    try:
        entries = list(root.iterdir())
    except OSError:
        return
    for entry in entries:
        pid_text = entry.name.split("-", 1)[0]
        if not pid_text.isdigit() or _alive(int(pid_text)):
            continue
        shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ChildSession:
    """A worker running on a :class:`JobFolder` in the sandbox, with its report pipe.

    The child starts at once, importing what it needs, and waits until :meth:`begin` says the
    folder holds its candidate: it can be started before the candidate exists. Its world is made
    read-only at ``begin`` (with the candidate's build folder then known to stay writable), before
    it reads the task or the candidate. ``request`` sends one request; ``receive`` waits for the
    next message within the time the sandbox has left. Use as a context manager: the child's
    process group (and, where the OS allows, its PID namespace) is killed on the way out.
    """

    def __init__(
        self,
        folder: JobFolder,
        module: str,
        *,
        threads: int,
        limits: SandboxLimits,
        max_message_bytes: int,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        read_end, write_end = os.pipe()
        widen_pipe(read_end)
        os.set_inheritable(write_end, True)
        env = child_environment(threads)
        env[EVIDENCE_FD_VARIABLE] = str(write_end)
        env.update(extra_env or {})
        self.folder = folder
        try:
            self.process = SandboxedProcess(
                [sys.executable, "-m", module, str(folder.root)],
                cwd=folder.work,
                log_dir=folder.logs,
                limits=limits,
                env=env,
                pass_fds=[write_end],
                lock_down_later=True,
            )
        finally:
            os.close(write_end)
        self._read_end: int | None = read_end
        self.reader = MessageReader(read_end, max_bytes=max_message_bytes)
        self.protocol_error: str | None = None
        self.late = False  # killed for missing a per-request limit, not the sandbox's own
        self.begun = False

    def begin(self, candidate: Candidate, **job: Any) -> None:
        """Hand the child its candidate (written into the folder with ``job``'s settings added) and
        let it go on; the sandbox's time limit counts from now."""
        from ..plugin_api.registry import get_registry

        backend = get_registry().backend(candidate.backend)
        self.folder.assign(candidate, **job)
        self.process.restart_clock()
        self.request(
            "begin",
            env={**build_environment(self.folder.build_dir), **backend.child_environment(self.folder.build_dir)},
            writable=self.folder.job["writable"],
            lock_down=self.process.files_isolated,
        )
        self.begun = True

    def request(self, op: str, **fields: Any) -> None:
        self.process.send(json.dumps({"op": op, **fields}))

    def receive(self, *events: str, within_s: float | None = None) -> Message | None:
        """The next message if it is one of ``events`` (or an ``error`` report); None when the child
        ended, ran out of time or broke the protocol (then :attr:`protocol_error` says how).
        ``within_s`` limits this answer more tightly than the sandbox's time left; a child that
        misses it is killed, and :attr:`late` says so."""
        left = max(self.process.remaining_s(), 0.0)
        deadline = time.monotonic() + (left if within_s is None else min(left, within_s))
        try:
            message = self.reader.receive(deadline, alive=self.process.running)
        except ChannelError as error:
            self.protocol_error = str(error)
            return None
        if message is None:
            if time.monotonic() >= deadline and self.process.running():
                self.late = within_s is not None and within_s < left
                self.process.expire()
            return None
        if message.event not in (*events, "error"):
            self.protocol_error = f"expected {' or '.join(events)}, got {message.event or 'a message without event'}"
            return None
        return message

    def finish(self, *, ended: bool = False) -> SandboxOutcome:
        """End the child and say how it ended. When everything the parent needs has arrived, the
        child is not left to tear torch down (most of a second): it is killed at once. A child that
        ``ended`` on its own (it crashed, or stopped answering) is waited for, so its exit code or
        signal is what the outcome says."""
        self.process.close_input()
        if not ended:
            self.process.stop()
        outcome = self.process.finish()
        self._close_pipe()
        return outcome

    def _close_pipe(self) -> None:
        if self._read_end is not None:
            os.close(self._read_end)
            self._read_end = None

    def __enter__(self) -> ChildSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.process.__exit__(*exc_info)
        self._close_pipe()


# -- the child's side -----------------------------------------------------------------------------


def load_task(root: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """In the child: the job's settings and the task's namespace (its ``Model``, ``get_inputs``...)."""
    job = json.loads((root / "job.json").read_text())
    task_file = root / "task.py"
    namespace: dict[str, Any] = {"__name__": "pragma_task", "__file__": str(task_file)}
    exec(compile(task_file.read_text(), str(task_file), "exec"), namespace)
    return job, namespace


def load_candidate(root: Path, job: Mapping[str, Any]) -> type:
    """In the child: build the candidate with its backend and return its ``ModelNew`` class."""
    from ..plugin_api.registry import get_registry

    backend = get_registry().backend(job["backend"])
    source = (root / "candidate.py").read_text()
    return backend.load(Candidate(source=source, backend=job["backend"]), root / "work")
