"""The sandbox runs a child under limits and always cleans up after it."""

from __future__ import annotations

import os
import sys
import time

from pragma_core.sandbox import SandboxedProcess, SandboxLimits, network_isolation, signal_name


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
    marker = tmp_path / "grandchild.pid"
    code = (
        "import subprocess, time\n"
        f"p = subprocess.Popen(['sleep', '60']); open({str(marker)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(60)\n"
    )
    started = time.monotonic()
    outcome = run(tmp_path, code, wall_s=3)
    assert outcome.timed_out and time.monotonic() - started < 20
    grandchild = int(marker.read_text())
    time.sleep(0.2)
    assert not os.path.exists(f"/proc/{grandchild}") or "Z" in open(f"/proc/{grandchild}/stat").read().split()[2]


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
    if prefix:
        assert outcome.network_isolated and outcome.stdout.startswith("closed")
    else:
        assert reason.startswith("no network isolation") and outcome.notes == (reason,)
