"""The rule-based reading of one attempt: what bounds the kernel, how close to the roofline it is,
what changed against the best, and which metrics to look at next.

The Conductor's prompt carries this beside the raw profile (the paper's Listing 1: historical best
against current), and a Conductor without a language model acts on it alone. Rules read whatever
the profilers gave: top-down level 1 from perf, simulated miss rates from cachegrind, throughput and
occupancy from ncu; where none says, the roofline does.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..records import Attempt, BoundClass, Diagnosis, Metric, Profile, Verdict, VerdictStatus

__all__ = ["diagnose", "GOOD_ATTAINMENT"]

GOOD_ATTAINMENT = 0.6
"""Below this share of the roofline, a memory-bound kernel still has traffic to save."""

_TOPDOWN = {
    "tma_frontend_bound": BoundClass.FRONTEND,
    "tma_bad_speculation": BoundClass.BAD_SPECULATION,
    "tma_backend_bound": BoundClass.MEMORY,  # refined by the roofline below
    "tma_retiring": BoundClass.COMPUTE,
}

_FIXES = {
    VerdictStatus.COMPILE_ERROR: "fix the compile error first; keep the kernel's signature and includes simple",
    VerdictStatus.RUNTIME_ERROR: "fix the error raised while importing or running the candidate",
    VerdictStatus.CRASHED: "look for out-of-bounds indexing, wrong strides or sizes passed to the kernel",
    VerdictStatus.TIMEOUT: "the kernel hangs or is far too slow: check loop bounds and termination",
    VerdictStatus.OUT_OF_MEMORY: "allocate only the outputs and small scratch buffers",
    VerdictStatus.WRONG_OUTPUT: "compare the formula with the reference; check indexing, reductions and edge rows",
    VerdictStatus.REJECTED: "do the whole computation in the kernel, on every call, with nothing left running",
    VerdictStatus.UNCHANGED: "the change built the same machine code as its parent: make one the compiler cannot fold away",
}


def diagnose(
    verdict: Verdict,
    profiles: Sequence[Profile] = (),
    *,
    best: Attempt | None = None,
    roofline_bound: BoundClass | None = None,
) -> Diagnosis:
    """Classify the bottleneck of an attempt from its verdict and profiles.

    ``roofline_bound`` is the task's bound by arithmetic intensity (memory or compute) on this
    machine; ``best`` gives the deltas.
    """
    if not verdict.ok:
        fix = _FIXES.get(verdict.status, "make the candidate correct")
        return Diagnosis(bound=BoundClass.UNKNOWN, hints=(f"{verdict.status.value}: {fix}",))
    metrics = {metric.name: metric for profile in profiles for metric in _kernel_first(profile.metrics)}
    attainment = verdict.attainment
    bound, reason = _bound(metrics, roofline_bound, attainment)
    hints = [reason] if reason else []
    request: list[str] = []
    hints += _hints(metrics, bound, attainment, request)
    deltas = _deltas(metrics, verdict, best)
    return Diagnosis(
        bound=bound, roofline_attainment=attainment, deltas=deltas, hints=tuple(hints), request_metrics=tuple(request)
    )


def _kernel_first(metrics: Sequence[Metric]) -> list[Metric]:
    """Whole-program metrics first so that the kernel's own, read later, win in the dict."""
    return [m for m in metrics if not m.kernel] + [m for m in metrics if m.kernel]


def _bound(metrics: dict[str, Metric], roofline: BoundClass | None, attainment: float | None) -> tuple[BoundClass, str]:
    topdown = {name: metrics[name].value for name in _TOPDOWN if name in metrics}
    if topdown:
        name = max(topdown, key=topdown.__getitem__)
        bound = _TOPDOWN[name]
        if bound is BoundClass.MEMORY and roofline is BoundClass.COMPUTE:
            bound = BoundClass.COMPUTE
        return (
            bound,
            f"top-down: {name.removeprefix('tma_').replace('_', ' ')} is the largest share ({topdown[name]:.0f}%)",
        )
    dram, sm = (
        metrics.get("dram__throughput.avg.pct_of_peak_sustained_elapsed"),
        metrics.get("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
    )
    if dram is not None and sm is not None:
        if max(dram.value, sm.value) < 40:
            return (
                BoundClass.LATENCY,
                f"neither memory ({dram.value:.0f}%) nor compute ({sm.value:.0f}%) is busy: latency or occupancy",
            )
        if dram.value >= sm.value:
            return BoundClass.MEMORY, f"DRAM throughput {dram.value:.0f}% of peak is the highest"
        return BoundClass.COMPUTE, f"SM throughput {sm.value:.0f}% of peak is the highest"
    if roofline is not None:
        if attainment is not None and attainment < 0.05:
            return (
                BoundClass.OVERHEAD,
                f"at {attainment:.0%} of the roofline: time goes to overhead, not to the {roofline.value} work",
            )
        return roofline, f"the task is {roofline.value} bound by its arithmetic intensity"
    return BoundClass.UNKNOWN, ""


def _hints(metrics: dict[str, Metric], bound: BoundClass, attainment: float | None, request: list[str]) -> list[str]:
    hints = []
    d1 = metrics.get("D1 miss rate")
    mispredict = metrics.get("Mispred rate") or metrics.get("branch-miss-rate")
    ipc = metrics.get("ipc")
    if d1 is not None and d1.value > 5:
        hints.append(
            f"D1 miss rate {d1.value:.1f}% is high: block the loops so the working set fits in L1, "
            "or walk memory contiguously"
        )
    if mispredict is not None and mispredict.value > 5:
        hints.append(f"branch mispredict rate {mispredict.value:.1f}%: make data-dependent branches branchless")
    if bound is BoundClass.MEMORY and attainment is not None and attainment < GOOD_ATTAINMENT:
        hints.append(
            f"memory bound at {attainment:.0%} of the roofline: fuse passes over memory, vectorize the "
            "inner loop and parallelize the outer loop"
        )
        if d1 is None and "D1 miss rate" not in request:
            request.append("D1 miss rate")
    if bound is BoundClass.COMPUTE and ipc is not None and ipc.value < 1.5:
        hints.append(f"compute bound with IPC {ipc.value:.2f}: use more independent accumulators and vector FMAs")
    if bound is BoundClass.COMPUTE and ipc is None and "ipc" not in request:
        request.append("ipc")
    if bound is BoundClass.OVERHEAD:
        hints.append(
            "reduce per-call overhead: fewer kernel calls, no Python work around them, fewer threads for tiny sizes"
        )
    return hints


def _deltas(metrics: dict[str, Metric], verdict: Verdict, best: Attempt | None) -> dict[str, float]:
    if best is None or best.verdict is None:
        return {}
    deltas = {}
    if verdict.candidate and best.verdict.candidate:
        deltas["median_ms"] = verdict.candidate.median_ms - best.verdict.candidate.median_ms
    if best.profiles:
        previous = {metric.name: metric for profile in best.profiles for metric in _kernel_first(profile.metrics)}
        for name, metric in metrics.items():
            if name in previous and metric.unit == previous[name].unit:
                deltas[name] = metric.value - previous[name].value
    return deltas
