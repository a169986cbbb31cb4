"""The metric table, the default set and the validation of requested names."""

from __future__ import annotations

from pathlib import Path

import pytest

from pragma_rocprof.commands import COUNTERS_PER_PASS, split_passes
from pragma_rocprof.metrics import (
    DEFAULT_METRICS,
    KNOWN_METRICS,
    aggregation_of,
    counters_for,
    meaning_of,
    unit_of,
    validate,
)


def test_every_default_metric_has_a_meaning_and_a_unit_where_it_has_one():
    for name in DEFAULT_METRICS:
        assert name in KNOWN_METRICS, name
        assert KNOWN_METRICS[name].meaning
    assert unit_of("AverageNs") == "ns" and unit_of("OccupancyPercent") == "%"
    assert unit_of("HBMBandwidth") == "GB/s" and unit_of("FETCH_SIZE") == "KB"


def test_the_default_set_covers_the_papers_gpu_metrics():
    defaults = set(DEFAULT_METRICS)
    assert {
        "AverageNs",
        "OccupancyPercent",
        "VGPR_Count",
        "SGPR_Count",
        "LDS_Block_Size",
        "MfmaUtil",
        "FETCH_SIZE",
        "WRITE_SIZE",
        "L2CacheHit",
        "L1CacheHit",
        "VALUBusy",
        "MemUnitBusy",
    } <= defaults


def test_default_counters_make_two_passes_with_l2_hits_and_misses_together():
    passes = split_passes(counters_for(DEFAULT_METRICS), COUNTERS_PER_PASS)
    assert len(passes) == 2
    assert {"TCC_HIT_sum", "TCC_MISS_sum"} <= set(passes[0])
    # the data_movement set that rocprof v1 counted in one pass on MI250X stays together
    assert {
        "FETCH_SIZE",
        "WRITE_SIZE",
        "TCP_TOTAL_CACHE_ACCESSES_sum",
        "TCP_TCC_READ_REQ_sum",
        "TCP_TCC_WRITE_REQ_sum",
    } <= set(passes[1])


def test_counters_for_skips_trace_columns_and_expands_derived_metrics():
    assert counters_for(["AverageNs", "VGPR_Count", "L2CacheHit", "TCC_HIT_sum", "SQ_WAVES"]) == (
        "TCC_HIT_sum",
        "TCC_MISS_sum",
        "SQ_WAVES",
    )


@pytest.mark.parametrize(
    "name",
    [
        "SQ_WAVES",
        "TCC_HIT[3]",
        "TCC_EA0_RDREQ_32B_sum",
        "VALUBusy",
        "SQ_WAVES:device=0",
        "TA_BUSY_avr",
        "GRBM_GUI_ACTIVE",
        "AverageNs",
    ],
)
def test_names_in_the_rocprof_grammar_are_accepted(name):
    accepted, rejected = validate([name])
    assert accepted == (name,) and not rejected


@pytest.mark.parametrize(
    "name",
    [
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "instructions",
        "D1 miss rate",
        "gpu__time_duration.sum",
        "",
        "SQ WAVES",
    ],
)
def test_names_outside_the_grammar_are_rejected_with_a_reason(name):
    accepted, rejected = validate([name])
    assert accepted == ()
    assert "not a rocprof counter name" in rejected[name] and "--list-avail" in rejected[name]


def test_v1_column_names_point_to_the_rocprofv3_name():
    _, rejected = validate(["arch_vgpr", "lds"])
    assert "VGPR_Count" in rejected["arch_vgpr"] and "LDS_Block_Size" in rejected["lds"]


def test_stats_only_columns_are_rejected():
    _, rejected = validate(["StdDev"])
    assert "--stats" in rejected["StdDev"]


def test_validate_keeps_order_and_drops_repeats():
    accepted, _ = validate(["VALUBusy", "AverageNs", "VALUBusy"])
    assert accepted == ("VALUBusy", "AverageNs")


def test_aggregation_counters_sum_derived_average_properties_max():
    assert aggregation_of("SQ_WAVES") == "sum"
    assert aggregation_of("FETCH_SIZE") == "sum"
    assert aggregation_of("OccupancyPercent") == "mean"
    assert aggregation_of("VGPR_Count") == "max"
    assert aggregation_of("SQ_INSTS_LDS") == "sum"  # unknown hardware counter
    assert aggregation_of("TCC_HIT[7]") == "sum"
    assert aggregation_of("SomeDerivedRate") == "mean"  # unknown CamelCase derived metric


def test_meanings_of_instances_and_stats_columns():
    assert "instance 3" in meaning_of("TCC_HIT[3]")
    assert meaning_of("hipMemcpy.TotalDurationNs") == "total time of all calls of hipMemcpy (ns)"
    assert unit_of("hipMemcpy.Percentage") == "%"
    assert meaning_of("SQ_SOMETHING_NEW") == ""


def test_the_readme_table_lists_every_default_metric():
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    table = readme[readme.index("| metric | unit | per kernel | meaning |") : readme.index("KNOWN_METRICS")]
    # "`SQ_INSTS_VALU_MFMA_MOPS_F16`, `_BF16`" lists the BF16 counter too
    missing = [
        name for name in DEFAULT_METRICS if f"`{name}`" not in table and f"`_{name.rsplit('_', 1)[-1]}`" not in table
    ]
    assert not missing
