"""The built-in ``default`` metric selector."""

from __future__ import annotations

from pragma_core import Availability, Metric, Profile, Profiler
from pragma_core.profiling.metric_selectors import MAX_METRICS_IN_PROMPT, defaults, select, summary_lines


def metric(name: str, kernel: str = "", value: float = 1.0) -> Metric:
    return Metric(name=name, value=value, kernel=kernel, profiler="perf")


def test_select_keeps_each_metric_once_kernel_metrics_first():
    profile = Profile(
        profiler="perf",
        metrics=(
            metric("task-clock", "", 3.0),
            metric("cycles", "k1", 10),
            metric("ipc", "k1"),
            metric("cycles", "k1", 99),
            metric("cycles", "k2"),
        ),
    )
    chosen = select(profile)
    assert [(m.name, m.kernel, m.value) for m in chosen] == [
        ("cycles", "k1", 10),
        ("ipc", "k1", 1.0),
        ("cycles", "k2", 1.0),
        ("task-clock", "", 3.0),
    ]


def test_summary_lines_give_value_unit_and_meaning():
    line = Metric(
        name="D1 miss rate",
        value=3.14159,
        unit="%",
        kernel="relu",
        profiler="valgrind",
        meaning="share of L1 data accesses that miss",
    )
    assert summary_lines((line,)) == ["D1 miss rate [relu] = 3.142 %: share of L1 data accesses that miss"]


def test_select_bounds_what_reaches_the_prompt():
    profile = Profile(profiler="ncu", metrics=tuple(metric(f"m{i}") for i in range(500)))
    chosen = select(profile)
    assert len(chosen) == MAX_METRICS_IN_PROMPT
    assert chosen[0].name == "m0"


def test_defaults_are_the_profilers_own_for_its_devices():
    profiler = Profiler(
        name="perf",
        devices=("cpu",),
        probe=lambda: Availability(available=True),
        default_metrics=("instructions", "cycles"),
        collect=lambda t, m: Profile(profiler="perf"),
        parse=lambda raw: [],
    )
    assert defaults(profiler, "cpu") == ("instructions", "cycles")
    assert defaults(profiler, "cuda") == ()
