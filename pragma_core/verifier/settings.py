"""How a candidate is verified and timed: trials, tolerances, repetitions, limits."""

from __future__ import annotations

import os

import attrs
from attrs import validators as v

__all__ = ["VerifySettings", "BASELINES"]

BASELINES = ("eager", "compile")


def _default_threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


@attrs.frozen(kw_only=True)
class VerifySettings:
    """Defaults follow KernelBench (5 trials, fp32 tolerance 1e-4) and the PRAGMA paper (5 warm-up
    runs, 100 timed repetitions). ``baseline="compile"`` also times ``torch.compile`` of the
    reference. ``input_sets`` None rotates as many input sets as it takes to leave the caches.
    Timing stops before ``reps`` once at least 10 repetitions ran and ``timing_budget_s`` passed, so
    a slow candidate (a plain serial matrix product) does not take minutes. ``seed`` None (the
    default) draws every verification's inputs from fresh operating-system randomness; a number
    repeats a verification exactly (the verdict records the seed it used)."""

    trials: int = attrs.field(default=5, validator=[v.instance_of(int), v.ge(1)])
    atol: float = attrs.field(default=1e-4, validator=v.ge(0))
    rtol: float = attrs.field(default=1e-4, validator=v.ge(0))
    warmup: int = attrs.field(default=5, validator=[v.instance_of(int), v.ge(0)])
    reps: int = attrs.field(default=100, validator=[v.instance_of(int), v.ge(1)])
    timing_budget_s: float = attrs.field(default=60.0, validator=v.gt(0))
    threads: int = attrs.field(factory=_default_threads, validator=[v.instance_of(int), v.ge(1)])
    baseline: str = attrs.field(default="eager", validator=v.in_(BASELINES))
    time: bool = True
    timeout_s: float = attrs.field(default=600.0, validator=v.gt(0))
    memory_gb: float = attrs.field(default=16.0, validator=v.gt(0))
    isolate_network: bool = True
    input_sets: int | None = attrs.field(default=None, validator=v.optional(v.ge(1)))
    seed: int | None = attrs.field(default=None, validator=v.optional(v.and_(v.instance_of(int), v.ge(0))))
