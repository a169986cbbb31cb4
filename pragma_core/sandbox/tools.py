"""Running a profiler's tool: one way for every plugin, with a time limit and nothing left behind.

    from pragma_core.sandbox.tools import run_tool

    run = run_tool(
        [valgrind, "--tool=cachegrind", *target.replay_argv],
        tool="valgrind",
        env=target.env,
        timeout_s=target.timeout_s,
        cwd=target.out_dir,
        stdout_path=target.out_dir / "cachegrind.stdout.txt",
        stderr_path=target.out_dir / "cachegrind.stderr.txt",
    )
    if run.timed_out:
        ...  # f"cachegrind {run.ending}" -> "cachegrind did not finish within 600 s"

The tool starts in a session and process group of its own, with exactly the environment given
(nothing is added from this process's) and no standard input. :func:`run_tool` waits up to
``timeout_s``; then, and whenever the wait ends, by the tool's exit, a timeout, KeyboardInterrupt
or any other exception, it kills the whole group with SIGKILL, so neither the tool nor the program
it profiles nor anything they started survives the call. Output goes to files (a temporary one
when no path is given) and comes back in the :class:`ToolRun` as a trimmed tail for messages. A
tool that cannot be started at all is :class:`~pragma_core.errors.ProfilerUnavailable` naming it.

When the tool runs a program pragma does not trust (the target's ``python_argv`` or
``replay_argv``, which run candidate code), pass ``writable``, for instance
``writable=target_writable(target)``: the whole tool command then runs contained
(:func:`pragma_core.sandbox.process.isolation_prefix`): every file system read-only except those folders and
``cwd``, its own PID namespace, no network. Where this OS does not allow that, the tool runs as
before and :attr:`ToolRun.notes` says why. A contained tool whose environment has no ``TMPDIR`` in
those folders gets one there, removed after the run: the only variable :func:`run_tool` adds. Whether contained or not, the tool is killed when the
thread that started it ends (pragma killed with SIGKILL included), on Linux.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

import attrs
from attrs import validators as v

from ..errors import ProfilerUnavailable
from ..files import read_tail
from .process import BUILD_FOLDER_VARIABLES, die_with_parent, isolation_prefix, kill_group, signal_name

if TYPE_CHECKING:
    from ..plugin_api.components import ProfileTarget

__all__ = ["TAIL_CHARS", "ToolRun", "run_tool", "target_writable"]

TAIL_CHARS = 4000
"""Characters of each output stream the record keeps: enough for a message, not a flood."""

_POLL_MAX_S = 0.05  # the longest pause between two looks at the tool; bounds the latency of a return


def _command(value: Sequence[str | os.PathLike[str]]) -> tuple[str, ...]:
    return tuple(os.fspath(part) for part in value)


def _optional_path(value: str | os.PathLike[str] | None) -> Path | None:
    return None if value is None else Path(value)


@attrs.frozen(kw_only=True)
class ToolRun:
    """How one run of a tool ended, and where its output is.

    ``returncode`` is the tool's exit status as :mod:`subprocess` gives it (negative: killed by that
    signal), None exactly when ``timed_out``: the tool was still running at ``timeout_s`` and was
    killed with its process group. ``stdout_path`` and ``stderr_path`` are the files holding the
    whole output (the same file when stderr went into stdout; None when the caller gave no file).
    ``stdout_tail`` and ``stderr_tail`` are their last :data:`TAIL_CHARS` characters, with a marker
    line when trimmed; ``stderr_tail`` is empty when stderr went into stdout. ``contained`` says
    whether the tool ran in the read-only world it was asked for; when it was asked for and did not,
    ``notes`` says why (``files not isolated: ...``).
    """

    tool: str = attrs.field(validator=v.min_len(1))
    command: tuple[str, ...] = attrs.field(converter=_command, validator=v.min_len(1))
    returncode: int | None
    timed_out: bool
    timeout_s: float = attrs.field(validator=v.gt(0))
    wall_s: float = attrs.field(validator=v.ge(0))
    stdout_path: Path | None = attrs.field(default=None, converter=_optional_path)
    stderr_path: Path | None = attrs.field(default=None, converter=_optional_path)
    stdout_tail: str = ""
    stderr_tail: str = ""
    contained: bool = False
    notes: tuple[str, ...] = ()

    def __attrs_post_init__(self) -> None:
        if self.timed_out != (self.returncode is None):
            raise ValueError("a run has no exit status exactly when it timed out")

    @property
    def ok(self) -> bool:
        """The tool finished in time with exit code 0."""
        return self.returncode == 0

    @property
    def ending(self) -> str:
        """How the run ended, to follow the tool's name in a message: ``did not finish within 120 s``."""
        if self.returncode is None:
            return f"did not finish within {self.timeout_s:g} s and was stopped"
        if self.returncode < 0:
            return f"was killed by {signal_name(-self.returncode)}"
        return f"exited with code {self.returncode}"


