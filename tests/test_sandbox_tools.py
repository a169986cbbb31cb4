"""run_tool: the one way profiler plugins run their tools, on real processes."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import uuid
from pathlib import Path

import attrs
import pytest

from pragma_core.errors import ProfilerUnavailable
from pragma_core.sandbox.tools import TAIL_CHARS, ToolRun, run_tool
from pragma_core.testing import RUN_MARKER, hanging_program, survivors

pytestmark = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="checking for survivors needs /proc")


def marked_environment() -> tuple[dict[str, str], str]:
    """This process's environment with a marker that finds every process of one run."""
    marker = uuid.uuid4().hex
    return {**os.environ, RUN_MARKER: marker}, marker


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def alive(pid: int, *, within_s: float = 2.0) -> bool:
    """Whether ``pid`` still runs once a SIGKILL sent before the call has had ``within_s`` seconds to
    land: a killed process is still listed while it exits (its environment already gone, so
    :func:`survivors` no longer finds it; seen once in a full test run)."""
    deadline = time.monotonic() + within_s
    while _running(pid):
        if time.monotonic() > deadline:
            return True
        time.sleep(0.05)
    return False


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_output_goes_to_files_and_its_tail_into_the_record(tmp_path):
    env, _ = marked_environment()
    run = run_tool(
        python("import sys; print('to stdout'); print('to stderr', file=sys.stderr); sys.exit(3)"),
        tool="python",
        env=env,
        timeout_s=60,
        stdout_path=tmp_path / "logs" / "out.txt",
        stderr_path=tmp_path / "logs" / "err.txt",
    )
    assert run.returncode == 3 and not run.timed_out and not run.ok
    assert run.ending == "exited with code 3"
    assert (tmp_path / "logs" / "out.txt").read_text() == "to stdout\n" == run.stdout_tail
    assert (tmp_path / "logs" / "err.txt").read_text() == "to stderr\n" == run.stderr_tail
    assert run.stdout_path == tmp_path / "logs" / "out.txt" and run.command[0] == sys.executable
    assert 0 < run.wall_s < 60


def test_without_files_the_output_is_kept_in_the_record_only(tmp_path):
    env, _ = marked_environment()
    run = run_tool(python("print('version 1.2')"), tool="python", env=env, timeout_s=60, cwd=tmp_path)
    assert run.ok and run.stdout_tail == "version 1.2\n" and run.stderr_tail == ""
    assert run.stdout_path is None and list(tmp_path.iterdir()) == []


def test_stderr_can_join_stdout_in_one_log(tmp_path):
    env, _ = marked_environment()
    log = tmp_path / "tool.log"
    run = run_tool(
        python("import sys; print('a', flush=True); print('b', file=sys.stderr)"),
        tool="python",
        env=env,
        timeout_s=60,
        stdout_path=log,
        stderr_to_stdout=True,
    )
    assert log.read_text() == "a\nb\n" == run.stdout_tail
    assert run.stderr_path == log and run.stderr_tail == ""


def test_a_long_output_is_trimmed_in_the_record_and_whole_in_the_file(tmp_path):
    env, _ = marked_environment()
    out = tmp_path / "out.txt"
    run = run_tool(python("print('x' * 100_000 + 'THE END')"), tool="python", env=env, timeout_s=60, stdout_path=out)
    assert len(out.read_text()) == 100_008
    assert run.stdout_tail.startswith("[... 100008 bytes, last 4000 characters kept]\n")
    assert run.stdout_tail.endswith("THE END\n") and len(run.stdout_tail.split("\n", 1)[1]) == TAIL_CHARS


def test_a_signal_is_named(tmp_path):
    env, _ = marked_environment()
    run = run_tool(
        python("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"), tool="python", env=env, timeout_s=60
    )
    assert run.returncode == -signal.SIGSEGV and run.ending == "was killed by SIGSEGV"


def test_the_environment_is_exactly_the_one_given(tmp_path, monkeypatch):
    monkeypatch.setenv("PRAGMA_TOOLS_NOT_PASSED", "from this process")
    env = {"PATH": os.environ["PATH"], "PRAGMA_TOOLS_PASSED": "given"}
    code = "import os; print(os.environ.get('PRAGMA_TOOLS_PASSED'), os.environ.get('PRAGMA_TOOLS_NOT_PASSED'))"
    run = run_tool(python(code), tool="python", env=env, timeout_s=60)
    assert run.stdout_tail == "given None\n"


