"""The verifier's timing: the timed repetitions of the reference and the candidate in the child.

:func:`time_contenders` measures the cost of asking (idle round trips), warms the contenders up,
runs the calibration kernels (a matrix product in cache, a copy beyond it) before and after, then times repetitions on fresh inputs, alternating
the contenders' order, until the repetitions, the time budget or the wanted precision are spent, or
the candidate cannot beat the caller's bar. With the loop's best loaded beside the candidate, it is a
contender too (``best``), timed on the same fresh inputs: the head-to-head a new best must win.
Every timed call is sampled against the reference, a few are checked whole (chosen after they return), and every call is read by both clocks: the
child's, which is the sample, and the parent's around it, which catches a forged one. What the
timing says about the candidate is judged in :mod:`.judgement`.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
import time

import attrs
import torch

from ..machine.load import CALIBRATION_SIZE, Snapshot, memory_probe_bytes, snapshot
from ..sandbox.channel import Message
from ._conversation import Conversation, count
from ._verdicts import Rejected, rejected
from .instrumentation import same_bits
from .reference import References
from .settings import VerifySettings
from .timing_statistics import bootstrap_speedup

__all__ = ["CHECK_PROBABILITY", "Timings", "time_contenders"]

CHECK_PROBABILITY = 0.03
"""The share of timed calls whose whole outputs and inputs the parent checks against its own
reference (chosen after each call returns, so the child cannot know); one of the first ten is
always checked. Every timed call is also sampled (:data:`_SAMPLED_ELEMENTS` elements of each output
and input), which is what catches a candidate that cheats on some calls; the whole checks make
sure the child's own reference run was honest too, at the cost of the parent drawing the inputs,
running the reference and comparing (about a quarter of a second for 32 MB)."""

_MIN_REPS = 10  # timed repetitions before the time budget, or a clearly slower candidate, may end timing
_WARMUP_ENOUGH_S = 1.0  # a warm-up of whole rounds stops once it took this long (one call of ~0.2 s warms)
_PRECISE_REPS = 30  # timed repetitions before a precise enough interval may end timing (drift needs 24)
_PRECISION_EVERY = 5  # how often, in repetitions, the interval is looked at
_SAMPLED_ELEMENTS = 32  # per output and input of every timed call
_FORGERY_SLACK_MS = 1.0
"""How much more than an idle round trip the parent may see around a call, beyond a quarter of the
call's own time, before the child's reading is called forged: an honest candidate call measured
up to about 0.55 ms more than an idle one on the CI machine (the recorder's session has events to
keep), and a busy machine adds scheduling delay."""
_CONFIRMING_REPS = 10
"""Repetitions timed beyond the last before a suspected forged clock is judged: on a busy machine
every one of a few calls can wait for a CPU past the forgery allowance, while a forged clock
disagrees on every call however many there are."""
_CALIBRATION_ROUNDS = 12  # round trips measured to know the cost of asking, with and without the recorder
_CALIBRATION_KERNELS = 9  # runs of the calibration kernel before and after the timing (median of them)
_CALIBRATION_WARMUP = 5  # unmeasured runs of it before the first
_MEMORY_PROBES = 5  # runs of the memory probe before and after the timing (median of them), after one unmeasured


@attrs.frozen(kw_only=True)
class Timings:
    """What the timing measured, per contender (``reference``, ``candidate``, ``compile``, ``best``)."""

    samples: dict[str, list[float]]  # the child's clock, ms per call
    parent_samples: dict[str, list[float]]  # the parent's clock around the same calls
    calibration: dict[str, list[float]]  # cost of asking, ms per idle round trip, "plain" and "profiled"
    trips: dict[str, list[float]]  # the same, one of each kind per repetition, asked between its calls
    # the machine before and after, and the calibration kernel's times before and after
    machine: tuple[Snapshot, Snapshot, list[float], list[float]]
    memory_probe: tuple[list[float], list[float]]  # the memory probe's times before and after, ms
    memory_probe_bytes: int  # the size of each of its two buffers
    uncalled: int  # timed candidate calls that called no compiled kernel
    forged: str | None  # how the child's clock disagreed with the parent's, or None


def time_contenders(
    conversation: Conversation,
    references: References,
    settings: VerifySettings,
    *,
    rng: random.Random,
    to_beat: float | None,
    notes: list[str],
    best: bool = False,
) -> Timings:
    """Time the contenders in the child (the module docstring says how); ``rng`` chooses which
    calls are checked and where they are sampled, ``to_beat`` is the speedup the candidate must
    beat to matter; ``best`` times the loop's best too (loaded in the child), and timing stops early
    once the candidate is clearly slower than it; why timing stopped early goes to ``notes``. A
    timed call that fails its check raises :class:`~.verdicts.Rejected`."""
    return _TimedRepetitions(conversation, references, settings, rng=rng, to_beat=to_beat, notes=notes, best=best).run()


class _TimedRepetitions:
    def __init__(
        self,
        conversation: Conversation,
        references: References,
        settings: VerifySettings,
        *,
        rng: random.Random,
        to_beat: float | None,
        notes: list[str],
        best: bool = False,
    ) -> None:
        self.child, self.references, self.settings = conversation, references, settings
        self.rng, self.to_beat, self.notes = rng, to_beat, notes
        self.contenders = ["reference", "candidate"] + (["best"] if best else [])
        self.contenders += ["compile"] if settings.baseline == "compile" else []
        # Every order of the contenders in turn, each followed by its reverse: each contender runs in
        # each place as often (reversing alone would keep a third one always in the middle).
        self.orders: list[list[str]] = []
        for order in map(list, itertools.permutations(self.contenders)):
            if order not in self.orders:
                self.orders += [order, order[::-1]]
        self.slots = settings.input_sets or 2
        self.samples: dict[str, list[float]] = {who: [] for who in self.contenders}
        self.parent_samples: dict[str, list[float]] = {who: [] for who in self.contenders}
        self.trips: dict[str, list[float]] = {"plain": [], "profiled": []}
        self.uncalled = 0
        self.forced = 0

    def run(self) -> Timings:
        settings, samples, parent_samples = self.settings, self.samples, self.parent_samples
        seeds = self.references.series(salt=3)
        calibration = self._round_trips()
        self._warm_up(seeds.randrange(2**31))  # warm-up calls are not measured: one draw serves them all
        self.child.where = "timing"
        self._calibrate(warming_up=True)
        probe_bytes = memory_probe_bytes()
        probed_before = self._probe_memory(probe_bytes, warming_up=True)
        calibrated_before = self._calibrate()
        self.forced = self.rng.randrange(min(_MIN_REPS, settings.reps))
        child = self.child.session.process.pid
        machine_before = snapshot(child)
        started = time.perf_counter()
        enough = min(_MIN_REPS, settings.reps)
        reps = 0
        for rep in range(settings.reps):
            self._repetition(rep, seeds)
            reps = rep + 1
            if reps >= enough and time.perf_counter() - started > settings.timing_budget_s:
                break
            if _precise_enough(samples, reps, settings.precision):
                break
            outrun = _outrun(samples, reps, self.to_beat)
            if outrun:
                self.notes.append(f"timing stopped after {reps} repetitions: {outrun}")
                break
        forged = _forged_timing(samples, parent_samples, calibration, self.trips)
        if forged:
            # A forged clock disagrees on every call; a busy machine's scheduling delay comes and goes.
            for rep in range(reps, reps + _CONFIRMING_REPS):
                self._repetition(rep, seeds)
            self.notes.append(
                f"the child's clock disagreed with the parent's over {reps} repetitions; "
                f"{_CONFIRMING_REPS} more were timed before judging"
            )
            forged = _forged_timing(samples, parent_samples, calibration, self.trips)
        machine_after = snapshot(child)
        return Timings(
            samples=samples,
            parent_samples=parent_samples,
            calibration=calibration,
            trips=self.trips,
            machine=(machine_before, machine_after, calibrated_before, self._calibrate()),
            memory_probe=(probed_before, self._probe_memory(probe_bytes)),
            memory_probe_bytes=probe_bytes,
            uncalled=self.uncalled,
            forged=forged,
        )

    def _round_trips(self) -> dict[str, list[float]]:
        """The cost of asking: idle round trips, with and without the operator recorder."""
        calibration: dict[str, list[float]] = {"plain": [], "profiled": []}
        self.child.where = "timing"
        for _ in range(_CALIBRATION_ROUNDS):
            for kind in ("plain", "profiled"):
                calibration[kind].append(self._round_trip(kind))
        return calibration

    def _round_trip(self, kind: str) -> float:
        """One idle round trip of ``kind`` ("plain", or "profiled": with the operator recorder), ms
        beyond what the child's clock read."""
        start = time.perf_counter()
        message = self.child.ask("idle", "idle", profiled=kind == "profiled")
        return (time.perf_counter() - start) * 1e3 - _number(message, "ms")

    def _warm_up(self, seed: int) -> None:
        if "compile" in self.contenders:
            self.child.where = "compiling the reference with torch.compile"
        warming = time.perf_counter()
        for round_ in range(max(self.settings.warmup, 1 if "compile" in self.contenders else 0)):
            for who in self.contenders:
                self._one_call(who, round_ % self.slots, seed)
            if time.perf_counter() - warming > _WARMUP_ENOUGH_S:
                break  # slow contenders: one full pass warms as well as five

    def _one_call(self, who: str, slot: int, seed: int) -> tuple[float, float, Message]:
        self.child.ask("prepare", "prepared", who=who, slot=slot, seed=seed)
        start = time.perf_counter()
        message = self.child.ask("call", "called", who=who, limited=who != "compile")  # compiling takes long
        return (time.perf_counter() - start) * 1e3, _number(message, "ms"), message

    def _repetition(self, rep: int, seeds: random.Random) -> None:
        seed, slot = seeds.randrange(2**31), rep % self.slots
        order = self.orders[rep % len(self.orders)]
        # The cost of asking in this repetition's conditions, beside its calls: a machine that
        # slows every round trip for a while slows these as much (see _forged_timing).
        for kind in ("plain", "profiled"):
            self.trips[kind].append(self._round_trip(kind))
        for who in order:
            parent_ms, child_ms, message = self._one_call(who, slot, seed)
            self.parent_samples[who].append(parent_ms)
            self.samples[who].append(child_ms)
            if who == "candidate" and not count(message, "native_calls"):
                self.uncalled += 1
        self._sample_timed_call(rep)
        if rep == self.forced or self.rng.random() < CHECK_PROBABILITY:
            self._check_timed_call(rep, seed)

    def _calibrate(self, *, warming_up: bool = False) -> list[float]:
        """A fixed multithreaded kernel timed by the parent's clock in the child: a busy machine
        slows it as it slows the reference. ``warming_up`` runs it a few times unmeasured first: its
        first calls in a process ran 1.2-2x slower than later ones (the matrix library's own start),
        which read as a machine that quietened during the timing."""
        times = []
        for _ in range(_CALIBRATION_WARMUP if warming_up else _CALIBRATION_KERNELS):
            start = time.perf_counter()
            self.child.ask("calibrate", "calibrated", size=CALIBRATION_SIZE)
            times.append((time.perf_counter() - start) * 1e3)
        return times

    def _probe_memory(self, nbytes: int, *, warming_up: bool = False) -> list[float]:
        """A copy between two buffers of ``nbytes`` in the child, timed by the parent's clock: what
        memory-bound work depends on, which the calibration kernel (in cache) does not see.
        ``warming_up`` runs it once unmeasured first (the buffers' first copy)."""
        if warming_up:
            self.child.ask("probe_memory", "probed", bytes=nbytes)
        times = []
        for _ in range(_MEMORY_PROBES):
            start = time.perf_counter()
            self.child.ask("probe_memory", "probed", bytes=nbytes)
            times.append((time.perf_counter() - start) * 1e3)
        return times

    def _sample_timed_call(self, rep: int) -> None:
        """Every timed call: elements at positions drawn now, after the call, of the candidate's
        outputs and inputs, against the reference's on the same fresh values in the same child."""
        self.child.where = f"checking timed call {rep}"
        outputs = [self._positions(t.numel()) for t in self.references.trials[0]]
        inputs = [self._positions(numel) for numel in self.references.input_sizes]
        message = self.child.ask("sample", "sample", outputs=outputs, inputs=inputs)
        sampled = len(outputs) + len(inputs)
        if len(message.tensors) != 2 * sampled:
            raise Rejected(rejected("harness-patched", "the child's sample of a timed call is incomplete"))
        reference, candidate = list(message.tensors[:sampled]), list(message.tensors[sampled:])
        got, want = candidate[: len(outputs)], reference[: len(outputs)]
        result = self.child.compare(got, want, poison=None)
        if not result.ok:
            raise Rejected(
                rejected("timed-output-mismatch", f"timed call {rep}, at elements drawn after it: {result.message}")
            )
        for position, (now, before) in enumerate(zip(candidate[len(outputs) :], reference[len(outputs) :])):
            if not same_bits(now, before):
                raise Rejected(rejected("input-mutation", f"timed call {rep} changed input {position}"))
        self.child.where = "timing"

    def _positions(self, numel: int) -> list[int]:
        return [self.rng.randrange(numel) for _ in range(_SAMPLED_ELEMENTS)] if numel else []

    def _check_timed_call(self, rep: int, seed: int) -> None:
        """Compare a timed call's outputs with the reference, and its inputs with what they were."""
        self.child.where = f"checking timed call {rep}"
        message = self.child.ask("outputs", "outputs", who="candidate")
        inputs, want = self.references.model.inputs_and_outputs(seed)
        result = self.child.compare(list(message.tensors), want, poison=None, seed=seed)
        if not result.ok:
            raise Rejected(rejected("timed-output-mismatch", f"timed call {rep}: {result.message}"))
        message = self.child.ask("inputs", "inputs", who="candidate")
        expected = [t for t in inputs if isinstance(t, torch.Tensor)]
        for position, (now, before) in enumerate(zip(message.tensors, expected)):
            if not same_bits(now, before):
                raise Rejected(rejected("input-mutation", f"timed call {rep} changed input {position}"))
        if len(message.tensors) != len(expected):
            raise Rejected(rejected("input-mutation", f"timed call {rep} replaced its inputs"))
        self.child.where = "timing"