def run_tool(
    argv: Sequence[str | os.PathLike[str]],
    *,
    tool: str,
    env: Mapping[str, str],
    timeout_s: float,
    cwd: str | os.PathLike[str] | None = None,
    stdout_path: str | os.PathLike[str] | None = None,
    stderr_path: str | os.PathLike[str] | None = None,
    stderr_to_stdout: bool = False,
    writable: Sequence[str | os.PathLike[str]] | None = None,
) -> ToolRun:
    """Run ``argv`` in its own process group and wait up to ``timeout_s``; see the module docstring.

    ``tool`` names the tool in messages (``valgrind``, ``perf``). ``env`` is the complete
    environment of the tool and of what it runs. ``stdout_path`` and ``stderr_path`` receive the
    output, truncated first (their folders are created); ``stderr_to_stdout`` sends stderr into
    the stdout file. ``writable`` (None: not contained) runs the tool and what it runs in the
    read-only world but these folders and ``cwd`` (see the module docstring). Raises
    :class:`~pragma_core.errors.ProfilerUnavailable` when the tool cannot be started (not found, not
    executable, no such ``cwd``), and ValueError for ``timeout_s`` <= 0.
    """
    command = _command(argv)
    if not command:
        raise ValueError("run_tool needs a command to run")
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    prefix: list[str] = []
    notes: tuple[str, ...] = ()
    folders: list[Path] = []
    if writable is not None:
        # Inside the prefix a missing tool is an exit code, not an OSError: look for it here first.
        if shutil.which(command[0], path=env.get("PATH", os.defpath)) is None:
            raise ProfilerUnavailable(f"`{tool}` cannot be started: not found or not executable ({command[0]})")
        folders = [Path(folder) for folder in writable] + ([Path(cwd)] if cwd is not None else [])
        folders = [folder.resolve() for folder in folders if folder.is_dir()]
        prefix, reason = isolation_prefix(folders)
        notes = (reason,) if reason else ()
    with contextlib.ExitStack() as files:
        if prefix and folders and not _inside(Path(env.get("TMPDIR") or tempfile.gettempdir()), folders):
            # The world outside is read-only; tools need a temporary folder (valgrind will not start without).
            scratch = tempfile.TemporaryDirectory(prefix=".tmp-", dir=folders[0], ignore_cleanup_errors=True)
            env = {**env, "TMPDIR": files.enter_context(scratch)}
        stdout = _sink(stdout_path, files)
        stderr = stdout if stderr_to_stdout else _sink(stderr_path, files)
        started = time.monotonic()
        try:
            process = subprocess.Popen(
                [*prefix, *command],
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        except OSError as error:
            where = f": {error.filename}" if error.filename else f" ({command[0]})"
            raise ProfilerUnavailable(f"`{tool}` cannot be started: {error.strerror or error}{where}") from None
        try:
            finished = _wait_for_exit(process, timeout_s)
        finally:
            # Also after a clean exit: a program the tool ran may have left children behind.
            kill_group(process.pid)
            process.wait()
        wall_s = time.monotonic() - started
        return ToolRun(
            tool=tool,
            command=command,
            returncode=process.returncode if finished else None,
            timed_out=not finished,
            timeout_s=timeout_s,
            wall_s=wall_s,
            stdout_path=stdout_path,
            stderr_path=stdout_path if stderr_to_stdout else stderr_path,
            stdout_tail=read_tail(stdout, TAIL_CHARS),
            stderr_tail="" if stderr_to_stdout else read_tail(stderr, TAIL_CHARS),
            contained=bool(prefix),
            notes=notes,
        )


def target_writable(target: ProfileTarget) -> tuple[Path, ...]:
    """The folders a profiled program may write: the target's ``out_dir`` and the build folders its
    environment names (:func:`pragma_core.sandbox.process.build_environment`)."""
    folders = [Path(target.out_dir)]
    folders += [Path(target.env[name]) for name in BUILD_FOLDER_VARIABLES if target.env.get(name)]
    return tuple(dict.fromkeys(folders))


def _inside(path: Path, folders: Sequence[Path]) -> bool:
    path = path.resolve()
    return any(path == folder or folder in path.parents for folder in folders)


def _sink(path: str | os.PathLike[str] | None, files: contextlib.ExitStack) -> IO[bytes]:
    """A fresh file for one output stream: the caller's, or an anonymous temporary one."""
    if path is None:
        return files.enter_context(tempfile.TemporaryFile())
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return files.enter_context(open(path, "w+b"))


def _wait_for_exit(process: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """True when the tool exited within ``timeout_s``; False when it is still running.

    The exited tool is left unreaped (``WNOWAIT``): while it is a zombie its process ID cannot be
    reused, so killing its group afterwards cannot reach an unrelated process.
    """
    deadline = time.monotonic() + timeout_s
    if not hasattr(os, "waitid"):  # macOS: reaping first leaves a short window, acceptable there
        try:
            process.wait(timeout=timeout_s)
            return True
        except subprocess.TimeoutExpired:
            return False
    pause = 0.001
    while os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(pause, remaining))
        pause = min(pause * 2, _POLL_MAX_S)
    return True
