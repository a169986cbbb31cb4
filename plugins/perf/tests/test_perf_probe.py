"""The probe: perf's own messages, recorded on real machines, turned into reasons."""

from __future__ import annotations

import time

import pytest
from perf_data import read

import pragma_perf.probe as probe_module
from pragma_perf.probe import (
    HARDWARE_UNAVAILABLE,
    HARDWARE_UNAVAILABLE_VM,
    PerfSetup,
    paranoid_text,
    probe,
    read_classification,
    read_setup,
)

PERF = "/usr/bin/perf"


def runner(answers: dict[str, tuple[int | None, str]]):
    """A fake ``run``: the recorded answer for the first key found in the command line."""

    def run(argv: list[str]) -> tuple[int | None, str]:
        line = " ".join(argv)
        for key, answer in answers.items():
            if key in line:
                return answer
        raise AssertionError(f"unexpected command {line}")

    return run


THIS_VM = {
    "--version": (0, read("probe-perf6.1-version.txt")),
    "-e task-clock,instructions": (0, read("probe-perf6.1-kvm-amd-events-root.txt")),
    "-M TopdownL1": (0, read("probe-perf6.1-kvm-amd-metric-group-TopdownL1.txt")),
    "--topdown": (234, read("probe-perf6.1-kvm-amd-topdown-flag.txt")),
}


def test_vm_without_pmu_runs_with_software_events_only():
    setup = read_setup(PERF, runner(THIS_VM), paranoid=2, privileged=True, virtual_machine=True)
    assert setup.runs and not setup.hardware
    assert setup.version == "perf version 6.1.187"
    assert setup.hardware_reason == HARDWARE_UNAVAILABLE_VM
    assert setup.topdown_args == ()
    assert "Cannot find metric or group `TopdownL1'" in setup.topdown_reason
    assert "requires system-wide mode (-a)" in setup.topdown_reason
    assert not setup.user_only


def test_not_supported_outside_a_vm_says_so_without_blaming_virtualisation():
    setup = read_setup(PERF, runner(THIS_VM), paranoid=2, privileged=True, virtual_machine=False)
    assert setup.hardware_reason == HARDWARE_UNAVAILABLE


def test_unprivileged_paranoid_2_counts_user_space_only():
    unprivileged = read("probe-perf6.1-kvm-amd-events-unprivileged-paranoid2.txt")
    answers = {**THIS_VM, "-e task-clock,instructions": (0, unprivileged)}
    setup = read_setup(PERF, runner(answers), paranoid=2, privileged=False, virtual_machine=True)
    assert setup.runs and setup.user_only


def test_permission_refused_names_perf_event_paranoid():
    denied = read("probe-perf6.1-system-wide-denied-paranoid2.txt")
    answers = {**THIS_VM, "-e task-clock,instructions": (255, denied)}
    setup = read_setup(PERF, runner(answers), paranoid=3, privileged=False, virtual_machine=True)
    assert not setup.runs
    assert setup.reason.startswith("perf may not open events for this user: perf_event_paranoid is 3")
    assert "CAP_PERFMON" in setup.reason and "\n" not in setup.reason


def test_hardware_and_topdown_where_perf_counts_them():
    spr = read("stat-csv-topdownl1-l2-spr.csv")  # instructions counted; TopdownL1 printed
    answers = {**THIS_VM, "-e task-clock,instructions": (0, spr), "-M TopdownL1": (0, spr)}
    setup = read_setup(PERF, runner(answers), paranoid=0, privileged=False, virtual_machine=False)
    assert setup.hardware and setup.hardware_reason == ""
    assert setup.topdown_args == ("-M", "TopdownL1")


def test_a_perf_that_cannot_start_is_unavailable_with_its_message():
    answers = {
        "--version": (None, "`/usr/bin/perf` cannot be run: Permission denied"),
        "-e task-clock": (None, "`/usr/bin/perf` cannot be run: Exec format error"),
    }
    setup = read_setup(PERF, runner(answers), paranoid=2, privileged=False, virtual_machine=False)
    assert not setup.runs and setup.reason == "`/usr/bin/perf` cannot be run: Exec format error"


@pytest.mark.parametrize(
    ("level", "privileged", "expected"),
    [
        (-1, False, "every event, CPU-wide and kernel included"),
        (1, False, "no CPU-wide (-a) events"),
        (2, False, "only the user space of their own processes"),
        (4, False, "no perf events at all"),
        (2, True, "the setting does not limit it"),
        (None, False, "unknown"),
    ],
)
def test_paranoid_levels_are_explained(level, privileged, expected):
    assert expected in paranoid_text(level, privileged)


def test_probe_reports_perf_missing(monkeypatch, fresh_probe):
    monkeypatch.setattr(probe_module.shutil, "which", lambda name: None)
    availability = probe()
    assert not availability.available
    assert availability.reason.startswith("perf is not installed")
    assert "valgrind" in availability.still_works


def test_probe_on_a_vm_without_pmu_is_available_and_says_what_is_missing(monkeypatch, fresh_probe):
    setup = read_setup(PERF, runner(THIS_VM), paranoid=2, privileged=True, virtual_machine=True)
    monkeypatch.setattr(probe_module, "perf_setup", lambda: setup)
    availability = probe()
    assert availability.available
    assert availability.reason.startswith(HARDWARE_UNAVAILABLE_VM)
    assert "task-clock" in availability.still_works


def test_probe_with_hardware_but_no_topdown_gives_the_topdown_reason(monkeypatch):
    setup = PerfSetup(perf=PERF, runs=True, hardware=True, topdown_reason="no TopdownL1 here")
    monkeypatch.setattr(probe_module, "perf_setup", lambda: setup)
    assert probe().reason == "no TopdownL1 here"


def test_probe_here_is_fast_and_cached(fresh_probe):
    started = time.monotonic()
    first = probe()
    assert probe() == first
    assert time.monotonic() - started < 10  # generous: the contract asks < 2 s


def test_names_perf_does_not_know_and_names_it_cannot_count():
    unknown = runner(
        {
            "-e bogus-event": (129, read("probe-perf6.1-unknown-event.txt")),
            "-M bogus-event": (0, read("probe-perf6.1-unknown-metric.txt")),
        }
    )
    assert read_classification(PERF, "bogus-event", unknown) == (
        "",
        "perf knows no event or metric named 'bogus-event' (`perf list` shows what it knows)",
    )
    silent = runner(
        {
            "-e bogus-event": (129, read("probe-perf6.1-unknown-event.txt")),
            "-M bogus-event": (0, read("probe-perf6.1.187-unknown-metric-silent.txt")),
        }
    )
    assert read_classification(PERF, "bogus-event", silent)[1].startswith("perf knows no event or metric")
    known = runner({"-e L1-icache-loads": (0, read("probe-perf6.1-kvm-amd-known-event-L1-icache-loads.txt"))})
    assert read_classification(PERF, "L1-icache-loads", known) == ("event", "")
    metric = runner(
        {
            "-e TopdownL1": (129, read("probe-perf6.1-unknown-event.txt")),
            "-M TopdownL1": (0, read("stat-csv-topdownl1-l2-spr.csv")),
        }
    )
    assert read_classification(PERF, "TopdownL1", metric) == ("metric", "")
