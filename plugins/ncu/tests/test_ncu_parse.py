"""The parser on every recorded ncu output: counts, exact values, and each quirk of FORMATS.md §1."""

from __future__ import annotations

import pytest
from ncu_data import FIXTURES, fixture_text

from pragma_core.errors import ProfileParseError
from pragma_core.records import Metric
from pragma_ncu import parse, read, rules

RAW_CSV = "ncu-raw-page-csv-units-base-fp-gtx1080-3launches.csv"
RAW_STDOUT = "ncu-raw-page-csv-stdout-with-app-output-gtx1080.txt"
CSV_DETAILS = "ncu-csv-details-set-full-b200-cc100-with-rules.log"
A100 = "ncu-default-details-A100-cc80-17kernels-pytorch.txt"
TRITON = "ncu-2023.3-default-details-cc89-triton.txt"
MATRIX_SUMS = "ncu-2022-default-details-rtx3070-matrix_sums.txt"
REDUCTIONS = "ncu-2022-default-details-rtx3070-reductions-3kernels.txt"
CMDLINE = "ncu-2022-cmdline-metrics-rtx3070-matrix_sums.txt"
TRANSPOSE = "ncu-2022-cmdline-metrics-ratio-units-transpose.txt"
PASCAL = "ncu-2019era-default-teslaP40-interleaved-stdout.txt"

ROW_SUMS = "row_sums(const float *, float *, unsigned long)"


def one(metrics: list[Metric], name: str, kernel: str | None = None) -> Metric:
    found = [m for m in metrics if m.name == name and (kernel is None or m.kernel == kernel)]
    assert len(found) == 1, (name, kernel, found)
    return found[0]


# layout, launches, distinct kernels, values printed, numeric metrics, rules
EXPECTED = {
    RAW_CSV: ("raw-csv", 3, 1, 1176, 1152, 0),
    RAW_STDOUT: ("raw-csv", 3, 1, 1176, 1152, 0),
    CSV_DETAILS: ("details-csv", 1, 1, 50, 47, 8),
    A100: ("details", 17, 14, 476, 459, 51),
    TRITON: ("details", 2, 2, 56, 54, 5),
    MATRIX_SUMS: ("details", 2, 2, 56, 54, 6),
    REDUCTIONS: ("details", 3, 3, 84, 81, 6),
    CMDLINE: ("details", 2, 2, 4, 4, 0),
    TRANSPOSE: ("details", 1, 1, 8, 8, 0),
    PASCAL: ("details", 1, 1, 16, 9, 0),
}


def test_every_fixture_has_expectations():
    assert {path.name for path in FIXTURES} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_what_each_fixture_yields(name):
    layout, launches, kernels, entries, metrics, rule_count = EXPECTED[name]
    reading = read(fixture_text(name))
    assert reading.layout == layout
    assert len(reading.kernels) == launches
    assert len({kernel.split("#")[0] for kernel in reading.kernels}) == kernels
    assert len(reading.entries) == entries
    parsed = parse(fixture_text(name))
    assert len(parsed) == metrics
    assert all(m.profiler == "ncu" and m.kernel for m in parsed)
    assert len(rules(fixture_text(name))) == rule_count


# -- the raw page (--csv --page raw) ---------------------------------------------------------------


def test_raw_page_units_row_and_thousands_separators_with_fp():
    metrics = parse(fixture_text(RAW_CSV))
    assert one(metrics, "gpu__time_duration", "vecAdd#0") == Metric(
        name="gpu__time_duration",
        value=2720.0,
        unit="ns",
        kernel="vecAdd#0",
        profiler="ncu",
        meaning="kernel duration (the name before the .sum roll-up existed)",
    )
    assert one(metrics, "device__attribute_clock_rate", "vecAdd#1").value == 1_759_000.0
    assert one(metrics, "dram__bytes_per_sec", "vecAdd#0").value == pytest.approx(2_917_647_058.82)
    assert one(metrics, "dram__bytes_per_sec", "vecAdd#0").unit == "byte/second"
    assert one(metrics, "dram__frequency", "vecAdd#2").value == pytest.approx(6_447_058_823.53)
    assert one(metrics, "launch__occupancy_limit_warps", "vecAdd#0").unit == "block"
    assert one(metrics, "launch__registers_per_thread", "vecAdd#0").unit == "register/thread"
    assert one(metrics, "launch__block_size", "vecAdd#0").unit == ""  # the units row leaves it empty


