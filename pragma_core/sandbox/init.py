"""The first program inside the sandbox's namespaces: a read-only world, then the contained program.

:func:`pragma_core.sandbox.process.isolation_prefix` starts it under ``unshare --user --map-root-user --mount
--ipc [--net]``, as a script (``python -I -S init.py --writable DIR ... -- PROGRAM ...``), so
it imports nothing but the standard library and starts in about 10 ms. Running as root of a fresh
user namespace, it

1. binds each writable folder onto itself, then remounts every other mount point read-only (keeping
   its nosuid, nodev and noexec flags, which the kernel refuses to drop), and checks that each one
   now is, so a mount it could not change stops the run instead of passing silently;
2. enters a new PID namespace and forks its init, which mounts a fresh ``/proc`` of its own (the
   host's processes, pragma among them, cannot be seen, read or traced from inside) and forks the
   program;
3. in the program's process, drops every capability, the bounding set and the ambient set, and
   sets no-new-privs before ``exec``: the program is uid 0 of the namespace but cannot remount,
   unmount or mount anything, and a user namespace it creates inherits mounts locked read-only.

Why an init between this process and the program: the init of a PID namespace is immune to the
signals its own namespace sends it, so a program that were init itself would survive its own
``abort()`` or ``kill(getpid(), SIGSEGV)``. The init waits for the program, reaping orphans meanwhile,
and hands its wait status over a pipe; this process, outside the PID namespace, then ends the same
way (same exit code, or killed by the same signal), so callers see the program's ending. When the
init ends, the kernel kills everything left in the PID namespace, whatever session or group it
moved to. The init dies with this process (``PR_SET_PDEATHSIG``), and this process with pragma (the
caller sets the same on it), so nothing survives pragma being killed with SIGKILL.

**Locking down later.** With ``--lock-down-later`` instead of ``--writable`` folders, step 1 waits:
the program starts in a world that is still writable, already without any capability, and the init
makes the file systems read-only when the program asks (:func:`lock_down`, once, with the folders
that stay writable), exactly as step 1 would have. The verifier uses this to import Python and
torch in the sandbox before it knows which candidate comes, hence which build folder must stay
writable; the program runs no code but pragma's and torch's until the init has answered. The init
keeps its capabilities and the program has none, so the program cannot ptrace or otherwise drive
the init (the kernel refuses a tracer whose capabilities are a subset of its target's), and the
init answers one request only.

A setup failure prints ``pragma sandbox: ...`` on stderr and exits with :data:`SETUP_FAILED`.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys

SETUP_FAILED = 125
"""Exit code when the read-only world could not be set up (the program never started)."""

LOCK_DOWN_VARIABLE = "PRAGMA_SANDBOX_LOCK_DOWN"
"""Set in the program's environment under ``--lock-down-later``: the descriptors (request, answer)
of its pipes to the init, for :func:`lock_down`."""


class SetupFailed(Exception):
    """The read-only world could not be set up; the message says what the OS refused."""


_MS_RDONLY = 0x1
_MS_NOSUID = 0x2
_MS_NODEV = 0x4
_MS_NOEXEC = 0x8
_MS_REMOUNT = 0x20
_MS_BIND = 0x1000
_MS_REC = 0x4000
_CLONE_NEWPID = 0x20000000
_PR_SET_PDEATHSIG = 1
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
# statvfs flag -> mount flag, for the per-mount flags a read-only remount must keep
_KEPT_FLAGS = {
    os.ST_NOSUID: _MS_NOSUID,
    os.ST_NODEV: _MS_NODEV,
    os.ST_NOEXEC: _MS_NOEXEC,
    os.ST_NOATIME: 0x400,
    os.ST_NODIRATIME: 0x800,
    os.ST_RELATIME: 0x200000,
}

_libc = ctypes.CDLL(None, use_errno=True)


def _fail(message: str) -> None:
    raise SetupFailed(message)


def _check(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        _fail(f"{what}: {os.strerror(error)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int) -> int:
    result: int = _libc.mount(_bytes(source), _bytes(target), _bytes(fstype), ctypes.c_ulong(flags), None)
    return result


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else os.fsencode(text)


def _mount_points() -> list[str]:
    """Every mount point of this mount namespace, decoded (mountinfo escapes spaces as ``\\040``)."""
    with open("/proc/self/mountinfo", "rb") as handle:
        lines = handle.read().decode(errors="surrogateescape").splitlines()
    points = []
    for line in lines:
        field = line.split(" ")[4]
        points.append(_unescape(field))
    return list(dict.fromkeys(points))


def _unescape(field: str) -> str:
    out, index = [], 0
    while index < len(field):
        if field[index] == "\\" and field[index + 1 : index + 4].isdigit():
            out.append(chr(int(field[index + 1 : index + 4], 8)))
            index += 4
        else:
            out.append(field[index])
            index += 1
    return "".join(out)


def _make_read_only(writable: list[str]) -> None:
    for folder in writable:
        _check(_mount(folder, folder, None, _MS_BIND | _MS_REC), f"cannot bind the writable folder {folder}")
    keep = set(writable)
    for point in _mount_points():
        if point in keep:
            continue
        try:
            flags = os.statvfs(point).f_flag
        except OSError:
            continue  # hidden under another mount: nothing reaches it by path
        kept = sum(mount_flag for stat_flag, mount_flag in _KEPT_FLAGS.items() if flags & stat_flag)
        _mount(None, point, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | kept)
    for point in _mount_points():  # fail closed: every mount reachable by path must be read-only now
        if point in keep:
            continue
        try:
            flags = os.statvfs(point).f_flag
        except OSError:
            continue
        if not flags & os.ST_RDONLY:
            _fail(f"cannot make {point} read-only")
    os.chdir(os.getcwd())  # the working folder, if writable, is the bind mount now, not the folder below it


def _drop_privileges() -> None:
    """No capability in any set, none to regain by exec (uid 0 of a user namespace would)."""
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "cannot set no-new-privs")
    _libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    capability = 0
    while _libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) == 0:
        capability += 1
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable for two 32-bit words: all zero
    _check(_libc.capset(header, data), "cannot drop capabilities")


def _die_with_parent(alive: int) -> None:
    """SIGKILL when the parent ends. ``alive`` is a pipe only the parent can write to: at end of
    file, the parent died before the signal was set (getppid says nothing across a PID namespace)."""
    _check(_libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "cannot set the parent-death signal")
    if select.select([alive], [], [], 0)[0]:
        os._exit(SETUP_FAILED)
    os.close(alive)


def _init(program: list[str], report: int, *, lock_down_later: bool) -> None:
    """PID 1 of the new namespace: a fresh /proc, the program, and its wait status to ``report``;
    with ``lock_down_later``, the read-only world when the program asks for it."""
    if _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC) != 0:
        _fail(f"cannot mount a fresh /proc: {os.strerror(ctypes.get_errno())}")
    requests = answers = None
    if lock_down_later:
        requests, answers = os.pipe(), os.pipe()  # (read, write) each: program -> init, init -> program
    child = os.fork()
    if child == 0:
        for number in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores them; exec would keep that
            signal.signal(number, signal.SIG_DFL)
        if requests is not None and answers is not None:
            os.close(requests[0])
            os.close(answers[1])
            for fd in (requests[1], answers[0]):
                os.set_inheritable(fd, True)
            os.environ[LOCK_DOWN_VARIABLE] = f"{requests[1]},{answers[0]}"
        _drop_privileges()
        try:
            os.execvp(program[0], program)
        except OSError as error:
            os.write(2, f"pragma sandbox: cannot run {program[0]}: {error.strerror}\n".encode(errors="replace"))
            os._exit(127 if isinstance(error, FileNotFoundError) else 126)
    if requests is not None and answers is not None:
        os.close(requests[1])
        os.close(answers[0])
        status = _serve_lock_down(child, requests[0], answers[1])
        if status is not None:
            os.write(report, str(status).encode())
            os._exit(0)
    while True:
        pid, status = os.wait()  # orphans are reparented here: reap them until the program ends
        if pid == child:
            os.write(report, str(status).encode())
            os._exit(0)


def _serve_lock_down(child: int, requests: int, answers: int) -> int | None:
    """In the init: reap orphans until the program asks for the read-only world (one request: the
    writable folders, one per line, then an empty line), make it, and answer ``ok`` or the reason
    it failed. Returns the program's wait status if it ended before asking, else None."""
    received = b""
    while not received.endswith(b"\n\n"):
        while True:  # reap what ended meanwhile
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return 0
            if pid == 0:
                break
            if pid == child:
                return status
        if select.select([requests], [], [], 0.05)[0]:
            chunk = os.read(requests, 65536)
            if not chunk:  # the program closed its end without asking: nothing to make
                os.close(requests)
                os.close(answers)
                return None
            received += chunk
    writable = [line for line in received.decode(errors="surrogateescape").split("\n") if line]
    try:
        _make_read_only(writable)
        answer = "ok"
    except SetupFailed as failure:
        answer = str(failure)
    os.write(answers, answer.encode(errors="replace") + b"\n")
    os.close(requests)
    os.close(answers)
    return None


