"""parse() on every recorded rocprof file, with the values read from the files themselves."""

from __future__ import annotations

from pathlib import Path

import pytest

from pragma_core.errors import ProfileParseError
from pragma_rocprof.parse import detect_format, kernel_name, parse

DATA = Path(__file__).parent / "data"

ADDITION = "void addition_kernel<float>(float*, float const*, float const*, int, int)"
SUBTRACT = "subtract_kernel(float*, float const*, float const*, int, int)"
MULTIPLY = "multiply_kernel(float*, float const*, float const*, int, int)"
DIVIDE = "divide_kernel(float*, float const*, float const*, int, int)"
VECCOPY = "vecCopy(double*, double*, double*, int, int)"


def metrics_of(name: str) -> dict[tuple[str, str], float]:
    """(kernel, metric) -> value; also checks each pair appears once and every metric is rocprof's."""
    metrics = parse((DATA / name).read_text(encoding="utf-8"))
    table = {}
    for metric in metrics:
        assert metric.profiler == "rocprof"
        assert (metric.kernel, metric.name) not in table, metric
        table[metric.kernel, metric.name] = metric.value
    return table


def units_of(name: str) -> dict[str, str]:
    return {metric.name: metric.unit for metric in parse((DATA / name).read_text())}


# -- rocprofv3 counter_collection.csv -------------------------------------------------------------


def test_counter_collection_2024_long_format_sums_each_kernels_dispatches():
    got = metrics_of("rocprofv3-docs-counter_collection.csv")
    # addition_kernel is dispatches 1, 5, 9, 13, rows not in dispatch order
    assert got[ADDITION, "Calls"] == 4
    assert got[ADDITION, "SQ_WAVES"] == 4 * 16384
    assert got[SUBTRACT, "Calls"] == 2 and got[SUBTRACT, "SQ_WAVES"] == 2 * 16384
    assert got[MULTIPLY, "Calls"] == 1 and got[MULTIPLY, "SQ_WAVES"] == 16384
    assert got[ADDITION, "VGPR_Count"] == 8
    assert got[ADDITION, "SGPR_Count"] == 16
    assert got[ADDITION, "LDS_Block_Size"] == 0 and got[ADDITION, "Scratch_Size"] == 0
    assert got[ADDITION, "Workgroup_Size"] == 64 and got[ADDITION, "Grid_Size"] == 1048576
    # this layout has no timestamps and no Accum_VGPR_Count: nothing is made up for them
    assert (ADDITION, "AverageNs") not in got and (ADDITION, "Accum_VGPR_Count") not in got


def test_counter_collection_without_kernel_id_column():
    assert detect_format((DATA / "rocprofv3-docs-counter_collection-kernel-filtered.csv").read_text()) == (
        "counter_collection"
    )
    got = metrics_of("rocprofv3-docs-counter_collection-kernel-filtered.csv")
    assert {kernel for kernel, _ in got} == {DIVIDE}
    assert got[DIVIDE, "Calls"] == 4
    assert got[DIVIDE, "SQ_WAVES"] == 65536
    assert got[DIVIDE, "VGPR_Count"] == 12


def test_rocm7_layout_quoted_agent_fixed_and_scientific_values_averaged():
    got = metrics_of("rocprofv3-rocm7-counter_collection-OccupancyPercent-first8.csv")
    assert got["init_gaussian", "OccupancyPercent"] == pytest.approx(13.271172)
    # 4.34259040e-02, 4.57287245e-02, 4.74045895e-02: a percentage, so the mean over dispatches
    assert got["apply_reflect_bc", "OccupancyPercent"] == pytest.approx(
        (4.34259040e-02 + 4.57287245e-02 + 4.74045895e-02) / 3
    )
    assert got["compute_rhs", "OccupancyPercent"] == pytest.approx((24.333218 + 22.353355) / 2)
    assert got["apply_reflect_bc", "Calls"] == 3
    # Accum_VGPR_Count is the column the ROCm 7 layout adds
    assert got["compute_rhs", "VGPR_Count"] == 52 and got["compute_rhs", "Accum_VGPR_Count"] == 4
    assert got["update_stage", "Accum_VGPR_Count"] == 0
    # Start/End timestamps give durations: 1569078135386762 - 1569078135380312
    assert got["init_gaussian", "AverageNs"] == 6450
    assert got["compute_rhs", "TotalDurationNs"] == (1569078165045964 - 1569078165036469) + (
        1569078165210296 - 1569078165200962
    )
    assert units_of("rocprofv3-rocm7-counter_collection-OccupancyPercent-first8.csv")["OccupancyPercent"] == "%"


