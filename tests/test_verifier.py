"""The Verifier on hand-written candidates: each gets its expected status and, when rejected, the
integrity check that caught it. Honest but unusual candidates must pass."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import attrs
import pytest

from pragma_core import Candidate, VerdictStatus, load_task
from pragma_core.verifier import VerifySettings, judgement, timing, verification, verify

from .conftest import EXAMPLES, REPO

CANDIDATES = Path(__file__).parent / "candidates"
GELU = EXAMPLES / "level1" / "1_GELUTanh.py"
SMALL = {"batch_size": 32, "dim": 1024}
QUICK = VerifySettings(reps=20, warmup=1, timeout_s=120, threads=2)


FAST_GELU = EXAMPLES.parent / "candidates" / "1_GELUTanh_fast.py"


def check(candidate: str, task: Path = GELU, sizes=None, settings: VerifySettings = QUICK):
    task_record = load_task(task, SMALL if sizes is None and task == GELU else sizes)
    path = FAST_GELU if candidate == "gelu_correct_fast" else CANDIDATES / f"{candidate}.py"
    source = path.read_text()
    return verify(task_record, Candidate(source=source, backend="cpu-cpp"), settings)


# -- plain outcomes -------------------------------------------------------------------------------


@pytest.mark.serial
def test_correct_fast_candidate_is_timed_with_a_speedup_interval():
    verdict = check("gelu_correct_fast")
    assert verdict.status is VerdictStatus.CORRECT, verdict.message
    assert verdict.speedup.low <= verdict.speedup.value <= verdict.speedup.high
    assert len(verdict.reference.samples_ms) == len(verdict.candidate.samples_ms) == QUICK.reps
    assert verdict.max_abs_error < 1e-4
    assert verdict.floor_ms > 0 and 0 < verdict.attainment


def test_correct_slow_candidate_is_correct():
    verdict = check("gelu_correct_slow")
    assert verdict.status is VerdictStatus.CORRECT, verdict.message


def test_wrong_values_report_the_worst_error_and_where():
    verdict = check("gelu_wrong_values")
    assert verdict.status is VerdictStatus.WRONG_OUTPUT
    assert verdict.failing_trial == 0 and verdict.max_abs_error > 1e-4
    assert len(verdict.error_index) == 2 and "differ beyond atol=0.0001" in verdict.message


def test_wrong_shape():
    verdict = check("gelu_wrong_shape")
    assert verdict.status is VerdictStatus.WRONG_OUTPUT
    assert "has shape (32768,); the reference has (32, 1024)" in verdict.message


def test_compile_error_carries_the_compiler_diagnostic():
    verdict = check("gelu_compile_error")
    assert verdict.status is VerdictStatus.COMPILE_ERROR
    assert "undefined_scale" in verdict.message
    assert any("kernel.cpp:5" in text for text in verdict.diagnostics)


def test_python_syntax_error_is_a_compile_error():
    task = load_task(GELU, SMALL)
    verdict = verify(task, "class ModelNew(:\n", QUICK)
    assert verdict.status is VerdictStatus.COMPILE_ERROR and "candidate.py:1" in verdict.message


def test_segfault_is_a_crash_named_by_its_signal():
    verdict = check("gelu_segfault")
    assert verdict.status is VerdictStatus.CRASHED
    assert "SIGSEGV" in verdict.message and "trial 0" in verdict.message


def test_infinite_loop_is_a_timeout_and_the_caller_survives():
    settings = VerifySettings(reps=5, warmup=1, timeout_s=8, threads=2)
    verdict = check("gelu_infinite_loop", settings=settings)
    assert verdict.status is VerdictStatus.TIMEOUT
    assert "no result within 8 s" in verdict.message


HANG_FLOOR_S = 4.0
"""The least time a forward may take, for the hang below: the 20 s default's mechanism, waited out
in a fifth of the time."""


def test_by_default_a_hang_ends_after_a_multiple_of_the_reference_time_not_minutes(monkeypatch):
    """No --timeout: the limit follows the work (100x the reference's forward, at least a floor,
    20 s by default)."""
    import time

    from pragma_core.verifier import settings as verify_settings

    defaults = VerifySettings(reps=5, warmup=1, threads=2)
    assert defaults.forward_limit_s(1.0) == verify_settings.FORWARD_LIMIT_FLOOR_S == 20.0
    assert defaults.forward_limit_s(1000.0) == 100.0  # a 1 s reference: 100 times its time
    for module in (verify_settings, verification):
        monkeypatch.setattr(module, "FORWARD_LIMIT_FLOOR_S", HANG_FLOOR_S)
    started = time.monotonic()
    verdict = check("gelu_infinite_loop", settings=defaults)
    elapsed = time.monotonic() - started
    assert verdict.status is VerdictStatus.TIMEOUT, verdict.message
    assert f"no answer within {HANG_FLOOR_S:g} s (while trial 0)" in verdict.message
    assert "times the reference's" in verdict.message
    assert any(note.startswith(f"time limit: {HANG_FLOOR_S:g} s per forward") for note in verdict.notes), verdict.notes
    assert elapsed < 45


def test_memory_hog_is_out_of_memory():
    settings = VerifySettings(reps=5, warmup=1, timeout_s=60, memory_gb=6, threads=2)
    verdict = check("gelu_memory_hog", settings=settings)
    assert verdict.status is VerdictStatus.OUT_OF_MEMORY
    assert "limit 6 GiB" in verdict.message


def test_reaching_for_the_network_is_rejected_before_and_while_it_runs():
    """``socket`` in the source is rejected before anything runs; a reach through a library the
    static rules let by (torch.hub) is caught by the audit hook, named with the candidate's line."""
    verdict = check("probe_network")
    assert verdict.failed_check == "forbidden-construct", verdict.message
    through_hub = (CANDIDATES / "probe_network.py").read_text().split("import socket")[0] + (
        "try:\n"
        "    torch.hub.load_state_dict_from_url('http://192.0.2.1/weights.pt', progress=False)\n"
        "except Exception:\n"
        "    pass\n"
        "class ModelNew(nn.Module):\n"
        "    def forward(self, x):\n"
        "        out = torch.empty_like(x)\n"
        "        lib.gelu_tanh(x, out, x.numel())\n"
        "        return out\n"
    )
    verdict = verify(load_task(GELU, SMALL), through_hub, QUICK)
    assert verdict.failed_check == "sandbox-escape", verdict.message
    assert "candidate.py line" in verdict.message


