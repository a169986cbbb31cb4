"""Records: validators, JSON round trip, schema version on disk."""

from __future__ import annotations

import json
import math

import attrs
import pytest

from pragma_core import (
    Attempt,
    Baseline,
    Candidate,
    Category,
    ChatMessage,
    Completion,
    CompletionRequest,
    Diagnosis,
    Guidance,
    Metric,
    Profile,
    RunResult,
    Speedup,
    Task,
    TaskAnalysis,
    TensorSpec,
    Timing,
    TokenUsage,
    Verdict,
    VerdictStatus,
    from_dict,
    read_record,
    to_dict,
    write_record,
)
from pragma_core.errors import RecordError
from pragma_core.serialization import SCHEMA_VERSION, dump, load


def make_task() -> Task:
    spec = TensorSpec(shape=(4, 8), dtype="float32", nbytes=128)
    return Task(
        name="19_ReLU",
        source="# task\n",
        path="/tmp/level1/19_ReLU.py",
        category="activation",
        sizes={"batch_size": 4, "scale": 0.5},
        level=1,
        problem_id=19,
        analysis=TaskAnalysis(
            inputs=(spec,), outputs=(spec,), parameter_bytes=16, flops=0, ops={"relu": 1}, traced_on="meta"
        ),
    )


def make_run() -> RunResult:
    verdict = Verdict(
        status="correct",
        message="correct in 5 trials",
        max_abs_error=1e-7,
        max_rel_error=2e-7,
        reference=Timing(median_ms=2.0, iqr_ms=0.1, samples_ms=(1.9, 2.0, 2.1)),
        candidate=Timing(median_ms=1.0, iqr_ms=0.05, samples_ms=(0.95, 1.0, 1.05)),
        speedup=Speedup(value=2.0, low=1.8, high=2.2),
    )
    profile = Profile(
        profiler="valgrind",
        metrics=(
            Metric(
                name="D1 miss rate",
                value=0.031,
                unit="%",
                kernel="relu_kernel",
                profiler="valgrind",
                meaning="share of L1 data accesses that miss",
            ),
        ),
        raw_paths=("attempt-1/cachegrind.out",),
        notes=("simulated caches",),
        not_collected={"branch-misses": "perf has no hardware counters on this machine"},
    )
    attempt = Attempt(
        number=1,
        candidate=Candidate(source="class ModelNew: ...", backend="cpu-cpp", attempt=1),
        verdict=verdict,
        profiles=(profile,),
        diagnosis=Diagnosis(
            bound="memory",
            roofline_attainment=0.42,
            deltas={"D1 miss rate": -0.2},
            hints=("vectorize the inner loop",),
            request_metrics=("LL miss rate",),
        ),
        guidance=Guidance(analysis="memory bound", actions=("use AVX2 loads",), new_best=True),
        usage=TokenUsage(prompt=1200, completion=300),
        elapsed_s=3.5,
    )
    failed = Attempt(
        number=2, verdict=Verdict(status="rejected", message="output aliases input", failed_check="output-aliasing")
    )
    baseline = Baseline(
        reference=verdict.reference,
        floor_ms=0.4,
        bound="memory",
        profiles=(profile,),
        skipped={"perf": "perf is not installed"},
    )
    return RunResult(
        run_id="20261122-relu",
        task=make_task(),
        baseline=baseline,
        attempts=(attempt, failed),
        best_attempt=1,
        stop_reason="max attempts",
    )


def test_run_result_round_trips_through_plain_dicts_and_json():
    run = make_run()
    data = to_dict(run)
    assert json.loads(json.dumps(data)) == data  # only JSON types
    assert data["task"]["category"] == "activation" and data["task"]["path"].endswith("19_ReLU.py")
    assert data["attempts"][0]["verdict"]["status"] == "correct"
    back = from_dict(RunResult, json.loads(json.dumps(data)))
    assert back == run
    assert back.best.verdict.speedup.value == 2.0
    assert back.task.sizes == {"batch_size": 4, "scale": 0.5}
    assert isinstance(back.task.sizes["batch_size"], int)


