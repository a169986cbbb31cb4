"""How a candidate is verified and timed: trials, tolerances, repetitions, limits."""

from __future__ import annotations

import os
from collections.abc import Iterable

import attrs
from attrs import validators as v

__all__ = ["all_cpus", "VerifySettings", "BASELINES", "BUILD_LIMIT_S", "FORWARD_LIMIT_FACTOR", "FORWARD_LIMIT_FLOOR_S"]

BASELINES = ("eager", "compile")

BUILD_LIMIT_S = 600.0
"""The default limit on a whole verification: torch's extension builds take a minute or more."""
FORWARD_LIMIT_FACTOR = 100.0
"""A forward may take this many times the reference's time (a naive serial loop runs 5-50x)."""
FORWARD_LIMIT_FLOOR_S = 20.0
"""...but never less than this: first calls page memory in and fill caches."""


def all_cpus() -> tuple[int, ...]:
    """The CPUs this process may run on (its affinity)."""
    if hasattr(os, "sched_getaffinity"):
        return tuple(sorted(os.sched_getaffinity(0)))
    return tuple(range(os.cpu_count() or 1))


def _cpu_set(value: Iterable[int] | None) -> tuple[int, ...] | None:
    return None if value is None else tuple(sorted({int(cpu) for cpu in value}))


@attrs.frozen(kw_only=True)
class VerifySettings:
    """Defaults follow KernelBench (5 trials, fp32 tolerance 1e-4) and the PRAGMA paper (5 warm-up
    runs, 100 timed repetitions). ``baseline="compile"`` also times ``torch.compile`` of the
    reference. ``input_sets`` None rotates as many input sets as it takes to leave the caches.
    Timing stops before ``reps`` once at least 10 repetitions ran and ``timing_budget_s`` passed, so
    a slow candidate (a plain serial matrix product) does not take minutes; and once at least 30 ran
    and the speedup's 95% interval lies within ``precision`` (default 2%) of its value, since more
    repetitions would not change what the verdict says (0 always runs ``reps``). ``seed`` None (the
    default) draws every verification's inputs from fresh operating-system randomness; a number
    repeats a verification exactly (the verdict records the seed it used).

    ``timeout_s`` None (the default) lets the time limit follow the work: building and importing
    the candidate may take up to :data:`BUILD_LIMIT_S`, and each forward after that at most
    :data:`FORWARD_LIMIT_FACTOR` times the reference's, never less than :data:`FORWARD_LIMIT_FLOOR_S`,
    so a hang on a 50 ms task ends in seconds, not minutes. A number is one wall-time limit for the
    whole verification instead.

    ``threads`` None (the default) times with the CPUs that are idle when the verification starts:
    all of them on a quiet machine, fewer when other work keeps some busy (:meth:`with_threads`
    decides, and says so). Reference and candidate always run in one process with the same thread
    count and CPU set; ``cpus`` pins that set (None: every CPU this process may use)."""

    @property
    def thread_count(self) -> int:
        """``threads``, or every CPU this process may use while it is undecided."""
        return self.threads if self.threads is not None else len(all_cpus())

    def with_threads(self) -> tuple[VerifySettings, str]:
        """These settings with ``threads`` decided, and a note when the machine was busy.

        A set ``threads`` stays as it is; None becomes the number of CPUs others leave idle now
        (watched for a quarter of a second), pinned to those CPUs when that is not all of them."""
        if self.threads is not None:
            return self, ""
        from ..machine.load import idle_cpus

        idle = idle_cpus()
        if not idle.busy:
            return attrs.evolve(self, threads=len(idle.cpus)), ""
        note = (
            f"{idle.describe()}: timing with {len(idle.cpus)} thread(s) on CPU {', '.join(map(str, idle.cpus))} "
            f"instead of all {len(idle.allowed)}; --threads sets the count"
        )
        return attrs.evolve(self, threads=len(idle.cpus), cpus=idle.cpus), note

    @property
    def wall_limit_s(self) -> float:
        """The limit on the whole verification, building included."""
        return self.timeout_s if self.timeout_s is not None else BUILD_LIMIT_S

    def forward_limit_s(self, reference_ms: float) -> float | None:
        """The limit on one forward of the candidate, from the reference's time; None with a set
        ``timeout_s``."""
        if self.timeout_s is not None:
            return None
        return max(FORWARD_LIMIT_FLOOR_S, FORWARD_LIMIT_FACTOR * reference_ms / 1e3)

    trials: int = attrs.field(default=5, validator=[v.instance_of(int), v.ge(1)])
    atol: float = attrs.field(default=1e-4, validator=v.ge(0))
    rtol: float = attrs.field(default=1e-4, validator=v.ge(0))
    warmup: int = attrs.field(default=5, validator=[v.instance_of(int), v.ge(0)])
    reps: int = attrs.field(default=100, validator=[v.instance_of(int), v.ge(1)])
    timing_budget_s: float = attrs.field(default=60.0, validator=v.gt(0))
    precision: float = attrs.field(default=0.02, validator=[v.ge(0), v.lt(1)])
    threads: int | None = attrs.field(default=None, validator=v.optional([v.instance_of(int), v.ge(1)]))
    cpus: tuple[int, ...] | None = attrs.field(default=None, converter=_cpu_set)
    baseline: str = attrs.field(default="eager", validator=v.in_(BASELINES))
    time: bool = True
    timeout_s: float | None = attrs.field(default=None, validator=v.optional(v.gt(0)))
    memory_gb: float = attrs.field(default=16.0, validator=v.gt(0))
    isolate_network: bool = True
    input_sets: int | None = attrs.field(default=None, validator=v.optional(v.ge(1)))
    seed: int | None = attrs.field(default=None, validator=v.optional(v.and_(v.instance_of(int), v.ge(0))))
