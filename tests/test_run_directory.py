"""The run directory: atomic attempts, the best, append-only events, reopening for resume."""

from __future__ import annotations

import json

import pytest

from pragma_core import Attempt, Candidate, RunResult, Verdict, load_task
from pragma_core.errors import PragmaError
from pragma_core.loop.run_directory import RunDirectory

from .conftest import EXAMPLES


@pytest.fixture
def run(tmp_path):
    task = load_task(EXAMPLES / "level1" / "1_GELUTanh.py", {"batch_size": 4, "dim": 8})
    return RunDirectory.create(tmp_path / "runs", task, {"model": "openai/gpt-4o-mini", "max_attempts": 3})


def attempt(number: int, status: str = "wrong_output") -> Attempt:
    return Attempt(
        number=number,
        candidate=Candidate(source=f"# attempt {number}\n", backend="cpu-cpp", attempt=number),
        verdict=Verdict(status=status, message="m"),
    )


def test_create_writes_settings_and_the_task_program(run):
    assert run.info()["model"] == "openai/gpt-4o-mini"
    assert "batch_size = 4" in (run.root / "task.py").read_text()
    assert run.task().sizes == {"batch_size": 4, "dim": 8}
    assert run.root.name.endswith("-1_GELUTanh")


def test_attempts_appear_only_when_complete(run):
    staging = run.staging_folder(1)
    (staging / "coder_reply.txt").write_text("half written")
    assert run.completed_attempts() == []  # a killed run leaves only a staging folder
    staging = run.staging_folder(1)  # the resumed run starts the attempt again
    run.complete_attempt(attempt(1), staging, {"candidate.py": "# attempt 1\n"})
    assert [a.number for a in run.completed_attempts()] == [1]
    assert (run.attempt_folder(1) / "candidate.py").read_text() == "# attempt 1\n"
    assert not staging.exists()


def test_best_is_replaced_whole(run):
    run.write_best(attempt(1, "correct"))
    run.write_best(attempt(2, "correct"))
    assert run.best().number == 2
    assert (run.root / "best" / "candidate.py").read_text() == "# attempt 2\n"
    assert sorted(p.name for p in run.root.iterdir() if p.name.startswith(".best")) == []


def test_events_are_appended_and_a_cut_line_is_skipped(run):
    run.append_event("attempt_started", attempt=1)
    with open(run.root / "events.jsonl", "a") as handle:
        handle.write('{"event": "cut')
    run.append_event("attempt_done", attempt=1, status="correct")
    assert [e["event"] for e in run.events()] == ["attempt_started", "attempt_done"]


def test_reopen_and_summary(run, tmp_path):
    run.complete_attempt(attempt(1), run.staging_folder(1), {})
    reopened = RunDirectory.open(run.root)
    assert [a.number for a in reopened.completed_attempts()] == [1]
    reopened.write_summary(RunResult(run_id=run.root.name, task=run.task(), attempts=reopened.completed_attempts()))
    assert json.loads((run.root / "summary.json").read_text())["record"] == "RunResult"
    with pytest.raises(PragmaError, match="not a pragma run directory"):
        RunDirectory.open(tmp_path)