def _outrun(samples: dict[str, list[float]], reps: int, to_beat: float | None) -> str:
    """Why the candidate cannot clear ``to_beat``, or beat the loop's best timed beside it (whose
    interval must lie above 1 to replace it), or '' while it may: after :data:`_MIN_REPS`
    repetitions its speedup interval lies wholly below it; after :data:`_PRECISE_REPS` its speedup
    itself is not above it (the interval's bottom, which would have to clear the bar, lies below
    the speedup, so only a speedup that moved up could). More repetitions would only narrow the
    interval of a verdict that cannot matter (looked at every few repetitions, quick bootstrap)."""
    if reps < _MIN_REPS or reps % _PRECISION_EVERY:
        return ""
    if "best" in samples:
        versus = bootstrap_speedup(samples["best"], samples["candidate"], resamples=500)
        if versus.high < 1:
            return f"side by side, the loop's best is faster ({versus.value:.3g}x, interval wholly below 1)"
        if reps >= _PRECISE_REPS and versus.value <= 1:
            return f"side by side, it is not faster than the loop's best ({versus.value:.3g}x)"
    if to_beat is None:
        return ""
    speedup = bootstrap_speedup(samples["reference"], samples["candidate"], resamples=500)
    if speedup.high < to_beat:
        return f"the speedup's interval already lies below {to_beat:.3g}x, the speedup it had to beat"
    if reps >= _PRECISE_REPS and speedup.value <= to_beat:
        return (
            f"the speedup, {speedup.value:.3g}x, is not above {to_beat:.3g}x, the speedup it had to beat "
            "(its interval would have to lie wholly above it)"
        )
    return ""


