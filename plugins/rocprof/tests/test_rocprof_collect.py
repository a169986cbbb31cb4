"""collect(): passes, splitting, merging, attribution and not_collected, against a stand-in rocprofv3.

There is no AMD GPU here. The stand-in is a small script that takes rocprofv3's command line, runs
the target, and writes the *recorded* rocprofv3 files from tests/data into the output folder, so
the orchestration around the real tool is tested on real output. It refuses passes with more
counters than it is told the hardware holds, the way rocprofv3 does. The test at the end runs the
real rocprofv3 where there is one.
"""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path

import attrs
import pytest

import pragma_rocprof.collect as collect_module
import pragma_rocprof.forward as forward
from pragma_core import Availability
from pragma_core.errors import ProfilerUnavailable
from pragma_core.plugin_api.components import Profiler, ProfileTarget
from pragma_core.records import Task
from pragma_core.testing import ProfilerContractTests
from pragma_rocprof.collect import COMMAND_NAME, LOG_NAME, collect, kernel_matches
from pragma_rocprof.probe import probe

DATA = Path(__file__).parent / "data"
OCCUPANCY = DATA / "rocprofv3-rocm7-counter_collection-OccupancyPercent-first8.csv"
VALUBUSY = DATA / "rocprofv3-rocm7-counter_collection-VALUBusy-first8.csv"
TRACE_2025 = DATA / "rocprofv3-docs2025-kernel_trace.csv"
MARKERS_2025 = DATA / "rocprofv3-docs2025-marker_api_trace.csv"  # from another run than the trace

FAKE_ROCPROFV3 = textwrap.dedent("""\
    import json, os, shutil, subprocess, sys, time
    args = sys.argv[1:]
    program = args[args.index("--") + 1:]
    options = args[:args.index("--")]
    counters = []
    if "--pmc" in options:
        for word in options[options.index("--pmc") + 1:]:
            if word.startswith("-"):
                break
            counters.append(word)
    out = options[options.index("-d") + 1]
    name = options[options.index("-o") + 1]
    subprocess.run(program, check=True)
    time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
    if os.environ.get("FAKE_EXIT"):
        print("HSA_STATUS_ERROR: A generic error has occurred.", file=sys.stderr)
        sys.exit(int(os.environ["FAKE_EXIT"]))
    if len(counters) > int(os.environ.get("FAKE_MAX_COUNTERS", "99")):
        print("rocprofiler_create_counter_config failed: ROCPROFILER_STATUS_ERROR_EXCEEDS_HW_LIMIT: "
              "Request exceeds the capabilities of the hardware to collect", file=sys.stderr)
        sys.exit(1)
    os.makedirs(os.path.join(out, "pmc_1"), exist_ok=True)
    if os.environ.get("FAKE_TRACE"):
        shutil.copy(os.environ["FAKE_TRACE"], os.path.join(out, "pmc_1", name + "_kernel_trace.csv"))
    if os.environ.get("FAKE_MARKERS") and "--marker-trace" in options:
        shutil.copy(os.environ["FAKE_MARKERS"], os.path.join(out, "pmc_1", name + "_marker_api_trace.csv"))
    recorded = json.loads(os.environ.get("FAKE_COUNTER_FILES", "{}"))
    for counter in counters:
        if counter in recorded:
            shutil.copy(recorded[counter], os.path.join(out, "pmc_1", name + "_counter_collection.csv"))
""")


@pytest.fixture
def fake_rocprofv3(tmp_path, monkeypatch):
    """Makes collect() find the stand-in and believe an AMD GPU is present."""
    tool = tmp_path / "bin" / "rocprofv3"
    tool.parent.mkdir()
    tool.write_text(f"#!{sys.executable}\n{FAKE_ROCPROFV3}")
    tool.chmod(0o755)
    monkeypatch.setattr(collect_module, "probe", lambda: Availability(available=True, reason="stand-in"))
    monkeypatch.setattr(collect_module, "find_rocprofv3", lambda: str(tool))
    for variable in (
        "FAKE_SLEEP",
        "FAKE_EXIT",
        "FAKE_MAX_COUNTERS",
        "FAKE_TRACE",
        "FAKE_COUNTER_FILES",
        "FAKE_MARKERS",
    ):
        monkeypatch.delenv(variable, raising=False)
    return tool


