"""collect() against a stand-in ncu that prints recorded output, and, where ncu and a GPU exist, for real.

There is no NVIDIA GPU here. The stand-in is a small script on the path collect() finds ncu at: it
notes its command line, runs the profiled program as ncu does (with ncu's environment, in its
process group), then prints the *recorded* ncu output the test chose and writes a report file; for
``--import`` it prints the recorded details page. So collect() runs a real process through
run_tool, and reads real ncu output.
"""

from __future__ import annotations

import importlib
import json
import sys
import textwrap
from pathlib import Path

import pytest
from ncu_data import fixture_text

from pragma_core.errors import ProfilerUnavailable
from pragma_core.plugin_api.components import Availability, Profiler, ProfileTarget
from pragma_core.records import Task
from pragma_core.testing import ProfilerContractTests
from pragma_ncu.collect import PERMISSION_REASON, collect
from pragma_ncu.probe import probe

# the package exports the function collect(), which hides the module of that name
collect_module = importlib.import_module("pragma_ncu.collect")

RAW_CSV = "ncu-raw-page-csv-stdout-with-app-output-gtx1080.txt"
CSV_DETAILS = "ncu-csv-details-set-full-b200-cc100-with-rules.log"
PROGRAM = (sys.executable, "-c", "pass")

STAND_IN = textwrap.dedent("""\
    import json, os, subprocess, sys, time
    here = os.path.dirname(os.path.abspath(__file__))
    args = sys.argv[1:]
    with open(os.path.join(here, "calls.jsonl"), "a") as calls:
        calls.write(json.dumps(args) + "\\n")
    answer = json.load(open(os.path.join(here, "answer.json")))
    if "--import" in args:
        sys.stdout.write(answer["details"])
        sys.exit(0)
    report = args[args.index("-o") + 1]
    subprocess.run(args[args.index("-o") + 2:])  # ncu's own options end with -f -o REPORT
    time.sleep(answer["sleep"])
    sys.stdout.write(answer["profile"])
    open(report + ".ncu-rep", "wb").write(b"report")
""")


def target(tmp_path: Path, **fields) -> ProfileTarget:
    task = Task(name="vector_add", source="", category="other")
    return ProfileTarget(
        **{"task": task, "candidate": None, "out_dir": tmp_path / "out", "device": "cuda", "python_argv": PROGRAM}
        | fields
    )


