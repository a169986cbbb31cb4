"""The whole loop with no model: `pragma optimize` falls back to the offline agents, says so, and
runs to a correct best with real verification and profiling."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pragma_core import RunResult, VerdictStatus, load_task, read_record
from pragma_core.loop.optimizer import optimize
from pragma_core.loop.run_directory import RunDirectory
from pragma_core.loop.settings import OptimizeSettings
from pragma_core.offline.modules import read_marker
from pragma_core.verifier import VerifySettings

from .conftest import EXAMPLES
from .offline_support import unknown_chain

PRAGMA = str(Path(sys.executable).with_name("pragma"))


def pragma(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRAGMA_") or k == "PRAGMA_CACHE_DIR"}
    return subprocess.run(
        [PRAGMA, *args], capture_output=True, text=True, cwd=cwd, timeout=900, env=env | {"COLUMNS": "200"}
    )


def trace(capsys, run_dir: Path, *args: str) -> str:
    """``pragma trace`` of a run folder, in this process (it reads records and runs nothing): its stdout."""
    from pragma_core.cli import main

    capsys.readouterr()
    main(["trace", str(run_dir), *args])  # returns when it succeeds (exits only on an error)
    return capsys.readouterr().out


@pytest.mark.slow
def test_optimize_without_a_model_runs_the_offline_agents(tmp_path, capsys):
    runs = tmp_path / "runs"
    done = pragma(
        "optimize",
        str(EXAMPLES / "level1" / "1_GELUTanh.py"),
        "--set",
        "batch_size=16",
        "--max-attempts",
        "4",
        "--reps",
        "10",
        "--threads",
        "1",
        "--profilers",
        "valgrind",
        "--runs-dir",
        str(runs),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "no model configured" in done.stderr and "offline agents" in done.stderr
    (run_dir,) = runs.iterdir()
    result = read_record(run_dir / "summary.json", RunResult)
    assert all(a.verdict.status is VerdictStatus.CORRECT for a in result.attempts)
    assert result.best is not None and result.best.number > 1  # a move made it faster
    first_actions = result.attempts[0].guidance.actions
    # attempt 1 is the family's starting shape (parallel, vectorized); cachegrind then finds tanh
    # called per element outside the kernel, so the first move is fast math
    first_knobs = read_marker(result.attempts[0].candidate.source)["knobs"]
    assert first_knobs["parallel"] is True and first_knobs["simd"] is True
    assert first_actions[0].startswith("set fast_math=true (from attempt 1)")
    shown = trace(capsys, run_dir)
    assert "kernel instructions per element" in shown and "action: set" in shown
    assert "baseline: reference" in shown
    document = json.loads(trace(capsys, run_dir, "--json"))
    assert [row["attempt"] for row in document["attempts"]] == [a.number for a in result.attempts]
    assert document["attempts"][0]["guidance"]["actions"] == list(first_actions)
    assert document["baseline"]["reference"]["median_ms"] > 0
    assert RunDirectory(run_dir).info()["settings"]["provider"] == "offline"
    # the prompt it records documents each metric from the compendium; the offline Conductor does
    # not read prose, so no search for related entries is made for it
    prompt = (RunDirectory(run_dir).attempt_folder(1) / "conductor_prompt.txt").read_text()
    assert "- D1 miss rate: D1 miss rate (valgrind). D1 miss rate = 100 * (D1mr + D1mw) / (Dr + Dw)" in prompt
    assert "From the profilers' documentation" not in prompt


@pytest.mark.slow
def test_a_task_written_outside_the_project_is_optimized_end_to_end(tmp_path):
    task_file = tmp_path / "kb" / "level1" / "77_ScaledSoftsignShift.py"
    task_file.parent.mkdir(parents=True)
    task_file.write_text(
        textwrap.dedent("""\
        import torch
        import torch.nn as nn


        class Model(nn.Module):
            def __init__(self, scale: float):
                super().__init__()
                self.scale = scale

            def forward(self, x):
                y = x * self.scale
                return y / (1 + torch.abs(y)) + 0.25


        batch_size = 32
        dim = 4096


        def get_inputs():
            return [torch.randn(batch_size, dim)]


        def get_init_inputs():
            return [1.5]
    """)
    )
    task = load_task(task_file)
    result = optimize(
        task,
        OptimizeSettings(
            max_attempts=3, profile=False, runs_dir=tmp_path / "runs", verify=VerifySettings(reps=10, warmup=1)
        ),
    )
    assert result.best is not None and result.best.verdict.status is VerdictStatus.CORRECT
    assert "elementwise chain (mul, abs, add, div, add)" in result.best.candidate.source


def test_a_task_no_recipe_knows_asks_for_a_model_and_writes_nothing(tmp_path):
    done = pragma("optimize", str(unknown_chain(tmp_path)), "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert "conv_then_sort" in done.stderr and "sort (sort)" in done.stderr and "--model" in done.stderr
    assert not (tmp_path / "runs").exists()


def test_the_provider_is_litellm_with_a_model_and_offline_without(monkeypatch):
    from pragma_core.loop.settings import provider_name

    monkeypatch.delenv("PRAGMA_MODEL", raising=False)
    assert provider_name(OptimizeSettings()) == "offline"
    assert provider_name(OptimizeSettings(model="ollama/qwen2.5-coder")) == "litellm"
    monkeypatch.setenv("PRAGMA_MODEL", "openai/gpt-4o-mini")
    assert provider_name(OptimizeSettings()) == "litellm"
    assert provider_name(OptimizeSettings(provider="offline")) == "offline"


def test_litellm_chosen_without_a_model_is_one_clear_line(tmp_path):
    done = pragma("optimize", str(EXAMPLES / "level1" / "1_GELUTanh.py"), "--provider", "litellm", cwd=tmp_path)
    assert done.returncode == 2 and "no language model chosen: pass --model" in done.stderr