def test_rocm7_layout_valubusy():
    got = metrics_of("rocprofv3-rocm7-counter_collection-VALUBusy-first8.csv")
    assert got["compute_rhs", "VALUBusy"] == pytest.approx((51.287701 + 49.378490) / 2)
    assert got["apply_reflect_bc", "VALUBusy"] == pytest.approx((2.48342814e-02 + 1.77540975e-02 + 2.38510447e-02) / 3)
    assert got["init_gaussian", "VALUBusy"] == pytest.approx(24.657900)
    assert got["apply_reflect_bc", "VGPR_Count"] == 28


def test_counter_collection_2025_docs_layout():
    got = metrics_of("rocprofv3-docs2025-counter_collection.csv")
    assert got[ADDITION, "SQ_WAVES"] == 16384  # printed 16384.000000
    assert got[DIVIDE, "VGPR_Count"] == 12
    assert got[ADDITION, "AverageNs"] == 3200098838483232 - 3200098838431081


# -- rocprofv3 kernel_trace.csv -------------------------------------------------------------------


def test_kernel_trace_durations_from_timestamps():
    got = metrics_of("rocprofv3-docs-kernel_trace.csv")
    addition = [
        8819330200116308 - 8819330200067564,
        8819330200219573 - 8819330200118678,
        8819330200283428 - 8819330200152902,
        8819330200320468 - 8819330200187127,
    ]
    assert got[ADDITION, "Calls"] == 4
    assert got[ADDITION, "TotalDurationNs"] == sum(addition) == 413506
    assert got[ADDITION, "AverageNs"] == sum(addition) / 4
    assert got[ADDITION, "MinNs"] == min(addition) and got[ADDITION, "MaxNs"] == max(addition)
    everything = 413506 + (103265 + 139119) + 139563
    assert got[SUBTRACT, "TotalDurationNs"] == 103265 + 139119
    assert got[MULTIPLY, "AverageNs"] == 8819330200369359 - 8819330200229796
    assert got[ADDITION, "Percentage"] == pytest.approx(100 * 413506 / everything)
    # the 2024 trace has segment sizes and X/Y/Z sizes, no registers
    assert got[ADDITION, "Group_Segment_Size"] == 0 and got[ADDITION, "Private_Segment_Size"] == 0
    assert got[ADDITION, "Workgroup_Size"] == 64 and got[ADDITION, "Grid_Size"] == 1024 * 1024
    assert units_of("rocprofv3-docs-kernel_trace.csv")["AverageNs"] == "ns"


def test_kernel_trace_lists_the_longest_kernel_first():
    metrics = parse((DATA / "rocprofv3-docs-kernel_trace.csv").read_text())
    assert [m.kernel for m in metrics if m.name == "TotalDurationNs"] == [ADDITION, SUBTRACT, MULTIPLY]


def test_kernel_trace_2025_carries_registers_and_quoted_agent():
    got = metrics_of("rocprofv3-docs2025-kernel_trace.csv")
    assert got[DIVIDE, "VGPR_Count"] == 12 and got[DIVIDE, "Accum_VGPR_Count"] == 4
    assert got[DIVIDE, "SGPR_Count"] == 16 and got[DIVIDE, "LDS_Block_Size"] == 0
    assert got[ADDITION, "Calls"] == 3
    assert got[DIVIDE, "TotalDurationNs"] == (1550151853075237 - 1550151853064037) + (
        1550151853160837 - 1550151853148397
    )
    truncated = metrics_of("rocprofv3-docs2025-kernel_trace-truncated-names.csv")
    assert ("addition_kernel", "AverageNs") in truncated