class StandIn:
    """The stand-in ncu: ``answer`` chooses what it prints, ``calls`` are its command lines."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / "ncu"
        self.path.write_text(f"#!{sys.executable}\n{STAND_IN}")
        self.path.chmod(0o755)
        self.answer()

    def answer(self, profile: str = RAW_CSV, details: str | None = None, sleep: float = 0) -> None:
        """``profile`` and ``details``: a file of tests/data, or the output itself (with a newline)."""

        def text(choice: str | None) -> str:
            return "" if choice is None else choice if "\n" in choice else fixture_text(choice)

        answer = {"profile": text(profile), "details": text(details), "sleep": sleep}
        (self.folder / "answer.json").write_text(json.dumps(answer))

    @property
    def calls(self) -> list[list[str]]:
        log = self.folder / "calls.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture
def ncu(monkeypatch, tmp_path) -> StandIn:
    """A machine where ncu runs: the stand-in, found by collect, on a GPU the probe believes in."""
    folder = tmp_path / "stand-in"
    folder.mkdir()
    stand_in = StandIn(folder)
    monkeypatch.setattr(collect_module, "probe", lambda: Availability(available=True))
    monkeypatch.setattr(collect_module, "find_ncu", lambda: str(stand_in.path))
    return stand_in


class TestContractWithTheStandIn(ProfilerContractTests):
    """The profiler contract, checked on collect() running the stand-in."""

    profiler_name = "ncu"

    @pytest.fixture
    def runnable(self, profiler: Profiler, ncu: StandIn) -> Profiler:
        return profiler


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
    assert [str(ncu.path), *profile_argv[:5]] == [
        str(ncu.path),
        "--csv",
        "--page",
        "raw",
        "--metrics",
        "gpu__time_duration.sum",
    ]
    assert profile_argv[-len(PROGRAM) :] == list(PROGRAM)
    assert import_argv == [
        "--import",
        str(out / "ncu-report.ncu-rep"),
        "--csv",
        "--page",
        "details",
    ]
    assert (out / "ncu-command.txt").read_text().startswith(f"{ncu.path} --csv")


def test_only_the_candidates_kernels_count(ncu, tmp_path):
    profile = collect(target(tmp_path, kernel_functions=("vecAdd",)), ["gpu__time_duration"])
    assert ncu.calls[0][ncu.calls[0].index("--kernel-name") + 1] == "regex:vecAdd"
    assert len(profile.metrics) == 3
    assert profile.notes[0].endswith(
        "'pragma_forward', of kernels matching vecAdd (others, library kernels among them, were not profiled)"
    )

    other = collect(target(tmp_path, kernel_functions=("relu_kernel",)), ["gpu__time_duration"])
    assert other.metrics == ()
    assert "belongs to the candidate's kernels" in other.not_collected["gpu__time_duration"]


def test_rule_results_become_notes(ncu, tmp_path):
    ncu.answer(profile=CSV_DETAILS, details=CSV_DETAILS)
    profile = collect(target(tmp_path), ["gpu__time_duration.sum"])
    assert "gpu__time_duration.sum" in profile.not_collected  # this page shows labels, not names
    assert profile.notes[1].startswith("library kernels did work inside the candidate's forward: cutlass3x_sm100")
    rules = profile.notes[2:]
    assert len(rules) == 8
    kernel = "cutlass3x_sm100_tensorop_s64x256x32gemm_f8_f8_f32_f16_f16_64x256x128_1x1x1_0_..."
    assert rules[0].startswith(f"OPT {kernel} (SpeedOfLight): This workload exhibits low compute")
    assert rules[3].endswith("[est. speedup 81.25% local]")


def test_library_kernels_in_the_range_are_a_note(ncu, tmp_path):
    # a Triton program's output, where torch.randn's kernel ran beside the Triton kernel
    ncu.answer(profile="ncu-2023.3-default-details-cc89-triton.txt")
    profile = collect(target(tmp_path), ["launch__registers_per_thread"])
    assert profile.notes[0] == "ncu profiled 2 kernel launch(es) in the NVTX range 'pragma_forward'"
    assert profile.notes[1].startswith("library kernels did work inside the candidate's forward: at::native::")
    assert profile.notes[1].endswith("(PyTorch ATen, 34% of kernel time)")
    # the duration is asked for, for the note's shares
    profile_argv = ncu.calls[0]
    assert profile_argv[profile_argv.index("--metrics") + 1] == "launch__registers_per_thread,gpu__time_duration.sum"


def test_no_library_note_for_the_candidates_own_kernels(ncu, tmp_path):
    profile = collect(target(tmp_path), ["launch__registers_per_thread"])
    assert not any(note.startswith("library kernels") for note in profile.notes)
    # the raw page prints every duration column; the profile keeps only what was requested
    assert {metric.name for metric in profile.metrics} == {"launch__registers_per_thread"}


def test_permission_error_is_unavailability(ncu, tmp_path):
    # the message as the Profiling Guide's FAQ and FORMATS.md quote it
    ncu.answer(
        profile="==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access "
        "NVIDIA GPU Performance Counters on the target device.\n"
    )
    with pytest.raises(ProfilerUnavailable) as error:
        collect(target(tmp_path), ["gpu__time_duration.sum"])
    assert str(error.value) == PERMISSION_REASON


def test_no_kernel_results(ncu, tmp_path):
    ncu.answer(profile=fixture_text("ncu-2022-default-details-rtx3070-matrix_sums.txt").splitlines()[0] + "\n")
    profile = collect(target(tmp_path), ["gpu__time_duration.sum"])
    assert profile.metrics == ()
    reason = profile.not_collected["gpu__time_duration.sum"]
    assert reason.startswith(
        "ncu (exit code 0) gave no kernel results inside the NVTX range 'pragma_forward': ncu printed no kernel results"
    )
    assert profile.notes == (reason,)


def test_timeout(ncu, tmp_path):
    ncu.answer(sleep=60)
    profile = collect(target(tmp_path, timeout_s=1), ["gpu__time_duration.sum"])
    assert profile.not_collected == {"gpu__time_duration.sum": "ncu did not finish within 1 s and was stopped"}
    assert len(ncu.calls) == 1  # no report to import


def test_an_ncu_that_cannot_be_started_is_named(ncu, tmp_path):
    ncu.path.chmod(0o644)
    with pytest.raises(ProfilerUnavailable, match=f"^`ncu` cannot be started: Permission denied: {ncu.path}"):
        collect(target(tmp_path), ["gpu__time_duration.sum"])


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
