"""Running untrusted code in a child process with limits.

The child gets its own process group and working directory, a wall-time limit, an address-space
limit, no core dumps, and no network where ``unshare`` is permitted. Its stdout and stderr go to
files and come back trimmed. After it exits, or is killed, its whole process group is killed, so
nothing it started survives it. The caller never parses what the child printed to judge it.

:class:`SandboxedProcess` lets the parent talk to a running child between phases (the verifier
compares outputs before it lets the child time anything); :func:`network_isolation` says whether
the network can be cut here and, if not, why.
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import attrs

from .files import read_tail

__all__ = [
    "SandboxLimits",
    "SandboxOutcome",
    "SandboxedProcess",
    "child_environment",
    "kill_group",
    "network_isolation",
    "signal_name",
]

_OUTPUT_LIMIT = 4000  # characters of stdout/stderr kept: enough for a prompt, not a flood
_PACKAGE_PARENT = Path(__file__).resolve().parents[1]

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


@attrs.frozen(kw_only=True)
class SandboxLimits:
    """Wall time in seconds, address space in bytes, and whether to cut the network."""

    wall_s: float = 300.0
    address_space_bytes: int = 16 * 1024**3
    isolate_network: bool = True


@attrs.frozen(kw_only=True)
class SandboxOutcome:
    """How the child ended: exit code or signal, timeout, output tails, and what isolation held."""

    returncode: int | None
    signal: str | None
    timed_out: bool
    wall_s: float
    stdout: str
    stderr: str
    network_isolated: bool
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


def _limit_child(address_space_bytes: int) -> None:
    """Runs in the child between fork and exec."""
    resource.setrlimit(resource.RLIMIT_AS, (address_space_bytes, address_space_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


class SandboxedProcess:
    """One child process under limits; use as a context manager so its group is always killed."""

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
    ) -> None:
        prefix, self._isolation_note = network_isolation() if limits.isolate_network else ([], "")
        self.network_isolated = bool(prefix)
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
            preexec_fn=functools.partial(_limit_child, limits.address_space_bytes),
        )
        self._timed_out = False

    # -- talking to the child -------------------------------------------------------------------

    def remaining_s(self) -> float:
        return self._limits.wall_s - (time.monotonic() - self._started)

    def running(self) -> bool:
        return self._process.poll() is None

    def expire(self) -> None:
        """Kill the child because its time is up; :meth:`finish` then reports a timeout."""
        self._kill()
        self._timed_out = True

    def wait_for(self, path: Path, poll_s: float = 0.01, on_poll: Callable[[], None] | None = None) -> bool:
        """Wait until ``path`` exists (True) or the child ends or runs out of time (False);
        ``on_poll`` is called between looks (a live display reads the child's progress there)."""
        while not path.exists():
            if on_poll is not None:
                on_poll()
            if self._process.poll() is not None:
                return path.exists()
            if self.remaining_s() <= 0:
                self._kill()
                self._timed_out = True
                return False
            time.sleep(poll_s)
        return True

    def send(self, line: str) -> None:
        """Write one line to the child's stdin; a child that already ended is not an error."""
        try:
            assert self._process.stdin is not None
            self._process.stdin.write((line + "\n").encode())
            self._process.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

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
        notes = (self._isolation_note,) if self._isolation_note else ()
        return SandboxOutcome(
            returncode=code if code >= 0 else None,
            signal=signal_name(-code) if code < 0 and not self._timed_out else None,
            timed_out=self._timed_out,
            wall_s=time.monotonic() - self._started,
            stdout=_tail(self._stdout_path),
            stderr=_tail(self._stderr_path),
            network_isolated=self.network_isolated,
            notes=notes,
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
        self._kill()
        self._process.wait()
        self._close_files()


def _tail(path: Path) -> str:
    with path.open("rb") as handle:
        return read_tail(handle, _OUTPUT_LIMIT)