def test_raw_page_launches_of_one_kernel_carry_their_launch_id():
    assert read(fixture_text(RAW_CSV)).kernels == ("vecAdd#0", "vecAdd#1", "vecAdd#2")


def test_raw_page_skips_strings_and_per_instance_lists():
    numeric = {m.name for m in parse(fixture_text(RAW_CSV)) if m.kernel == "vecAdd#0"}
    assert "device__attribute_display_name" not in numeric  # "NVIDIA GeForce GTX 1080"
    assert "inst_executed" not in numeric  # "32.00; 32.00; ..."


def test_raw_page_after_program_output_and_prof_lines_reads_the_same():
    assert parse(fixture_text(RAW_STDOUT)) == parse(fixture_text(RAW_CSV))


# -- the CSV details page -------------------------------------------------------------------------


def test_csv_details_ragged_rows_and_base_units():
    metrics = parse(fixture_text(CSV_DETAILS))
    kernel = read(fixture_text(CSV_DETAILS)).kernels[0]
    assert kernel.startswith("cutlass3x_sm100_tensorop_s64x256x32gemm_f8_f8_f32_f16_f16")
    assert "#" not in kernel
    assert one(metrics, "Duration") == Metric(
        name="Duration",
        value=406240.0,
        unit="ns",
        kernel=kernel,
        profiler="ncu",
        meaning="kernel duration: time the kernel ran on the GPU (gpu__time_duration.sum)",
    )
    assert one(metrics, "DRAM Frequency").value == pytest.approx(3_995_313_115.40)
    assert one(metrics, "DRAM Frequency").unit == "hz"
    assert one(metrics, "Dynamic Shared Memory Per Block").value == 205696.0
    assert one(metrics, "Dynamic Shared Memory Per Block").unit == "byte/block"
    assert one(metrics, "Achieved Occupancy").value == 15.53
    names = {m.name for m in metrics}
    assert not names & {"Cluster Scheduling Policy", "Function Cache Configuration", "Enabled TPC IDs"}


def test_csv_details_rules_keep_name_section_id_and_speedup():
    found = rules(fixture_text(CSV_DETAILS))
    assert [r.name for r in found] == [
        "SOLBottleneck",
        "LaunchConfiguration",
        "LaunchConfiguration",
        "TheoreticalOccupancy",
    ] + ["WorkloadImbalance"] * 4
    assert {r.kind for r in found} == {"OPT"}
    assert [r.section for r in found][:4] == ["SpeedOfLight", "LaunchStats", "LaunchStats", "Occupancy"]
    assert [(r.speedup_pct, r.speedup_type) for r in found] == [
        (None, ""),
        (None, ""),
        (50.0, "global"),
        (81.25, "local"),
        (5.818, "global"),
        (6.24, "global"),
        (5.818, "global"),
        (14.55, "global"),
    ]
    assert found[3].text.startswith("The 3.00 theoretical warps per scheduler this kernel can issue")


# -- the details page, 2023 and later -------------------------------------------------------------


def test_2023_layout_header_row_thousands_separators_and_grid_stripped_from_the_name():
    reading = read(fixture_text(TRITON))
    first, square = reading.kernels
    assert first.startswith("void at::native::<unnamed>::distribution_elementwise_grid_stride_kernel<")
    assert first.endswith("(int, at::PhiloxCudaState, T3, T4)")  # not "(768, 1, 1)x(256, 1, 1)"
    assert square == "square_kernel_0d1d234"
    metrics = parse(fixture_text(TRITON))
    assert one(metrics, "Elapsed Cycles", square).value == 27344.0  # printed 27,344
    assert one(metrics, "SM Active Cycles", square).value == 17462.53  # printed 17,462.53
    assert one(metrics, "Duration", square).value == pytest.approx(11550.0)  # 11.55 usecond
    assert one(metrics, "Duration", square).unit == "ns"
    assert one(metrics, "SM Frequency", square).value == pytest.approx(2.37e9)  # cycle/nsecond
    assert one(metrics, "Shared Memory Configuration Size", square).value == pytest.approx(32770.0)
    assert one(metrics, "Grid Size", square).value == 1823.0
    assert one(metrics, "Memory Throughput", square).unit == "%"
    assert "Metric Name" not in {m.name for m in metrics}