# -- stats files ----------------------------------------------------------------------------------


def test_kernel_stats_keep_kernel_names_with_commas_and_mixed_percentages():
    got = metrics_of("rocprofv3-kernel_stats.csv")
    jacobi = "JacobiIterationKernel(int, double, double, double const*, double const*, double*, double*)"
    assert got[jacobi, "Calls"] == 1000
    assert got[jacobi, "TotalDurationNs"] == 545275480
    assert got[jacobi, "AverageNs"] == pytest.approx(545275.480000)
    assert got[jacobi, "Percentage"] == pytest.approx(43.03)
    assert got[jacobi, "StdDev"] == pytest.approx(8821.418627)
    assert got["__amd_rocclr_copyBuffer", "Percentage"] == pytest.approx(0.6173)
    assert got["__amd_rocclr_fillBufferAligned", "Percentage"] == pytest.approx(4.671e-04)
    assert got["__amd_rocclr_fillBufferAligned", "StdDev"] == 0.0  # 0.00000000e+00


def test_api_stats_are_named_by_function_without_a_kernel():
    got = metrics_of("rocprofv3-hip_api_stats.csv")
    assert got["", "hipMemcpy.Calls"] == 1005
    assert got["", "hipMemcpy.Percentage"] == pytest.approx(75.20)
    assert got["", "hipStreamCreate.Percentage"] == pytest.approx(0.8175)
    assert got["", "__hipRegisterFatBinary.Percentage"] == pytest.approx(1.616e-03)
    assert got["", "hipInit.StdDev"] == 0.0
    docs = metrics_of("rocprofv3-docs-hip_api_stats.csv")
    assert docs["", "hipSetDevice.Percentage"] == pytest.approx(2.141e-04)
    assert docs["", "hipFree.MaxNs"] == 1036046
    assert units_of("rocprofv3-docs-hip_api_stats.csv")["hipFree.TotalDurationNs"] == "ns"


def test_domain_stats():
    got = metrics_of("rocprofv3-domain_stats.csv")
    assert got["", "HIP_API.Calls"] == 24044
    assert got["", "HIP_API.TotalDurationNs"] == 1660103043
    assert got["", "HIP_API.Percentage"] == 100.0
    assert metrics_of("rocprofv3-docs2025-hip_domain_stats.csv")["", "HIP_API.Calls"] == 13


def test_v1_results_stats_five_columns_and_long_percentages():
    got = metrics_of("rocprof-v1-rocm5.7.1-results.stats.csv")
    assert got["laplacian_kernel", "Calls"] == 1001
    assert got["laplacian_kernel", "Percentage"] == 99.91776286922584
    assert got["__amd_rocclr_fillBufferAligned", "AverageNs"] == 5441  # ".kd" dropped
    assert ("laplacian_kernel", "MinNs") not in got


# -- memory_copy_trace.csv ------------------------------------------------------------------------


def test_memory_copy_trace_per_direction():
    got = metrics_of("rocprofv3-docs-memory_copy_trace.csv")
    assert got["", "MEMORY_COPY_HOST_TO_DEVICE.TotalDurationNs"] == 14955950239443 - 14955949675563
    assert got["", "MEMORY_COPY_DEVICE_TO_HOST.Calls"] == 1
    newer = metrics_of("rocprofv3-docs2025-memory_copy_trace.csv")
    assert newer["", "MEMORY_COPY_HOST_TO_DEVICE.Calls"] == 2
    assert newer["", "MEMORY_COPY_DEVICE_TO_HOST.MaxNs"] == 1057963498200446 - 1057963498099125


# -- rocprof v1 per-dispatch CSV ------------------------------------------------------------------


