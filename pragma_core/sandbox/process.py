"""Running untrusted code in a child process with limits, in a read-only world.

The child gets its own process group and working directory, a wall-time limit, a CPU-time limit,
an address-space limit, no core dumps, and, where the OS permits ``unshare`` (Linux with user
namespaces), a contained world: every file system read-only except its working folder and the
folders named writable, its own PID namespace (it cannot see, read or trace pragma or any other
process of the host), and no network. Its stdout and stderr go to files and come back trimmed.
After it exits, or is killed, its whole process group is killed, and with contained children the
whole PID namespace, so nothing it started survives it, not even a process that left the group
with ``setsid``. If pragma itself is killed (even with SIGKILL), the child is killed too. The caller
never parses what the child printed to judge it.

:class:`SandboxedProcess` lets the parent talk to a running child between phases (the verifier
compares outputs before it lets the child time anything); :func:`isolation_prefix` gives the
command prefix that contains any program (the profiler tools use it), or says why this OS does not
allow it; :func:`build_environment` points every compiler cache a candidate may use into a folder
it may write; :func:`network_isolation` is the prefix that cuts the network alone.
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from ..files import read_tail

__all__ = [
    "BUILD_FOLDER_VARIABLES",
    "READ_BUILD_FOLDER_VARIABLES",
    "SandboxLimits",
    "SandboxOutcome",
    "SandboxedProcess",
    "build_environment",
    "read_build_environment",
    "child_environment",
    "die_with_parent",
    "isolation_prefix",
    "kill_group",
    "network_isolation",
    "signal_name",
]

_OUTPUT_LIMIT = 4000  # characters of stdout/stderr kept: enough for a prompt, not a flood
_PACKAGE_PARENT = Path(__file__).resolve().parents[2]

KEEP_FREED_MEMORY = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1099511627776"
"""glibc settings for the child: freed memory stays with the process. Otherwise every fresh output
buffer of a few MB is mapped anew and page-faulted in, which on this project's CI machine made
LeakyReLU on 32 MB take 12 ms instead of 1.7 ms: allocator cost, not kernel cost, paid by both
programs and drowning the difference between them."""


def child_environment(threads: int) -> dict[str, str]:
    """The environment of a child that runs kernels: this one, plus a fixed thread count for every
    runtime, freed memory kept, and pragma importable from where this process imported it."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PRAGMA_STRICT", "PYTHONSTARTUP"))}
    count = str(threads)
    env.update(
        OMP_NUM_THREADS=count,
        MKL_NUM_THREADS=count,
        OPENBLAS_NUM_THREADS=count,
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONHASHSEED="0",
    )
    env["GLIBC_TUNABLES"] = ":".join(filter(None, [os.environ.get("GLIBC_TUNABLES"), KEEP_FREED_MEMORY]))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PACKAGE_PARENT), os.environ.get("PYTHONPATH")]))
    return env


BUILD_FOLDER_VARIABLES = {
    "PRAGMA_NATIVE_BUILD_DIR": "native",
    "TORCH_EXTENSIONS_DIR": "torch_extensions",
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "TRITON_CACHE_DIR": "triton/cache",
    "TRITON_HOME": "triton",
    "CUDA_CACHE_PATH": "cuda",
    "XDG_CACHE_HOME": "cache",
    "TMPDIR": "tmp",
}
"""The variables :func:`build_environment` points into a child's build folder, and their sub-folders."""


def build_environment(build_dir: Path) -> dict[str, str]:
    """Environment variables that send every build and compiler cache of a child into ``build_dir``.

    A contained child can write only its own folders, so what it compiles must land there:
    :func:`~pragma_core.backends.cpu_cpp.native.build_library` builds into ``PRAGMA_NATIVE_BUILD_DIR`` (it still
    reuses what the shared cache, read-only to the child, already holds), ``load_inline`` into
    ``TORCH_EXTENSIONS_DIR``, torch.compile into ``TORCHINDUCTOR_CACHE_DIR`` (by default a folder
    under ``TMPDIR``), Triton into ``TRITON_CACHE_DIR`` and ``TRITON_HOME``, the CUDA driver's JIT
    into ``CUDA_CACHE_PATH``, and the compiler's temporary files and Python's ``tempfile`` into
    ``TMPDIR``; other tools' caches go to ``XDG_CACHE_HOME``. ``PRAGMA_CACHE_DIR`` is pinned to this
    process's cache folder, so the child looks up the same shared cache whatever its
    ``XDG_CACHE_HOME``. The folders are created; add the result to the child's environment and
    ``build_dir`` to its writable folders.
    """
    from .. import paths

    build_dir = Path(build_dir).resolve()
    folders = {name: build_dir / part for name, part in BUILD_FOLDER_VARIABLES.items()}
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    return {"PRAGMA_CACHE_DIR": str(paths.cache_dir()), **{name: str(path) for name, path in folders.items()}}


