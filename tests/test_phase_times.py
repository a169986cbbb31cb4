"""Seconds per phase of every attempt: measured by the loop, kept in the attempt's record, the events,
the summaries and `pragma trace`; runs written before phases were measured still load and resume."""

from __future__ import annotations

import json
import shutil

import pytest

from pragma_core import Attempt, RunResult, Timing, Verdict, load_task, read_record
from pragma_core.cli import main
from pragma_core.errors import RecordError
from pragma_core.loop.optimizer import optimize
from pragma_core.loop.run_directory import RunDirectory
from pragma_core.loop.run_summary import run_summary, trace_document
from pragma_core.loop.settings import OptimizeSettings, settings_of_run
from pragma_core.present.tables import trace_text
from pragma_core.serialization import dump, load
from pragma_core.verifier import VerifySettings

from .conftest import EXAMPLES

# One xdist worker runs the whole module (`make test-core`: --dist loadgroup): the one-attempt run of
# the module's fixture `one_attempt` is then made once, not once per worker.
pytestmark = pytest.mark.xdist_group("phase_times")

PHASES = {"writing", "building", "verifying", "timing", "finishing", "profiling:valgrind", "diagnosing", "advising"}


@pytest.fixture(scope="module")
def one_attempt(tmp_path_factory) -> tuple[RunResult, RunDirectory]:
    """A one-attempt offline run of a small GELU with the real verifier and cachegrind."""
    task = load_task(EXAMPLES / "level1" / "1_GELUTanh.py", {"batch_size": 16, "dim": 1024})
    settings = OptimizeSettings(
        provider="offline",
        max_attempts=1,
        profilers=("valgrind",),
        runs_dir=tmp_path_factory.mktemp("phases") / "runs",
        verify=VerifySettings(reps=10, warmup=1, threads=1),
    )
    result = optimize(task, settings)
    return result, RunDirectory(settings.runs_dir / result.run_id)


def test_an_attempt_keeps_its_seconds_per_phase_everywhere(one_attempt, capsys):
    result, run = one_attempt
    (attempt,) = result.attempts
    assert attempt.verdict.ok
    assert set(attempt.phase_seconds) == PHASES
    # the phases cover the attempt: only the attempt_started event lies outside them
    assert sum(attempt.phase_seconds.values()) <= attempt.elapsed_s < sum(attempt.phase_seconds.values()) + 0.5
    samples = [*attempt.verdict.reference.samples_ms, *attempt.verdict.candidate.samples_ms]
    assert attempt.timed_s == pytest.approx(sum(samples) / 1000) and attempt.timed_s > 0
    assert attempt.timed_s < attempt.phase_seconds["timing"]  # the timed calls run inside timing

    assert run.completed_attempts() == [attempt]  # the record on disk holds the same seconds
    assert read_record(run.root / "summary.json", RunResult).attempts[0].phase_seconds == attempt.phase_seconds
    events = {event["event"]: event for event in run.events()}
    done = events["attempt_done"]
    assert done["phase_seconds"] == {name: round(seconds, 3) for name, seconds in attempt.phase_seconds.items()}
    assert done["elapsed_s"] == round(attempt.elapsed_s, 3) and done["timed_s"] == round(attempt.timed_s, 3)
    baseline = events["baseline"]
    assert set(baseline["phase_seconds"]) == {"roofline", "profiling:valgrind", "timing"}
    assert baseline["seconds"] == pytest.approx(sum(baseline["phase_seconds"].values()), abs=0.003)

    summary = run_summary(result, run_dir=run.root, model=None, provider="offline")
    assert summary["phase_seconds"] == done["phase_seconds"] and summary["timed_s"] == done["timed_s"]
    row = json.loads(json.dumps(trace_document(result.run_id, result.task.key, run.baseline(), [attempt])))
    assert row["attempts"][0]["phase_seconds"] == attempt.phase_seconds
    assert row["attempts"][0]["timed_s"] == attempt.timed_s

    main(["trace", str(run.root)])
    lines = capsys.readouterr().out.splitlines()
    header = lines.index("seconds per phase (timed: the timed calls inside timing; overhead: total - timed)")
    assert lines[header + 1].split() == [
        "#",
        "write",
        "build",
        "verify",
        "timing",
        "finish",
        "valgrind",
        "diagnose",
        "advise",
        "total",
        "timed",
        "overhead",
    ]
    seconds = attempt.phase_seconds
    overhead = attempt.elapsed_s - attempt.timed_s
    assert lines[header + 2].split() == [
        "1",
        *(
            f"{seconds[name]:.2f}"
            for name in ("writing", "building", "verifying", "timing", "finishing", "profiling:valgrind")
        ),
        f"{seconds['diagnosing']:.2f}",
        f"{seconds['advising']:.2f}",
        f"{attempt.elapsed_s:.2f}",
        f"{attempt.timed_s:.2f}",
        f"{overhead:.2f}",
    ]
    assert max(len(line) for line in lines[header:]) <= 100


@pytest.mark.slow
def test_a_run_from_before_phase_times_still_loads_and_resumes(one_attempt, tmp_path):
    _, original = one_attempt
    old = tmp_path / "runs" / original.root.name
    shutil.copytree(original.root, old)
    for path in (old / "attempt-01" / "attempt.json", old / "best" / "attempt.json"):
        record = json.loads(path.read_text())
        del record["phase_seconds"]
        path.write_text(json.dumps(record))

    result = optimize(None, settings_of_run(old, max_attempts=2, profile=False), resume=old)
    first, second = result.attempts
    assert first.phase_seconds == {} and first.elapsed_s > 0
    assert set(second.phase_seconds) == PHASES - {"profiling:valgrind"}
    run = RunDirectory(old)
    assert run.completed_attempts() == [first, second]
    summary = run_summary(result, run_dir=old, model=None, provider="offline")
    assert summary["phase_seconds"] == {name: round(value, 3) for name, value in second.phase_seconds.items()}
    lines = trace_text(run.task(), run.completed_attempts(), run.baseline()).splitlines()
    header = lines.index("seconds per phase (timed: the timed calls inside timing; overhead: total - timed)")
    cells = lines[header + 2].split()
    count = len(second.phase_seconds)  # a column per phase any attempt measured
    assert cells[0] == "1" and cells[1 : count + 1] == ["-"] * count and cells[count + 1] == f"{first.elapsed_s:.2f}"
    assert "-" not in lines[header + 3].split()


def test_phase_seconds_round_trip_and_must_be_finite_and_non_negative():
    verdict = Verdict(
        status="correct",
        message="ok",
        reference=Timing(median_ms=2.0, iqr_ms=0.0, samples_ms=(2.0, 2.0)),
        candidate=Timing(median_ms=1.0, iqr_ms=0.0, samples_ms=(1.0, 1.0)),
        compiled_reference=Timing(median_ms=1.5, iqr_ms=0.0, samples_ms=(1.5,)),
    )
    attempt = Attempt(number=1, verdict=verdict, phase_seconds={"writing": 0.25, "profiling:perf": 1.5}, elapsed_s=2)
    assert load(Attempt, json.loads(json.dumps(dump(attempt)))) == attempt
    assert attempt.timed_s == pytest.approx(0.0075)  # every timed call of all three, in seconds
    assert Attempt(number=2).timed_s == 0.0
    for bad in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="phase_seconds"):
            Attempt(number=1, phase_seconds={"writing": bad})
    with pytest.raises(RecordError, match="phase_seconds"):
        load(Attempt, {**dump(attempt), "phase_seconds": {"writing": -1.0}})