class TestContractWithTheStandIn(ProfilerContractTests):
    """The profiler contract, checked on collect() running the stand-in."""

    profiler_name = "rocprof"

    @pytest.fixture
    def runnable(self, profiler: Profiler, fake_rocprofv3: Path) -> Profiler:
        return profiler


def target_for(tmp_path: Path, **changes) -> ProfileTarget:
    marker = tmp_path / "runs.txt"
    fields = dict(
        task=Task(name="shallow_water", source="", category="other"),
        candidate=None,
        out_dir=tmp_path / "profile",
        device="rocm",
        python_argv=(sys.executable, "-c", f"open({str(marker)!r}, 'a').write('ran\\n')"),
    )
    return ProfileTarget(**(fields | changes))


def runs_of(tmp_path: Path) -> int:
    marker = tmp_path / "runs.txt"
    return len(marker.read_text().splitlines()) if marker.exists() else 0


def test_passes_the_hardware_refuses_are_split_and_merged(fake_rocprofv3, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_MAX_COUNTERS", "1")
    monkeypatch.setenv(
        "FAKE_COUNTER_FILES", json.dumps({"OccupancyPercent": str(OCCUPANCY), "VALUBusy": str(VALUBUSY)})
    )
    target = target_for(tmp_path, kernel_functions=("compute_rhs",))
    profile = collect(target, ["OccupancyPercent", "VALUBusy", "AverageNs", "VGPR_Count"])

    # one run with both counters, refused; then one run each
    assert runs_of(tmp_path) == 3
    assert any("cannot count OccupancyPercent, VALUBusy at once" in note for note in profile.notes)
    assert {metric.kernel for metric in profile.metrics} == {"compute_rhs"}
    assert profile.get("OccupancyPercent").value == pytest.approx((24.333218 + 22.353355) / 2)
    assert profile.get("VALUBusy").value == pytest.approx((51.287701 + 49.378490) / 2)
    assert profile.get("VGPR_Count").value == 52
    # no kernel trace was written, so durations come from the first counter file's timestamps
    assert (
        profile.get("AverageNs").value
        == ((1569078165045964 - 1569078165036469) + (1569078165210296 - 1569078165200962)) / 2
    )
    assert [metric.name for metric in profile.metrics[:4]] == [
        "OccupancyPercent",
        "VALUBusy",
        "AverageNs",
        "VGPR_Count",
    ]
    assert any("left out 3 other kernel(s)" in note for note in profile.notes)
    assert not profile.not_collected
    assert any(path.endswith("rocprof_counter_collection.csv") for path in profile.raw_paths)
    assert any(path.endswith(LOG_NAME) for path in profile.raw_paths)
    first_command = (target.out_dir / "rocprof" / "pass_1" / COMMAND_NAME).read_text()
    assert "--pmc OccupancyPercent VALUBusy --kernel-trace" in first_command
    assert "--kernel-include-regex compute_rhs" in first_command
    assert "exceeds the capabilities of the hardware" in (target.out_dir / "rocprof" / "pass_1" / LOG_NAME).read_text()


def test_unknown_and_missing_metrics_are_reported_not_dropped(fake_rocprofv3, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_COUNTER_FILES", json.dumps({"OccupancyPercent": str(OCCUPANCY)}))
    profile = collect(
        target_for(tmp_path),
        [
            "OccupancyPercent",
            "sm__throughput.avg.pct_of_peak_sustained_elapsed",  # an ncu name
            "arch_vgpr",  # a rocprof v1 column
            "SQ_NOT_ON_THIS_GPU",  # grammatical, but rocprofv3 returns nothing for it
            "L2CacheHit",  # needs TCC_HIT_sum and TCC_MISS_sum
        ],
    )
    assert profile.get("OccupancyPercent", "init_gaussian").value == pytest.approx(13.271172)
    reasons = profile.not_collected
    assert set(reasons) == {
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "arch_vgpr",
        "SQ_NOT_ON_THIS_GPU",
        "L2CacheHit",
    }
    assert "not a rocprof counter name" in reasons["sm__throughput.avg.pct_of_peak_sustained_elapsed"]
    assert "VGPR_Count" in reasons["arch_vgpr"]
    assert "--list-avail" in reasons["SQ_NOT_ON_THIS_GPU"]
    assert "TCC_HIT_sum, TCC_MISS_sum not collected" in reasons["L2CacheHit"]
    command = (tmp_path / "profile" / "rocprof" / "pass_1" / COMMAND_NAME).read_text()
    assert "sm__throughput" not in command and "SQ_NOT_ON_THIS_GPU" in command


def test_trace_only_with_no_matching_kernel_keeps_all_and_says_so(fake_rocprofv3, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_TRACE", str(TRACE_2025))
    profile = collect(target_for(tmp_path, kernel_functions=("relu_kernel",)), ["AverageNs", "Calls"])
    assert runs_of(tmp_path) == 1
    command = (tmp_path / "profile" / "rocprof" / "pass_1" / COMMAND_NAME).read_text()
    assert "--pmc" not in command and "--kernel-include-regex relu_kernel" in command
    assert any("none of the candidate's kernels (relu_kernel)" in note for note in profile.notes)
    # longest-running kernel first
    assert profile.metrics[0].kernel == "void addition_kernel<float>(float*, float const*, float const*, int, int)"
    assert profile.metrics[0].name == "AverageNs"
    assert not profile.not_collected


def test_kernel_trace_durations_win_and_bandwidth_uses_them(fake_rocprofv3, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_TRACE", str(TRACE_2025))
    counters = DATA / "rocprofv3-docs2025-counter_collection.csv"
    monkeypatch.setenv("FAKE_COUNTER_FILES", json.dumps({"SQ_WAVES": str(counters)}))
    profile = collect(target_for(tmp_path, kernel_functions=("divide_kernel",)), ["AverageNs", "SQ_WAVES"])
    divide = "divide_kernel(float*, float const*, float const*, int, int)"
    assert {metric.kernel for metric in profile.metrics} == {divide}
    # two dispatches in the trace, one in the counter file: the trace's count and durations are kept
    assert profile.get("Calls").value == 2
    assert (
        profile.get("AverageNs").value
        == ((1550151853075237 - 1550151853064037) + (1550151853160837 - 1550151853148397)) / 2
    )
    assert profile.get("SQ_WAVES").value == 16384


def test_without_the_forward_range_the_whole_run_is_kept_and_said_so(fake_rocprofv3, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_TRACE", str(TRACE_2025))
    profile = collect(target_for(tmp_path), ["Calls"])
    command = (tmp_path / "profile" / "rocprof" / "pass_1" / COMMAND_NAME).read_text()
    assert "--kernel-trace --marker-trace" in command
    assert (
        "rocprofv3 wrote no marker trace, so the ROCTx range 'pragma_forward' is unknown; the metrics cover every "
        "dispatch of the run, warm-up forwards included"
    ) in profile.notes
    assert profile.get("Calls", "divide_kernel(float*, float const*, float const*, int, int)").value == 2

    # the guide's marker trace has ranges, but not this one, and its times are of another run
    monkeypatch.setenv("FAKE_MARKERS", str(MARKERS_2025))
    profile = collect(target_for(tmp_path), ["Calls"])
    assert any(note.startswith("the marker trace has no ROCTx range 'pragma_forward'") for note in profile.notes)
    monkeypatch.setattr(  # a range it has
        collect_module, "forward_windows", lambda text: forward.forward_windows(text, name="hipLaunchKernel")
    )
    profile = collect(target_for(tmp_path), ["Calls"])
    assert any(
        note.startswith("by rocprofv3's timestamps no dispatch ran inside the ROCTx range") for note in profile.notes
    )
    assert profile.get("Calls", "divide_kernel(float*, float const*, float const*, int, int)").value == 2


def test_the_files_are_cut_to_the_forward_range(fake_rocprofv3, tmp_path, monkeypatch):
    # The recorded marker trace and kernel trace come from different runs, so the window is placed
    # here, by hand, around the kernel trace's second to fourth dispatches in time.
    monkeypatch.setenv("FAKE_TRACE", str(TRACE_2025))
    monkeypatch.setenv("FAKE_MARKERS", str(MARKERS_2025))
    found = forward.dispatches(TRACE_2025.read_text())
    in_time = sorted(found, key=lambda dispatch: dispatch.start)
    window = (in_time[1].start, in_time[3].end)
    monkeypatch.setattr(collect_module, "forward_windows", lambda text: [window])
    profile = collect(target_for(tmp_path), ["Calls", "AverageNs"])
    assert (
        "kept the dispatches inside the ROCTx range 'pragma_forward' (the timed forwards), by rocprofv3's marker trace"
    ) in profile.notes
    timed = forward.inside(found, [window])
    assert len(timed) == 3
    assert {metric.kernel for metric in profile.metrics} == {dispatch.kernel for dispatch in timed}
    assert sum(metric.value for metric in profile.metrics if metric.name == "Calls") == len(timed)
    assert not any(note.startswith("library kernels") for note in profile.notes)  # hand-written HIP kernels


def test_a_failed_run_marks_its_counters(fake_rocprofv3, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_EXIT", "3")
    profile = collect(target_for(tmp_path), ["VALUBusy", "MemUnitBusy", "AverageNs"])
    assert runs_of(tmp_path) == 1  # not a hardware-limit failure: no split
    reason = profile.not_collected["VALUBusy"]
    assert reason == profile.not_collected["MemUnitBusy"]
    assert "exited with code 3: HSA_STATUS_ERROR: A generic error has occurred." in reason
    assert "no kernel ran under rocprofv3" in profile.not_collected["AverageNs"]


def test_a_run_past_its_timeout_is_stopped_and_the_passes_after_it_are_not_run(fake_rocprofv3, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_SLEEP", "30")
    started = time.monotonic()
    profile = collect(target_for(tmp_path, timeout_s=1), ["VALUBusy", "MemUnitBusy"], per_pass=1)
    assert time.monotonic() - started < 10
    assert runs_of(tmp_path) == 1
    assert profile.not_collected["VALUBusy"] == "rocprofv3 run 1 did not finish within 1 s and was stopped"
    assert profile.not_collected["MemUnitBusy"] == (
        "not run: run 1 did not finish within 1 s, and this one would wait as long"
    )


def test_runs_stop_at_the_limit(fake_rocprofv3, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_MAX_COUNTERS", "0")
    profile = collect(target_for(tmp_path), ["VALUBusy", "MemUnitBusy", "MfmaUtil"], max_runs=3)
    assert runs_of(tmp_path) == 3
    assert "stops after 3 rocprofv3 runs" in profile.not_collected["MfmaUtil"]


def test_unavailable_here_raises_the_probes_reason(monkeypatch, tmp_path):
    reason = "no AMD GPU: /dev/kfd is missing"
    monkeypatch.setattr(collect_module, "probe", lambda: Availability(available=False, reason=reason))
    with pytest.raises(ProfilerUnavailable, match=reason):
        collect(target_for(tmp_path), ["VALUBusy"])


def test_a_cpu_target_is_refused(fake_rocprofv3, tmp_path):
    with pytest.raises(ProfilerUnavailable, match="AMD GPUs"):
        collect(target_for(tmp_path, device="cpu"), ["VALUBusy"])


@pytest.mark.parametrize(
    "kernel, function, expected",
    [
        ("void relu_kernel<float>(float*, int)", "relu_kernel", True),
        ("relu_kernel_0d1d2", "relu_kernel", True),
        ("ns::relu_kernel(float*)", "relu_kernel", True),
        ("my_relu_kernel(float*)", "relu_kernel", False),
        ("relu_kernel2(float*)", "relu_kernel", False),
    ],
)
def test_kernel_matches(kernel, function, expected):
    assert kernel_matches(kernel, function) is expected


needs_rocm = pytest.mark.skipif(not probe().available, reason=f"needs rocprofv3 and an AMD GPU: {probe().reason}")


@needs_rocm
def test_real_rocprofv3_on_a_torch_kernel(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("this torch has no ROCm device")
    program = "import torch; x = torch.ones(1 << 20, device='cuda'); (x * 2).sum().item()"
    target = attrs.evolve(target_for(tmp_path), python_argv=(sys.executable, "-c", program))
    profile = collect(target, ["AverageNs", "VGPR_Count", "SQ_WAVES", "sm__not_amd"])
    assert profile.get("AverageNs") is not None and profile.get("AverageNs").value > 0
    assert "sm__not_amd" in profile.not_collected
    assert all(Path(path).exists() for path in profile.raw_paths)