READ_BUILD_FOLDER_VARIABLES = {"PRAGMA_NATIVE_READ_DIR": "native"}
"""The variables :func:`read_build_environment` points into another candidate's build folder."""


def read_build_environment(build_dir: Path) -> dict[str, str]:
    """Environment variables that let a child reuse what was built in another candidate's
    ``build_dir`` (the loop's best, timed beside the candidate), reading it only: the child's own
    builds still go to its own folder. The folder is readable in a contained child as every folder
    outside the writable ones is (read-only)."""
    build_dir = Path(build_dir).resolve()
    return {name: str(build_dir / part) for name, part in READ_BUILD_FOLDER_VARIABLES.items()}


_CPU_MARGIN_S = 10.0


@attrs.frozen(kw_only=True)
class SandboxLimits:
    """Wall time and CPU time in seconds, address space in bytes, and what to isolate.

    ``cpu_s`` (RLIMIT_CPU, per process) is what stops a child spinning on its own when nothing
    watches its wall time any more (pragma was killed); by default it is ``wall_s`` times the CPU
    cores plus a margin, which a child running within its wall time never reaches. The program gets
    SIGXCPU at the limit and SIGKILL a second later. ``isolate_files`` asks for the contained world
    (read-only file systems but the writable folders, own PID namespace); ``isolate_network`` cuts
    the network.
    """

    wall_s: float = 300.0
    cpu_s: float | None = None
    address_space_bytes: int = 16 * 1024**3
    isolate_network: bool = True
    isolate_files: bool = True

    @property
    def cpu_limit_s(self) -> int:
        """The CPU-time limit in whole seconds: ``cpu_s`` or the default derived from ``wall_s``."""
        if self.cpu_s is not None:
            return max(1, math.ceil(self.cpu_s))
        return math.ceil(self.wall_s * (os.cpu_count() or 1) + _CPU_MARGIN_S)


@attrs.frozen(kw_only=True)
class SandboxOutcome:
    """How the child ended: exit code or signal, timeout, output tails, and what isolation held.

    ``notes`` say why an isolation that was asked for is missing (``files not isolated: ...``).
    """

    returncode: int | None
    signal: str | None
    timed_out: bool
    wall_s: float
    stdout: str
    stderr: str
    network_isolated: bool
    files_isolated: bool = False
    notes: tuple[str, ...] = ()


def signal_name(number: int) -> str:
    """``SIGSEGV`` for 11."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def kill_group(pgid: int) -> None:
    """SIGKILL to every process of the group; a group already empty is not an error."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@functools.cache