# -- integrity checks -----------------------------------------------------------------------------
# One cheating candidate (or more) per check runs in the audit (tests/test_audit.py); these tests
# cover what the audit does not: the examples' own candidates, the files a cheat must leave alone.


def test_inexact_matmul_is_caught_by_the_exact_integer_probe():
    sizes = {"M": 64, "K": 128, "N": 32}
    assert check("matmul_correct_tiled", EXAMPLES / "level1" / "10_Matmul.py", sizes).ok
    verdict = check("cheat_matmul_inexact", EXAMPLES / "level1" / "10_Matmul.py", sizes)
    assert verdict.failed_check == "exact-arithmetic-probe", verdict.message


def test_forged_stdout_is_never_read():
    verdict = check("cheat_forged_output")
    assert verdict.status is VerdictStatus.WRONG_OUTPUT


def test_editing_the_task_file_is_a_sandbox_escape_and_the_file_stays(tmp_path):
    task_file = tmp_path / "1_GELUTanh.py"
    shutil.copy(GELU, task_file)
    source = FAST_GELU.read_text() + (
        f"\nwith open({str(task_file)!r}, 'a') as handle:\n    handle.write('# touched\\n')\n"
    )
    verdict = verify(load_task(task_file, SMALL), source, QUICK)
    assert verdict.failed_check == "sandbox-escape", verdict.message
    assert str(task_file) in verdict.message
    assert task_file.read_text() == GELU.read_text()


def test_a_child_clock_that_reads_less_than_the_parents_is_forged_timing(monkeypatch):
    """The backstop behind the harness-patched check: readings a tenth of what the parent's clock
    saw around each call are rejected, and only after more calls confirmed it (scheduling delay on
    a busy machine comes and goes; a forged clock disagrees on every call)."""
    read = timing._number

    def forged(message, key):
        value = read(message, key)
        return value * 0.1 if message.event == "called" else value

    monkeypatch.setattr(timing, "_number", forged)
    verdict = check("gelu_correct_fast", sizes={"batch_size": 256, "dim": 16384})  # calls of milliseconds
    assert verdict.failed_check == "forged-timing", verdict.message
    assert "never less than" in verdict.message
    assert any("more were timed before judging" in note for note in verdict.notes)