def lock_down(writable: list[str]) -> None:
    """In a program started under ``--lock-down-later``: have the init make every file system
    read-only except ``writable`` (folders that exist), and return once it has; this process's
    working folder is then the writable bind mount when it is one of them. Raises
    :class:`SetupFailed` with the reason when the world could not be made read-only, or when this
    process was not started that way. Callable once."""
    fds = os.environ.pop(LOCK_DOWN_VARIABLE, "")
    if not fds:
        raise SetupFailed("this process was not started with --lock-down-later, or already locked down")
    request, answer = (int(fd) for fd in fds.split(","))
    text = "".join(f"{folder}\n" for folder in writable) + "\n"
    os.write(request, text.encode(errors="surrogateescape"))
    os.close(request)
    reply = b""
    while not reply.endswith(b"\n"):
        chunk = os.read(answer, 65536)
        if not chunk:
            break
        reply += chunk
    os.close(answer)
    said = reply.decode(errors="replace").strip()
    if said != "ok":
        raise SetupFailed(said or "the sandbox's init ended before it answered")
    os.chdir(os.getcwd())  # the working folder, if writable, is the bind mount now, not the folder below it


def main(argv: list[str]) -> None:
    try:
        _main(argv)
    except SetupFailed as failure:
        os.write(2, f"pragma sandbox: {failure}\n".encode(errors="replace"))
        os._exit(SETUP_FAILED)


