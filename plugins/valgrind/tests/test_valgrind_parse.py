"""The parser on each real cachegrind output in data/, one test per grammar quirk (FORMATS.md §4).

Expected values are read from the fixtures themselves: the ``summary:`` lines, cg_annotate's
``PROGRAM TOTALS`` rows and function rows, the exit summary's lines.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pragma_core.errors import ProfileParseError
from pragma_core.records import Metric
from pragma_valgrind.metrics import DEFAULT_METRICS, EVENTS, RATES, meaning_of
from pragma_valgrind.outfile import read_outfile
from pragma_valgrind.parse import parse

DATA = Path(__file__).parent / "data"
CACHE_ONLY = "cachegrind.out-valgrind-tests-cgout-test-glibc2.27"
LEGACY_L2 = "cachegrind.out.23497-valgrind-3.5-L2-legacy"
MERGED = "cg_merge-output-valgrind-3.5-two-runs.cgout"
BRANCH_SIM = "cachegrind.out.small-c-relu-branchsim-valgrind3.19"
EXIT_SUMMARY = "cachegrind-stderr-summary-valgrind-3.5.log"
ANNOTATE_PERL = "cg_annotate-perl-3.14-ann1.post.exp.txt"
ANNOTATE_PYTHON = "cg_annotate-python-3.21plus-ann1a.post.exp.txt"
ANNOTATE_322 = "cg_annotate-3.22-arm64-branch-sim-bottlenecks-mt.txt"
ANNOTATE_RELU = "cg_annotate-small-c-relu-branchsim-valgrind3.19.txt"
CALLGRIND = "callgrind.out.small-relu-valgrind3.19-captured-here"


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def values(metrics: list[Metric], kernel: str = "") -> dict[str, float]:
    return {metric.name: metric.value for metric in metrics if metric.kernel == kernel}


# -- cachegrind.out ---------------------------------------------------------------------------


def test_cache_only_outfile_with_trailing_space_on_the_events_line():
    program = values(parse(read(CACHE_ONLY)))
    # summary: 5229753 952 931 4057955 1918 1520 18005 745 699
    assert {name: program[name] for name in list(EVENTS)[:9]} == {
        "Ir": 5229753,
        "I1mr": 952,
        "ILmr": 931,
        "Dr": 4057955,
        "D1mr": 1918,
        "DLmr": 1520,
        "Dw": 18005,
        "D1mw": 745,
        "DLmw": 699,
    }
    assert not {"Bc", "Bcm", "Bi", "Bim", "Mispred rate"} & program.keys()  # no branch simulation
    assert program["D1 miss rate"] == pytest.approx(100 * (1918 + 745) / (4057955 + 18005))
    assert program["LL miss rate"] == pytest.approx(100 * (931 + 1520 + 699) / (5229753 + 4057955 + 18005))
    assert program["I1 miss rate"] == pytest.approx(100 * 952 / 5229753)


def test_outfile_header_lines_are_kept():
    out = read_outfile(read(CACHE_ONLY))
    assert out.cmd == "./a.out"
    assert out.desc[2] == "LL cache: 19922944 B, 64 B, 19-way associative"  # 9 spaces squeezed


def test_branch_sim_outfile_has_all_thirteen_events_and_the_mispredict_rate():
    metrics = parse(read(BRANCH_SIM))
    program = values(metrics)
    summary = "27392928 1345 1324 1340370 328946 1005 2370290 393637 131424 2384903 3402 307 164"
    assert [program[name] for name in EVENTS] == [int(field) for field in summary.split()]
    assert program["Mispred rate"] == pytest.approx(100 * (3402 + 164) / (2384903 + 307))
    assert program["D1 miss rate"] == pytest.approx(100 * (328946 + 393637) / (1340370 + 2370290))
    assert program["LLd miss rate"] == pytest.approx(100 * (1005 + 131424) / (1340370 + 2370290))
    units = {metric.name: metric.unit for metric in metrics if not metric.kernel}
    assert units["Ir"] == "count" and units["D1 miss rate"] == "%"


def test_per_function_metrics_add_up_a_function_over_its_files():
    metrics = parse(read(CACHE_ONLY))
    # _dl_relocate_object has lines in dl-machine.h and do-rel.h; cg_annotate (Python layout) gives
    # its total as "> 34,576 51 51 _dl_relocate_object:"
    assert values(metrics, "_dl_relocate_object")["Ir"] == 34576
    assert values(metrics, "_dl_relocate_object")["I1mr"] == 51
    assert values(metrics, "(below main)")["Ir"] == 55  # a name with a space and parentheses
    assert values(metrics, "main")["Ir"] == 5000015


def test_outfile_functions_agree_with_cg_annotate_made_from_the_same_file():
    from_outfile = parse(read(CACHE_ONLY))
    from_annotate = parse(read(ANNOTATE_PYTHON))
    functions = {metric.kernel for metric in from_annotate if metric.kernel}
    assert len(functions) == 7
    for function in functions:
        shown = values(from_annotate, function)
        assert {name: values(from_outfile, function)[name] for name in shown} == pytest.approx(shown), function


def test_legacy_l2_event_names_become_ll_names():
    out = read_outfile(read(LEGACY_L2))
    assert out.events == ("Ir", "I1mr", "ILmr", "Dr", "D1mr", "DLmr", "Dw", "D1mw", "DLmw")
    assert out.legacy_names
    program = values(parse(read(LEGACY_L2)))
    assert not {"I2mr", "D2mr", "D2mw"} & program.keys()
    # summary: 110947 641 639 31742 1180 1031 13237 458 427
    assert (program["ILmr"], program["DLmr"], program["DLmw"]) == (639, 1031, 427)
    assert out.desc[2].startswith("L2 cache:")


def test_cg_merge_output_repeats_fl_and_doubles_the_two_runs():
    single = values(parse(read(LEGACY_L2)))
    merged_metrics = parse(read(MERGED))
    merged = values(merged_metrics)
    assert merged["Ir"] == 221894 == 2 * single["Ir"]
    assert all(merged[name] == 2 * single[name] for name in single if name not in RATES)
    assert merged["D1 miss rate"] == pytest.approx(single["D1 miss rate"])
    assert values(merged_metrics, "main")["Ir"] == 298  # "4   10 ..." three spaces, trailing space


def test_missing_trailing_counts_are_zero():
    # The grammar lets a count line stop early when the rest are zero; real files rarely do, so take
    # a real one and drop the trailing zeros of one of its lines.
    raw = read(CACHE_ONLY)
    assert "\n68 1 0 0 0 0 0 1 0 0\n" in raw
    shortened = raw.replace("\n68 1 0 0 0 0 0 1 0 0\n", "\n68 1 0 0 0 0 0 1\n", 1)
    assert values(parse(shortened)) == values(parse(raw))


def test_hash_comment_lines_are_skipped():
    raw = read(CACHE_ONLY)
    assert values(parse("# a comment, as valgrind's own tests write\n" + raw)) == values(parse(raw))


def test_a_summary_that_does_not_match_the_counts_is_an_error():
    raw = read(CACHE_ONLY).replace("\n52 8 1 1 0 0 0 4 0 0\n", "\n52 9 1 1 0 0 0 4 0 0\n", 1)
    with pytest.raises(ProfileParseError, match="not the sum"):
        parse(raw)


def test_a_file_cut_short_is_an_error():
    raw = read(BRANCH_SIM)
    with pytest.raises(ProfileParseError, match="cut short"):
        parse(raw[: raw.index("summary:")])


def test_more_counts_than_events_is_an_error():
    raw = read(CACHE_ONLY).replace("\n52 8 1 1 0 0 0 4 0 0\n", "\n52 8 1 1 0 0 0 4 0 0 7\n", 1)
    with pytest.raises(ProfileParseError, match="line 8 has 10 counts"):
        parse(raw)


def test_callgrind_output_is_refused_by_name():
    with pytest.raises(ProfileParseError, match="callgrind"):
        parse(read(CALLGRIND))


# -- cg_annotate -------------------------------------------------------------------------------


def test_perl_cg_annotate_gives_the_events_it_shows():
    metrics = parse(read(ANNOTATE_PERL))
    program = values(metrics)
    assert program == pytest.approx(
        {
            "Ir": 5229753,
            "I1mr": 952,
            "ILmr": 931,
            "I1 miss rate": 100 * 952 / 5229753,
            "LLi miss rate": 100 * 931 / 5229753,
        }
    )
    # two file:function rows of _dl_relocate_object (21,821 and 11,521) add up
    assert values(metrics, "_dl_relocate_object")["Ir"] == 21821 + 11521
    assert values(metrics, "main") == pytest.approx(
        {"Ir": 5000015, "I1mr": 1, "ILmr": 1, "I1 miss rate": 100 / 5000015, "LLi miss rate": 100 / 5000015}
    )


def test_python_cg_annotate_reads_underscore_headers_and_function_rows():
    metrics = parse(read(ANNOTATE_PYTHON))
    assert values(metrics)["Ir"] == 5229753
    assert values(metrics, "do_lookup_x")["Ir"] == 48347  # "> 48,347 20 20 do_lookup_x:" then file rows
    assert values(metrics, "_dl_name_match_p")["I1mr"] == 2  # "> 6,898 2 2 _dl_name_match_p:/build/..."


def test_cg_annotate_with_percentages_and_cpp_names():
    metrics = parse(read(ANNOTATE_322))
    program = values(metrics)
    assert program["Ir"] == 1996681571 and program["Bim"] == 401578
    assert program["Mispred rate"] == pytest.approx(100 * (2257898 + 401578) / (200355579 + 5689143))
    sentry = values(metrics, "std::ostream::sentry::sentry(std::ostream&)")
    assert sentry["Ir"] == 12000567 and sentry["D1mr"] == 26 and sentry["Bi"] == 0
    assert values(metrics, "???")["Bi"] == 4328340  # "???:???"
    assert values(metrics, "__multf3")["Bc"] == 72720000


def test_perl_cg_annotate_with_branch_events_matches_its_outfile():
    from_annotate = parse(read(ANNOTATE_RELU))
    from_outfile = parse(read(BRANCH_SIM))
    assert values(from_annotate) == pytest.approx(values(from_outfile))
    assert values(from_annotate, "main") == pytest.approx(values(from_outfile, "main"))


# -- exit summary ------------------------------------------------------------------------------


def test_exit_summary_gives_the_events_of_its_parts():
    program = values(parse(read(EXIT_SUMMARY)))
    # I refs 110,947; D refs 44,979 (31,742 rd + 13,237 wr); L2d misses 1,458 (1,031 rd + 427 wr)
    assert program["Ir"] == 110947 and (program["Dr"], program["Dw"]) == (31742, 13237)
    assert (program["ILmr"], program["DLmr"], program["DLmw"]) == (639, 1031, 427)
    # the rates agree with those printed: D1 3.6%, L2d 3.2%, L2 1.3%, I1 0.57%
    assert round(program["D1 miss rate"], 1) == 3.6
    assert round(program["LLd miss rate"], 1) == 3.2
    assert round(program["LL miss rate"], 1) == 1.3
    assert math.floor(program["I1 miss rate"] * 100) / 100 == 0.57


def test_exit_summary_and_outfile_of_the_same_program_agree():
    assert values(parse(read(EXIT_SUMMARY))) == pytest.approx(values(parse(read(LEGACY_L2))))


# -- everything else ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "junk",
    [
        "   \n",
        "events:\n",
        "==123== Memcheck, a memory error detector\n",
        "--------------------------------------------------------------------------------\nPROGRAM TOTALS\n",
    ],
)
def test_things_that_are_not_cachegrind_output_are_refused(junk):
    with pytest.raises(ProfileParseError):
        parse(junk)


def test_the_refusal_says_what_it_saw():
    with pytest.raises(ProfileParseError, match="starts with 'hello world'"):
        parse("hello world\n")


def test_every_metric_has_a_meaning_and_the_profiler_name():
    assert all(meaning_of(name) for name in DEFAULT_METRICS)
    for metric in parse(read(BRANCH_SIM)):
        assert metric.profiler == "valgrind" and metric.meaning
