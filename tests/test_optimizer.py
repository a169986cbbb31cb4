"""The whole loop with scripted model replies (litellm's mock_response, written as a model would
answer) and the real compile, verify and profile on the CPU."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import attrs
import pytest

from pragma_core import RunResult, load_task, read_record
from pragma_core.cli import main
from pragma_core.loop.optimizer import optimize
from pragma_core.loop.run_directory import RunDirectory
from pragma_core.loop.run_summary import kernel_identity, run_summary, trace_document
from pragma_core.loop.settings import OptimizeSettings
from pragma_core.present.tables import trace_text
from pragma_core.verifier import VerifySettings

from .conftest import EXAMPLES
from .scripted_model import SCRIPT_VARIABLE

SECRET = "sk-test-0123456789abcdefghijklmnopqrstuv"
GELU = EXAMPLES / "level1" / "1_GELUTanh.py"
FAST = (EXAMPLES.parent / "candidates" / "1_GELUTanh_fast.py").read_text()
SLOW = (Path(__file__).parent / "candidates" / "gelu_correct_slow.py").read_text()
BROKEN = (Path(__file__).parent / "candidates" / "gelu_compile_error.py").read_text()
SCRIPTED_MODEL = Path(__file__).parent / "scripted_model.py"


def coder(code: str, prose: str = "Here is the kernel.") -> str:
    return f"{prose}\n\n```python\n{code}```\n\nIt keeps the reference's signature."


def conductor(analysis: str, actions: list[str], new_best: bool = False) -> str:
    return (
        "```json\n"
        + json.dumps({"analysis": analysis, "actions": actions, "extra_metrics": [], "new_best": new_best})
        + "\n```"
    )


CODER = [
    BROKEN_REPLY := coder(BROKEN),
    coder(SLOW, "Fixed: no undefined symbol."),
    coder(FAST, "Vectorized with expf."),
    NO_CODE := "I am not sure what to change, sorry.",
]
CONDUCTOR = [
    conductor("undefined_scale is not declared", ["declare the constant or drop it"]),
    "litellm.RateLimitError",  # transient: retried
    conductor(
        "correct but pow() in double on one thread; tma_backend_bound would tell more", ["use float math and OpenMP"]
    ),
    "Sure! I think it is memory bound.",  # unparseable ...
    "still not JSON",  # ... and after repair
    conductor("the reply held no code", ["resend the whole module"]),
]


def write_script(folder: Path, coder_replies: list, conductor_replies: list) -> Path:
    path = folder / "script.json"
    path.write_text(json.dumps({"coder": coder_replies, "conductor": conductor_replies}))
    return path


@pytest.fixture
def scripted(monkeypatch, tmp_path, plugin_site):
    """The test model (tests/scripted_model.py) installed as a plugin named 'scripted'; returns a
    function that writes its script."""
    plugin_site.add("scripted_model", SCRIPTED_MODEL.read_text(), entry_point="scripted")
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)

    def script(coder_replies: list, conductor_replies: list) -> Path:
        path = write_script(tmp_path, coder_replies, conductor_replies)
        monkeypatch.setenv(SCRIPT_VARIABLE, str(path))
        return path

    return script


FLAWED_PROFILERS = """
from pragma_core import Availability, Profiler, hookimpl


def collect(target, metrics):
    raise RuntimeError("the plugin's own bug")


def parse(raw):
    return []


@hookimpl
def pragma_register_profilers(register):
    register(Profiler(name="buggy", devices=("cpu",), probe=lambda: Availability(available=True),
                      default_metrics=("x",), collect=collect, parse=parse))
    register(Profiler(name="absent", devices=("cpu",), default_metrics=("x",), collect=collect, parse=parse,
                      probe=lambda: Availability(available=False, reason="its tool is not installed here")))
