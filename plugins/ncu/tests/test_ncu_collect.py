"""collect() with ncu's runs replayed from recorded output, and, where ncu and a GPU exist, for real."""

from __future__ import annotations

import importlib
import subprocess
from pathlib import Path

import pytest
from ncu_data import fixture_text

from pragma_core.components import Availability, ProfileTarget
from pragma_core.errors import ProfilerUnavailable
from pragma_core.records import Task
from pragma_ncu.collect import PERMISSION_REASON, collect
from pragma_ncu.probe import probe

# the package exports the function collect(), which hides the module of that name
collect_module = importlib.import_module("pragma_ncu.collect")

RAW_CSV = "ncu-raw-page-csv-stdout-with-app-output-gtx1080.txt"
CSV_DETAILS = "ncu-csv-details-set-full-b200-cc100-with-rules.log"
PROGRAM = ("python", "-m", "pragma_core.profiling.worker", "run", "job", "3")


def target(tmp_path: Path, **fields) -> ProfileTarget:
    task = Task(name="vector_add", source="", category="other")
    return ProfileTarget(
        task=task, candidate=None, out_dir=tmp_path / "out", device="cuda", python_argv=PROGRAM, **fields
    )


@pytest.fixture
def ncu(monkeypatch):
    """A machine where ncu runs: each run prints the recorded output named in ``ncu.outputs``."""

    class FakeNcu:
        outputs = {"profile": RAW_CSV, "details": None}
        calls: list[list[str]] = []
        timeout = False

        def run(self, argv, **kwargs):
            self.calls.append(list(argv))
            if "--import" in argv:
                text = fixture_text(self.outputs["details"]) if self.outputs["details"] else ""
                return subprocess.CompletedProcess(argv, 0, text, "")
            if self.timeout:
                raise subprocess.TimeoutExpired(argv, kwargs["timeout"])
            kwargs["stdout"].write(
                self.outputs["profile"] if "\n" in self.outputs["profile"] else fixture_text(self.outputs["profile"])
            )
            if "-o" in argv:
                Path(argv[argv.index("-o") + 1] + ".ncu-rep").write_bytes(b"report")
            return subprocess.CompletedProcess(argv, 0)

    fake = FakeNcu()
    fake.calls = []
    monkeypatch.setattr(collect_module, "probe", lambda: Availability(available=True))
    monkeypatch.setattr(collect_module, "find_ncu", lambda: "/opt/nvidia/nsight-compute/ncu")
    monkeypatch.setattr(collect_module.subprocess, "run", fake.run)
    return fake


def test_requested_metrics_per_launch_and_why_the_others_are_missing(ncu, tmp_path):
    profile = collect(
        target(tmp_path),
        [
            "gpu__time_duration",
            "launch__registers_per_thread",
            "lts__t_sector_hit_rate.pct",
            "device__attribute_display_name",
            "instructions",
            "gpu__time_duration",
        ],
    )
    assert [(m.kernel, m.name, m.value, m.unit) for m in profile.metrics] == [
        ("vecAdd#0", "gpu__time_duration", 2720.0, "ns"),
        ("vecAdd#0", "launch__registers_per_thread", 8.0, "register/thread"),
        ("vecAdd#1", "gpu__time_duration", 2720.0, "ns"),
        ("vecAdd#1", "launch__registers_per_thread", 8.0, "register/thread"),
        ("vecAdd#2", "gpu__time_duration", 2720.0, "ns"),
        ("vecAdd#2", "launch__registers_per_thread", 8.0, "register/thread"),
    ]
    assert set(profile.not_collected) == {
        "lts__t_sector_hit_rate.pct",
        "device__attribute_display_name",
        "instructions",
    }
    assert "is not an ncu metric name" in profile.not_collected["instructions"]
    assert profile.not_collected["lts__t_sector_hit_rate.pct"].startswith("ncu did not report it")
    assert profile.not_collected["device__attribute_display_name"] == (
        "ncu printed 'NVIDIA GeForce GTX 1080', not one number"
    )
    assert profile.notes[0] == "ncu profiled 3 kernel launch(es) in the NVTX range 'pragma_forward'"


def test_the_run_and_its_raw_output_are_kept(ncu, tmp_path):
    profile = collect(target(tmp_path), ["gpu__time_duration.sum"])
    out = tmp_path / "out"
    assert [Path(p).name for p in profile.raw_paths] == [
        "ncu-report.ncu-rep",
        "ncu-raw.csv",
        "ncu-stderr.txt",
        "ncu-command.txt",
        "ncu-details.csv",
    ]
    assert (out / "ncu-raw.csv").read_text() == fixture_text(RAW_CSV)
    profile_argv, import_argv = ncu.calls
    assert profile_argv[:6] == [
        "/opt/nvidia/nsight-compute/ncu",
        "--csv",
        "--page",
        "raw",
        "--metrics",
        "gpu__time_duration.sum",
    ]
    assert profile_argv[-len(PROGRAM) :] == list(PROGRAM)
    assert import_argv == [
        "/opt/nvidia/nsight-compute/ncu",
        "--import",
        str(out / "ncu-report.ncu-rep"),
        "--csv",
        "--page",
        "details",
    ]
    assert (out / "ncu-command.txt").read_text().startswith("/opt/nvidia/nsight-compute/ncu --csv")


