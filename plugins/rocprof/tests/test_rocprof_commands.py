"""The rocprofv3 command lines, built without running anything."""

from __future__ import annotations

import re

import pytest

from pragma_rocprof.commands import build_command, kernel_include_regex, split_passes

ARGV = ("/usr/bin/python3", "run.py", "--repetitions", "3")


def test_one_pass_command_line():
    command = build_command("/opt/rocm/bin/rocprofv3", ("FETCH_SIZE", "WRITE_SIZE"), "/tmp/out/pass_1", ARGV)
    assert command == (
        "/opt/rocm/bin/rocprofv3",
        "--pmc",
        "FETCH_SIZE",
        "WRITE_SIZE",
        "--kernel-trace",
        "--marker-trace",
        "--output-format",
        "csv",
        "-d",
        "/tmp/out/pass_1",
        "-o",
        "rocprof",
        "--",
        *ARGV,
    )


def test_kernel_filter_goes_before_the_program():
    command = build_command("rocprofv3", ("SQ_WAVES",), "out", ARGV, kernel_regex="relu_kernel", name="x")
    assert command[command.index("-o") + 1] == "x"
    assert command[command.index("--kernel-include-regex") + 1] == "relu_kernel"
    assert command.index("--kernel-include-regex") < command.index("--")
    assert command[command.index("--") + 1 :] == ARGV


def test_no_counters_traces_kernels_only():
    command = build_command("rocprofv3", (), "out", ARGV)
    assert "--pmc" not in command and "--kernel-trace" in command


def test_no_program_is_an_error():
    with pytest.raises(ValueError, match="python_argv"):
        build_command("rocprofv3", ("SQ_WAVES",), "out", ())


def test_split_passes_keeps_order_and_drops_repeats():
    counters = [f"C{i}" for i in range(10)] + ["C3"]
    assert split_passes(counters, 4) == [("C0", "C1", "C2", "C3"), ("C4", "C5", "C6", "C7"), ("C8", "C9")]
    assert split_passes(counters) == [tuple(f"C{i}" for i in range(8)), ("C8", "C9")]
    assert split_passes([], 4) == []
    with pytest.raises(ValueError):
        split_passes(["C0"], 0)


def test_kernel_include_regex():
    assert kernel_include_regex(()) is None
    assert kernel_include_regex(["relu_kernel", " ", "relu_kernel", "gemm_tile"]) == "relu_kernel|gemm_tile"
    regex = kernel_include_regex(["op.kernel"])
    assert re.search(regex, "void op.kernel<float>(float*)") and not re.search(regex, "opXkernel")
