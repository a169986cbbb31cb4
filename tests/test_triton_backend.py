"""The triton backend on a machine with no GPU: checked under Triton's interpreter, never timed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pragma_core import load_task
from pragma_core.backends import DEFAULT_BACKEND, backend_for_source
from pragma_core.backends.gpu.clock import gpu_available
from pragma_core.errors import ProfilerUnavailable
from pragma_core.plugin_api.registry import get_registry
from pragma_core.profiling import profile
from pragma_core.records import Candidate, VerdictStatus
from pragma_core.testing import BackendPluginTests
from pragma_core.verifier import VerifySettings, verify

from .test_cli import run

pytest.importorskip("triton")

REPO = Path(__file__).resolve().parents[1]
GELU_TASK = REPO / "examples" / "tasks" / "level1" / "1_GELUTanh.py"
GELU_TRITON = REPO / "examples" / "candidates" / "triton" / "1_GELUTanh_triton.py"
CANDIDATES = Path(__file__).parent / "candidates" / "triton"
SMALL = {"batch_size": 4}

no_gpu = pytest.mark.skipif(not gpu_available(), reason="a GPU is here: Triton runs natively, not interpreted")


class TestTritonConformance(BackendPluginTests):
    backend_name = "triton"
    builtin = True
    task_path = GELU_TASK
    sizes = SMALL
    candidate_path = GELU_TRITON


@no_gpu
def test_a_correct_triton_candidate_is_correct_and_says_it_was_not_timed():
    candidate = Candidate(source=GELU_TRITON.read_text(), backend="triton")
    verdict = verify(load_task(GELU_TASK, SMALL), candidate)
    assert verdict.status is VerdictStatus.CORRECT, verdict.message
    assert verdict.speedup is None and verdict.candidate is None
    assert "not timed" in verdict.message
    assert any("interpreter" in note and note.startswith("not timed") for note in verdict.notes)


def test_a_triton_launch_beside_pytorch_compute_is_rejected():
    source = (CANDIDATES / "gelu_torch_after_launch.py").read_text()
    verdict = verify(
        load_task(GELU_TASK, SMALL), Candidate(source=source, backend="triton"), VerifySettings(time=False)
    )
    assert verdict.status is VerdictStatus.REJECTED
    assert verdict.failed_check == "torch-fallback", verdict.message


def test_a_kernel_that_does_not_build_fails_and_names_the_cause():
    source = (CANDIDATES / "relu_launch_error.py").read_text()
    verdict = verify(
        load_task(GELU_TASK, SMALL), Candidate(source=source, backend="triton"), VerifySettings(time=False)
    )
    assert verdict.status in (VerdictStatus.COMPILE_ERROR, VerdictStatus.RUNTIME_ERROR)
    assert "no_such_function" in verdict.message


def test_the_backend_of_a_candidate_is_read_from_its_source():
    registry = get_registry()
    assert backend_for_source(GELU_TRITON.read_text(), registry) == "triton"
    fast_path = (REPO / "examples" / "candidates" / "1_GELUTanh_fast.py").read_text()
    assert backend_for_source(fast_path, registry) == DEFAULT_BACKEND


@no_gpu
def test_pragma_verify_picks_triton_and_reports_the_untimed_verdict(capsys):
    code, out, err = run(capsys, "verify", str(GELU_TASK), str(GELU_TRITON), "--set", "batch_size=4", "--json")
    assert code == 0, err
    verdict = json.loads(out)
    assert verdict["status"] == "correct" and verdict["speedup"] is None
    assert any(note.startswith("not timed") for note in verdict["notes"])


def test_an_unknown_backend_is_bad_input(capsys):
    code, _out, err = run(capsys, "verify", str(GELU_TASK), str(GELU_TRITON), "--backend", "fpga")
    assert code == 2
    assert "--backend fpga: no such backend" in err and "triton" in err


@no_gpu
def test_an_interpreted_candidate_is_not_profiled(tmp_path):
    candidate = Candidate(source=GELU_TRITON.read_text(), backend="triton")
    with pytest.raises(ProfilerUnavailable, match="interpreter"):
        profile(load_task(GELU_TASK, SMALL), candidate, profiler="perf", out_dir=tmp_path)


@no_gpu
@pytest.mark.slow
def test_the_offline_loop_writes_triton_and_ends_correct_under_the_interpreter(tmp_path):
    from pragma_core.loop.optimizer import optimize
    from pragma_core.loop.settings import OptimizeSettings

    settings = OptimizeSettings(backend="triton", runs_dir=tmp_path, max_attempts=4)
    result = optimize(load_task(REPO / "examples" / "tasks" / "level1" / "3_Softmax.py", SMALL), settings)
    best = result.best
    assert best is not None and best.verdict is not None and best.candidate is not None
    assert best.verdict.ok and best.verdict.speedup is None
    assert "import triton" in best.candidate.source and "@triton.jit" in best.candidate.source
    assert result.stop_reason.startswith("correct; no later attempt")
    assert len(result.attempts) == 1
