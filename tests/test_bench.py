"""``pragma bench``, ``pragma report`` and ``pragma compare`` on the bundled examples, for real: the
offline agents (or a priced stand-in model) through the whole loop in worker processes, a bench
killed mid-way and resumed, and the same tasks through a local Ray instance."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pragma_core.bench.plan import BenchSettings, task_files
from pragma_core.bench.store import BenchStore, begin_variant
from pragma_core.errors import PragmaError

from .conftest import EXAMPLES

# Each test runs whole benches in worker processes that load both cores: run alone (serial), since
# a neighbouring test that times something would see a busy machine.
pytestmark = pytest.mark.serial

TASKS = ("2_LeakyReLU", "3_Softmax")
FAST = ("--max-attempts", "2", "--reps", "10", "--no-profile")


def bench(*arguments: str, check: bool = True, **options) -> subprocess.CompletedProcess:
    """``pragma bench`` in its own process, as a user runs it."""
    result = subprocess.run(
        [sys.executable, "-m", "pragma_core", *arguments], capture_output=True, text=True, timeout=900, **options
    )
    if check:
        assert result.returncode == 0, result.stderr[-3000:]
    return result


def only(*names: str) -> list[str]:
    return [part for name in names for part in ("--only", name)]


def rows(out: Path, variant: str = "unprofiled") -> dict:
    return json.loads((out / "bench.json").read_text())["variants"][variant]["tasks"]


@pytest.fixture(scope="module")
def local_bench(tmp_path_factory) -> Path:
    """Two example tasks, two workers, offline agents: the bench every check below reads."""
    out = tmp_path_factory.mktemp("bench") / "local"
    bench("bench", str(EXAMPLES), *only(*TASKS), *FAST, "--workers", "2", "--out", str(out))
    return out


def test_a_bench_writes_a_row_per_task_the_report_and_the_plots(local_bench):
    document = json.loads((local_bench / "bench.json").read_text())
    assert document["schema"] == 1 and document["tree"] == str(EXAMPLES.resolve())
    tasks = document["variants"]["unprofiled"]["tasks"]
    assert sorted(tasks) == [f"level1/{name}" for name in TASKS]
    for row in tasks.values():
        assert row["status"] == "finished" and row["category"] == "activation"
        assert row["attempts"] <= 2 and len(row["best_by_attempt"]) == row["attempts"]
        assert Path(row["run_dir"]).is_relative_to(local_bench / "runs" / "unprofiled")
        if row["correct"]:
            eager = row["speedup"]["eager"]
            assert eager["low"] <= eager["value"] <= eager["high"]
            assert (Path(row["run_dir"]) / "confirmation.json").is_file()
    overall = document["metrics"]["unprofiled"]["eager"]["all"]
    correct = sum(row["correct"] for row in tasks.values())
    assert overall["tasks"] == 2 and overall["correct"] == correct
    assert overall["fast_p"]["0"] == correct / 2
    report = (local_bench / "report.md").read_text()
    assert "| **all** | 2 |" in report and "level1/3_Softmax" in report
    for plot in ("speedup_by_category.png", "speedup_by_attempt.png"):
        assert (local_bench / "plots" / plot).read_bytes()[:4] == b"\x89PNG"


def test_running_a_finished_bench_again_redoes_nothing(local_bench):
    before = (local_bench / "bench.json").read_text()
    runs = sorted(path.name for path in (local_bench / "runs" / "unprofiled").glob("*/*"))
    again = bench("bench", str(EXAMPLES), *only(*TASKS), *FAST, "--out", str(local_bench))
    assert "2 of 2 tasks already ran" in again.stderr
    assert sorted(path.name for path in (local_bench / "runs" / "unprofiled").glob("*/*")) == runs
    assert json.loads(before)["variants"] == json.loads((local_bench / "bench.json").read_text())["variants"]


def test_report_renders_again_and_compare_reads_two_benches(local_bench, tmp_path):
    (local_bench / "report.md").unlink()
    shown = bench("report", str(local_bench))
    assert (local_bench / "report.md").is_file() and "fast_1" in shown.stdout
    compared = bench("compare", str(local_bench), str(local_bench), "--json")
    part = json.loads(compared.stdout)["variants"]["unprofiled"]
    assert part["common"] == 2
    assert all(task["a"] == task["b"] for task in part["tasks"])
    missing = bench("report", str(tmp_path), check=False)
    assert missing.returncode == 2 and "no bench.json" in missing.stderr


def test_a_resumed_bench_must_keep_its_settings(local_bench):
    changed = bench(
        "bench", str(EXAMPLES), *only(*TASKS), "--max-attempts", "3", "--reps", "10", "--no-profile",
        "--out", str(local_bench), check=False,
    )  # fmt: skip
    assert changed.returncode == 2
    assert "max_attempts=2, not 3" in changed.stderr


def _snapshot(out: Path) -> dict[str, str]:
    """Every complete attempt's record, by path: what a resume must leave alone."""
    return {
        str(path.relative_to(out)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in out.glob("runs/*/*/*/attempt-*/attempt.json")
    }


def test_a_bench_killed_mid_way_resumes_with_nothing_redone(tmp_path):
    out = tmp_path / "killed"
    names = ("2_LeakyReLU", "3_Softmax")
    command = [sys.executable, "-m", "pragma_core", "bench", str(EXAMPLES), *only(*names)]
    command += ["--max-attempts", "3", "--patience", "3", "--reps", "10", "--no-profile", "--out", str(out)]
    driver = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    try:
        # Kill once a task has ended and the next one is in the middle: an attempt done, others to come.
        while time.monotonic() < deadline:
            done = (
                rows(out) if (out / "bench.json").is_file() and "unprofiled" in (out / "bench.json").read_text() else {}
            )
            started = [
                p
                for p in out.glob("runs/unprofiled/*/*/attempt-01")
                if not any(k.replace("/", "__") in str(p) for k in done)
            ]
            if done and started:
                break
            assert driver.poll() is None, driver.stderr.read().decode()[-2000:]
            time.sleep(0.2)
        else:
            pytest.fail("the bench never reached the middle of its second task")
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(30)
    finally:
        if driver.poll() is None:
            driver.kill()
    time.sleep(1.0)  # the worker dies with the driver (parent-death signal)
    finished_before = rows(out)
    attempts_before = _snapshot(out)
    assert len(finished_before) < 2

    bench(*command[3:])
    after = rows(out)
    assert sorted(after) == [f"level1/{name}" for name in names]
    for key, row in finished_before.items():
        assert after[key] == row  # a finished task is not run again
    snapshot = _snapshot(out)
    assert all(snapshot[path] == digest for path, digest in attempts_before.items())  # no attempt redone
    interrupted = next(p for p in out.glob("runs/unprofiled/*/*/events.jsonl") if "resumed" in p.read_text())
    events = [json.loads(line)["event"] for line in interrupted.read_text().splitlines()]
    assert events.count("started") == 1 and "resumed" in events
    for row in after.values():
        assert row["status"] == "finished" and 1 <= row["attempts"] <= 3


def test_the_same_bench_through_ray_gives_the_same_verdicts(local_bench, tmp_path):
    ray = pytest.importorskip("ray")
    from pragma_core.bench.executors import RayExecutor
    from pragma_core.bench.runner import run_bench

    settings = BenchSettings(only=TASKS, max_attempts=2, reps=10, profile=False)
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        # As on a node that cannot see the bench directory: each run folder travels back with its row.
        run_bench(EXAMPLES, tmp_path / "ray", settings, RayExecutor(workers=2, ship=True))
    finally:
        ray.shutdown()
    local, through_ray = rows(local_bench), rows(tmp_path / "ray")
    assert sorted(through_ray) == sorted(local)
    for key, row in through_ray.items():
        assert row["status"] == local[key]["status"] == "finished"
        assert row["correct"] == local[key]["correct"]
        assert Path(row["run_dir"]).is_relative_to(tmp_path / "ray" / "runs" / "unprofiled")
        assert (Path(row["run_dir"]) / "summary.json").is_file()


def test_executor_ray_without_ray_says_how_to_install_it(tmp_path):
    blocker = tmp_path / "no_ray"
    blocker.mkdir()
    (blocker / "ray.py").write_text("raise ImportError('ray is not installed here')\n")
    env = os.environ | {"PYTHONPATH": str(blocker)}
    result = bench("bench", str(EXAMPLES), "--executor", "ray", "--out", str(tmp_path / "b"), check=False, env=env)
    assert result.returncode == 2
    assert "pip install 'pragma-core[ray]'" in result.stderr
    assert not (tmp_path / "b").exists()


def test_a_model_bench_counts_tokens_and_cost(tmp_path, plugin_site):
    """A priced stand-in model (the offline agents' answers through litellm) in the workers."""
    plugin_site.add("slow_model_entry", "from pragma_core.testing.slow_model import *\n", entry_point="slow-offline")
    out = tmp_path / "model"
    env = os.environ | {"PYTHONPATH": str(plugin_site.root)}
    arguments = ["--provider", "slow-offline", "--model", "openai/gpt-4o-mini", "--out", str(out)]
    bench(
        "bench",
        str(EXAMPLES),
        *only(TASKS[0]),
        "--max-attempts",
        "1",
        "--reps",
        "10",
        "--no-profile",
        *arguments,
        env=env,
    )
    row = rows(out)[f"level1/{TASKS[0]}"]
    assert row["model"] == "openai/gpt-4o-mini"
    assert row["tokens"]["prompt"] > 100 and row["tokens"]["completion"] > 10
    assert row["cost_usd"] is not None and row["cost_usd"] > 0
    assert "Model use:" in (out / "report.md").read_text()


FLAKY_MODEL = """
import os
from pragma_core import LLMProvider, PragmaError, hookimpl
from pragma_core.plugins import get_registry

def complete(request):
    if os.path.exists(os.environ["FLAKY_OUTAGE"]):
        raise PragmaError("openai/gpt-4o-mini: the server stopped answering")
    return get_registry().llm_provider("offline").complete(request)

@hookimpl
def pragma_register_llm_providers(register):
    register(LLMProvider(name="flaky", complete=complete, prepare=get_registry().llm_provider("offline").prepare))
"""


def test_a_task_stopped_by_an_outage_runs_again_on_resume(tmp_path, plugin_site):
    plugin_site.add("flaky_model", FLAKY_MODEL, entry_point="flaky")
    outage = tmp_path / "outage"
    outage.write_text("down")
    out = tmp_path / "flaky"
    env = os.environ | {"PYTHONPATH": str(plugin_site.root), "FLAKY_OUTAGE": str(outage)}
    arguments = ["bench", str(EXAMPLES), *only(TASKS[0]), *FAST, "--provider", "flaky", "--out", str(out)]
    first = bench(*arguments, env=env)
    assert "stopped (run again when the bench is resumed): openai/gpt-4o-mini: the server" in first.stderr
    assert rows(out)[f"level1/{TASKS[0]}"]["status"] == "error"
    assert json.loads((out / "bench.json").read_text())["metrics"] == {}  # not a result: nothing to count
    outage.unlink()
    bench(*arguments, env=env)
    assert rows(out)[f"level1/{TASKS[0]}"]["status"] == "finished"


def test_a_missing_model_key_stops_the_bench_before_anything_runs(tmp_path):
    env = {name: value for name, value in os.environ.items() if not name.endswith("_API_KEY")}
    out = tmp_path / "keyless"
    result = bench("bench", str(EXAMPLES), "--model", "openai/gpt-4o-mini", "--out", str(out), check=False, env=env)
    assert result.returncode == 2 and "OPENAI_API_KEY" in result.stderr
    assert not out.exists()


def test_a_kernelbench_level_at_fitted_sizes(kernelbench, tmp_path):
    """The real files as KernelBench ships them; a task the offline agents know no recipe for is a
    row that could not run, said in the report, and counts against the success rate."""
    out = tmp_path / "kernelbench"
    names = ("19_ReLU", "12_Matmul_with_diagonal_matrices_")
    bench("bench", str(kernelbench), "--levels", "1", *only(*names), "--fit-ms", "5", *FAST, "--out", str(out))
    found = rows(out)
    assert found["level1/19_ReLU"]["status"] == "finished" and found["level1/19_ReLU"]["sizes"]
    failed = found["level1/12_Matmul_with_diagonal_matrices_"]
    assert failed["status"] == "failed" and "no offline recipe knows this task" in failed["error"]
    metrics = json.loads((out / "bench.json").read_text())["metrics"]["unprofiled"]["eager"]["all"]
    assert metrics["tasks"] == 2 and metrics["fast_p"]["0"] == found["level1/19_ReLU"]["correct"] / 2
    report = (out / "report.md").read_text()
    assert "Could not run:" in report and "12_Matmul_with_diagonal_matrices_" in report
    assert (out / "plots" / "speedup_by_category.png").is_file() == found["level1/19_ReLU"]["correct"]


def test_bad_choices_are_clear_errors(tmp_path):
    with pytest.raises(PragmaError, match="no task in level 7"):
        task_files(EXAMPLES, BenchSettings(levels=(7,)))
    with pytest.raises(PragmaError, match="no task file's name contains 'Nope'"):
        task_files(EXAMPLES, BenchSettings(only=("Nope",)))
    with pytest.raises(PragmaError, match="--categories convolution: not a category"):
        BenchSettings(categories=("convolution",))
    with pytest.raises(PragmaError, match="--baseline inductor"):
        BenchSettings(baselines=("inductor",))
    assert BenchSettings(baselines=("compile",)).baselines == ("eager", "compile")
    assert [p.stem for p in task_files(EXAMPLES, BenchSettings(levels=(2,)))] == [
        "1_LinearBiasReLU",
        "2_Conv2dReLUScale",
    ]
    (tmp_path / "bench.json").write_text("[1, 2]")
    with pytest.raises(PragmaError, match="not a pragma bench record"):
        BenchStore(tmp_path).load()
    document = BenchStore(tmp_path / "new").load()
    begin_variant(document, BenchSettings(max_attempts=3), EXAMPLES)
    with pytest.raises(PragmaError, match="max_attempts=3, not 4"):
        begin_variant(document, BenchSettings(max_attempts=4), EXAMPLES)
