"""A contained child sees a read-only world except its folders, no host process, and dies with pragma.

These run real namespaces (``unshare``); where this OS does not permit them, the contained tests are
skipped with the reason and the fallback test still runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import pragma_core
from pragma_core.native import cache_dir
from pragma_core.sandbox.process import (
    SandboxedProcess,
    SandboxLimits,
    build_environment,
    child_environment,
    isolation_prefix,
)

from .test_sandbox import gone, processes_with

PROJECT = Path(pragma_core.__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def contained_here():
    prefix, reason = isolation_prefix([])
    if not prefix:
        pytest.skip(reason)


def run(tmp_path, code: str, *, writable=(), env=None, lock_down_later=False, **limits):
    child = SandboxedProcess(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=tmp_path / "work",
        log_dir=tmp_path / "logs",
        limits=SandboxLimits(**limits),
        env=env or os.environ,
        writable=writable,
        lock_down_later=lock_down_later,
    )
    with child:
        return child.finish()


def unique(name: str) -> str:
    return f"pragma-test-{name}-{os.getpid()}-{time.monotonic_ns()}"


def test_writes_outside_its_folders_fail_and_change_nothing(tmp_path):
    task = tmp_path / "task.py"
    task.write_text("class Model: ...\n")
    writable = tmp_path / "out"
    targets = {
        "task": str(task),
        "project": str(PROJECT / unique("planted")),
        "tmp": f"/tmp/{unique('outside')}",
        "cwd": "in-cwd.txt",
        "writable": str(writable / "result.txt"),
        "devnull": "/dev/null",
    }
    code = f"""
        import json
        results = {{}}
        for name, path in {targets!r}.items():
            try:
                with open(path, "a") as handle:
                    handle.write("written by the child")
                results[name] = "ok"
            except OSError as error:
                results[name] = error.strerror
        print(json.dumps(results))
    """
    outcome = run(tmp_path, code, writable=[writable])
    assert outcome.files_isolated and outcome.network_isolated and outcome.notes == ()
    results = json.loads(outcome.stdout)
    assert results == {
        "task": "Read-only file system",
        "project": "Read-only file system",
        "tmp": "Read-only file system",
        "cwd": "ok",
        "writable": "ok",
        "devnull": "ok",
    }
    assert task.read_text() == "class Model: ...\n"
    assert not Path(targets["project"]).exists() and not Path(targets["tmp"]).exists()
    assert (tmp_path / "work" / "in-cwd.txt").read_text() == "written by the child"
    assert (writable / "result.txt").read_text() == "written by the child"


def test_the_child_cannot_undo_its_read_only_world(tmp_path):
    code = """
        import subprocess
        status = open("/proc/self/status").read().splitlines()
        print(*[line for line in status if line.startswith(("CapEff", "CapBnd", "CapAmb", "NoNewPrivs"))], sep="\\n")
        for command in (["mount", "-o", "remount,rw", "/"],
                        ["unshare", "--user", "--map-root-user", "--mount", "mount", "-o", "remount,rw", "/"]):
            print("exit", subprocess.run(command, capture_output=True).returncode)
        try:
            open("/planted-by-the-child", "w")
            print("written")
        except OSError as error:
            print(error.strerror)
    """
    outcome = run(tmp_path, code)
    lines = outcome.stdout.split("\n")
    assert "CapEff:\t0000000000000000" in lines and "CapBnd:\t0000000000000000" in lines
    assert "CapAmb:\t0000000000000000" in lines and "NoNewPrivs:\t1" in lines
    assert "exit 0" not in lines and lines.count("exit 32") + lines.count("exit 1") == 2
    assert "Read-only file system" in lines and not Path("/planted-by-the-child").exists()


def test_a_child_that_locks_down_later_is_writable_only_until_it_does(tmp_path):
    """The verifier's child imports torch before it knows its candidate's build folder: its world
    is made read-only by the namespace's init when it asks, with its own threads already running,
    and from then on it is contained as a child locked from the start."""
    writable = tmp_path / "out"
    writable.mkdir()
    before, after = f"/tmp/{unique('before')}", f"/tmp/{unique('after')}"
    code = f"""
        import json, os, threading, time
        from pragma_core.sandbox.init import SetupFailed, lock_down
        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()  # as torch's pools are
        open({before!r}, "w").write("before")
        lock_down([{str(writable)!r}, os.getcwd()])
        results = {{}}
        for name, path in {{"tmp": {after!r}, "writable": {str(writable / "r.txt")!r}, "cwd": "c.txt"}}.items():
            try:
                open(path, "w").write("x")
                results[name] = "ok"
            except OSError as error:
                results[name] = error.strerror
        status = open("/proc/self/status").read().splitlines()
        results["caps"] = [line for line in status if line.startswith(("CapEff", "CapPrm", "NoNewPrivs"))]
        try:
            lock_down([])
        except SetupFailed as refused:
            results["again"] = str(refused)
        print(json.dumps(results))
    """
    outcome = run(tmp_path, code, env=child_environment(1), lock_down_later=True)
    assert outcome.returncode == 0 and outcome.files_isolated, outcome.stderr
    results = json.loads(outcome.stdout)
    try:
        assert Path(before).read_text() == "before"
    finally:
        Path(before).unlink(missing_ok=True)
    assert results["tmp"] == "Read-only file system" and not Path(after).exists()
    assert results["writable"] == "ok" and results["cwd"] == "ok"
    assert "CapEff:\t0000000000000000" in results["caps"] and "NoNewPrivs:\t1" in results["caps"]
    assert "already locked down" in results["again"]


def test_a_child_that_never_asks_is_not_locked_down_and_ends_normally(tmp_path):
    outcome = run(tmp_path, "import sys; sys.exit(3)", lock_down_later=True)
    assert outcome.returncode == 3 and not outcome.timed_out


def test_host_processes_are_invisible(tmp_path):
    code = """
        import os
        print(sorted(int(name) for name in os.listdir("/proc") if name.isdigit()))
    """
    outcome = run(tmp_path, code)
    visible = json.loads(outcome.stdout)
    assert visible == [1, 2]  # the namespace's init and the child itself; pragma's pid means nothing here


def test_a_setsid_grandchild_ends_with_the_child(tmp_path):
    marker = unique("setsid")
    code = f"""
        import os, subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", {marker!r}], start_new_session=True)
        while not any({marker!r}.encode() in open(f"/proc/{{p}}/cmdline", "rb").read()
                      for p in os.listdir("/proc") if p.isdigit() and p not in ("1", str(os.getpid()))):
            time.sleep(0.01)
    """
    outcome = run(tmp_path, code, wall_s=30)
    assert outcome.returncode == 0, outcome.stderr
    assert gone(marker)


def test_killing_pragma_with_sigkill_kills_the_child_and_its_grandchildren(tmp_path):
    marker = unique("orphan")
    ready = tmp_path / "work" / "ready"
    parent_code = f"""
        import os, sys, time
        from pathlib import Path
        from pragma_core.sandbox.process import SandboxedProcess, SandboxLimits
        child_code = (
            "import subprocess, sys, time\\n"
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', {marker!r}], start_new_session=True)\\n"
            "open('ready', 'w').close()\\n"
            "time.sleep(300)\\n"
        )
        tmp = Path({str(tmp_path)!r})
        child = SandboxedProcess([sys.executable, "-c", child_code, {marker!r}], cwd=tmp / "work",
                                 log_dir=tmp / "logs", limits=SandboxLimits(), env=os.environ)
        time.sleep(300)
    """
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(parent_code)], env=env)
    try:
        deadline = time.monotonic() + 15
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert ready.exists(), "the sandboxed child never started"
        time.sleep(0.1)  # the grandchild writes `ready` after it is started
        assert len(processes_with(marker)) >= 3  # pragma, the child (and its init), the grandchild
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert gone(marker, within_s=5)
    finally:
        parent.kill()
        parent.wait()


def test_without_unshare_the_child_runs_in_the_process_group_sandbox_and_says_so(tmp_path):
    outside = tmp_path / "outside.txt"
    code = f"""
        import json, os, sys
        from pathlib import Path
        from pragma_core.sandbox.process import SandboxedProcess, SandboxLimits
        tmp = Path({str(tmp_path)!r})
        child = SandboxedProcess([sys.executable, "-c", "open({str(outside)!r}, 'w').write('uncontained')"],
                                 cwd=tmp / "work", log_dir=tmp / "logs", limits=SandboxLimits(), env=os.environ)
        with child:
            outcome = child.finish()
        print(json.dumps([outcome.returncode, outcome.files_isolated, outcome.network_isolated, outcome.notes]))
    """
    no_unshare = tmp_path / "bin"  # a PATH with the tools the code above needs, but not unshare
    no_unshare.mkdir()
    env = {**os.environ, "PATH": str(no_unshare), "PYTHONPATH": str(PROJECT)}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    returncode, files_isolated, network_isolated, notes = json.loads(done.stdout)
    assert returncode == 0 and not files_isolated and not network_isolated
    assert notes == [
        "files not isolated: the unshare command is not installed (util-linux)",
        "no network isolation: the unshare command is not installed",
    ]
    assert outside.read_text() == "uncontained"


def test_a_contained_child_builds_kernels_in_its_own_folder_and_reuses_the_shared_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PRAGMA_CACHE_DIR", str(tmp_path / "cache"))
    from pragma_core.native import build_library

    shared_source = 'extern "C" int answer() { return 42; }\n'
    shared = build_library(shared_source)  # built by the parent, into the shared cache
    build_dir = tmp_path / "build"
    env = {**child_environment(1), **build_environment(build_dir)}
    code = f"""
        import ctypes, tempfile
        from pragma_core.native import build_library
        shared = build_library({shared_source!r})
        own = build_library('extern "C" int own() {{ return 7; }}\\n')
        print(shared, own, ctypes.CDLL(str(own)).own(), tempfile.gettempdir(), sep="\\n")
    """
    outcome = run(tmp_path, code, env=env, writable=[build_dir])
    assert outcome.returncode == 0, outcome.stderr
    reported_shared, own, value, temporary = outcome.stdout.split()
    assert Path(reported_shared) == shared and value == "7"
    assert Path(own).parent == build_dir / "native" and Path(temporary) == build_dir / "tmp"
    assert sorted(path.name for path in cache_dir().glob("*.so")) == [shared.name]


def test_a_tool_given_writable_folders_runs_contained_with_a_temporary_folder_there(tmp_path):
    from pragma_core.errors import ProfilerUnavailable
    from pragma_core.sandbox.tools import run_tool

    out = tmp_path / "out"
    out.mkdir()
    script = f'echo "$TMPDIR"; echo x > {out}/kept && echo wrote; echo x > {tmp_path}/outside || echo refused'
    env = {"PATH": os.environ["PATH"]}
    run = run_tool(["sh", "-c", script], tool="sh", env=env, timeout_s=30, writable=[out])
    temporary, wrote, refused = run.stdout_tail.split()
    assert run.ok and run.contained and run.notes == ()
    assert Path(temporary).parent == out and not Path(temporary).exists()  # removed after the run
    assert (wrote, refused) == ("wrote", "refused") and (out / "kept").exists() and not (tmp_path / "outside").exists()
    with pytest.raises(ProfilerUnavailable, match="no-such-profiler"):
        run_tool(["no-such-profiler"], tool="no-such-profiler", env=env, timeout_s=5, writable=[out])
