"""The whole loop with scripted model replies (litellm's mock_response, written as a model would
answer) and the real compile, verify and profile on the CPU."""

from __future__ import annotations

import json
from pathlib import Path

import litellm
import pytest

from pragma_core import LLMProvider, load_task
from pragma_core.optimizer import OptimizeSettings, optimize
from pragma_core.plugins import get_registry
from pragma_core.providers.litellm_provider import LiteLLMProvider, LiteLLMSettings
from pragma_core.reports import trace_text
from pragma_core.run_directory import RunDirectory
from pragma_core.verifier import VerifySettings

from .conftest import EXAMPLES

SECRET = "sk-test-0123456789abcdefghijklmnopqrstuv"
GELU = EXAMPLES / "level1" / "1_GELUTanh.py"
FAST = (EXAMPLES.parent / "candidates" / "1_GELUTanh_fast.py").read_text()
SLOW = (Path(__file__).parent / "candidates" / "gelu_correct_slow.py").read_text()
BROKEN = (Path(__file__).parent / "candidates" / "gelu_compile_error.py").read_text()


def coder(code: str, prose: str = "Here is the kernel.") -> str:
    return f"{prose}\n\n```python\n{code}```\n\nIt keeps the reference's signature."


def conductor(analysis: str, actions: list[str], new_best: bool = False) -> str:
    return "```json\n" + json.dumps({"analysis": analysis, "actions": actions, "extra_metrics": [],
                                     "new_best": new_best}) + "\n```"


SCRIPT = [
    coder(BROKEN),                                                          # 1: compile error
    conductor("undefined_scale is not declared", ["declare the constant or drop it"]),
    "litellm.RateLimitError",                                               # transient: retried
    coder(SLOW, "Fixed: no undefined symbol."),                             # 2: correct but slow
    conductor("correct but pow() in double on one thread", ["use float math and OpenMP"]),
    coder(FAST, "Vectorized with expf."),                                   # 3: faster
    "Sure! I think it is memory bound.",                                    # unparseable ...
    "still not JSON",                                                       # ... and after repair
    "I am not sure what to change, sorry.",                                 # 4: no code at all
    conductor("the reply held no code", ["resend the whole module"]),
]


@pytest.fixture
def scripted(monkeypatch, tmp_path):
    """A provider named 'scripted' that answers each litellm call with the next reply of SCRIPT."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("PRAGMA_CACHE_DIR", str(tmp_path / "cache"))
    replies = list(SCRIPT)
    calls = []

    def completion(**kwargs):
        reply = replies.pop(0)
        calls.append(reply)
        return litellm.completion(mock_response=reply, **kwargs)

    provider = LiteLLMProvider(LiteLLMSettings(max_retries=2), completion=completion, sleep=lambda s: None)
    registry = get_registry()
    registry.llm_providers()
    monkeypatch.setitem(registry._components["llm_providers"], "scripted",
                        LLMProvider(name="scripted", description="test script", complete=provider.complete))
    return calls


def settings(tmp_path: Path, max_attempts: int) -> OptimizeSettings:
    return OptimizeSettings(model="openai/gpt-4o-mini", provider="scripted", max_attempts=max_attempts,
                            profilers=("valgrind",), runs_dir=tmp_path / "runs", patience=10,
                            verify=VerifySettings(reps=10, warmup=1, threads=1, timeout_s=120))


def test_compile_error_fix_slow_then_fast(scripted, tmp_path):
    task = load_task(GELU, {"batch_size": 16, "dim": 1024})
    result = optimize(task, settings(tmp_path, 4))
    statuses = [a.verdict.status.value for a in result.attempts]
    assert statuses == ["compile_error", "correct", "correct", "compile_error"]
    assert result.best_attempt == 3 and result.best.verdict.speedup.low > result.attempts[1].verdict.speedup.high
    assert "RateLimitError" not in str(result)  # retried, not an attempt
    assert "litellm.RateLimitError" in scripted
    assert result.attempts[1].profile.profiler == "valgrind"
    assert result.attempts[2].guidance.analysis.startswith("the Conductor's reply could not be read")
    assert "no Python module defining class ModelNew" in result.attempts[3].verdict.message
    assert all(a.usage.prompt > 0 for a in result.attempts)

    run = RunDirectory(tmp_path / "runs" / result.run_id)
    assert run.best().number == 3 and (run.root / "best" / "candidate.py").read_text().strip() == FAST.strip()
    assert (run.attempt_folder(1) / "coder_reply.txt").exists() and (run.attempt_folder(3) / "conductor_note.txt").exists()
    events = run.events()
    assert events[-1]["event"] == "finished"
    baseline = next(e for e in events if e["event"] == "baseline")
    assert baseline["floor_ms"] > 0 and "cachegrind needs the native fast path" in baseline["skipped"]["valgrind"]
    assert (run.root / "baseline" / "roofline.json").exists()
    for path in run.root.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".txt", ".py", ".jsonl"):
            assert SECRET not in path.read_text(errors="replace"), path
    trace = trace_text(run.task(), run.completed_attempts())
    assert "historical best: #2" in trace and "action: use float math and OpenMP" in trace


def test_resume_continues_after_the_last_complete_attempt(scripted, tmp_path):
    task = load_task(GELU, {"batch_size": 16, "dim": 1024})
    first = optimize(task, settings(tmp_path, 2))
    run_dir = tmp_path / "runs" / first.run_id
    (run_dir / ".attempt-03.partial").mkdir()  # what a kill -9 mid-attempt leaves
    resumed = optimize(None, settings(tmp_path, 3), resume=run_dir)
    assert [a.number for a in resumed.attempts] == [1, 2, 3]
    assert resumed.attempts[0] == first.attempts[0]
    assert resumed.best_attempt == 3
    assert not (run_dir / ".attempt-03.partial").exists()