def test_a_machine_that_slows_every_round_trip_after_the_calibration_is_no_forged_clock(monkeypatch):
    """A parent that waits 2 ms for a CPU on every request once the timing began (a hypervisor
    taking the machine's CPUs after the dozen idle round trips were measured): every call's gap
    exceeds that calibration by more than the allowance, but not the idle trips asked beside the
    calls, and an honest candidate stays correct."""
    from pragma_core.verifier._conversation import Conversation

    calibrate, ask = timing._TimedRepetitions._round_trips, Conversation.ask
    slowed = []

    def calibrated(self):
        trips = calibrate(self)
        slowed.append(True)
        return trips

    def slow_ask(self, op, expect, **fields):
        message = ask(self, op, expect, **fields)
        if slowed and op in ("call", "idle"):
            time.sleep(0.002)
        return message

    monkeypatch.setattr(timing._TimedRepetitions, "_round_trips", calibrated)
    monkeypatch.setattr(Conversation, "ask", slow_ask)
    verdict = check("gelu_correct_fast")
    assert verdict.status is VerdictStatus.CORRECT, verdict.message


@pytest.mark.serial  # the timing's own clock checks come first, and a neighbour's load can trip them
def test_a_time_below_the_roofline_floor_is_rejected(monkeypatch):
    monkeypatch.setattr(verification, "_floors", lambda task, settings, backend: judgement.Floors(1e6, 2e6))
    monkeypatch.setattr(judgement, "_floor_binds", lambda task: True)
    verdict = check("gelu_correct_fast")
    assert verdict.failed_check == "below-roofline", verdict.message


def test_a_verdict_gives_the_physical_floor_and_the_library_floor_beside_it():
    verdict = check("gelu_correct_fast")
    assert verdict.ok, verdict.message
    # torch's own copy cannot beat the machine's streaming peak: its floor is the higher one
    assert verdict.floor_ms is not None and verdict.library_floor_ms is not None
    assert 0 < verdict.floor_ms <= verdict.library_floor_ms


def test_the_dram_floor_is_not_enforced_when_the_data_stays_in_cache(monkeypatch):
    monkeypatch.setattr(verification, "_floors", lambda task, settings, backend: judgement.Floors(1e6, 2e6))
    verdict = check("gelu_correct_fast")  # small GELU: 256 KB of input and output
    assert verdict.status is VerdictStatus.CORRECT, verdict.message
    assert any("floor does not bound this timing" in note for note in verdict.notes)


def test_low_magnitude_task_gets_the_whole_output_check(tmp_path):
    """Outputs around 1e-6: zeros would pass atol=1e-4, so the preflight tightens the check."""
    task_file = tmp_path / "1_TinyScale.py"
    task_file.write_text(
        GELU.read_text().replace(
            'return nn.functional.gelu(x, approximate="tanh")',
            'return nn.functional.gelu(x, approximate="tanh") * 1e-6',
        )
        if 'return nn.functional.gelu(x, approximate="tanh")' in GELU.read_text()
        else ""
    )
    assert task_file.read_text(), "the GELU example changed; update this test"
    zeros = (
        (CANDIDATES / "cheat_unwritten_output.py")
        .read_text()
        .replace("lib_noop.touch(out, out.numel())", "lib_noop.touch(out, out.numel())\n        out.zero_()")
    )
    verdict = verify(load_task(task_file, SMALL), zeros, QUICK)
    assert verdict.status is VerdictStatus.WRONG_OUTPUT, verdict.message
    assert "whole-output" in verdict.message


# -- honest but unusual ---------------------------------------------------------------------------


def test_several_kernels_own_scratch_and_in_place_work_pass():
    verdict = check(
        "honest_layernorm_two_kernels", EXAMPLES / "level1" / "4_LayerNorm.py", {"batch_size": 16, "dim": 512}
    )
    assert verdict.status is VerdictStatus.CORRECT, verdict.message


# A pybind11 module taking tensors (load_extension) and a load_inline candidate, each a torch
# extension build of about a minute, are honest rows of the audit (tests/test_audit.py:
# honest_softmax_pybind11, honest_relu_load_inline): they are not built a second time here.


@pytest.mark.slow
def test_compile_baseline_times_torch_compile():
    settings = VerifySettings(reps=5, warmup=1, timeout_s=300, threads=2, baseline="compile")
    verdict = check("gelu_correct_fast", settings=settings)
    assert verdict.status is VerdictStatus.CORRECT, verdict.message
    assert verdict.compiled_reference is not None and verdict.speedup_vs_compiled is not None


