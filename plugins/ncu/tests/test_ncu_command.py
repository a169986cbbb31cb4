"""The ncu command lines, built without running anything."""

from __future__ import annotations

import re

import pytest

from pragma_ncu.command import NVTX_RANGE, details_command, kernel_regex, profile_command

PROGRAM = ("/venv/bin/python", "-m", "pragma_core.profiling.worker", "run", "/tmp/out/job", "3")


def test_profile_command_reads_the_raw_page_inside_the_nvtx_range():
    argv = profile_command(
        "/usr/local/cuda/bin/ncu",
        PROGRAM,
        ["gpu__time_duration.sum", "lts__t_sector_hit_rate.pct"],
        report="/tmp/out/ncu-report",
    )
    assert argv == [
        "/usr/local/cuda/bin/ncu",
        "--csv",
        "--page",
        "raw",
        "--metrics",
        "gpu__time_duration.sum,lts__t_sector_hit_rate.pct",
        "--section",
        "SpeedOfLight",
        "--section",
        "LaunchStats",
        "--section",
        "Occupancy",
        "--nvtx",
        "--nvtx-include",
        "pragma_forward/",
        "--kernel-name-base",
        "demangled",
        "--target-processes",
        "all",
        "-f",
        "-o",
        "/tmp/out/ncu-report",
        *PROGRAM,
    ]


def test_profile_command_filters_the_candidates_kernels():
    argv = profile_command(
        "ncu",
        PROGRAM,
        ["gpu__time_duration.sum"],
        sections=(),
        kernel_functions=["relu_kernel", "add_bias<float>", "relu_kernel"],
    )
    assert argv[argv.index("--kernel-name") + 1] == r"regex:relu_kernel|add_bias<float>"
    assert "--section" not in argv and "-o" not in argv
    assert argv[-len(PROGRAM) :] == list(PROGRAM)


def test_kernel_regex_escapes_and_drops_duplicates_and_blanks():
    assert kernel_regex([]) == ""
    assert kernel_regex(["", "a.b", "a.b", "ns::k(int)"]) == r"a\.b|ns::k\(int\)"


def test_profile_command_without_metrics_or_program():
    assert "--metrics" not in profile_command("ncu", PROGRAM, [])
    with pytest.raises(ValueError, match="nothing to profile"):
        profile_command("ncu", (), ["gpu__time_duration.sum"])


def test_details_command_imports_the_report():
    assert details_command("ncu", "/tmp/out/ncu-report.ncu-rep") == [
        "ncu",
        "--import",
        "/tmp/out/ncu-report.ncu-rep",
        "--csv",
        "--page",
        "details",
    ]


def test_the_nvtx_range_is_the_one_the_worker_opens():
    worker = pytest.importorskip("pragma_core.profiling.worker")
    assert worker.NVTX_RANGE == NVTX_RANGE


def test_only_the_candidates_kernels_inside_the_forward_are_profiled():
    """Both filters in one command: the NVTX push/pop range (``pragma_forward/``, the trailing slash
    makes it a push/pop range in ncu's syntax) and a partial regex on the demangled kernel name."""
    argv = profile_command("ncu", PROGRAM, ["gpu__time_duration.sum"], kernel_functions=["square_kernel"])
    assert argv[argv.index("--nvtx") + 1 : argv.index("--nvtx") + 3] == ["--nvtx-include", "pragma_forward/"]
    assert argv[argv.index("--kernel-name-base") + 1] == "demangled"
    pattern = argv[argv.index("--kernel-name") + 1].removeprefix("regex:")
    assert re.search(pattern, "square_kernel_0d1d234")  # Triton's name for the jit function square_kernel
    assert not re.search(pattern, "void at::native::vectorized_elementwise_kernel<(int)4, at::native::AbsFunctor>")
