"""What a verification is told about the loop's attempts around a candidate: the best to time it
against side by side (:class:`Incumbent`) and the machine code of the attempt it changed
(:class:`ParentCode`), and the loop's way to make them from its attempts."""

from __future__ import annotations

import attrs

from ..records import Attempt, Candidate, HeadToHead, Verdict, VerdictStatus
from ..sandbox.child_run import candidate_build_dir
from ..sandbox.process import read_build_environment
from .timing_statistics import bootstrap_speedup, summarize

__all__ = ["Incumbent", "ParentCode", "head_to_head", "incumbent_of", "parent_code_of"]


@attrs.frozen(kw_only=True)
class Incumbent:
    """The loop's best (attempt ``attempt``, None outside a loop), loaded in the candidate's child
    and timed interleaved with it: the verdict's ``versus_best``. Its kernels are read from its own
    build folder, where its verification built them."""

    attempt: int | None
    candidate: Candidate

    def request(self) -> dict[str, object]:
        """The child's ``incumbent`` request: the best's source and the variables that let the child
        read its build folder."""
        return {
            "source": self.candidate.source,
            "backend": self.candidate.backend,
            "env": read_build_environment(candidate_build_dir(self.candidate)),
        }


@attrs.frozen(kw_only=True)
class ParentCode:
    """The machine code fingerprint of the attempt a candidate changes: a candidate with the same
    one is "unchanged" and not timed."""

    attempt: int | None
    machine_code: str


def incumbent_of(best: Attempt | None) -> Incumbent | None:
    """The best to time a new attempt against: one with a candidate and a correct, timed verdict."""
    if best is None or best.candidate is None or best.verdict is None or not best.verdict.ok:
        return None
    if best.verdict.speedup is None:
        return None
    return Incumbent(attempt=best.number, candidate=best.candidate)


def parent_code_of(parent: Attempt | None) -> ParentCode | None:
    """The machine code a child of ``parent`` is compared with: the parent's fingerprint when its
    verdict has one (correct, or itself unchanged)."""
    verdict = parent.verdict if parent is not None else None
    if parent is None or verdict is None or not verdict.machine_code:
        return None
    if not verdict.ok and verdict.status is not VerdictStatus.UNCHANGED:
        return None
    return ParentCode(attempt=parent.number, machine_code=verdict.machine_code)


def head_to_head(verdict: Verdict, samples: dict[str, list[float]], attempt: int | None) -> HeadToHead | None:
    """The candidate against the best timed beside it (``samples["best"]``), for a correct verdict."""
    if not verdict.ok or not samples.get("best"):
        return None
    return HeadToHead(
        attempt=attempt,
        best=summarize(samples["best"]),
        speedup=bootstrap_speedup(samples["best"], samples["candidate"]),
    )