# -- the command line -----------------------------------------------------------------------------


def test_cli_verify_prints_a_table_and_exit_codes(tmp_path, capsys):
    """``pragma verify`` as a shell runs it (a process of its own, a bare environment) prints the
    verdict's table and exits 0; a failing candidate exits 1 and bad input 2, read here from
    ``main`` (the same command, without a second and third process importing torch and checking
    the machine's peaks)."""
    from pragma_core.cli import main

    script = Path(sys.executable).with_name("pragma")
    sizes = ["--set", "batch_size=32", "--set", "dim=1024", "--reps", "5", "--warmup", "1"]
    env = {"PRAGMA_CACHE_DIR": os.environ["PRAGMA_CACHE_DIR"], "PATH": "/usr/bin:/bin"}  # the run's cache
    good = subprocess.run(
        [str(script), "verify", str(GELU), str(FAST_GELU), *sizes],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    assert good.returncode == 0, good.stderr
    assert "correct" in good.stdout and "speedup" in good.stdout

    def exit_code(*arguments: str) -> int:
        capsys.readouterr()
        try:
            main(["verify", str(GELU), *arguments])
        except SystemExit as exit:
            return int(exit.code or 0)
        return 0

    assert exit_code(str(CANDIDATES / "gelu_segfault.py"), *sizes, "--json") == 1
    assert '"status": "crashed"' in capsys.readouterr().out
    assert exit_code(str(tmp_path / "nope.py")) == 2
    assert capsys.readouterr().err.strip().endswith("nope.py: no such candidate file")


@pytest.mark.serial
def test_timing_stops_at_its_budget_after_ten_runs():
    settings = VerifySettings(reps=100_000, warmup=1, timeout_s=120, threads=2, timing_budget_s=0.5)
    verdict = check("gelu_correct_slow", settings=settings)
    assert verdict.status is VerdictStatus.CORRECT, verdict.message
    assert 10 <= len(verdict.candidate.samples_ms) < 100_000
    assert len(verdict.reference.samples_ms) == len(verdict.candidate.samples_ms)


def test_killing_pragma_verify_leaves_no_worker_and_no_job_folder(tmp_path):
    """kill -9 of `pragma verify` while its candidate spins: the worker and everything it started
    die with it at once, and the next verification sweeps the job folder it left."""
    import signal
    import time

    from pragma_core.sandbox.child_run import jobs_root

    from .test_sandbox import processes_with

    spinning = tmp_path / "spinning.py"
    spinning.write_text((CANDIDATES / "gelu_infinite_loop.py").read_text())
    cli = subprocess.Popen(
        [sys.executable, "-m", "pragma_core", "verify", str(GELU), str(spinning), "--set", "batch_size=4"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    folder_prefix = f"{jobs_root()}/{cli.pid}-"
    try:
        deadline = time.monotonic() + 90
        while not processes_with(folder_prefix) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert processes_with(folder_prefix), "the worker never started"
        time.sleep(3)  # the candidate is built and spinning by now
        cli.send_signal(signal.SIGKILL)
        cli.wait()
        deadline = time.monotonic() + 5
        while processes_with(folder_prefix) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes_with(folder_prefix) == []
    finally:
        cli.kill()
        cli.wait()
    left = [path for path in jobs_root().iterdir() if path.name.startswith(f"{cli.pid}-")]
    assert left, "a killed run cannot clean up after itself"
    check("gelu_correct_slow", settings=VerifySettings(trials=1, time=False, threads=1))
    assert not any(path.exists() for path in left)


def test_where_the_os_cannot_contain_the_child_an_edited_task_is_caught_and_restored(tmp_path):
    """Without unshare the child can write the task file: the parent's hashes see the change,
    reject the candidate, and put the user's task back as it was."""
    no_unshare = tmp_path / "bin"  # every program of /usr/bin but unshare
    no_unshare.mkdir()
    for program in Path("/usr/bin").iterdir():
        if program.name != "unshare":
            (no_unshare / program.name).symlink_to(program)
    task_file = tmp_path / "1_GELUTanh.py"
    shutil.copy(GELU, task_file)
    candidate = tmp_path / "edits_its_task.py"
    candidate.write_text(
        FAST_GELU.read_text() + f"\nwith open({str(task_file)!r}, 'a') as handle:\n    handle.write('# touched\\n')\n"
    )
    env = {**os.environ, "PATH": str(no_unshare)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pragma_core",
            "verify",
            str(task_file),
            str(candidate),
            "--set",
            "batch_size=4",
            "--no-timing",
            "--json",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    verdict = json.loads(done.stdout)
    assert verdict["failed_check"] == "harness-modified", verdict["message"]
    assert any("files not isolated" in note for note in verdict["notes"])
    assert task_file.read_text() == GELU.read_text()


@pytest.mark.serial
def test_timing_stops_once_the_interval_is_precise_enough_and_not_before_thirty_runs():
    loose = VerifySettings(reps=1000, warmup=1, timeout_s=120, threads=2, precision=0.95)
    verdict = check("gelu_correct_fast", settings=loose)
    assert verdict.ok and len(verdict.candidate.samples_ms) == 30, verdict.message
    every = VerifySettings(reps=40, warmup=1, timeout_s=120, threads=2, precision=0)
    assert len(check("gelu_correct_fast", settings=every).candidate.samples_ms) == 40


@pytest.mark.serial
def test_timing_stops_once_the_candidate_is_clearly_slower_than_the_best_to_beat():
    """A serial double-precision GELU against a best of 50x: ten repetitions show it cannot win."""
    settings = VerifySettings(reps=1000, warmup=1, timeout_s=120, threads=2, precision=0)
    task = load_task(GELU, SMALL)
    source = (CANDIDATES / "gelu_correct_slow.py").read_text()
    verdict = verify(task, Candidate(source=source, backend="cpu-cpp"), settings, to_beat=50.0)
    assert verdict.ok and verdict.speedup.high < 50.0, verdict.message
    assert len(verdict.candidate.samples_ms) == 10
    assert any("timing stopped after 10 repetitions" in note and "50x" in note for note in verdict.notes)
    cleared = verify(task, Candidate(source=source, backend="cpu-cpp"), attrs.evolve(settings, reps=25), to_beat=1e-6)
    assert len(cleared.candidate.samples_ms) == 25  # a bar it clears: the settings decide


def test_a_warm_child_serves_one_verification_and_one_that_does_not_fit_is_replaced():
    from pragma_core.verifier import WarmChild

    task = load_task(GELU, SMALL)
    source = FAST_GELU.read_text()
    with WarmChild(task, QUICK) as warm:
        rejected = verify(task, Candidate(source="import ctypes\n" + source, backend="cpu-cpp"), QUICK, warm=warm)
        assert rejected.status is VerdictStatus.REJECTED and warm.fits(task, QUICK)  # refused before it ran
        verdict = verify(task, Candidate(source=source, backend="cpu-cpp"), QUICK, warm=warm)
        assert verdict.ok, verdict.message
        assert warm.closed and not warm.folder.root.exists()
    other = load_task(GELU, {"batch_size": 16, "dim": 512})
    with WarmChild(task, QUICK) as warm:
        assert not warm.fits(other, QUICK) and not warm.fits(task, attrs.evolve(QUICK, memory_gb=4))
        verdict = verify(other, Candidate(source=source, backend="cpu-cpp"), QUICK, warm=warm)
        assert verdict.ok and warm.closed, verdict.message


def test_a_warm_child_needs_its_thread_count_decided():
    from pragma_core.verifier import WarmChild

    with pytest.raises(ValueError, match="with_threads"):
        WarmChild(load_task(GELU, SMALL), VerifySettings())


def test_timing_stops_after_thirty_runs_when_the_speedup_itself_is_not_above_the_bar():
    """A candidate near the bar: its interval reaches over it, but its own speedup does not."""
    from pragma_core.verifier.timing import _outrun

    reference = [10.0, 10.4, 9.6, 10.2, 9.8] * 6
    candidate = [5.0, 4.6, 5.6, 4.9, 5.3] * 6  # 2x, scattered: its interval reaches about 2.08x
    assert _outrun({"reference": reference[:10], "candidate": candidate[:10]}, 10, 2.05) == ""
    said = _outrun({"reference": reference, "candidate": candidate}, 30, 2.05)
    assert said.startswith("the speedup, 2") and "not above 2.05x" in said
    assert _outrun({"reference": reference, "candidate": candidate}, 30, 1.9) == ""  # above the bar: it may win
    assert "lies below 3x" in _outrun({"reference": reference, "candidate": candidate}, 10, 3.0)
    assert _outrun({"reference": reference, "candidate": candidate}, 30, None) == ""
