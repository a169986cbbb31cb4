"""The perf stat parser on each quirk of FORMATS.md section 3, with values read from the fixtures."""

from __future__ import annotations

import pytest
from perf_data import read

from pragma_core.errors import ProfileParseError
from pragma_perf.parse import (
    NOT_COUNTED,
    NOT_SUPPORTED,
    REASONS,
    Reading,
    _combine_intervals,
    parse,
    read_rows,
    unsupported,
)


def values(name: str) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {}
    for metric in parse(read(name)):
        found.setdefault(metric.name, []).append(metric.value)
    return found


def one(fixture: str, name: str):
    matches = [metric for metric in parse(read(fixture)) if metric.name == name]
    assert len(matches) == 1, (name, matches)
    return matches[0]


# -- human-readable default (3.1) ---------------------------------------------------------------


def test_default_layout_reads_values_units_and_metric_groups():
    fixture = "stat-default-topdownl1-l2-spr.txt"
    clock = one(fixture, "cpu-clock")
    assert (clock.value, clock.unit) == (226054.13, "ms")  # "226,054.13 msec cpu-clock"
    assert one(fixture, "context-switches").value == 932
    assert one(fixture, "instructions").value == 36676047
    # "TopdownL1  #  68.7 %  tma_backend_bound", then "#" continuation rows
    found = values(fixture)
    assert found["tma_backend_bound"] == [68.7]
    assert found["tma_bad_speculation"] == [3.1]
    assert found["tma_frontend_bound"] == [13.0]
    assert found["tma_retiring"] == [15.2]
    assert found["tma_memory_bound"] == [49.1]  # TopdownL2 group
    assert one(fixture, "tma_retiring").unit == "%"
    assert "TopdownL1" not in found and "TopdownL2" not in found


def test_comments_and_trailer_lines_are_not_metrics():
    found = values("stat-default-wsl2-not-supported.txt")
    assert found == {"task-clock": [2.16], "context-switches": [0], "cpu-migrations": [0], "page-faults": [114]}


def test_program_output_before_the_header_is_skipped():
    # the file starts with the program's own "25.000000"
    assert values("perf6.1-TopdownL1-kvm.txt") == {
        "task-clock": [13.08],
        "context-switches": [2],
        "cpu-migrations": [0],
        "page-faults": [2107],
    }


def test_not_supported_rows_are_reported_not_parsed():
    raw = read("stat-default-wsl2-not-supported.txt")
    assert unsupported(raw) == {
        name: REASONS[NOT_SUPPORTED] for name in ("cycles", "instructions", "branches", "branch-misses")
    }
    assert "cycles" not in values("stat-default-wsl2-not-supported.txt")


def test_hybrid_default_keeps_the_pmu_in_names_and_nan_as_unsupported():
    fixture = "stat-default-topdownl1-hybrid.txt"
    found = values(fixture)
    assert found["cpu_atom/cycles/"] == [257711907]  # "(54.18%)" multiplexing column stripped
    assert found["cpu_core/instructions/"] == [4477162]
    assert found["cpu_core/tma_bad_speculation/"] == [0.0]
    assert found["cpu_atom/tma_frontend_bound/"] == [41.1]
    assert found["cpu_atom/tma_backend_bound_aux/"] == [39.2]
    missing = unsupported(read(fixture))
    assert missing == {
        name: REASONS["nan"]
        for name in ("cpu_core/tma_backend_bound/", "cpu_core/tma_frontend_bound/", "cpu_core/tma_retiring/")
    }
    readings = {r.name: r for r in read_rows(read(fixture))}
    assert readings["cpu_atom/cycles/"].running_pct == 54.18
    assert readings["cpu_core/cycles/"].running_pct is None


def test_unprefixed_duplicates_stay_separate_and_block_ambiguous_ratios():
    fixture = "stat-default-hybrid-topdownl1-not-supported.txt"
    found = values(fixture)
    assert found["L1-dcache-loads"] == [307898450, 383074196]
    assert found["L1-dcache-load-misses"] == [6005096]
    assert found["LLC-load-misses"] == [9, 87135]
    assert "L1-dcache-load-miss-rate" not in found  # which of the two loads? perf does not say
    # "<not supported> L1-dcache-load-misses" next to a counted one of the same name
    assert "L1-dcache-load-misses" not in unsupported(read(fixture))
    assert found["cpu_core/tma_retiring/"] == [26.6]  # "(27.71%)" stripped
    assert found["cpu_atom/tma_frontend_bound/"] == [31.6]


def test_locale_grouping_and_decimal_comma():
    fixture = "stat-repeat-topdownl1-locale-uk-nnbsp-thousands-comma-decimal.txt"
    assert one(fixture, "task-clock").value == 164.40  # "164,40 msec"
    assert one(fixture, "page-faults").value == 10073  # "10 073" with U+202F
    assert one(fixture, "cycles").value == 739505378
    assert one(fixture, "instructions").value == 911793014
    assert one(fixture, "tma_retiring").value == 19.0  # "19,0 %  tma_retiring  ( +-  0,10% )"
    assert one(fixture, "tma_backend_bound").value == 13.5