def _main(argv: list[str]) -> None:
    writable: list[str] = []
    lock_down_later = False
    while argv and argv[0] in ("--writable", "--lock-down-later"):
        if argv[0] == "--lock-down-later":
            lock_down_later, argv = True, argv[1:]
        else:
            writable.append(argv[1])
            argv = argv[2:]
    if not argv or argv[0] != "--" or len(argv) < 2 or (lock_down_later and writable):
        _fail("usage: init.py [--writable DIR]... | --lock-down-later -- PROGRAM [ARG]...")
    program = argv[1:]
    if not lock_down_later:
        _make_read_only(writable)
    _check(_libc.unshare(_CLONE_NEWPID), "cannot create a PID namespace")
    read_end, write_end = os.pipe()
    alive_read, alive_write = os.pipe()
    init = os.fork()
    if init == 0:
        os.close(read_end)
        os.close(alive_write)
        _die_with_parent(alive_read)
        _init(program, write_end, lock_down_later=lock_down_later)
    os.close(write_end)
    os.close(alive_read)
    _, init_status = os.waitpid(init, 0)
    with os.fdopen(read_end, "rb") as handle:
        reported = handle.read()
    status = int(reported) if reported else init_status
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
        os._exit(128 + number)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else SETUP_FAILED)


if __name__ == "__main__":
    main(sys.argv[1:])