def test_v1_pmc_unquoted_header_ten_decimals_and_v1_column_names():
    got = metrics_of("rocprof-v1-rocm5.7.1-pmc-derived-counters-first250.csv")
    assert got["test_function_kernel", "FETCH_SIZE"] == 6.8125
    assert got["test_function_kernel", "WRITE_SIZE"] == 1044480.0  # 1044480.0000000000
    assert got["laplacian_kernel", "Calls"] == 246
    assert got["laplacian_kernel", "TCP_TCC_WRITE_REQ_sum"] == pytest.approx(4095014400.0)
    # arch_vgpr / accum_vgpr / sgpr / lds / scr under the rocprofv3 names
    assert got["laplacian_kernel", "VGPR_Count"] == 24
    assert got["check_kernel", "Accum_VGPR_Count"] == 4
    assert got["laplacian_kernel", "SGPR_Count"] == 32
    assert got["laplacian_kernel", "LDS_Block_Size"] == 0 and got["laplacian_kernel", "Scratch_Size"] == 0
    assert got["laplacian_kernel", "Grid_Size"] == 134217728 and got["laplacian_kernel", "Workgroup_Size"] == 256
    assert "__amd_rocclr_fillBufferAligned" in {kernel for kernel, _ in got}
    assert units_of("rocprof-v1-rocm5.7.1-pmc-derived-counters-first250.csv")["FETCH_SIZE"] == "KB"


def test_v1_pmc_gives_the_vector_l1_hit_rate():
    got = metrics_of("rocprof-v1-rocm5.7.1-pmc-derived-counters-first250.csv")
    # test_function_kernel: 33554432 lookups, 0 reads and 16777216 writes sent on to L2
    assert got["test_function_kernel", "L1CacheHit"] == 50.0
    lookups = got["laplacian_kernel", "TCP_TOTAL_CACHE_ACCESSES_sum"]
    sent = got["laplacian_kernel", "TCP_TCC_READ_REQ_sum"] + got["laplacian_kernel", "TCP_TCC_WRITE_REQ_sum"]
    assert got["laplacian_kernel", "L1CacheHit"] == pytest.approx(100 * (1 - sent / lookups))
    # no timestamps in this file, so no bandwidth
    assert ("laplacian_kernel", "HBMBandwidth") not in got


def test_v1_results_csv_fully_quoted_header_and_quoted_hex():
    text = (DATA / "rocprof-v1-rocm5.7.1-stats-kernel-trace-results-first250.csv").read_text()
    assert text.startswith('"Index","KernelName"') and detect_format(text) == "dispatch_table"
    got = metrics_of("rocprof-v1-rocm5.7.1-stats-kernel-trace-results-first250.csv")
    assert got["laplacian_kernel", "Calls"] == 246
    assert got["laplacian_kernel", "TotalDurationNs"] == 650400876
    assert got["laplacian_kernel", "MinNs"] == 2632816 and got["laplacian_kernel", "MaxNs"] == 2654098
    assert got["test_function_kernel", "AverageNs"] == 1087688  # DurationNs of its one dispatch
    assert got["__amd_rocclr_fillBufferAligned", "AverageNs"] == 5441
    assert not any(name in ("sig", "obj", "DispatchNs", "BeginNs") for _, name in got)


def test_v1_lds_bank_conflict_percentages_are_averaged():
    got = metrics_of("rocprof-v1-pmc-LDSBankConflict-first120.csv")
    assert got["compute_fd_x_kernel", "Calls"] == 100
    assert got["compute_fd_x_kernel", "LDSBankConflict"] == 0.0
    assert got["initialize_polynomial_kernel", "VGPR_Count"] == 44
    assert {kernel for kernel, _ in got} == {
        "initialize_polynomial_kernel",
        "__amd_rocclr_fillBufferAligned",
        "compute_fd_x_kernel",
        "compute_fd_y_kernel",
        "max_absval_gpu_kernel",
    }
    assert units_of("rocprof-v1-pmc-LDSBankConflict-first120.csv")["LDSBankConflict"] == "%"


# -- layouts Omniperf re-wrote (layout references) ------------------------------------------------


