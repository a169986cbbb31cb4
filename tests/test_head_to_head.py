"""A new best wins side by side, and a move that changed nothing is "unchanged": the verifier times
a candidate against the loop's best in the same child, ``improves_on`` decides by that
head-to-head, and the cpu-cpp backend's machine-code fingerprint tells an identical build."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from pragma_core import Candidate, VerdictStatus, load_task
from pragma_core.records import Attempt, HeadToHead, Speedup, Timing, Verdict
from pragma_core.verifier import VerifySettings, verify
from pragma_core.verifier.head_to_head import Incumbent, ParentCode, incumbent_of, parent_code_of
from pragma_core.verifier.timing_statistics import best_of, improves_on

from .conftest import EXAMPLES
from .test_optimizer import coder, conductor, scripted  # noqa: F401 - scripted: the scripted model fixture

CANDIDATES = Path(__file__).parent / "candidates"
GELU = EXAMPLES / "level1" / "1_GELUTanh.py"
SMALL = {"batch_size": 32, "dim": 4096}
QUICK = VerifySettings(reps=20, warmup=1, timeout_s=120, threads=2, precision=0.0)
FAST = (EXAMPLES.parent / "candidates" / "1_GELUTanh_fast.py").read_text()
SLOW = (CANDIDATES / "gelu_correct_slow.py").read_text()


def _cpp(source: str) -> Candidate:
    return Candidate(source=source, backend="cpu-cpp")


def _task():
    return load_task(GELU, SMALL)


# -- the verifier ---------------------------------------------------------------------------------


@pytest.mark.serial
def test_the_same_kernel_as_the_best_reads_about_even_and_cannot_replace_it():
    verdict = verify(_task(), _cpp(FAST), QUICK, incumbent=Incumbent(attempt=3, candidate=_cpp(FAST)))
    assert verdict.ok, verdict.message
    versus = verdict.versus_best
    assert versus is not None and versus.attempt == 3
    assert len(versus.best.samples_ms) == len(verdict.candidate.samples_ms)
    # near even: an interval about 1 (a few percent either way on a machine other work shares)
    assert 0.8 < versus.speedup.value < 1.25 and versus.speedup.low < 1.03 and versus.speedup.high > 0.97, versus
    best = Attempt(number=3, candidate=_cpp(FAST), verdict=attrs.evolve(verdict, versus_best=None))
    assert not improves_on(verdict, best)
    assert verdict.machine_code  # cpu-cpp fingerprints what it runs


@pytest.mark.serial
def test_a_clearly_faster_kernel_beats_a_slow_best_side_by_side():
    verdict = verify(_task(), _cpp(FAST), QUICK, incumbent=Incumbent(attempt=1, candidate=_cpp(SLOW)))
    assert verdict.ok, verdict.message
    assert verdict.versus_best is not None and verdict.versus_best.speedup.low > 1, verdict.versus_best
    assert "side by side" in verdict.message


def test_a_best_that_does_not_load_costs_only_the_head_to_head():
    broken = _cpp(
        FAST.replace("lib.gelu_tanh(", "lib.missing_function(").replace(
            "import torch\n", "import torch\nraise ImportError('gone')\n", 1
        )
    )
    settings = attrs.evolve(QUICK, reps=10)
    verdict = verify(_task(), _cpp(FAST), settings, incumbent=Incumbent(attempt=2, candidate=broken))
    assert verdict.ok, verdict.message
    assert verdict.versus_best is None
    assert any("not timed against the loop's best (attempt 2)" in note and "gone" in note for note in verdict.notes)


def test_a_candidate_whose_machine_code_is_its_parents_is_unchanged_and_not_timed():
    task = _task()
    first = verify(task, _cpp(FAST), attrs.evolve(QUICK, time=False))
    assert first.ok and first.machine_code
    reworded = FAST.replace("const float k0", "// the same constants, reworded\n    const float  k0")
    reworded = reworded.replace('"""GELU (tanh)', '"""Another docstring. GELU (tanh)')
    verdict = verify(task, _cpp(reworded), QUICK, parent_code=ParentCode(attempt=4, machine_code=first.machine_code))
    assert verdict.status is VerdictStatus.UNCHANGED, verdict.message
    assert "identical to attempt 4" in verdict.message
    assert verdict.candidate is None and verdict.speedup is None and not verdict.ok
    assert verdict.machine_code == first.machine_code


def test_a_changed_constant_or_launch_argument_gives_another_fingerprint():
    task, settings = _task(), attrs.evolve(QUICK, time=False)
    base = verify(task, _cpp(FAST), settings).machine_code
    constant = verify(task, _cpp(FAST.replace("k1 = 0.044715f", "k1 = 0.0447151f")), settings)
    assert constant.ok and constant.machine_code and constant.machine_code != base
    launch = FAST.replace("lib.gelu_tanh(x, out, x.numel())", "lib.gelu_tanh(x, out, x.numel() + 0)")
    assert verify(task, _cpp(launch), settings).machine_code not in (None, base)


def test_an_unchanged_candidate_that_fails_its_trials_is_reported_failing():
    task = _task()
    wrong = (CANDIDATES / "gelu_wrong_values.py").read_text()
    verdict = verify(task, _cpp(wrong), QUICK, parent_code=ParentCode(attempt=1, machine_code="whatever"))
    assert verdict.status is VerdictStatus.WRONG_OUTPUT


# -- the rule -------------------------------------------------------------------------------------


def _timed(value: float, low: float, high: float, versus: HeadToHead | None = None) -> Verdict:
    timing = Timing(median_ms=1.0, iqr_ms=0.1, samples_ms=(1.0,))
    return Verdict(
        status=VerdictStatus.CORRECT,
        message="correct",
        reference=timing,
        candidate=timing,
        speedup=Speedup(value=value, low=low, high=high),
        versus_best=versus,
    )


def _versus(attempt: int, low: float, high: float) -> HeadToHead:
    timing = Timing(median_ms=1.0, iqr_ms=0.1, samples_ms=(1.0,))
    return HeadToHead(attempt=attempt, best=timing, speedup=Speedup(value=(low + high) / 2, low=low, high=high))


def test_improves_on_decides_by_the_head_to_head_with_this_best_only():
    best = Attempt(number=2, verdict=_timed(2.0, 1.9, 2.1))
    # a lucky draw across processes, but side by side no faster: kept out
    assert not improves_on(_timed(2.5, 2.4, 2.6, _versus(2, 0.98, 1.03)), best)
    # slower-looking across processes, but faster side by side: the new best
    assert improves_on(_timed(1.95, 1.9, 2.0, _versus(2, 1.04, 1.09)), best)
    # a head-to-head against another attempt is ignored: the intervals decide
    assert improves_on(_timed(2.5, 2.4, 2.6, _versus(1, 0.9, 0.95)), best)
    assert not improves_on(_timed(1.95, 1.9, 2.0, _versus(1, 1.5, 1.6)), best)


def test_best_of_replays_runs_with_and_without_head_to_heads():
    first = Attempt(number=1, verdict=_timed(2.0, 1.9, 2.1))
    same = Attempt(number=2, verdict=_timed(2.3, 2.2, 2.4, _versus(1, 0.97, 1.02)))
    faster = Attempt(number=3, verdict=_timed(2.1, 2.0, 2.2, _versus(1, 1.05, 1.1)))
    old = Attempt(number=4, verdict=_timed(3.0, 2.9, 3.1))  # recorded before head-to-heads
    assert best_of([first, same]).number == 1
    assert best_of([first, same, faster]).number == 3
    assert best_of([first, same, faster, old]).number == 4


def test_the_loop_passes_a_correct_timed_best_and_a_parents_fingerprint():
    unchanged = Verdict(status=VerdictStatus.UNCHANGED, message="same code", machine_code="abc")
    assert parent_code_of(Attempt(number=5, verdict=unchanged)) == ParentCode(attempt=5, machine_code="abc")
    failed = Verdict(status=VerdictStatus.WRONG_OUTPUT, message="wrong", machine_code="abc")
    assert parent_code_of(Attempt(number=5, verdict=failed)) is None
    assert incumbent_of(Attempt(number=1, candidate=_cpp(FAST), verdict=_timed(2.0, 1.9, 2.1))).attempt == 1
    untimed = Verdict(status=VerdictStatus.CORRECT, message="correct, not timed")
    assert incumbent_of(Attempt(number=1, candidate=_cpp(FAST), verdict=untimed)) is None


# -- the loop -------------------------------------------------------------------------------------


@pytest.mark.serial
def test_the_loop_replaces_its_best_side_by_side_and_records_an_identical_child_as_unchanged(
    scripted,  # noqa: F811 - the fixture imported above
    tmp_path,
):
    from pragma_core import OptimizeSettings, optimize

    reworded = FAST.replace("const float k0", "// reworded: the same code\n    const float k0")
    scripted(
        [coder(SLOW), coder(FAST), coder(reworded)],
        [conductor("slow", ["vectorize"]), conductor("faster", ["reword"]), conductor("same", ["keep it"])],
    )
    run_settings = OptimizeSettings(
        model="openai/gpt-4o-mini",
        provider="scripted",
        max_attempts=3,
        profile=False,
        patience=10,
        runs_dir=tmp_path / "runs",
        verify=attrs.evolve(QUICK, reps=10),
    )
    result = optimize(_task(), run_settings)
    first, second, third = result.attempts
    assert first.verdict.ok and first.verdict.versus_best is None  # no best to race yet
    assert second.verdict.versus_best is not None and second.verdict.versus_best.attempt == 1
    assert second.verdict.versus_best.speedup.low > 1, second.verdict.versus_best
    assert third.verdict.status is VerdictStatus.UNCHANGED, third.verdict.message
    assert "identical to attempt 2" in third.verdict.message
    assert third.verdict.candidate is None and third.verdict.speedup is None  # not timed
    if not second.verdict.noisy:  # a noisy head-to-head must win by more than the machine could inflate it
        assert result.best_attempt == 2
    assert best_of(list(result.attempts)).number == result.best_attempt  # the same best replayed from the records
