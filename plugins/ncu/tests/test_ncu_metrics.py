"""The default metric set, the meaning of each metric, and which names ncu would accept."""

from __future__ import annotations

import pytest

from pragma_core import PluginRegistry
from pragma_ncu.metrics import DEFAULT_METRICS, LABELS, MEANINGS, meaning_of, rejection_reason

PAPER_SET = {
    "gpu__time_duration.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "launch__occupancy_limit_registers",
    "launch__occupancy_limit_shared_mem",
    "launch__occupancy_limit_warps",
    "launch__occupancy_limit_blocks",
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_static",
    "launch__shared_mem_per_block_dynamic",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__t_sector_hit_rate.pct",
    "l1tex__t_sector_hit_rate.pct",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
}


def test_the_default_set_is_the_papers_gpu_set_each_with_a_meaning():
    assert set(DEFAULT_METRICS) == PAPER_SET
    assert len(DEFAULT_METRICS) == len(PAPER_SET)
    for name in DEFAULT_METRICS:
        assert MEANINGS[name] and "\n" not in MEANINGS[name]
        assert rejection_reason(name) is None


def test_the_registered_profiler_collects_the_default_set():
    assert PluginRegistry().profiler("ncu").default_metrics == DEFAULT_METRICS


def test_every_label_points_at_a_known_metric():
    assert set(LABELS.values()) <= set(MEANINGS)


def test_labels_mean_their_metric_only_where_the_unit_agrees():
    assert meaning_of("Achieved Occupancy", "%") == (
        MEANINGS["sm__warps_active.avg.pct_of_peak_sustained_active"]
        + " (sm__warps_active.avg.pct_of_peak_sustained_active)"
    )
    assert meaning_of("Memory Throughput", "byte/second") == ""
    assert meaning_of("Registers Per Thread", "register/thread").startswith("registers each thread")
    assert meaning_of("something else", "%") == ""


@pytest.mark.parametrize(
    "name",
    [
        "sm__inst_executed.sum",
        "l1tex__data_bank_conflicts_pipe_lsu.sum.pct_of_peak_sustained_active",
        "l1tex__data_bank_conflicts_pipe_lsu.sum.peak_sustained_active.per_second",
        "smsp__average_warp_latency.pct",
        "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio",
        "launch__grid_size",
        "device__attribute_multiprocessor_count",
    ],
)
def test_names_in_ncu_metric_grammar_are_accepted(name):
    assert rejection_reason(name) is None


@pytest.mark.parametrize(
    "name, said",
    [
        ("sm__inst_executed", "not an ncu metric name"),  # a counter without its roll-up
        ("instructions", "not an ncu metric name"),  # perf's name
        ("Achieved Occupancy", "not an ncu metric name"),  # a details-page label
        ("SM__THROUGHPUT.AVG", "not an ncu metric name"),
        ("regex:sm__.*", "filter expression"),
        ("breakdown:sm__throughput.avg.pct_of_peak_sustained_elapsed", "filter expression"),
    ],
)
def test_other_names_are_rejected_with_a_reason(name, said):
    reason = rejection_reason(name)
    assert reason is not None and said in reason and name in reason
