"""What a model that stops answering, or a context window too small, does to a run: the run stops
with its finished attempts kept, says how to continue, and resumes where it stopped; prompts are
fitted to the window and say what gave way. Model replies are scripted (litellm's
``mock_response``, tests/scripted_model.py); everything else is the real loop."""

from __future__ import annotations

import json

import attrs
import pytest

from pragma_core.cli import main
from pragma_core.loop.optimizer import optimize
from pragma_core.loop.run_directory import RunDirectory
from pragma_core.tasks.loading import load_task

from .test_optimizer import FAST, GELU, SLOW, coder, conductor, scripted, settings  # noqa: F401 (fixture)


def unprofiled(tmp_path, max_attempts: int):
    return attrs.evolve(settings(tmp_path, max_attempts), profile=False)


DOWN = ["litellm.InternalServerError"] * 3  # a server failing on its side, three times: the retries are spent


def test_a_model_that_stops_answering_stops_the_run_and_resume_continues(scripted, tmp_path, capsys):  # noqa: F811
    script = scripted(
        [coder(SLOW), *DOWN, coder(FAST)],
        [conductor("correct but slow", ["vectorize"]), conductor("faster", ["unroll"])],
    )
    runs = tmp_path / "runs"
    arguments = ["optimize", str(GELU), "--set", "batch_size=16", "--set", "dim=1024", "--model", "openai/gpt-4o-mini"]
    arguments += ["--provider", "scripted", "--max-attempts", "2", "--reps", "10", "--no-profile"]
    arguments += ["--threads", "1", "--runs-dir", str(runs)]
    with pytest.raises(SystemExit) as ended:
        main(arguments)
    said = capsys.readouterr().err
    assert ended.value.code == 2
    (folder,) = list(runs.iterdir())
    assert "InternalServerError" in said and f"continue with: pragma optimize --resume {folder}" in said
    run = RunDirectory(folder)
    stop = [event for event in run.events() if event["event"] == "interrupted"][-1]
    assert stop["by"] == "provider" and stop["attempt"] == 2 and "failed 3 times" in stop["reason"]
    assert [a["number"] for a in json.loads((folder / "summary.json").read_text())["attempts"]] == [1]

    resumed = optimize(None, unprofiled(tmp_path, 2), resume=folder)
    assert [a.number for a in resumed.attempts] == [1, 2]
    assert resumed.attempts[1].candidate is not None and resumed.attempts[1].candidate.source.strip() == FAST.strip()
    assert script.with_name("script.coder.count").read_text() == "5"


def test_prompts_are_fitted_to_a_small_window_and_say_what_gave_way(scripted, tmp_path, monkeypatch):  # noqa: F811
    scripted([coder(SLOW)], [conductor("correct but slow", ["vectorize"])])
    monkeypatch.setenv("PRAGMA_CONTEXT_WINDOW", "2000")  # the first Coder prompt takes ~1,800 tokens whole
    task = load_task(GELU, {"batch_size": 16, "dim": 1024})
    result = optimize(task, unprofiled(tmp_path, 1))
    folder = RunDirectory(tmp_path / "runs" / result.run_id).attempt_folder(1)
    prompt = (folder / "coder_prompt.txt").read_text()
    fitted = "### pragma\nfitted to 1,500 tokens (2,000-token context window from PRAGMA_CONTEXT_WINDOW"
    assert prompt.startswith(fitted)
    assert "the backend's guide beyond 1,500 characters" in prompt.splitlines()[1]
    assert result.attempts[0].verdict.status.value == "correct"


def test_a_window_no_prompt_fits_ends_the_run_saying_so(scripted, tmp_path, monkeypatch):  # noqa: F811
    scripted([coder(SLOW)], [conductor("never asked", [])])
    monkeypatch.setenv("PRAGMA_CONTEXT_WINDOW", "600")
    task = load_task(GELU, {"batch_size": 16, "dim": 1024})
    result = optimize(task, unprofiled(tmp_path, 2))
    assert result.attempts == ()
    assert result.stop_reason.startswith("the Coder's prompt needs ")
    assert "but the model takes 344" in result.stop_reason  # 600 less 256 kept for the reply