def test_completion_request_round_trips():
    request = CompletionRequest(
        role="conductor",
        messages=(ChatMessage(role="user", content="why slow?"),),
        model="openai/gpt-4o-mini",
        task=make_task(),
        best=make_run().attempts[0],
    )
    assert from_dict(CompletionRequest, to_dict(request)) == request
    completion = Completion(text="{}", model="offline", usage=TokenUsage(prompt=3, completion=4))
    assert from_dict(Completion, to_dict(completion)).usage.total == 7


def test_records_are_frozen():
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        make_task().name = "other"


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: Verdict(status="fast", message="x"), "fast"),
        (lambda: Verdict(status="correct", message=""), "message"),
        (lambda: Verdict(status="rejected", message="no"), "must name the integrity check"),
        (
            lambda: Verdict(status="wrong_output", message="no", speedup=Speedup(value=2, low=1, high=3)),
            "only a correct candidate",
        ),
        (lambda: Speedup(value=3.0, low=1.0, high=2.0), "outside its interval"),
        (lambda: Speedup(value=math.nan, low=1.0, high=2.0), "finite"),
        (lambda: Timing(median_ms=-1.0, iqr_ms=0.0), "median_ms must be >= 0"),
        (lambda: Timing(median_ms=1.0, iqr_ms=0.0, samples_ms=(1.0, -2.0)), "samples_ms"),
        (lambda: Metric(name="ipc", value=math.inf, profiler="perf"), "finite"),
        (lambda: Metric(name="", value=1.0, profiler="perf"), "name"),
        (lambda: Task(name="t", source="", category="gemm"), "gemm"),
        (lambda: Attempt(number=0), "number"),
        (lambda: Profile(profiler="perf", notes="a single string"), "single string"),
        (lambda: RunResult(run_id="r", task=make_task(), best_attempt=3), "not among attempts"),
        (lambda: TokenUsage(prompt=-1), "prompt"),
    ],
)
def test_validators_reject_records_that_make_no_sense(build, message):
    with pytest.raises((ValueError, TypeError), match=message):
        build()


def test_task_key_and_min_bytes():
    task = make_task()
    assert task.key == "level1/19_ReLU"
    assert task.analysis.min_bytes == 128 + 128 + 16
    assert Task(name="x", source="", category=Category.OTHER).key == "x"


def test_profile_get_finds_a_metric_by_name_and_kernel():
    profile = make_run().attempts[0].profiles[0]
    assert profile.get("D1 miss rate").value == 0.031
    assert profile.get("D1 miss rate", kernel="other") is None


def test_written_records_carry_schema_version_and_kind(tmp_path):
    path = tmp_path / "attempt-1" / "verdict.json"
    verdict = make_run().attempts[0].verdict
    write_record(path, verdict)
    data = json.loads(path.read_text())
    assert data["schema_version"] == SCHEMA_VERSION and data["record"] == "Verdict"
    assert read_record(path, Verdict) == verdict
    assert [p.name for p in path.parent.iterdir()] == ["verdict.json"]  # no temporary left behind


def test_reading_refuses_newer_schema_other_kinds_and_bad_fields(tmp_path):
    verdict = make_run().attempts[0].verdict
    newer = dump(verdict) | {"schema_version": SCHEMA_VERSION + 1}
    with pytest.raises(RecordError, match="newer than this pragma reads"):
        load(Verdict, newer)
    with pytest.raises(RecordError, match="holds a Verdict, not a Profile"):
        load(Profile, dump(verdict))
    with pytest.raises(RecordError, match="no schema_version"):
        load(Verdict, to_dict(verdict))
    broken = dump(verdict) | {"status": "fast"}
    path = tmp_path / "v.json"
    path.write_text(json.dumps(broken))
    with pytest.raises(RecordError, match=r"v\.json: not a valid Verdict: .*fast"):
        read_record(path, Verdict)
    path.write_text("{not json")
    with pytest.raises(RecordError, match="not JSON"):
        read_record(path, Verdict)
    with pytest.raises(RecordError, match="no such file"):
        read_record(tmp_path / "missing.json", Verdict)


def test_failed_write_keeps_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "verdict.json"
    write_record(path, make_run().attempts[0].verdict)
    before = path.read_text()

    def failing_fsync(fd):
        raise OSError("disk full")

    monkeypatch.setattr("pragma_core.files.os.fsync", failing_fsync)
    with pytest.raises(OSError, match="disk full"):
        write_record(path, Verdict(status=VerdictStatus.TIMEOUT, message="timed out after 60 s"))
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["verdict.json"]