def test_only_the_candidates_kernels_count(ncu, tmp_path):
    profile = collect(target(tmp_path, kernel_functions=("vecAdd",)), ["gpu__time_duration"])
    assert ncu.calls[0][ncu.calls[0].index("--kernel-name") + 1] == "regex:vecAdd"
    assert len(profile.metrics) == 3
    assert profile.notes[0].endswith("'pragma_forward', of kernels matching vecAdd")

    other = collect(target(tmp_path, kernel_functions=("relu_kernel",)), ["gpu__time_duration"])
    assert other.metrics == ()
    assert "belongs to the candidate's kernels" in other.not_collected["gpu__time_duration"]


def test_rule_results_become_notes(ncu, tmp_path):
    ncu.outputs = {"profile": CSV_DETAILS, "details": CSV_DETAILS}
    profile = collect(target(tmp_path), ["gpu__time_duration.sum"])
    assert "gpu__time_duration.sum" in profile.not_collected  # this page shows labels, not names
    rules = profile.notes[1:]
    assert len(rules) == 8
    kernel = "cutlass3x_sm100_tensorop_s64x256x32gemm_f8_f8_f32_f16_f16_64x256x128_1x1x1_0_..."
    assert rules[0].startswith(f"OPT {kernel} (SpeedOfLight): This workload exhibits low compute")
    assert rules[3].endswith("[est. speedup 81.25% local]")


def test_permission_error_is_unavailability(ncu, tmp_path):
    # the message as the Profiling Guide's FAQ and FORMATS.md quote it
    ncu.outputs["profile"] = (
        "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access "
        "NVIDIA GPU Performance Counters on the target device.\n"
    )
    with pytest.raises(ProfilerUnavailable) as error:
        collect(target(tmp_path), ["gpu__time_duration.sum"])
    assert str(error.value) == PERMISSION_REASON


def test_no_kernel_results(ncu, tmp_path):
    ncu.outputs["profile"] = (
        "\n".join(fixture_text("ncu-2022-default-details-rtx3070-matrix_sums.txt").splitlines()[:1]) + "\n"
    )
    profile = collect(target(tmp_path), ["gpu__time_duration.sum"])
    assert profile.metrics == ()
    reason = profile.not_collected["gpu__time_duration.sum"]
    assert reason.startswith(
        "ncu (exit code 0) gave no kernel results inside the NVTX range 'pragma_forward': ncu printed no kernel results"
    )
    assert profile.notes == (reason,)


def test_timeout(ncu, tmp_path):
    ncu.timeout = True
    profile = collect(target(tmp_path), ["gpu__time_duration.sum"], timeout_s=5)
    assert profile.not_collected == {"gpu__time_duration.sum": "ncu did not finish within 5 s"}


def test_nothing_known_to_ask_for(ncu, tmp_path):
    profile = collect(target(tmp_path), ["cycles", "instructions"])
    assert set(profile.not_collected) == {"cycles", "instructions"}
    assert ncu.calls == []


def test_unavailable_where_the_probe_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(
        collect_module, "probe", lambda: Availability(available=False, reason="ncu is not installed (not on PATH)")
    )
    with pytest.raises(ProfilerUnavailable, match="^ncu is not installed"):
        collect(target(tmp_path), ["gpu__time_duration.sum"])


@pytest.mark.skipif(not probe().available, reason=f"ncu cannot run here: {probe().reason}")
def test_really_profiling_a_task_on_the_gpu(tmp_path):
    from pragma_core import load_task
    from pragma_core.profiling import profile

    task = load_task(Path(__file__).parents[3] / "examples" / "tasks" / "level1" / "2_LeakyReLU.py")
    result = profile(
        task, profiler="ncu", metrics=["no_such_unit__counter.sum", "bogus"], out_dir=tmp_path, repetitions=1
    )
    assert result.get("gpu__time_duration.sum") is not None
    assert "bogus" in result.not_collected
    assert "no_such_unit__counter.sum" in result.not_collected
    assert all(Path(path).exists() for path in result.raw_paths)


def test_a_metric_ncu_answers_with_n_a_names_the_alternatives():
    # no recorded output has an n/a value (FORMATS.md 1.1), so the reading is built by hand
    from pragma_ncu.parse import Entry, Reading

    tensor = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
    reading = Reading(
        layout="raw-csv", kernels=("gemm",), entries=(Entry(kernel="gemm", name=tensor, unit="", text="n/a"),)
    )
    reason = collect_module._why_missing(reading, tensor, {"gemm"})
    assert reason.startswith("ncu printed n/a: this GPU or ncu version has no such metric")
    assert reason.endswith(
        "try sm__pipe_tensor_op_hmma_cycles_active_v2.avg.pct_of_peak_sustained_active"
        " or sm__pipe_tensor_subpipe_hmma_cycles_active.avg.pct_of_peak_sustained_active"
    )