def test_2023_rules_with_est_speedup_and_est_local_speedup():
    found = rules(fixture_text(TRITON))
    assert [(r.kind, r.section) for r in found] == [
        ("OPT", "GPU Speed Of Light Throughput"),
        ("OPT", "Occupancy"),
        ("INF", "GPU Speed Of Light Throughput"),
        ("OPT", "Launch Statistics"),
        ("OPT", "Occupancy"),
    ]
    assert [(r.speedup_pct, r.speedup_type) for r in found] == [
        (None, ""),
        (32.73, "local"),
        (None, ""),
        (50.0, ""),
        (26.8, "local"),
    ]
    wave = found[3]
    assert wave.kernel == "square_kernel_0d1d234"
    assert wave.text.startswith("A wave of thread blocks is defined as the maximum number of blocks")
    assert wave.text.endswith("description for more details on launch configurations.")
    assert "  " not in wave.text  # padding and continuation indentation are gone
    assert wave.describe() == (f"OPT square_kernel_0d1d234 (Launch Statistics): {wave.text} [est. speedup 50%]")


def test_a100_log_without_separators_and_with_repeated_kernels():
    reading = read(fixture_text(A100))
    repeated = [label.rsplit("#", 1)[1] for label in reading.kernels if "#" in label]
    assert repeated == ["3", "5", "8", "9", "11"]
    assert reading.kernels[5].startswith(
        "void at::native::vectorized_elementwise_kernel<(int)4, at::native::AbsFunctor<float>"
    )
    metrics = parse(fixture_text(A100))
    assert one(metrics, "Elapsed Cycles", reading.kernels[0]).value == 15606.0
    assert one(metrics, "Threads", reading.kernels[0]).value == 221184.0
    assert len([m for m in metrics if m.name == "Duration"]) == 17
    found = rules(fixture_text(A100))
    assert {r.kind for r in found} == {"OPT"}
    assert (found[1].speedup_pct, found[1].speedup_type, found[1].section) == (50.0, "", "Launch Statistics")
    assert found[2].speedup_pct == 21.63  # "Estimated Speedup: 21.63%"
    assert found[2].text.startswith("This kernel's theoretical occupancy (75.0%) is limited by")


# -- the details page, 2021/2022 ------------------------------------------------------------------


def test_2022_layout_timestamp_stripped_scaled_units_converted():
    metrics = parse(fixture_text(MATRIX_SUMS))
    assert read(fixture_text(MATRIX_SUMS)).kernels == (ROW_SUMS, "column_sums(const float *, float *, unsigned long)")
    assert one(metrics, "Elapsed Cycles", ROW_SUMS).value == 9_284_529.0
    assert one(metrics, "Duration", ROW_SUMS).value == pytest.approx(11_970_000.0)  # 11.97 msecond
    assert one(metrics, "SM Frequency", ROW_SUMS).value == pytest.approx(775_670_000.0)  # cycle/usecond
    assert one(metrics, "SM Frequency", ROW_SUMS).unit == "hz"
    assert one(metrics, "Driver Shared Memory Per Block", ROW_SUMS).value == pytest.approx(1020.0)
    assert one(metrics, "Driver Shared Memory Per Block", ROW_SUMS).unit == "byte/block"  # Kbyte/block
    assert one(metrics, "Shared Memory Configuration Size", ROW_SUMS).unit == "byte"
    assert one(metrics, "Memory [%]", ROW_SUMS).value == 72.28
    assert one(metrics, "Memory [%]", ROW_SUMS).meaning.endswith(
        "(gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed)"
    )
    assert one(metrics, "Achieved Occupancy", ROW_SUMS).value == 27.92
    assert "Function Cache Configuration" not in {m.name for m in metrics}  # cudaFuncCachePreferNone


def test_2022_wrn_and_inf_rules():
    found = rules(fixture_text(MATRIX_SUMS))
    assert [r.kind for r in found] == ["WRN", "WRN", "WRN", "INF", "WRN", "WRN"]
    assert found[0].kernel == ROW_SUMS
    assert found[0].text == (
        "Memory is more heavily utilized than Compute: Look at the Memory Workload Analysis section "
        "to identify the L1 bottleneck. Check memory replay (coalescing) metrics to make sure you're "
        "efficiently utilizing the bytes transferred. Also consider whether it is possible to do more "
        "work per memory access (kernel fusion) or whether there are values you can (re)compute."
    )
    assert all(r.speedup_pct is None for r in found)


