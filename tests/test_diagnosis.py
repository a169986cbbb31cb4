"""Rule-based diagnosis: bound class, attainment, hints, deltas, requests."""

from __future__ import annotations

from pragma_core import Attempt, BoundClass, Metric, Profile, Speedup, Timing, Verdict
from pragma_core.loop.diagnosis import diagnose


def correct(median_ms: float, floor_ms: float | None = 1.0) -> Verdict:
    return Verdict(
        status="correct",
        message="ok",
        candidate=Timing(median_ms=median_ms, iqr_ms=0.1),
        reference=Timing(median_ms=10.0, iqr_ms=0.1),
        speedup=Speedup(value=10 / median_ms, low=10 / median_ms * 0.9, high=10 / median_ms * 1.1),
        floor_ms=floor_ms,
    )


def profile(profiler: str, **values: float) -> Profile:
    return Profile(
        profiler=profiler,
        metrics=tuple(
            Metric(name=name.replace("__", " "), value=value, unit="%", kernel="k", profiler=profiler)
            for name, value in values.items()
        ),
    )


def test_failed_attempts_get_the_fix_for_their_status():
    verdict = Verdict(status="crashed", message="SIGSEGV")
    diagnosis = diagnose(verdict)
    assert diagnosis.bound is BoundClass.UNKNOWN and "out-of-bounds" in diagnosis.hints[0]


def test_top_down_decides_when_perf_has_it():
    perf = Profile(
        profiler="perf",
        metrics=tuple(
            Metric(name=name, value=value, unit="%", profiler="perf", kernel="k")
            for name, value in {
                "tma_frontend_bound": 10,
                "tma_backend_bound": 60,
                "tma_bad_speculation": 5,
                "tma_retiring": 25,
            }.items()
        ),
    )
    assert diagnose(correct(4.0), [perf], roofline_bound=BoundClass.MEMORY).bound is BoundClass.MEMORY
    assert diagnose(correct(4.0), [perf], roofline_bound=BoundClass.COMPUTE).bound is BoundClass.COMPUTE


def test_memory_bound_far_from_the_roofline_with_l1_misses():
    cachegrind = profile("valgrind", D1__miss__rate=11.1, Mispred__rate=0.05)
    diagnosis = diagnose(correct(4.0, floor_ms=1.0), [cachegrind], roofline_bound=BoundClass.MEMORY)
    assert diagnosis.bound is BoundClass.MEMORY and diagnosis.roofline_attainment == 0.25
    assert any("D1 miss rate 11.1%" in hint for hint in diagnosis.hints)
    assert any("fuse passes" in hint for hint in diagnosis.hints)
    assert not any("branch" in hint for hint in diagnosis.hints)


def test_branch_mispredicts_and_overhead():
    cachegrind = profile("valgrind", Mispred__rate=12.0)
    hinted = diagnose(correct(4.0), [cachegrind], roofline_bound=BoundClass.MEMORY)
    assert any("branchless" in hint for hint in hinted.hints)
    tiny = diagnose(correct(100.0, floor_ms=1.0), [], roofline_bound=BoundClass.MEMORY)
    assert tiny.bound is BoundClass.OVERHEAD


def test_gpu_throughputs():
    ncu = Profile(
        profiler="ncu",
        metrics=(
            Metric(name="dram__throughput.avg.pct_of_peak_sustained_elapsed", value=20, unit="%", profiler="ncu"),
            Metric(name="sm__throughput.avg.pct_of_peak_sustained_elapsed", value=15, unit="%", profiler="ncu"),
        ),
    )
    assert diagnose(correct(2.0), [ncu]).bound is BoundClass.LATENCY


def test_compute_bound_without_ipc_requests_it():
    diagnosis = diagnose(correct(2.0), [], roofline_bound=BoundClass.COMPUTE)
    assert diagnosis.bound is BoundClass.COMPUTE and diagnosis.request_metrics == ("ipc",)


def test_deltas_against_the_best():
    best = Attempt(number=1, verdict=correct(5.0), profiles=(profile("valgrind", D1__miss__rate=20.0),))
    diagnosis = diagnose(
        correct(4.0), [profile("valgrind", D1__miss__rate=11.0)], best=best, roofline_bound=BoundClass.MEMORY
    )
    assert diagnosis.deltas == {"median_ms": -1.0, "D1 miss rate": -9.0}