def _precise_enough(samples: dict[str, list[float]], reps: int, precision: float) -> bool:
    """Whether the speedup's interval (and the head-to-head's, with the best timed) is already
    within ``precision`` of its value (looked at every few repetitions from :data:`_PRECISE_REPS` on, with a quick bootstrap)."""
    if not precision or reps < _PRECISE_REPS or reps % _PRECISION_EVERY:
        return False
    pairs = [("reference", "candidate")] + ([("best", "candidate")] if "best" in samples else [])
    for slower, faster in pairs:
        speedup = bootstrap_speedup(samples[slower], samples[faster], resamples=500)
        if speedup.high - speedup.low > 2 * precision * speedup.value:
            return False
    return True


def _forged_timing(
    samples: dict[str, list[float]],
    parent_samples: dict[str, list[float]],
    calibration: dict[str, list[float]],
    trips: dict[str, list[float]],
) -> str | None:
    """Whether the child's clock readings disagree with the parent's clock around the same calls.

    The parent's reading of a call is the child's plus the cost of asking (measured with idle round
    trips, with and without the operator recorder) plus however long the parent waited for a CPU
    to read the answer, which on a busy machine can be milliseconds. So the smallest gap over all
    calls is compared, not the typical one: a child that reports less time than its calls took
    leaves every gap larger, the smallest included. A machine can also slow every round trip for a
    while (a hypervisor taking its CPUs, a neighbour's work): then the calls' gaps are compared
    with idle round trips (``trips``) asked in the same repetitions, one each, and their typical
    difference must exceed the allowance too: a forged clock's hidden time is in every call's gap
    and in no idle trip. One that reports more leaves gaps smaller than a round trip with nothing
    in it can be (the fastest of all, before the timing and beside its calls). The loop's best,
    timed beside the candidate, is not judged here: its clock is the same harness clock, checked
    when it was verified itself, and on a busy machine its calls wait for a CPU like any other's (a
    false "forged" there would reject an honest candidate for its best's scheduling).
    """
    for who in samples:
        if who == "best":
            continue
        kind = "profiled" if who == "candidate" else "plain"
        fastest_trip = min(calibration[kind])
        gaps = [parent - child for parent, child in zip(parent_samples[who], samples[who])]
        beside = [gap - trip for gap, trip in zip(gaps, trips[kind])]
        child = statistics.median(samples[who])
        allowance = _FORGERY_SLACK_MS + 0.25 * child
        if min(gaps) > fastest_trip + allowance and statistics.median(beside) > allowance:
            seen = statistics.median(parent_samples[who])
            return (
                f"the {who}'s own clock read a median {child:.4g} ms per call, but the parent's clock saw "
                f"{seen:.4g} ms around the same calls, never less than {min(gaps):.3g} ms more "
                f"(asking costs {fastest_trip:.3g} ms, typically {statistics.median(trips[kind]):.3g} ms beside these calls)"
            )
        if statistics.median(gaps) < min(calibration[kind] + trips[kind]) - allowance:
            return f"the {who}'s own clock read more time per call than the parent's clock saw around it"
    return None


def _number(message: Message, key: str) -> float:
    value = message.header.get(key)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
        raise Rejected(rejected("harness-patched", f"the child reported a malformed {key}: {value!r:.50}"))
    return float(value)
