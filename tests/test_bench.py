"""``pragma bench``, ``pragma report`` and ``pragma compare`` on the bundled examples, for real: the
offline agents (or a priced stand-in model) through the whole loop in worker processes, a bench
killed mid-way and resumed, and the same tasks through a local Ray instance."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pragma_core.bench.confirmations import DISAGREED
from pragma_core.bench.plan import BenchSettings, task_files
from pragma_core.bench.report import interval
from pragma_core.bench.store import BenchStore, begin_variant
from pragma_core.cli import main
from pragma_core.errors import PragmaError

from .conftest import EXAMPLES

# Not serial: no test here checks a timing against a figure, so a busy neighbour only slows them,
# and a neighbouring test in the parallel tier times nothing that is checked either.
SHARES_LOCAL_BENCH = pytest.mark.xdist_group("local_bench")
"""The tests that read the module's bench run on one xdist worker (``--dist loadgroup``), so it is
made once; the others go to whichever worker is free."""

TASKS = ("2_LeakyReLU", "3_Softmax")
SMALL = ("--set", "batch_size=64")
"""Both tasks at 64 rows instead of 1024 (2 MB a tensor, not 32): every reference run, correctness
trial and timing of the bench takes a sixteenth of the time, and no check here is about a size."""

FAST = (
    "--max-attempts", "1", "--target-attainment", "3", "--reps", "10", "--no-profile", "--retime-after", "0", *SMALL,
)  # fmt: skip
"""One attempt per task, never ended early by the roofline (on a machine whose measured peaks are
low, LeakyReLU's first attempt reached 90% of the floor). A confirmation timed while the machine
was busy is timed again at once, not a minute later."""

TWO_ATTEMPTS = (*FAST, "--max-attempts", "2")
"""For the bench killed between its task's first and second attempt (the last --max-attempts counts)."""


def bench(*arguments: str, check: bool = True, **options) -> subprocess.CompletedProcess:
    """``pragma bench`` in its own process, as a user runs it."""
    result = subprocess.run(
        [sys.executable, "-m", "pragma_core", *arguments], capture_output=True, text=True, timeout=900, **options
    )
    if check:
        assert result.returncode == 0, result.stderr[-3000:]
    return result


def pragma_here(capsys, *arguments: str) -> tuple[int, str, str]:
    """A ``pragma`` command that runs nothing generated (reports, refusals), in this process: its
    exit code, stdout and stderr."""
    capsys.readouterr()
    try:
        main(list(arguments))
        code = 0
    except SystemExit as exit:
        code = int(exit.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


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


@SHARES_LOCAL_BENCH
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


@SHARES_LOCAL_BENCH
def test_with_two_workers_a_task_starts_once_the_one_before_it_waits_for_its_model(local_bench):
    """Two tasks' baselines (fitting, measuring, timing) never run at once, and tasks that are alike
    start out of step: the second starts after the first began writing its first attempt."""

    def events(name: str) -> list[dict]:
        (run,) = (local_bench / "runs" / "unprofiled").glob(f"level1__{name}/*/events.jsonl")
        return [json.loads(line) for line in run.read_text().splitlines()]

    first, second = events(TASKS[0]), events(TASKS[1])
    if first[0]["time"] > second[0]["time"]:
        first, second = second, first
    writing = next(event["time"] for event in first if event["event"] == "attempt_started")
    assert second[0]["event"] == "started" and second[0]["time"] >= writing


@SHARES_LOCAL_BENCH
def test_running_a_finished_bench_again_redoes_nothing(local_bench):
    before = (local_bench / "bench.json").read_text()
    runs = sorted(path.name for path in (local_bench / "runs" / "unprofiled").glob("*/*"))
    again = bench("bench", str(EXAMPLES), *only(*TASKS), *FAST, "--out", str(local_bench))
    assert "2 of 2 tasks already ran" in again.stderr
    assert sorted(path.name for path in (local_bench / "runs" / "unprofiled").glob("*/*")) == runs
    assert json.loads(before)["variants"] == json.loads((local_bench / "bench.json").read_text())["variants"]


@SHARES_LOCAL_BENCH
def test_report_renders_again_and_compare_reads_two_benches(local_bench, tmp_path, capsys):
    (local_bench / "report.md").unlink()
    code, shown, _ = pragma_here(capsys, "report", str(local_bench))
    assert code == 0 and (local_bench / "report.md").is_file() and "fast_1" in shown
    code, compared, _ = pragma_here(capsys, "compare", str(local_bench), str(local_bench), "--json")
    part = json.loads(compared)["variants"]["unprofiled"]
    assert code == 0 and part["common"] == 2
    assert all(task["a"] == task["b"] for task in part["tasks"])
    code, _, said = pragma_here(capsys, "report", str(tmp_path))
    assert code == 2 and "no bench.json" in said


@SHARES_LOCAL_BENCH
def test_every_task_shows_the_loops_best_beside_its_confirmation(local_bench):
    tasks = rows(local_bench)
    report = (local_bench / "report.md").read_text()
    assert "| loop's best | confirmed | confirmations | flag |" in report
    assert "| roofline (library) |" in report
    for key, row in tasks.items():
        if row["correct"]:
            # both floors beside each other: torch's own copy cannot beat the machine's STREAM
            roofline = row["roofline"]
            assert 0 < roofline["floor_ms"] <= roofline["library_floor_ms"]
            assert 0 < roofline["attainment"] <= roofline["library_attainment"]
            loop_best, confirmation = row["loop_best"], row["confirmation"]
            assert loop_best["low"] <= loop_best["value"] <= loop_best["high"]
            assert [m["source"] for m in confirmation["measurements"]][:2] == ["loop", "confirmation.json"]
            assert confirmation["measurements"][0]["eager"] == loop_best and not confirmation["due"]
            assert (
                f"| {key} | activation | correct | {interval(loop_best)} | {interval(row['speedup']['eager'])} |"
                in (report)
            )


def _drop_row(out: Path, key: str) -> None:
    """Forget the task's row, as a bench killed before writing it would: the next start makes it
    from the run folder."""
    document = json.loads((out / "bench.json").read_text())
    del document["variants"]["unprofiled"]["tasks"][key]
    (out / "bench.json").write_text(json.dumps(document))


def _plant_disagreement(run_dir: Path) -> float:
    """The task's first confirmation rewritten as half the low end of the loop's best, a 2% interval
    and nothing disturbing it: what the VM's argmin read a minute after its loop (7.93x, then
    3.90x), without waiting for such a minute. Returns the planted value."""
    for extra in run_dir.glob("confirmation-*.json"):
        extra.unlink()
    best = json.loads((run_dir / "best" / "attempt.json").read_text())["verdict"]["speedup"]
    confirmation = json.loads((run_dir / "confirmation.json").read_text())
    value = best["low"] / 2  # apart from the loop's interval, however wide that was
    confirmation["speedup"] = {"value": value, "low": value * 0.99, "high": value * 1.01, "confidence": 0.95}
    confirmation["conditions"]["noise"] = []
    (run_dir / "confirmation.json").write_text(json.dumps(confirmation))
    return value


@SHARES_LOCAL_BENCH
def test_a_summary_cut_short_is_made_again_from_the_run_folder_and_said(local_bench, tmp_path):
    """A finished run whose row was not saved and whose summary.json was cut in half (a crash while
    writing): the resumed bench makes the summary again from the run folder, equal to what it was,
    and says so on a line of its own."""
    from pragma_core.records import RunResult
    from pragma_core.serialization import read_record

    out = tmp_path / "damaged"
    shutil.copytree(local_bench, out)
    key, row = next((k, r) for k, r in sorted(rows(out).items()) if r["correct"])
    run_dir = out / Path(row["run_dir"]).relative_to(local_bench)
    summary = run_dir / "summary.json"
    original = read_record(summary, RunResult)
    summary.write_bytes(summary.read_bytes()[: summary.stat().st_size // 2])
    _drop_row(out, key)

    again = bench("bench", str(EXAMPLES), *only(key.split("/")[-1]), *FAST, "--out", str(out))
    assert f"{key}: its summary.json could not be read (" in again.stderr
    assert f"made again from its {len(original.attempts)} attempts in the run folder" in again.stderr
    assert read_record(summary, RunResult) == original
    assert rows(out)[key]["best_attempt"] == row["best_attempt"] and rows(out)[key]["speedup"] == row["speedup"]


@SHARES_LOCAL_BENCH
def test_a_confirmation_that_disagrees_is_timed_again_and_a_resume_reads_every_figure_from_disk(local_bench, tmp_path):
    """The loop's best and its confirmation apart: the best is timed a third time after the task
    ended, the row reports the median of the three with the spread, flagged; a resumed bench
    makes the same row from the files, timing nothing."""
    out = tmp_path / "disagreed"
    shutil.copytree(local_bench, out)
    key, row = next((k, r) for k, r in sorted(rows(out).items()) if r["timed"])
    run_dir = out / Path(row["run_dir"]).relative_to(local_bench)
    planted = _plant_disagreement(run_dir)
    _drop_row(out, key)
    name = key.split("/")[-1]

    first = bench("bench", str(EXAMPLES), *only(name), *FAST, "--out", str(out))
    assert "timing the best of 1 task(s) again" in first.stderr
    row = rows(out)[key]
    confirmation = row["confirmation"]
    sources = [m["source"] for m in confirmation["measurements"]]
    assert sources[:3] == ["loop", "confirmation.json", "confirmation-2.json"] and len(sources) <= 4
    assert all((run_dir / source).is_file() for source in sources[1:])
    values = [m["eager"]["value"] for m in confirmation["measurements"]]
    assert values[1] == pytest.approx(planted) and values[0] == row["loop_best"]["value"]
    latest = sorted(values[-3:])
    assert row["speedup"]["eager"]["value"] == latest[(len(latest) - 1) // 2]
    assert confirmation["spread"]["eager"] == [min(values), max(values)]
    assert DISAGREED in row["flags"] and not confirmation["due"]
    report = (out / "report.md").read_text()
    assert f"| {interval(row['loop_best'])} | {interval(row['speedup']['eager'])} | {len(sources) - 1}: " in report
    assert "disagreed" in report

    kept = {path.name: path.read_bytes() for path in run_dir.glob("confirmation*.json")}
    _drop_row(out, key)
    again = bench("bench", str(EXAMPLES), *only(name), *FAST, "--out", str(out))
    assert "timing the best of" not in again.stderr
    assert {path.name: path.read_bytes() for path in run_dir.glob("confirmation*.json")} == kept
    resumed = rows(out)[key]
    assert {name: resumed[name] for name in ("speedup", "flags", "confirmation", "loop_best")} == {
        name: row[name] for name in ("speedup", "flags", "confirmation", "loop_best")
    }


@SHARES_LOCAL_BENCH
def test_reproducibility_re_verifies_each_best_in_fresh_processes(local_bench, tmp_path):
    key, row = next((k, r) for k, r in sorted(rows(local_bench).items()) if r["timed"])
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "reproducibility.py"
    out = tmp_path / "reproducibility"
    result = subprocess.run(
        [
            sys.executable,
            str(script),
            str(local_bench),
            "--tasks",
            key.split("/")[-1],
            "--runs",
            "2",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads((out / "reproducibility.json").read_text())
    (task,) = figures["tasks"]
    assert task["task"] == key and task["reported"] == row["speedup"]["eager"] and len(task["runs"]) == 2
    for run in task["runs"]:
        reported = row["speedup"]["eager"]
        inside = reported["low"] <= run["value"] <= reported["high"]
        near = max(run["value"], reported["value"]) <= 1.1 * min(run["value"], reported["value"])
        assert run["lands"] == (inside or near)
    assert task["spread"] == [min(r["value"] for r in task["runs"]), max(r["value"] for r in task["runs"])]
    summary = figures["summary"]
    assert summary["tasks"] == 1 and summary["runs"] == 2 and summary["tasks_landed"] == int(task["landed"])
    assert f"{summary['tasks_landed']} of 1 tasks" in result.stdout and "target >= 90%" in result.stdout
    assert (out / "reproducibility.png").read_bytes()[:4] == b"\x89PNG"


@SHARES_LOCAL_BENCH
def test_a_resumed_bench_must_keep_its_settings(local_bench, capsys):
    before = (local_bench / "bench.json").read_text()
    code, _, said = pragma_here(
        capsys, "bench", str(EXAMPLES), *only(*TASKS), "--max-attempts", "3", "--reps", "10", "--no-profile",
        *SMALL, "--out", str(local_bench),
    )  # fmt: skip
    assert code == 2 and "max_attempts=1, not 3" in said
    assert (local_bench / "bench.json").read_text() == before


def _snapshot(out: Path) -> dict[str, str]:
    """Every complete attempt's record, by path: what a resume must leave alone."""
    return {
        str(path.relative_to(out)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in out.glob("runs/*/*/*/attempt-*/attempt.json")
    }


@SHARES_LOCAL_BENCH
def test_the_same_bench_through_ray_gives_the_same_verdicts(local_bench, tmp_path):
    ray = pytest.importorskip("ray")
    from pragma_core.bench.executors import RayExecutor
    from pragma_core.bench.runner import run_bench

    settings = BenchSettings(
        only=TASKS[:1],
        max_attempts=1,
        target_attainment=3,
        reps=10,
        profile=False,
        retime_after_s=0,
        sizes={"batch_size": "64"},
    )
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        # As on a node that cannot see the bench directory: each run folder travels back with its row.
        run_bench(EXAMPLES, tmp_path / "ray", settings, RayExecutor(workers=2, ship=True))
    finally:
        ray.shutdown()
    local, through_ray = rows(local_bench), rows(tmp_path / "ray")
    assert sorted(through_ray) == [f"level1/{TASKS[0]}"]
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


FLAKY_MODEL = """
import os
from pragma_core import LLMProvider, PragmaError, hookimpl
from pragma_core.plugin_api.registry import get_registry
from pragma_core.testing.slow_model import complete as priced

def complete(request):
    if os.path.exists(os.environ["FLAKY_OUTAGE"]):
        raise PragmaError(f"{request.model}: the server stopped answering")
    return priced(request)

@hookimpl
def pragma_register_llm_providers(register):
    register(LLMProvider(name="flaky", complete=complete, prepare=get_registry().llm_provider("offline").prepare))
"""


def _flaky_bench(tmp_path, plugin_site, arguments_after: tuple[str, ...]) -> tuple[list[str], dict, Path, Path]:
    """The arguments and environment of a bench of one task whose stand-in model (the offline
    agents' answers, priced through litellm, in the workers) is down while the file ``outage`` exists."""
    plugin_site.add("flaky_model", FLAKY_MODEL, entry_point="flaky")
    outage = tmp_path / "outage"
    out = tmp_path / "interrupted"
    env = os.environ | {"PYTHONPATH": str(plugin_site.root), "FLAKY_OUTAGE": str(outage)}
    arguments = ["bench", str(EXAMPLES), *only(TASKS[0]), *arguments_after]
    arguments += ["--provider", "flaky", "--model", "openai/gpt-4o-mini", "--out", str(out)]
    return arguments, env, out, outage


def _events(row: dict) -> list[dict]:
    """The events of the task's run folder, in order."""
    return [json.loads(line) for line in (Path(row["run_dir"]) / "events.jsonl").read_text().splitlines()]


def test_a_task_stopped_by_an_outage_resumes_and_counts_the_models_tokens_and_cost(tmp_path, plugin_site):
    """The model is down for the first start: the task is an error row that is no result. The
    second start runs it again, finishes it, and counts the model's tokens and cost."""
    arguments, env, out, outage = _flaky_bench(tmp_path, plugin_site, FAST)
    key = f"level1/{TASKS[0]}"
    outage.write_text("down")
    first = bench(*arguments, env=env)
    assert "stopped (run again when the bench is resumed): openai/gpt-4o-mini: the server" in first.stderr
    assert rows(out)[key]["status"] == "error"
    assert json.loads((out / "bench.json").read_text())["metrics"] == {}  # not a result: nothing to count

    outage.unlink()
    bench(*arguments, env=env)
    row = rows(out)[key]
    assert row["status"] == "finished" and row["attempts"] == 1 and row["model"] == "openai/gpt-4o-mini"
    assert row["tokens"]["prompt"] > 100 and row["tokens"]["completion"] > 10
    assert row["cost_usd"] is not None and row["cost_usd"] > 0
    assert "Model use:" in (out / "report.md").read_text()
    assert json.loads((Path(row["run_dir"]) / "run.json").read_text())["settings"]["target_attainment"] == 3
    names = [event["event"] for event in _events(row)]
    assert names.count("started") == 1 and names.count("resumed") == 1


@pytest.mark.release
def test_a_task_killed_mid_way_resumes_with_nothing_redone(tmp_path, plugin_site):
    """A bench killed (SIGKILL) with its task's first attempt recorded and its second under way
    writes no row; the next start keeps the recorded attempt and finishes. (In CI, the loop's own
    kill and resume: ``test_optimizer.py::test_cli_run_killed_mid_attempt_resumes_without_losing_an_attempt``.)"""
    arguments, env, out, _ = _flaky_bench(tmp_path, plugin_site, TWO_ATTEMPTS)
    key = f"level1/{TASKS[0]}"
    driver = subprocess.Popen(
        [sys.executable, "-m", "pragma_core", *arguments], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
    )
    deadline = time.monotonic() + 600
    try:
        while not any(out.glob("runs/unprofiled/*/*/attempt-01/attempt.json")):
            assert driver.poll() is None, driver.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the bench never recorded its first attempt"
            time.sleep(0.1)
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(30)
    finally:
        if driver.poll() is None:
            driver.kill()
    time.sleep(1.0)  # the worker dies with the driver (parent-death signal)
    # the killed start wrote no row (its bench.json may not even hold the variant yet)
    written = json.loads((out / "bench.json").read_text()) if (out / "bench.json").exists() else {}
    assert key not in written.get("variants", {}).get("unprofiled", {}).get("tasks", {})
    attempts_before = _snapshot(out)
    assert attempts_before

    bench(*arguments, env=env)
    row = rows(out)[key]
    assert row["status"] == "finished" and row["attempts"] == 2
    assert row["tokens"]["prompt"] > 100 and row["cost_usd"] is not None and row["cost_usd"] > 0
    snapshot = _snapshot(out)
    assert all(snapshot[path] == digest for path, digest in attempts_before.items())  # no attempt redone
    events = _events(row)
    names = [event["event"] for event in events]
    assert names.count("started") == 1 and names.count("resumed") == 1
    assert [event.get("attempt") for event in events if event["event"] == "attempt_done"] == [1, 2]


def test_a_missing_model_key_stops_the_bench_before_anything_runs(tmp_path, capsys, monkeypatch):
    for name in [name for name in os.environ if name.endswith("_API_KEY")]:
        monkeypatch.delenv(name)
    out = tmp_path / "keyless"
    code, _, said = pragma_here(capsys, "bench", str(EXAMPLES), "--model", "openai/gpt-4o-mini", "--out", str(out))
    assert code == 2 and "OPENAI_API_KEY" in said
    assert not out.exists()


def test_a_kernelbench_level_at_fitted_sizes(kernelbench, tmp_path):
    """The real files as KernelBench ships them; a task the offline agents know no recipe for (a
    level-2 chain, until the fusion planner takes it) is a row that could not run, said in the
    report, and counts against the success rate. The profiled half run after it into the same
    ``--out`` takes the sizes the timing-only half was fitted to."""
    out = tmp_path / "kernelbench"
    unknown = "66_Matmul_Dropout_Softmax"  # a level-2 chain no recipe takes (dropout); the planner fuses 13_ now
    names = ("19_ReLU", unknown)
    settings = ("--max-attempts", "1", "--reps", "10", "--no-profile", "--fit-ms", "5", "--retime-after", "0")
    bench("bench", str(kernelbench), "--levels", "1,2", *only(*names), *settings, "--workers", "2", "--out", str(out))
    found = rows(out)
    assert found["level1/19_ReLU"]["status"] == "finished" and found["level1/19_ReLU"]["sizes"]
    failed = found[f"level2/{unknown}"]
    assert failed["status"] == "failed" and "no offline recipe knows this task" in failed["error"]
    metrics = json.loads((out / "bench.json").read_text())["metrics"]["unprofiled"]["eager"]["all"]
    assert metrics["tasks"] == 2 and metrics["fast_p"]["0"] == found["level1/19_ReLU"]["correct"] / 2
    report = (out / "report.md").read_text()
    assert "Could not run:" in report and unknown in report
    assert (out / "plots" / "speedup_by_category.png").is_file() == found["level1/19_ReLU"]["correct"]

    # The other half of the ablation into the same --out is not fitted again: it times the same sizes.
    profiled = [arg for arg in settings if arg != "--no-profile"]
    second = bench("bench", str(kernelbench), "--levels", "1", *only("19_ReLU"), *profiled, "--profilers", "perf",
                   "--out", str(out))  # fmt: skip
    assert "not fitted again" in second.stdout + second.stderr, second.stderr[-3000:]
    profiled_row = rows(out, "profiled")["level1/19_ReLU"]
    assert profiled_row["sizes"] == found["level1/19_ReLU"]["sizes"]
    # One attempt each from the same starting shape: one kernel, which the ablation says, not a win.
    assert profiled_row["best_kernel"] == found["level1/19_ReLU"]["best_kernel"] is not None
    assert "Of the 1 tasks timed correct in both, 1 ended with the same best kernel" in (out / "report.md").read_text()


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