def test_2022_rows_indented_by_six_spaces():
    metrics = parse(fixture_text(REDUCTIONS))
    atomic = "atomic_red(const float *, float *)"
    assert one(metrics, "Grid Size", atomic).value == 32768.0
    assert one(metrics, "Threads", atomic).value == 8_388_608.0
    assert one(metrics, "SM Active Cycles", atomic).value == 23_771_132.18
    assert one(metrics, "Duration", atomic).value == pytest.approx(30_510_000.0)
    found = rules(fixture_text(REDUCTIONS))
    assert [(r.kind, r.kernel.split("(")[0]) for r in found] == [
        ("WRN", "atomic_red"),
        ("WRN", "atomic_red"),
        ("WRN", "reduce_a"),
        ("INF", "reduce_a"),
        ("INF", "reduce_ws"),
        ("WRN", "reduce_ws"),
    ]
    assert found[3].text == "This kernel's theoretical occupancy is not impacted by any block limit."


def test_2022_command_line_metrics_section_raw_names_and_ratio_units():
    metrics = parse(fixture_text(CMDLINE))
    assert [
        (m.kernel.split("(")[0], m.value) for m in metrics if m.name == "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
    ] == [("row_sums", 268_427_291.0), ("column_sums", 33_554_432.0)]
    transpose = parse(fixture_text(TRANSPOSE))
    ratio = one(transpose, "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_st.ratio")
    assert (ratio.value, ratio.unit) == (32.0, "sector/request")
    assert one(transpose, "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum").value == 16_777_216.0
    pct = one(transpose, "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.pct")
    assert (pct.value, pct.unit) == (25.0, "%")


# -- the details page, 2019 era -------------------------------------------------------------------


def test_2019_layout_spliced_progress_line_and_nan_values():
    reading = read(fixture_text(PASCAL))
    assert reading.kernels == ("vadd(float const *,float const *,float*,int)",)
    metrics = parse(fixture_text(PASCAL))
    assert [m.name for m in metrics] == [
        "Memory Frequency",
        "SOL FB",
        "Memory [%]",
        "Duration",
        "Memory Throughput",
        "Mem Busy",
        "L2 Hit Rate",
        "Mem Pipes Busy",
        "L1 Hit Rate",
    ]  # the seven "(!) nan" rows are left out
    assert (one(metrics, "Memory Frequency").value, one(metrics, "Memory Frequency").unit) == (7.1e9, "hz")
    throughput = one(metrics, "Memory Throughput")  # Mbyte/second here, a percentage since 2021
    assert (throughput.value, throughput.unit, throughput.meaning) == (90_560_000.0, "byte/second", "")
    assert one(metrics, "L2 Hit Rate").value == 91.67
    assert {e.text for e in reading.entries if e.name == "Elapsed Cycles"} == {"(!) nan"}


# -- what is not ncu output -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, said",
    [
        ("", "empty ncu output"),
        ("   \n\n", "empty ncu output"),
        ("hello world\nnot a profiler\n", "it starts with 'hello world'"),
        # the ncu error line quoted in the Profiling Guide's FAQ
        (
            "==ERROR== The application returned an error code (11)\n",
            "it said: ==ERROR== The application returned an error code (11)",
        ),
        # the ==PROF== lines of a recorded run, without its results
        (
            "\n".join(fixture_text(MATRIX_SUMS).splitlines()[:3]),
            'its last message: ==PROF== Profiling "column_sums" - 1: 0%....50%....100% - 9 passes',
        ),
        ('"ID","Process ID","Process Name","Host Name","Kernel Name"\n', "header but no kernel launch rows"),
        ('"ID","Process ID","Process Name"\n"0","1","x"\n', 'no "Kernel Name" column'),
    ],
)
def test_unreadable_output_says_what_it_saw(raw, said):
    with pytest.raises(ProfileParseError) as error:
        parse(raw)
    assert said in str(error.value)
    assert "\n" not in str(error.value)


def test_rules_of_the_raw_page_are_none_and_of_junk_an_error():
    assert rules(fixture_text(RAW_CSV)) == []
    with pytest.raises(ProfileParseError):
        rules("not ncu\n")