@pytest.mark.serial
def test_a_timeout_kills_the_tool_and_what_it_started(tmp_path):
    env, marker = marked_environment()
    pids = tmp_path / "pids.txt"
    started = time.monotonic()
    run = run_tool(hanging_program(pids), tool="sh", env=env, timeout_s=2)
    elapsed = time.monotonic() - started
    assert run.timed_out and run.returncode is None and not run.ok
    assert run.ending == "did not finish within 2 s and was stopped"
    assert 2 <= run.wall_s <= elapsed < 5
    shell, grandchild = (int(line) for line in pids.read_text().split())
    assert survivors(marker) == []
    assert not alive(shell) and not alive(grandchild)


def test_what_a_finished_tool_left_running_is_killed_too(tmp_path):
    env, marker = marked_environment()
    pid_file = tmp_path / "pid.txt"
    run = run_tool(["sh", "-c", f"sleep 300 & echo $! > {pid_file}"], tool="sh", env=env, timeout_s=60)
    assert run.ok and run.wall_s < 30
    assert survivors(marker) == [] and not alive(int(pid_file.read_text()))


@pytest.fixture
def ctrl_c_raises():
    """Python's own Ctrl-C handler for the test, even in a run started with SIGINT ignored (as a
    shell without job control starts a background job)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_keyboard_interrupt_kills_the_group_and_propagates(tmp_path, ctrl_c_raises):
    env, marker = marked_environment()
    pids = tmp_path / "pids.txt"
    main = threading.get_ident()

    def interrupt_once_the_program_runs() -> None:
        deadline = time.monotonic() + 30
        while not (pids.exists() and len(pids.read_text().split()) == 2):
            if time.monotonic() > deadline:
                return  # the test then fails on the missing interrupt
            time.sleep(0.02)
        signal.pthread_kill(main, signal.SIGINT)  # what Ctrl-C does, delivered to the waiting thread

    helper = threading.Thread(target=interrupt_once_the_program_runs)
    helper.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_tool(hanging_program(pids), tool="sh", env=env, timeout_s=120)
    helper.join()
    assert time.monotonic() - started < 30
    assert survivors(marker) == []
    assert not any(alive(int(pid)) for pid in pids.read_text().split())


def test_a_missing_tool_is_one_clear_error(tmp_path):
    with pytest.raises(ProfilerUnavailable) as raised:
        run_tool([str(tmp_path / "valgrind"), "--version"], tool="valgrind", env=os.environ, timeout_s=5)
    assert str(raised.value) == f"`valgrind` cannot be started: No such file or directory: {tmp_path / 'valgrind'}"


def test_a_tool_that_is_not_executable_is_one_clear_error(tmp_path):
    script = tmp_path / "ncu"
    script.write_text("#!/bin/sh\necho hi\n")
    with pytest.raises(ProfilerUnavailable, match=r"^`ncu` cannot be started: Permission denied"):
        run_tool([str(script)], tool="ncu", env=os.environ, timeout_s=5)


def test_a_missing_working_folder_is_named(tmp_path):
    with pytest.raises(
        ProfilerUnavailable, match=f"^`perf` cannot be started: No such file or directory: {tmp_path}/gone"
    ):
        run_tool(["true"], tool="perf", env=os.environ, timeout_s=5, cwd=tmp_path / "gone")


def test_impossible_requests_and_records_are_refused(tmp_path):
    with pytest.raises(ValueError, match="timeout_s must be a positive"):
        run_tool(["true"], tool="true", env=os.environ, timeout_s=0)
    with pytest.raises(ValueError, match="needs a command"):
        run_tool([], tool="true", env=os.environ, timeout_s=5)
    run = run_tool(["true"], tool="true", env=os.environ, timeout_s=5)
    with pytest.raises(ValueError, match="exactly when it timed out"):
        attrs.evolve(run, timed_out=True)
    assert isinstance(run, ToolRun) and run.ok and run.ending == "exited with code 0"