def network_isolation() -> tuple[list[str], str]:
    """The command prefix that runs a program without network here, or ``[]`` and the reason."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return [], "no network isolation: the unshare command is not installed"
    attempts = [[unshare, "--net", "--"]]
    if os.geteuid() != 0:
        attempts.insert(0, [unshare, "--net", "--map-root-user", "--"])
    for prefix in attempts:
        try:
            probe = subprocess.run(prefix + ["true"], capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            return prefix, ""
    return [], "no network isolation: unshare is not permitted here (no user or network namespaces)"


_INIT_SCRIPT = Path(__file__).resolve().with_name("init.py")


def isolation_prefix(
    writable: Sequence[Path], *, network: bool = True, lock_down_later: bool = False
) -> tuple[list[str], str]:
    """The command prefix that runs a program contained, or ``([], reason)`` where this OS does not allow it.

    Contained: every file system read-only except the folders in ``writable`` (which must exist
    when the program starts; ``/dev/null`` and the other devices still work), its own PID namespace
    with a fresh ``/proc`` (no host process visible, pragma's included), its own IPC namespace, no
    capability left to undo any of it, and no network when ``network`` is true. When the prefixed
    command ends, everything it started ends with it. The command should be started with
    :func:`die_with_parent` as (part of) its ``preexec_fn``, so that it dies with the process that
    started it. See :mod:`pragma_core.sandbox.init` for how.

    ``lock_down_later`` (with no ``writable``): the file systems stay writable until the program
    calls :func:`pragma_core.sandbox.init.lock_down` with the folders to keep writable; everything
    else holds from the start.

    Whether ``unshare`` is permitted is probed once per process and network setting (about 30 ms).
    """
    if lock_down_later and writable:
        raise ValueError("a program that locks down later names its writable folders then, not now")
    unshare = shutil.which("unshare")
    if not sys.platform.startswith("linux"):
        return [], f"files not isolated: namespaces are a Linux feature, this is {sys.platform}"
    if unshare is None:
        return [], "files not isolated: the unshare command is not installed (util-linux)"
    base, reason = _probe_isolation(unshare, sys.executable, network)
    if not base:
        return [], reason
    folders = [part for folder in writable for part in ("--writable", str(Path(folder).resolve()))]
    return [*base, *(["--lock-down-later"] if lock_down_later else folders), "--"], ""


def _isolation_base(unshare: str, python: str, network: bool) -> list[str]:
    namespaces = ["--user", "--map-root-user", "--mount", "--ipc", *(["--net"] if network else [])]
    return [unshare, *namespaces, "--", python, "-I", "-S", str(_INIT_SCRIPT)]


@functools.cache
def _probe_isolation(unshare: str, python: str, network: bool) -> tuple[list[str], str]:
    """Run ``true`` contained with one writable folder: the base prefix when that works."""
    base = _isolation_base(unshare, python, network)
    with tempfile.TemporaryDirectory(prefix="pragma-probe-") as folder:
        try:
            probe = subprocess.run(
                [*base, "--writable", folder, "--", "true"], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            return [], f"files not isolated: the probe of unshare failed ({error})"
    if probe.returncode != 0:
        said = (probe.stderr.strip().splitlines() or [f"exit code {probe.returncode}"])[0]
        return [], f"files not isolated: unshare is not permitted here ({said})"
    return base, ""


_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def die_with_parent() -> None:
    """In a child between fork and exec: SIGKILL it when the thread that started it ends.

    Linux only (elsewhere a no-op). The kernel sends the signal when the *thread* that forked the
    child exits, not the process: start sandboxed children from a thread that outlives them (the
    main thread, or a worker thread that waits for them).
    """
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _limit_child(address_space_bytes: int, cpu_s: int) -> None:
    """Runs in the child between fork and exec."""
    resource.setrlimit(resource.RLIMIT_AS, (address_space_bytes, address_space_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    ceiling = cpu_s + 1 if hard == resource.RLIM_INFINITY else min(cpu_s + 1, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (min(cpu_s, ceiling), ceiling))  # SIGXCPU, then SIGKILL a second later
    die_with_parent()


class SandboxedProcess:
    """One child process under limits; use as a context manager so its group is always killed.

    ``writable`` are the folders the child may write besides ``cwd`` (contained children only);
    ``pass_fds`` stay open in the program at the same numbers. ``files_isolated`` and
    ``network_isolated`` say what held; the outcome's notes say why what was asked for did not.

    ``lock_down_later``: the program makes its world read-only itself, with
    :func:`pragma_core.sandbox.init.lock_down`, once it knows which folders stay writable (``cwd``
    and ``writable`` are then not made writable here); ``files_isolated`` then says the program can
    and must do so before it runs anything untrusted. :meth:`restart_clock` starts the wall-time
    limit again, for a child started ahead of its work.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        log_dir: Path,
        limits: SandboxLimits,
        env: Mapping[str, str],
        writable: Sequence[Path] = (),
        pass_fds: Sequence[int] = (),
        lock_down_later: bool = False,
    ) -> None:
        notes: list[str] = []
        prefix: list[str] = []
        self.files_isolated = False
        self.network_isolated = False
        if limits.isolate_files:
            folders = [Path(cwd), *map(Path, writable)]
            for folder in folders:
                folder.mkdir(parents=True, exist_ok=True)
            prefix, reason = isolation_prefix(
                [] if lock_down_later else folders, network=limits.isolate_network, lock_down_later=lock_down_later
            )
            self.files_isolated = bool(prefix)
            self.network_isolated = bool(prefix) and limits.isolate_network
            if reason:
                notes.append(reason)
        if limits.isolate_network and not self.network_isolated:
            prefix, reason = network_isolation()
            self.network_isolated = bool(prefix)
            if reason:
                notes.append(reason)
        self._notes = tuple(notes)
        self._limits = limits
        self._stdout_path = log_dir / "stdout.txt"
        self._stderr_path = log_dir / "stderr.txt"
        log_dir.mkdir(parents=True, exist_ok=True)
        self._stdout = self._stdout_path.open("wb")
        self._stderr = self._stderr_path.open("wb")
        self._started = time.monotonic()
        self._process = subprocess.Popen(
            [*prefix, *argv],
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=self._stdout,
            stderr=self._stderr,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
            preexec_fn=functools.partial(_limit_child, limits.address_space_bytes, limits.cpu_limit_s),
        )
        self._timed_out = False
        self._exited = False

    # -- talking to the child -------------------------------------------------------------------

    def remaining_s(self) -> float:
        return self._limits.wall_s - (time.monotonic() - self._started)

    def restart_clock(self) -> None:
        """Count the wall-time limit from now: a child started ahead of its work, waiting for it,
        is not charged for the wait."""
        self._started = time.monotonic()

    @property
    def pid(self) -> int:
        """The sandbox's first process (as this process sees it), root of the candidate's tree."""
        return self._process.pid

    def running(self) -> bool:
        return self._process.poll() is None

    def expire(self) -> None:
        """Kill the child because its time is up; :meth:`finish` then reports a timeout."""
        self._kill()
        self._timed_out = True

    def send(self, line: str) -> None:
        """Write one line to the child's stdin; a child that already ended is not an error."""
        try:
            assert self._process.stdin is not None
            self._process.stdin.write((line + "\n").encode())
            self._process.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def stop(self) -> None:
        """Kill the child now, because everything needed from it has arrived (not a timeout)."""
        self._kill()

    def close_input(self) -> None:
        """Close the child's stdin: a child reading requests sees the end and exits."""
        stdin = self._process.stdin
        if stdin is not None and not stdin.closed:
            try:
                stdin.close()
            except OSError:
                pass

    def finish(self) -> SandboxOutcome:
        """Wait for the child within the time left, kill its group, and say how it ended."""
        try:
            self._process.wait(timeout=max(self.remaining_s(), 0.0))
        except subprocess.TimeoutExpired:
            self._timed_out = True
        self._kill()
        self._process.wait()
        self._close_files()
        code = self._process.returncode
        return SandboxOutcome(
            returncode=code if code >= 0 else None,
            signal=signal_name(-code) if code < 0 and not self._timed_out else None,
            timed_out=self._timed_out,
            wall_s=time.monotonic() - self._started,
            stdout=_tail(self._stdout_path),
            stderr=_tail(self._stderr_path),
            network_isolated=self.network_isolated,
            files_isolated=self.files_isolated,
            notes=self._notes,
        )

    def _kill(self) -> None:
        kill_group(self._process.pid)

    def _close_files(self) -> None:
        for handle in (self._stdout, self._stderr, self._process.stdin):
            if handle is not None and not handle.closed:
                try:
                    handle.close()
                except OSError:
                    pass

    def __enter__(self) -> SandboxedProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._exited:
            return
        self._exited = True
        self._kill()
        self._process.wait()
        self._close_files()


def _tail(path: Path) -> str:
    """The end of a log the child wrote; where the OS could not contain it, the child may have
    removed the file: that is said, not raised."""
    try:
        with path.open("rb") as handle:
            return read_tail(handle, _OUTPUT_LIMIT)
    except OSError as error:
        return f"[the child's log {path.name} could not be read: {error.strerror}]"