def test_rocprofv2_layout_from_omniperf():
    got = metrics_of("derived-omniperf/omniperf2.0-rocprofv2-MI300X-SQ_LEVEL_WAVES.csv")
    assert {kernel for kernel, _ in got} == {VECCOPY}  # " (.kd)" dropped
    assert got[VECCOPY, "Calls"] == 3
    assert got[VECCOPY, "SQ_WAVES"] == 3 * 16384
    assert got[VECCOPY, "VGPR_Count"] == 4 and got[VECCOPY, "Accum_VGPR_Count"] == 4
    assert got[VECCOPY, "TotalDurationNs"] == 16160 + 13680 + 14160


def test_v1_layout_renamed_by_omniperf():
    got = metrics_of("derived-omniperf/omniperf2.0-rocprofv1-rocm6.0.2-MI200-SQ_LEVEL_WAVES.csv")
    assert {kernel for kernel, _ in got} == {VECCOPY}  # " [clone .kd]" dropped
    assert got[VECCOPY, "SQ_WAVES"] == 16384 and got[VECCOPY, "GRBM_COUNT"] == 27505
    assert got[VECCOPY, "AverageNs"] == 1411987252082105 - 1411987252061945
    assert got[VECCOPY, "SGPR_Count"] == 16


# -- meanings and units ---------------------------------------------------------------------------


def test_default_metrics_found_in_the_files_carry_meanings():
    for name in (
        "rocprofv3-rocm7-counter_collection-OccupancyPercent-first8.csv",
        "rocprof-v1-rocm5.7.1-pmc-derived-counters-first250.csv",
        "rocprofv3-docs-kernel_trace.csv",
    ):
        for metric in parse((DATA / name).read_text()):
            assert metric.meaning, metric


# -- what is not rocprof output -------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["rocprof-v1-input-pmc-data_movement.txt", "derived-omniperf/omniperf-rocprof-input-SQ_LEVEL_WAVES.txt"]
)
def test_rocprof_input_files_are_refused_with_a_clear_message(name):
    with pytest.raises(ProfileParseError, match="rocprof input file"):
        parse((DATA / name).read_text())


@pytest.mark.parametrize(
    "junk, says",
    [
        ("", "empty"),
        ("\n\n", "empty"),
        ("this is not the output of any profiler\n", "not a rocprof CSV layout"),
        ("\x00\x01\x02 binary junk", "not (a )?rocprof CSV"),
        ("a,b,c\n1,2,3\n", "not a rocprof CSV layout"),
    ],
)
def test_unreadable_input_says_what_was_seen(junk, says):
    with pytest.raises(ProfileParseError, match=says) as caught:
        parse(junk)
    assert "\n" not in str(caught.value)


def test_a_line_cut_short_is_an_error_naming_the_line():
    lines = (DATA / "rocprofv3-docs-kernel_trace.csv").read_text().splitlines()
    cut = "\n".join(lines[:3] + [lines[3][:40]])
    with pytest.raises(ProfileParseError, match="line 4 has"):
        parse(cut)


def test_a_value_that_is_not_a_number_is_an_error():
    lines = (DATA / "rocprofv3-docs-counter_collection.csv").read_text().splitlines()
    broken = "\n".join(lines[:2] + [lines[2].replace(',"SQ_WAVES",16384', ',"SQ_WAVES",lots')])
    with pytest.raises(ProfileParseError, match="Counter_Value is 'lots'"):
        parse(broken)


def test_grouped_thousands_in_a_quoted_value_are_read():
    lines = (DATA / "rocprofv3-docs-counter_collection.csv").read_text().splitlines()
    grouped = "\n".join(lines[:2]).replace(',"SQ_WAVES",16384', ',"SQ_WAVES","16,384"')
    assert {m.name: m.value for m in parse(grouped)}["SQ_WAVES"] == 16384


def test_kernel_name_drops_v1_code_object_suffixes():
    assert kernel_name("__amd_rocclr_fillBufferAligned.kd") == "__amd_rocclr_fillBufferAligned"
    assert kernel_name(f"{VECCOPY} [clone .kd]") == VECCOPY
    assert kernel_name(f"{VECCOPY} (.kd)") == VECCOPY
    assert kernel_name(ADDITION) == ADDITION