"""


def settings(tmp_path: Path, max_attempts: int) -> OptimizeSettings:
    return OptimizeSettings(
        model="openai/gpt-4o-mini",
        provider="scripted",
        max_attempts=max_attempts,
        profilers=("valgrind",),
        runs_dir=tmp_path / "runs",
        patience=10,
        verify=VerifySettings(reps=10, warmup=1, threads=1, timeout_s=120),
    )


@pytest.mark.serial
def test_compile_error_fix_slow_then_fast(scripted, plugin_site, tmp_path):
    """Also: a profiler plugin that raises is recorded with its traceback, one that cannot run here
    is left out and said, and the live status hears every phase of an attempt."""
    script = scripted(CODER, CONDUCTOR)
    plugin_site.add("flawed_profilers", FLAWED_PROFILERS)
    task = load_task(GELU, {"batch_size": 16, "dim": 1024})
    heard = []
    run_settings = attrs.evolve(settings(tmp_path, 4), profilers=("valgrind", "buggy", "absent"))
    result = optimize(task, run_settings, on_progress=heard.append)
    phases = [(p.attempt, p.phase, p.detail) for p in heard]
    assert phases[0] == (0, "baseline", "")
    second = [(phase, detail) for attempt, phase, detail in phases if attempt == 2]
    verification = [("building", ""), ("verifying", ""), ("timing", ""), ("finishing", "")]
    after = [("profiling", "valgrind"), ("profiling", "buggy"), ("diagnosing", ""), ("advising", "")]
    # a timing the noise check flagged (the VM's memory moving under the memory probe, say) is
    # measured once more, and the status hears that verification's phases again
    assert second in ([("writing", ""), *verification, *after], [("writing", ""), *verification * 2, *after])
    assert {p.run_dir for p in heard} == {tmp_path / "runs" / result.run_id}
    assert result.baseline.skipped["absent"] == "its tool is not installed here"
    assert "the buggy plugin failed (RuntimeError: the plugin's own bug)" in result.baseline.skipped["buggy"]
    bug = result.attempts[1].skipped["buggy"]
    assert bug.startswith("the buggy plugin failed (RuntimeError: the plugin's own bug); a bug in the plugin")
    assert "absent" not in result.attempts[1].skipped  # left out of the run, said once
    assert (
        "Traceback"
        in (
            RunDirectory(tmp_path / "runs" / result.run_id).attempt_folder(2) / "profile-buggy" / "plugin-error.txt"
        ).read_text()
    )
    statuses = [a.verdict.status.value for a in result.attempts]
    assert statuses == ["compile_error", "correct", "correct", "compile_error"], [
        a.verdict.message for a in result.attempts
    ]
    assert result.best_attempt == 3 and result.best.verdict.speedup.low > result.attempts[1].verdict.speedup.high
    assert "RateLimitError" not in str(result)  # retried, not an attempt
    assert script.with_name("script.conductor.count").read_text() == "6"  # the rate-limited call was retried
    assert [p.profiler for p in result.attempts[1].profiles] == ["valgrind"]
    assert result.attempts[2].guidance.analysis.startswith("the Conductor's reply could not be read")
    assert "no Python module defining class ModelNew" in result.attempts[3].verdict.message
    assert all(a.usage.prompt > 0 for a in result.attempts)

    run = RunDirectory(tmp_path / "runs" / result.run_id)
    assert run.best().number == 3 and (run.root / "best" / "candidate.py").read_text().strip() == FAST.strip()
    assert (run.attempt_folder(1) / "coder_reply.txt").exists() and (
        run.attempt_folder(3) / "conductor_note.txt"
    ).exists()
    events = run.events()
    assert events[-1]["event"] == "finished"
    assert any(e["event"] == "baseline" for e in events)
    assert result.baseline == run.baseline() and result.baseline.reference.median_ms > 0
    assert result.baseline.floor_ms > 0 and result.baseline.bound.value == "memory"
    assert "cachegrind needs the native fast path" in result.baseline.skipped["valgrind"]
    assert (run.root / "baseline" / "roofline.json").exists()
    for path in run.root.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".txt", ".py", ".jsonl"):
            assert SECRET not in path.read_text(errors="replace"), path
    second = (run.attempt_folder(2) / "conductor_prompt.txt").read_text()
    assert "D1 miss rate (valgrind)" in second and "https://valgrind.org/docs/manual/cg-manual.html" in second
    assert "From the profilers' documentation, on the diagnosed bottleneck" in second
    assert result.attempts[1].guidance.unmeasured_citations == ("tma_backend_bound",)
    third = (run.attempt_folder(3) / "conductor_prompt.txt").read_text()
    assert "Citation check: your previous reply cited tma_backend_bound" in third
    trace = trace_text(run.task(), run.completed_attempts(), run.baseline())
    assert "historical best: #2" in trace and "action: use float math and OpenMP" in trace
    assert "no absent profile of the reference: its tool is not installed here" in trace
    assert "no buggy profile: the buggy plugin failed (RuntimeError" in trace
    assert any(e["event"] == "profiler_unavailable" and e["profiler"] == "absent" for e in events)

    summary = run_summary(result, run_dir=run.root, model="openai/gpt-4o-mini", provider="scripted")
    assert summary["best_attempt"] == 3 and summary["attempts"] == 4 and summary["correct_attempts"] == 2
    speedup = result.best.verdict.speedup
    assert summary["speedup"] == {"value": speedup.value, "low": speedup.low, "high": speedup.high, "confidence": 0.95}
    assert summary["reference_ms"] == result.baseline.reference.median_ms and summary["bound"] == "memory"
    assert summary["best_candidate"] == str(run.root / "best" / "candidate.py")
    assert (
        summary["best_kernel"] == f"machine:{result.best.verdict.machine_code}" != kernel_identity(result.attempts[0])
    )
    assert set(summary["skipped_profilers"]) == {"valgrind", "buggy", "absent"}
    document = json.loads(json.dumps(trace_document(result.run_id, task.key, run.baseline(), list(result.attempts))))
    assert [row["best_before"] for row in document["attempts"]] == [None, None, 2, 3]
    assert [row["status"] for row in document["attempts"]] == statuses
    assert list(document["attempts"][1]["profiles"]) == ["valgrind"]


def _as_a_terminal_starts_it() -> None:
    """In the child before exec: Ctrl-C's default disposition, as a shell gives a foreground
    command (a test run started as a background job would pass SIGINT on ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def pragma_process(args: list[str], site: Path, tmp_path: Path) -> subprocess.Popen:
    """``pragma`` in a process of its own, with the test model installed from ``site``."""
    env = {**os.environ, "PYTHONPATH": str(site), "COLUMNS": "200"}
    return subprocess.Popen(
        [str(Path(sys.executable).with_name("pragma")), *args],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_as_a_terminal_starts_it,
    )


def wait_for(path: Path, process: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if process.poll() is not None:
            raise AssertionError(f"pragma ended early ({process.returncode}): {process.communicate()}")
        if time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            raise AssertionError(f"{path.name} did not appear in {timeout_s} s")
        time.sleep(0.2)


@pytest.mark.slow
def test_cli_run_killed_mid_attempt_resumes_without_losing_an_attempt(scripted, plugin_site, tmp_path, capsys):
    """The scripted run from the command line; SIGKILL while the Conductor thinks about attempt 3,
    then ``--resume`` in a new process finishes it."""
    hang = tmp_path / "conductor-is-thinking"
    scripted(CODER[:3] + CODER[2:], CONDUCTOR[:3] + [{"hang": str(hang)}] + CONDUCTOR[3:])
    runs = tmp_path / "runs"
    first = pragma_process(
        [
            "optimize",
            str(GELU),
            "--set",
            "batch_size=16",
            "--set",
            "dim=1024",
            "--provider",
            "scripted",
            "--model",
            "openai/gpt-4o-mini",
            "--max-attempts",
            "4",
            "--patience",
            "10",
            "--profilers",
            "valgrind",
            "--reps",
            "10",
            "--threads",
            "1",
            "--runs-dir",
            str(runs),
        ],
        plugin_site.root,
        tmp_path,
    )
    wait_for(hang, first, timeout_s=600)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    (run_dir,) = runs.iterdir()
    assert sorted(p.name for p in run_dir.iterdir() if "attempt" in p.name) == [
        ".attempt-03.partial",
        "attempt-01",
        "attempt-02",
    ]
    assert not (run_dir / "summary.json").exists()
    kept = {n: (run_dir / f"attempt-0{n}" / "attempt.json").read_bytes() for n in (1, 2)}

    resumed = pragma_process(
        ["optimize", "--resume", str(run_dir), "--provider", "scripted", "--json"], plugin_site.root, tmp_path
    )
    out, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err
    summary = json.loads(out)  # --json: stdout is the summary alone, progress went to stderr
    assert summary["run_dir"] == str(run_dir) and summary["best_attempt"] == 3
    assert summary["provider"] == "scripted" and summary["stop_reason"] == "max attempts"
    assert "attempt  4" in err
    assert f"pragma: resuming {run_dir} after attempt 2 (2 of 4 attempts left)" in err
    run = RunDirectory(run_dir)
    attempts = run.completed_attempts()
    assert [a.verdict.status.value for a in attempts] == ["compile_error", "correct", "correct", "compile_error"]
    assert {n: (run_dir / f"attempt-0{n}" / "attempt.json").read_bytes() for n in (1, 2)} == kept
    assert not list(run_dir.glob(".*partial")) and run.best().number == 3
    assert [e["event"] for e in run.events()].count("resumed") == 1
    assert read_record(run_dir / "summary.json", RunResult).stop_reason == "max attempts"
    assert "the reply held no code" in (run.attempt_folder(4) / "conductor_reply.txt").read_text()
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path

    capsys.readouterr()
    main(["trace", str(run_dir)])  # in this process: trace reads records and runs nothing
    assert "historical best: #2" in capsys.readouterr().out


@pytest.mark.slow
def test_prompt_tokens_stay_bounded_over_fifteen_attempts(scripted, tmp_path):
    """Attempt 15's prompts (Coder and Conductor, as the model counts them) are at most 1.5 times
    attempt 2's, though the history has grown by 13 attempts."""
    cycle = [coder(SLOW), coder(FAST), coder(BROKEN), NO_CODE]
    notes = [
        conductor(f"attempt note {n}: " + "the loop is scalar; " * 20, ["vectorize", "add OpenMP"]) for n in range(15)
    ]
    scripted([cycle[n % 4] for n in range(15)], notes)
    task = load_task(GELU, {"batch_size": 16, "dim": 1024})
    run_settings = attrs.evolve(
        settings(tmp_path, 15),
        profile=False,
        patience=15,
        verify=VerifySettings(reps=3, warmup=1, threads=1, timeout_s=120),
    )
    result = optimize(task, run_settings)
    prompts = [attempt.usage.prompt for attempt in result.attempts]
    assert len(prompts) == 15 and all(tokens > 500 for tokens in prompts)
    assert prompts[14] <= 1.5 * prompts[1], prompts


def test_ctrl_c_prints_the_command_that_continues_the_run(scripted, plugin_site, tmp_path):
    hang = tmp_path / "coder-is-writing"
    scripted([{"hang": str(hang)}], [])
    runs = tmp_path / "runs"
    args = ["optimize", str(GELU), "--set", "batch_size=16", "--provider", "scripted", "--model", "openai/gpt-4o-mini"]
    args += ["--profilers", "valgrind", "--reps", "10", "--threads", "1", "--runs-dir", str(runs)]
    process = pragma_process(args, plugin_site.root, tmp_path)
    wait_for(hang, process, timeout_s=300)
    process.send_signal(signal.SIGINT)  # what a terminal sends on Ctrl-C
    out, err = process.communicate(timeout=120)
    (run_dir,) = runs.iterdir()
    assert process.returncode == 130
    assert err.strip().splitlines()[-1] == (
        f"pragma: interrupted; completed attempts are saved. Continue with: pragma optimize --resume {run_dir}"
    )
    assert (run_dir / "baseline" / "baseline.json").exists() and (run_dir / "summary.json").exists()


@pytest.mark.serial
def test_a_timing_on_a_busy_machine_is_measured_again_and_said_noisy(scripted, tmp_path):
    from pragma_core.machine.load import synthetic_load

    scripted([coder(FAST)], [conductor("memory bound", ["keep it"])])
    cpus = len(os.sched_getaffinity(0))
    run_settings = attrs.evolve(
        settings(tmp_path, 1),
        profile=False,
        verify=VerifySettings(reps=60, warmup=1, threads=cpus, timeout_s=120, timing_budget_s=5, precision=0),
    )
    task = load_task(GELU, {"batch_size": 256, "dim": 4096})  # timing long enough to count CPU ticks
    with synthetic_load(cpus):
        result = optimize(task, run_settings)
    verdict = result.attempts[0].verdict
    assert verdict.ok and verdict.noisy, verdict.conditions
    assert any("measured twice: the first timing was noisy" in note for note in verdict.notes)
    run_dir = tmp_path / "runs" / result.run_id
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["attempt"] for e in events if e["event"] == "remeasuring"] == [1]
    assert result.best_attempt == 1  # the only correct version is kept, marked noisy
    assert "noisy" in trace_text(task, list(result.attempts))
    assert run_summary(result, run_dir=run_dir, model=None, provider="scripted")["noisy"] is True


def test_the_child_started_for_an_attempt_that_did_not_come_is_handed_over_and_verifies(tmp_path):
    """A caller that verifies again after the run (the bench's confirmation) gets a child started
    after the last attempt's timing, torch imported while the loop finished, and verifies in it."""
    from pragma_core.records import VerdictStatus
    from pragma_core.verifier import verify

    task = load_task(GELU, sizes={"batch_size": 16, "dim": 256})
    verify_settings = VerifySettings(reps=5, threads=1)
    settings = OptimizeSettings(max_attempts=1, profile=False, runs_dir=tmp_path / "runs", verify=verify_settings)
    children: list = []
    result = optimize(task, settings, on_leftover_child=children.append)
    (child,) = children
    assert not child.closed and child.session.process.running() and not child.session.begun
    confirming = VerifySettings(reps=5, threads=1, baseline="eager")
    assert child.fits(task, confirming)
    verdict = verify(task, result.best.candidate, confirming, warm=child)
    assert verdict.status is VerdictStatus.CORRECT, verdict.message
    assert child.closed and not child.folder.root.exists()  # used, then closed by verify