def test_english_grouping_and_the_repeat_variance_column():
    fixture = "stat-repeat-topdownl1-en.txt"
    assert one(fixture, "task-clock").value == 290.69
    assert one(fixture, "cycles").value == 1176204955
    assert one(fixture, "branch-misses").value == 9647703  # "( +-  0.20% )" stripped
    assert one(fixture, "tma_retiring").value == 20.8


def test_default_output_written_with_o_on_this_vm():
    raw = read("perf6.1-kvm-amd-collect-events-default.txt")
    assert values("perf6.1-kvm-amd-collect-events-default.txt") == {
        "task-clock": [67.63],
        "page-faults": [58],
        "context-switches": [0],
        "cpu-migrations": [0],
    }
    assert len(unsupported(raw)) == 8


# -- CSV (3.2) ----------------------------------------------------------------------------------


def test_old_five_field_csv():
    fixture = "stat-csv-old-format-not-supported-virtualbox.csv"
    clock = one(fixture, "task-clock")
    assert (clock.value, clock.unit) == (0.327422, "ms")  # unit field empty in perf 4.x
    assert one(fixture, "page-faults").value == 40
    assert set(unsupported(read(fixture))) == {
        "cycles",
        "stalled-cycles-frontend",
        "stalled-cycles-backend",
        "instructions",
        "branches",
        "branch-misses",
    }


def test_not_counted_rows_give_no_metric_and_a_reason():
    raw = read("stat-csv-group-not-counted.csv")
    assert parse(raw) == []
    assert unsupported(raw) == {
        name: REASONS[NOT_COUNTED]
        for name in ("slots", "topdown-retiring", "topdown-be-bound", "topdown-fe-bound", "topdown-bad-spec", "cycles")
    }


def test_csv_metric_rows_and_group_headers():
    fixture = "stat-csv-topdownl1-l2-spr.csv"
    assert one(fixture, "cpu-clock").value == 225851.20  # no grouping in CSV
    assert one(fixture, "cycles").value == 52288305
    found = values(fixture)
    assert found["tma_backend_bound"] == [70.1]  # ",,,,,70.1,%  tma_backend_bound"
    assert found["tma_retiring"] == [14.6]
    assert found["tma_memory_bound"] == [50.5]
    assert "TopdownL1" not in found  # ",225849327050,100.00,,,,TopdownL1" is a header


def test_csv_hybrid_empty_nan_value_and_metric_rows_with_run_time():
    fixture = "stat-csv-topdownl1-hybrid.csv"
    found = values(fixture)
    assert found["cpu_atom/cycles/"] == [256500230]
    assert found["cpu_core/tma_bad_speculation/"] == [0.0]
    assert found["cpu_atom/tma_frontend_bound/"] == [41.3]  # ",10188319019,63.00,,,41.3,%  tma_..."
    assert found["cpu_atom/tma_retiring/"] == [5.4]
    assert unsupported(read(fixture)) == {
        name: REASONS["nan"]
        for name in ("cpu_core/tma_backend_bound/", "cpu_core/tma_frontend_bound/", "cpu_core/tma_retiring/")
    }


def test_csv_interval_threshold_and_a_comma_inside_an_event_name():
    fixture = "stat-csv-interval-topdownl1-metric-threshold.csv"
    slots = one(fixture, "TOPDOWN.SLOTS")
    assert slots.value == 4677067630
    assert one(fixture, "tma_backend_bound").value == 31.1  # on the TOPDOWN.SLOTS row, then ",bad"
    assert one(fixture, "tma_frontend_bound").value == 51.0
    assert one(fixture, "tma_retiring").value == 10.2
    assert one(fixture, "cpu/UOPS_DECODED.DEC0,cmask=1/").value == 26472844
    assert one(fixture, "UOPS_ISSUED.ANY").value == 709313662
    assert one(fixture, "topdown-retiring").value == 476781750
    assert {r.interval for r in read_rows(read(fixture))} == {1.000103288}


def test_legacy_topdown_table_maps_to_tma_names():
    found = {m.name: (m.value, m.unit) for m in parse(read("stat-csv-legacy-topdown-flag.csv"))}
    assert found == {
        "tma_retiring": (18.0, "%"),
        "tma_bad_speculation": (16.1, "%"),
        "tma_frontend_bound": (40.4, "%"),
        "tma_backend_bound": (25.5, "%"),
    }


def test_csv_written_by_collect_on_this_vm():
    raw = read("perf6.1-kvm-amd-collect-events.csv")  # starts with "# started on" and a blank line
    assert values("perf6.1-kvm-amd-collect-events.csv") == {
        "task-clock": [81.51],
        "page-faults": [60],
        "context-switches": [2],
        "cpu-migrations": [0],
    }
    assert set(unsupported(raw)) == {
        "instructions",
        "cycles",
        "branches",
        "branch-misses",
        "cache-references",
        "cache-misses",
        "L1-dcache-loads",
        "L1-dcache-load-misses",
    }
    assert one("perf6.1-x-csv-kvm-hw-events-not-supported.csv", "page-faults").value == 2111


