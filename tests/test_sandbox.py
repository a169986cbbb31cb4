"""The sandbox runs a child under limits and always cleans up after it."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from pragma_core.sandbox.process import SandboxedProcess, SandboxLimits, network_isolation, signal_name


def run(tmp_path, code: str, **limits):
    child = SandboxedProcess(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        log_dir=tmp_path / "logs",
        limits=SandboxLimits(**limits),
        env=os.environ,
    )
    with child:
        return child.finish()


def processes_with(marker: str) -> list[int]:
    """Live (not zombie) processes of this host whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in argv and state != "Z":
            found.append(int(entry.name))
    return found


def gone(marker: str, within_s: float = 2.0) -> bool:
    """Whether every process holding ``marker`` has ended within ``within_s``: the namespace's init
    kills what is left as it exits, which can end milliseconds after the sandbox's own process."""
    deadline = time.monotonic() + within_s
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return processes_with(marker) == []


def test_exit_code_and_trimmed_output(tmp_path):
    outcome = run(tmp_path, "import sys; print('x' * 100000); print('tail'); sys.exit(3)")
    assert outcome.returncode == 3 and not outcome.timed_out and outcome.signal is None
    assert outcome.stdout.startswith("[... ") and outcome.stdout.rstrip().endswith("tail")
    assert len(outcome.stdout) < 5000


def test_signal_is_named(tmp_path):
    outcome = run(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert outcome.signal == "SIGSEGV" and outcome.returncode is None
    assert signal_name(9) == "SIGKILL"


def test_hang_times_out_and_its_children_die_with_it(tmp_path):
    marker = f"pragma-test-hang-{os.getpid()}-{time.monotonic_ns()}"
    started_file = tmp_path / "started"
    code = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', {marker!r}])\n"
        f"open({str(started_file)!r}, 'w').close()\n"
        "time.sleep(60)\n"
    )
    started = time.monotonic()
    outcome = run(tmp_path, code, wall_s=5)  # room to start both under load, still a hang
    assert outcome.timed_out and time.monotonic() - started < 20
    assert started_file.exists()
    assert gone(marker)


def test_address_space_limit(tmp_path):
    outcome = run(tmp_path, "b = bytearray(3 * 1024**3)", address_space_bytes=1024**3)
    assert outcome.returncode == 1 and "MemoryError" in outcome.stderr


def test_network_is_cut_or_the_reason_is_given(tmp_path):
    prefix, reason = network_isolation()
    code = (
        "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 53), timeout=2)\n    print('open')\n"
        "except OSError as e:\n    print('closed', e)\n"
    )
    outcome = run(tmp_path, code)
    if outcome.network_isolated:
        assert outcome.stdout.startswith("closed")
    else:
        assert not prefix and reason.startswith("no network isolation") and reason in outcome.notes


def test_cpu_time_limit_stops_a_spinning_child(tmp_path):
    started = time.monotonic()
    outcome = run(tmp_path, "while True: pass", wall_s=60, cpu_s=1)
    assert outcome.signal == "SIGXCPU" and not outcome.timed_out
    assert time.monotonic() - started < 15


def test_default_cpu_limit_exceeds_what_the_wall_time_allows():
    limits = SandboxLimits(wall_s=10)
    assert limits.cpu_limit_s >= 10 * (os.cpu_count() or 1)
    assert SandboxLimits(cpu_s=0.2).cpu_limit_s == 1


def test_passed_descriptors_reach_the_program(tmp_path):
    read_end, write_end = os.pipe()
    try:
        child = SandboxedProcess(
            [sys.executable, "-c", f"import os; os.write({write_end}, b'through')"],
            cwd=tmp_path,
            log_dir=tmp_path / "logs",
            limits=SandboxLimits(),
            env=os.environ,
            pass_fds=[write_end],
        )
        with child:
            outcome = child.finish()
        os.close(write_end)
        write_end = -1
        assert outcome.returncode == 0, outcome.stderr
        assert os.read(read_end, 100) == b"through"
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


def test_a_child_that_removes_its_own_logs_gets_a_note_not_a_crash(tmp_path):
    """Where the OS cannot contain it, a child can delete the log files the parent reads back."""
    limits = SandboxLimits(wall_s=30, isolate_files=False, isolate_network=False)
    code = "import shutil; shutil.rmtree('../logs')"
    (tmp_path / "work").mkdir()
    with SandboxedProcess(
        [sys.executable, "-c", code], cwd=tmp_path / "work", log_dir=tmp_path / "logs", limits=limits, env=os.environ
    ) as child:
        outcome = child.finish()
    assert outcome.returncode == 0
    assert "could not be read" in outcome.stdout and "could not be read" in outcome.stderr


def test_restarting_the_clock_gives_the_whole_wall_time_again(tmp_path):
    with SandboxedProcess(
        [sys.executable, "-c", "import sys; sys.stdin.read()"],
        cwd=tmp_path / "work",
        log_dir=tmp_path / "logs",
        limits=SandboxLimits(wall_s=30),
        env=os.environ,
    ) as child:
        time.sleep(0.3)
        assert child.remaining_s() < 29.8
        child.restart_clock()
        assert child.remaining_s() > 29.9
