"""A run in a few numbers, and a run attempt by attempt: what ``pragma optimize --json`` and
``pragma trace --json`` print, for scripts that compare runs.

    summary = run_summary(result, settings, run_dir)   # a plain dict, JSON-ready
    entries = trace_entries(result.attempts)           # each attempt with the best it was judged against

The fields are documented in ``docs/loop.md``; a field is added, never renamed, within a version.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..records import Attempt, Baseline, Plan, RunResult, Speedup, TokenUsage, Verdict
from ..serialization import to_dict
from ..verifier.timing_statistics import improves_on
from .run_directory import RunDirectory

__all__ = ["run_summary", "trace_entries", "trace_document", "total_phase_seconds", "kernel_identity", "same_kernel"]


def run_summary(result: RunResult, *, run_dir: Path, model: str | None, provider: str) -> dict[str, Any]:
    """The run's outcome: the best attempt's speedup with its interval, times, roofline, tokens."""
    best = result.best
    verdict = best.verdict if best is not None else None
    baseline = result.baseline
    plans = list(RunDirectory(run_dir).plans().values()) if Path(run_dir).is_dir() else []
    usage = TokenUsage()
    by_role: dict[str, TokenUsage] = {}
    for attempt in result.attempts:
        usage = usage + attempt.usage
        for role, spent in attempt.usage_by_role.items():
            by_role[role] = by_role.get(role, TokenUsage()) + spent
    for plan in plans:
        usage = usage + plan.usage
        by_role["planner"] = by_role.get("planner", TokenUsage()) + plan.usage
    best_source = Path(run_dir) / "best" / "candidate.py"
    return {
        "run_id": result.run_id,
        "run_dir": str(run_dir),
        "task": result.task.key,
        "category": result.task.category.value,
        "provider": provider,
        "model": model,
        "stop_reason": result.stop_reason,
        "attempts": len(result.attempts),
        "correct_attempts": sum(1 for a in result.attempts if a.verdict is not None and a.verdict.ok),
        "best_attempt": result.best_attempt,
        "speedup": _speedup(verdict.speedup if verdict else None),
        "noisy": verdict.noisy if verdict else None,
        "best_ms": verdict.candidate.median_ms if verdict and verdict.candidate else None,
        "reference_ms": baseline.reference.median_ms if baseline and baseline.reference else None,
        "floor_ms": baseline.floor_ms if baseline else None,
        "bound": baseline.bound.value if baseline and baseline.bound else None,
        "attainment": verdict.attainment if verdict else None,
        "skipped_profilers": dict(baseline.skipped) if baseline else {},
        "tokens": {"prompt": usage.prompt, "completion": usage.completion},
        "tokens_by_role": {role: {"prompt": u.prompt, "completion": u.completion} for role, u in by_role.items()},
        "cost_usd": run_cost_usd([*result.attempts, *plans]),
        "elapsed_s": round(sum(attempt.elapsed_s for attempt in result.attempts), 3),
        "timed_s": round(sum(attempt.timed_s for attempt in result.attempts), 3),
        "phase_seconds": total_phase_seconds(result.attempts),
        "best_candidate": str(best_source) if best is not None else None,
        "best_kernel": kernel_identity(best),
    }


def kernel_identity(attempt: Attempt | None) -> str | None:
    """What tells two runs' bests apart: the fingerprint of the machine code the attempt built
    (``machine:...``), or where none was taken a hash of its source (``source:...``). Two runs
    whose bests share it ended with one kernel, and any difference in their speedups is the noise
    between two timings of it. None without a candidate."""
    if attempt is None or attempt.candidate is None:
        return None
    code = attempt.verdict.machine_code if attempt.verdict is not None else None
    if code:
        return f"machine:{code}"
    return "source:" + hashlib.sha256(attempt.candidate.source.encode()).hexdigest()[:16]


def same_kernel(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two summaries (or rows carrying their ``best_kernel``) ended with one kernel; False where
    either does not say (a row from before the field)."""
    return a.get("best_kernel") is not None and a.get("best_kernel") == b.get("best_kernel")


def run_cost_usd(spent: Sequence[Attempt | Plan]) -> float | None:
    """What the model calls of these attempts (and plans) cost in US dollars; None when no
    provider reported a cost."""
    costs = [item.cost_usd for item in spent if item.cost_usd is not None]
    return math.fsum(costs) if costs else None


def total_phase_seconds(attempts: tuple[Attempt, ...] | list[Attempt]) -> dict[str, float]:
    """Seconds per phase summed over the attempts (rounded to the millisecond), phases in the order
    they first ran; attempts from before pragma measured phases add nothing."""
    totals: dict[str, float] = {}
    for attempt in attempts:
        for name, seconds in attempt.phase_seconds.items():
            totals[name] = totals.get(name, 0.0) + seconds
    return {name: round(seconds, 3) for name, seconds in totals.items()}


def trace_entries(attempts: tuple[Attempt, ...] | list[Attempt]) -> list[tuple[Attempt, Attempt | None]]:
    """Each attempt with the historical best it was judged against (None before the first)."""
    entries = []
    best: Attempt | None = None
    for attempt in attempts:
        entries.append((attempt, best))
        if improves_on(attempt.verdict, best):
            best = attempt
    return entries


def trace_document(result_id: str, task_key: str, baseline: Baseline | None, attempts: list[Attempt]) -> dict[str, Any]:
    """The trace as data: per attempt its verdict, the best before it, diagnosis, guidance, the
    profilers that gave no profile and the metrics of those that did (not the candidate's source,
    which is ``attempt-NN/candidate.py``)."""
    rows = []
    for attempt, best in trace_entries(attempts):
        verdict = attempt.verdict
        rows.append(
            {
                "attempt": attempt.number,
                "status": verdict.status.value if verdict else None,
                "message": verdict.message if verdict else None,
                "speedup": _speedup(verdict.speedup if verdict else None),
                "noisy": verdict.noisy if verdict else None,
                "versus_best": _versus_best(verdict),
                "machine_code": verdict.machine_code if verdict else None,
                "best_before": best.number if best else None,
                "best_before_speedup": _speedup(best.verdict.speedup if best and best.verdict else None),
                "diagnosis": to_dict(attempt.diagnosis) if attempt.diagnosis else None,
                "guidance": to_dict(attempt.guidance) if attempt.guidance else None,
                "profiles": {
                    profile.profiler: [to_dict(metric) for metric in profile.metrics] for profile in attempt.profiles
                },
                "skipped_profilers": dict(attempt.skipped),
                "tokens": {"prompt": attempt.usage.prompt, "completion": attempt.usage.completion},
                "elapsed_s": attempt.elapsed_s,
                "timed_s": attempt.timed_s,
                "phase_seconds": dict(attempt.phase_seconds),
            }
        )
    return {
        "run_id": result_id,
        "task": task_key,
        "baseline": to_dict(baseline) if baseline is not None else None,
        "attempts": rows,
    }


def _speedup(speedup: Speedup | None) -> dict[str, float] | None:
    if speedup is None:
        return None
    return {"value": speedup.value, "low": speedup.low, "high": speedup.high, "confidence": speedup.confidence}


def _versus_best(verdict: Verdict | None) -> dict[str, Any] | None:
    """The attempt timed side by side with the best: which best, and how much faster than it."""
    if verdict is None or verdict.versus_best is None:
        return None
    return {"attempt": verdict.versus_best.attempt, "speedup": _speedup(verdict.versus_best.speedup)}