# -- JSON lines (3.3) ---------------------------------------------------------------------------


def test_early_json_blank_lines_bare_numbers_and_not_counted():
    fixture = "stat-json-interval-early-2022-blank-lines-not-counted.jsonl"
    found = values(fixture)
    assert found["instructions:u"] == [150684]
    assert found["task-clock:u"] == [0.21236]
    assert one(fixture, "task-clock:u").unit == "ms"
    assert "stalled cycles per insn" not in found  # a comment on a count, not a named metric
    assert unsupported(read(fixture)) == {"branch-misses:u": REASONS[NOT_COUNTED]}
    assert found["ipc"] == [150684 / 143761]


def test_json_metric_groups_and_metric_only_records():
    fixture = "stat-json-topdownl1-l2-spr.jsonl"
    assert one(fixture, "cpu-clock").value == 225904.823297
    assert one(fixture, "tma_retiring").value == 15.251513  # "%  tma_retiring", two spaces
    assert one(fixture, "tma_memory_bound").value == 50.220860
    assert one(fixture, "cycles").value == 48433482


def test_json_hybrid_nan_strings():
    fixture = "stat-json-topdownl1-hybrid.jsonl"
    assert one(fixture, "cpu_atom/tma_retiring/").value == 5.374638
    assert one(fixture, "cpu_core/tma_bad_speculation/").value == 0.0
    assert set(unsupported(read(fixture))) == {
        "cpu_core/tma_backend_bound/",
        "cpu_core/tma_frontend_bound/",
        "cpu_core/tma_retiring/",
    }


def test_json_interval_and_threshold():
    fixture = "stat-json-interval-topdownl1-metric-threshold.jsonl"
    assert one(fixture, "tma_backend_bound").value == 22.036686
    assert one(fixture, "branch-misses").value == 9237201
    assert {r.interval for r in read_rows(read(fixture))} == {1.001089747}


def test_json_from_this_vm_with_the_started_on_line():
    raw = read("perf6.1-kvm-amd-collect-events-json.jsonl")
    assert values("perf6.1-kvm-amd-collect-events-json.jsonl")["task-clock"] == [68.438694]
    assert len(unsupported(raw)) == 8
    assert one("perf6.1-json-kvm-hw-events-not-supported.json", "task-clock").value == 11.573058


def test_a_broken_json_line_is_named():
    raw = read("stat-json-topdownl1-l2-spr.jsonl")
    broken = raw.replace('{"metric-value" : "2.351757"', '{"metric-value" : 2.351757 oops', 1)
    with pytest.raises(ProfileParseError, match=r"line 15 is not JSON"):
        parse(broken)


# -- derived ratios, intervals, garbage ---------------------------------------------------------


def test_ratios_are_computed_from_counts_per_pmu():
    assert one("stat-csv-topdownl1-l2-spr.csv", "ipc").value == 37977214 / 52288305
    assert one("stat-csv-topdownl1-l2-spr.csv", "branch-miss-rate").value == 100 * 51102 / 7299859
    assert one("stat-csv-topdownl1-l2-spr.csv", "branch-miss-rate").unit == "%"
    assert one("stat-csv-topdownl1-hybrid.csv", "cpu_atom/ipc/").value == 37487490 / 256500230
    assert one("stat-csv-topdownl1-hybrid.csv", "cpu_core/branch-miss-rate/").value == 100 * 41359 / 845211
    assert "ipc" not in values("stat-csv-topdownl1-hybrid.csv")


def test_meanings_follow_the_name_through_its_pmu_prefix():
    assert one("stat-csv-topdownl1-hybrid.csv", "cpu_atom/tma_retiring/").meaning.startswith("share of pipeline")
    assert all(m.profiler == "perf" for m in parse(read("stat-csv-topdownl1-hybrid.csv")))


def test_intervals_sum_counts_and_average_metrics():
    readings = [
        Reading(name="cycles", value=10.0, interval=1.0),
        Reading(name="tma_retiring", value=20.0, unit="%", is_metric=True, interval=1.0),
        Reading(name="cycles", value=30.0, interval=2.0),
        Reading(name="tma_retiring", value=40.0, unit="%", is_metric=True, interval=2.0),
        Reading(name="branches", value=None, status=NOT_COUNTED, interval=2.0),
    ]
    combined = {r.name: r for r in _combine_intervals(readings)}
    assert combined["cycles"].value == 40.0
    assert combined["tma_retiring"].value == 30.0
    assert combined["branches"].status == NOT_COUNTED


@pytest.mark.parametrize("junk", ["", "   \n\n", "hello world\n", "a,b,c\n1,2,3\n", "\x00\x01\x02 binary junk"])
def test_unreadable_output_raises_with_what_was_seen(junk):
    with pytest.raises(ProfileParseError, match="perf stat output|not perf stat output"):
        parse(junk)
