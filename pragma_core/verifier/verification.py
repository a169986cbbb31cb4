"""``verify(task, candidate)``: the Verifier's verdict on one candidate.

The parent (this module) reads the candidate's source, draws the verification's seeds from the
operating system, computes the reference outputs, the preflight and the roofline floor itself, and
only then starts the sandbox child. It asks the child for one forward at a time and receives the
evidence over a pipe (:mod:`pragma_core.sandbox.child_run`): outputs it compares with its own references,
inputs it compares with what it knows they were, and the child's clock readings it checks against
its own clock around each call. Timed calls get fresh input values, and the parent decides after a
call returns whether to check its outputs. Nothing the child prints or writes to a file is read to
judge it.
"""

from __future__ import annotations

import hashlib
import math
import random
import shutil
import statistics
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import torch

from ..backends import DEFAULT_BACKEND
from ..errors import BackendUnavailable, PragmaError
from ..machine.load import (
    CALIBRATION_SIZE,
    Snapshot,
    best_calibration,
    block_drift,
    frequency_mhz,
    noise_reasons,
    snapshot,
    usage_between,
)
from ..machine.timing_slot import busy_slot, timing_slot
from ..plugin_api.components import Backend
from ..plugin_api.registry import get_registry
from ..records import Candidate, Task, TimingConditions, Verdict, VerdictStatus
from ..sandbox.channel import Message
from ..sandbox.child_run import ChildSession
from ..sandbox.process import SandboxOutcome
from ..tasks.loading import task_program
from .checks import CHECKS, describe_check
from .comparison import Comparison, compare_outputs
from .inputs import trial_seeds
from .instrumentation import POISON_VALUES, same_bits
from .reference import References, compute_references, preflight, preflight_path, reference_error
from .settings import FORWARD_LIMIT_FACTOR, FORWARD_LIMIT_FLOOR_S, VerifySettings, all_cpus
from .static_checks import StaticFindings, read_candidate
from .timing_statistics import bootstrap_speedup, summarize
from .warm_child import WarmChild

__all__ = ["verify"]

_PACKAGE_ROOT = Path(__file__).resolve().parents[1]

ROOFLINE_MARGIN = 0.5
"""A median under this share of the roofline floor is rejected. Peaks are measured (best of ten
runs of torch's copy and sgemm) and vary by ~15% between runs; an honest kernel can come close to
them, a kernel that skips its work lands far below."""

CHECK_PROBABILITY = 0.03
"""The share of timed calls whose whole outputs and inputs the parent checks against its own
reference (chosen after each call returns, so the child cannot know); one of the first ten is
always checked. Every timed call is also sampled (:data:`_SAMPLED_ELEMENTS` elements of each output
and input), which is what catches a candidate that cheats on some calls; the whole checks make
sure the child's own reference run was honest too, at the cost of the parent drawing the inputs,
running the reference and comparing (about a quarter of a second for 32 MB)."""

_KNOWN_CHECKS = CHECKS
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


class _Ended(Exception):
    """The child stopped answering: it ended, timed out, reported an error or broke the protocol."""

    def __init__(self, error: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.error = error


class _Rejected(Exception):
    def __init__(self, verdict: Verdict) -> None:
        super().__init__()
        self.verdict = verdict


def verify(
    task: Task,
    candidate: Candidate | str,
    settings: VerifySettings | None = None,
    *,
    job_dir: Path | None = None,
    on_phase: Callable[[str], None] | None = None,
    keep_recordings: Mapping[Path, Task] | None = None,
    warm: WarmChild | None = None,
    to_beat: float | None = None,
) -> Verdict:
    """Check ``candidate`` (a :class:`Candidate` or the source of a module defining ``ModelNew``)
    against ``task`` in a sandboxed child process, and time it when it is correct.

    ``job_dir`` keeps the job's files (the task and candidate as run, the child's logs) there; by
    default a private folder is used and removed afterwards. ``on_phase`` hears where the check
    goes after building the candidate: ``"verifying"`` (the correctness trials), ``"timing"``,
    then ``"finishing"`` (the re-check on fresh inputs, the last checks, recordings for profiling:
    nothing timed from there on, so a caller may start other work). ``keep_recordings``, for a
    candidate found correct, maps folders to tasks: each folder receives the child's recording of
    one forward's native calls on its task
    (``task`` itself, or ``task`` at a profiler's smaller sizes, where the candidate's output is
    checked against the reference's first), for profiling it without another child
    (:func:`pragma_core.profiling.targets.remember_recording`); nothing is written where the
    candidate was not found correct, or differed at those sizes.
    ``warm`` is a child started ahead for this task and settings (:class:`WarmChild`): used, and
    closed, when it fits; otherwise a child is started now. A candidate refused before it runs
    (it does not parse, or a static rule rejects it) leaves ``warm`` unused and open. ``to_beat``
    is the speedup the candidate must beat to matter to the caller (the loop's best): timing stops
    once the candidate's interval lies wholly below it (after at least 10 repetitions), or its
    speedup is not above it (after at least 30), and a note says so. A candidate whose backend
    cannot run here (its probe says why) raises :class:`~pragma_core.errors.BackendUnavailable`.
    """
    settings = settings or VerifySettings()
    settings, threads_note = settings.with_threads()
    if isinstance(candidate, str):
        candidate = Candidate(source=candidate, backend=DEFAULT_BACKEND)
    backend = get_registry().backend(candidate.backend)
    availability = backend.probe()
    if not availability.available:
        still = f"; still works: {availability.still_works}" if availability.still_works else ""
        raise BackendUnavailable(f"backend {candidate.backend} cannot run here: {availability.reason}{still}")
    untimed = backend.timing_refusal() if settings.time else ""
    if untimed:
        settings = attrs.evolve(settings, time=False)
    findings = read_candidate(candidate.source)
    refusal = refused_before_running(task, findings)
    if refusal is not None:
        return refusal
    notes = [f"flagged PyTorch calls in forward: {', '.join(findings.flagged_calls)}"] if findings.flagged_calls else []
    notes += list(findings.notes)
    if untimed:
        notes.append(f"not timed: {untimed}")
    if threads_note:
        notes.append(threads_note)

    with busy_slot():  # building and checking keep cores busy: never during another task's timing
        # Trust anchors, all computed here: the roofline floor (which may measure this machine's
        # peaks, so before any child works), seeds, references, preflight. A contained child cannot
        # write what they read, so they are computed while it imports torch and builds the candidate;
        # where the OS cannot contain it, before it begins, with the files it must not change hashed.
        floor = _floor_ms(task, settings, backend)
        if warm is not None and (job_dir is not None or not warm.fits(task, settings)):
            warm.close()
            warm = None
        child = warm if warm is not None else WarmChild(task, settings, root=job_dir)
        with child:
            contained = child.files_isolated
            job = {"backend": candidate.backend}
            if contained:
                child.session.begin(candidate, **job)
            task_bytes = task.path.read_bytes() if task.path is not None and task.path.exists() else None
            hashes_before = {} if contained else _harness_hashes(task, settings)
            references = compute_references(task, settings, seed=settings.seed)
            trivial = preflight(task, references, settings)
            own_error = reference_error(task, references, settings)
            if own_error > settings.rtol / 10:
                notes.append(
                    f"the reference's own float32 result is {own_error:.2g} (whole-output relative) from the same "
                    f"program in float64; the whole-output check allows rtol plus that"
                )
            if trivial:
                notes.append(
                    f"a {', '.join(trivial)} output would pass this task at atol={settings.atol:g}; "
                    "outputs are also checked by whole-output relative error"
                )
            if not contained:
                child.session.begin(candidate, **job)
            run = _Verification(
                child.session,
                task,
                settings,
                references,
                relative_norm=bool(trivial),
                reference_error=own_error,
                notes=notes,
                floor=floor,
                record={
                    f"recording-{number}": None
                    if task_program(sized) == child.folder.task_program
                    else task_program(sized)
                    for number, sized in enumerate((keep_recordings or {}).values())
                },
                to_beat=to_beat,
                kernel_hint=backend.kernel_hint,
                interpreted=bool(untimed),
            )
            verdict = run.execute(on_phase)
            for number, kept in enumerate(keep_recordings or {}):
                recorded = child.folder.work / f"recording-{number}"
                if verdict.ok and (recorded / "calls.json").is_file():
                    shutil.copytree(recorded, kept, symlinks=False, dirs_exist_ok=True)

    if not contained and _harness_hashes(task, settings) != hashes_before:
        if task_bytes is not None and task.path is not None and task.path.read_bytes() != task_bytes:
            task.path.write_bytes(task_bytes)  # put the user's task back as it was
        verdict = _rejected(
            "harness-modified",
            "files of the task or of pragma changed while the candidate ran (the task file was restored)",
            notes=verdict.notes,
        )
    return attrs.evolve(verdict, seed=references.seed)


def refused_before_running(task: Task, findings: StaticFindings) -> Verdict | None:
    """The verdict of a candidate whose source alone decides it (:func:`read_candidate`'s
    ``findings``): it does not parse, defines no ``ModelNew``, reuses the reference, or a static
    rule rejects it. None when it must be run to be judged."""
    if findings.syntax_error:
        return Verdict(status=VerdictStatus.COMPILE_ERROR, message=findings.syntax_error)
    if findings.missing_model_new:
        return Verdict(status=VerdictStatus.RUNTIME_ERROR, message="the candidate defines no class ModelNew(nn.Module)")
    if findings.reference_reuse:
        return _rejected("reference-reuse", findings.reference_reuse)
    rejection = findings.rejection(float32_task=_float32_task(task))
    return _rejected(*rejection) if rejection is not None else None


class _Verification:
    """One conversation with the child: correctness trials, then timing, then the last checks."""

    def __init__(
        self,
        session: ChildSession,
        task: Task,
        settings: VerifySettings,
        references: References,
        *,
        relative_norm: bool,
        reference_error: float = 0.0,
        notes: list[str],
        floor: float | None,
        record: Mapping[str, str | None] | None = None,
        to_beat: float | None = None,
        kernel_hint: str = "",
        interpreted: bool = False,
    ) -> None:
        self.session, self.task, self.settings, self.references = session, task, settings, references
        self.kernel_hint, self.interpreted = kernel_hint, interpreted
        self.relative_norm, self.notes, self.floor = relative_norm, notes, floor
        self.reference_error = reference_error
        self.where = "building the candidate"
        self.trial_outputs: list[list[torch.Tensor]] = []
        self.trial_results: list[Comparison] = []  # each trial's comparison, for the verdict's errors
        self.rng = random.Random()  # which timed calls are checked: never derivable from the seeds
        self.uncalled = 0  # timed candidate calls that called no compiled kernel
        # folder -> task program (None: the task's own) to record a correct candidate at
        self.record = dict(record or {})
        self.to_beat = to_beat  # timing may stop once the candidate is clearly slower than this
        self.machine: tuple[Snapshot, Snapshot, list[float], list[float]] | None = None  # around the timing
        # An interpreted backend runs orders of magnitude slower than the reference: only the
        # whole verification's limit applies to it.
        self.forward_limit = None if interpreted else settings.forward_limit_s(references.call_ms)
        if self.forward_limit is not None:
            notes.append(
                f"time limit: {self.forward_limit:.3g} s per forward ({FORWARD_LIMIT_FACTOR:g}x the reference's "
                f"{references.call_ms:.3g} ms, at least {FORWARD_LIMIT_FLOOR_S:g} s); building may take "
                f"{settings.wall_limit_s:g} s; --timeout sets one limit for the whole verification instead"
            )
        self.input_sizes = list(references.input_sizes)

    def execute(self, on_phase: Callable[[str], None] | None) -> Verdict:
        """The conversation with the child, which has begun (:meth:`ChildSession.begin`); the child
        is ended on the way out, whatever happens."""
        settings, session = self.settings, self.session
        with session:
            try:
                self._receive("ready")
                if on_phase is not None:
                    on_phase("verifying")
                self._correctness()
                if not settings.time:
                    self._finish()
                    outcome = session.finish()
                    untimed = "; not timed (interpreted here)" if self.interpreted else ""
                    return Verdict(
                        status=VerdictStatus.CORRECT,
                        message=_correct_message(settings, None) + untimed,
                        notes=[*self.notes, *outcome.notes],
                        **self._errors(),
                    )
                if on_phase is not None:
                    on_phase("timing")
                with timing_slot():  # other tasks' builds and profiling wait; their model calls go on
                    samples, parent_samples, calibration = self._timing()
                if on_phase is not None:
                    on_phase("finishing")
                self._post_check()
                self._finish()  # PyTorch operators of timed calls are named before uncalled kernels
                if self.uncalled:
                    raise _Rejected(
                        _rejected(
                            "kernel-not-called",
                            f"{self.uncalled} of {len(samples['candidate'])} timed forwards called no compiled kernel",
                        )
                    )
                self._record_for_profiling()
            except _Rejected as rejection:
                outcome = session.finish()
                verdict = rejection.verdict
                return attrs.evolve(verdict, notes=(*self.notes, *outcome.notes, *verdict.notes))
            except _Ended as ended:
                crashed = ended.error is None and session.protocol_error is None  # wait for its exit status
                return self._ended_early(session.finish(ended=crashed), ended.error, session.protocol_error)
            outcome = session.finish()
        self.notes += list(outcome.notes)
        return self._judge_timing(samples, parent_samples, calibration)

    # -- talking to the child -------------------------------------------------------------------

    def _ask(self, op: str, expect: str, *, limited: bool = True, **fields: Any) -> Message:
        """Send a request and receive its answer, within the per-forward limit when ``limited``."""
        self.session.request(op, **fields)
        return self._receive(expect, within_s=self.forward_limit if limited else None)

    def _receive(self, expect: str, within_s: float | None = None) -> Message:
        message = self.session.receive(expect, within_s=within_s)
        if message is None:
            raise _Ended()
        for finding in message.header.get("findings") or []:
            if isinstance(finding, dict) and finding.get("check") in _KNOWN_CHECKS:
                raise _Rejected(_rejected(str(finding["check"]), str(finding.get("message", ""))))
            raise _Rejected(_rejected("harness-patched", f"the child reported a malformed finding: {finding!r:.200}"))
        if message.event == "error":
            raise _Ended(message.header)
        return message

    # -- phase 1: correctness -------------------------------------------------------------------

    def _correctness(self) -> None:
        references, settings = self.references, self.settings
        native_calls = 0
        previous: list[torch.Tensor] | None = None
        seeds = references.trial_seeds

        def ask_trial(trial: int) -> None:
            self.session.request("trial", seed=seeds[trial], poison=0, reuse=trial % 2 == 1, trial=trial)

        def ask_second_poison() -> None:
            self.session.request("trial", seed=seeds[0], poison=1, reuse=False, trial=0)

        # The next trial is asked for as soon as this one's outputs are in, so the child runs it
        # while the parent compares (trials are checked, not timed).
        ask_trial(0)
        for trial, want in enumerate(references.trials):
            self.where = f"trial {trial}"
            message = self._receive("trial", within_s=self.forward_limit)
            if trial + 1 < len(seeds):
                ask_trial(trial + 1)
            else:
                ask_second_poison()
            native_calls += _count(message, "native_calls")
            self._reject_compute(message)
            got = list(message.tensors)
            result = self._compare(got, want, poison=POISON_VALUES[0])
            if not result.ok:
                if (
                    previous is not None
                    and _same_outputs(got, previous)
                    and not _same_outputs(want, references.trials[trial - 1])
                ):
                    raise _Rejected(
                        _rejected(
                            "output-caching", f"trial {trial} returned trial {trial - 1}'s result for new input values"
                        )
                    )
                raise _Rejected(_mismatch(result, trial))
            self.trial_outputs.append(got)
            self.trial_results.append(result)
            previous = got
        if not native_calls:
            raise _Rejected(
                _rejected(
                    "kernel-not-called",
                    f"forward never called a kernel of its backend ({self.kernel_hint})",
                )
            )

        self.where = "trial 0 under a second poison"
        message = self._receive("trial", within_s=self.forward_limit)
        self._reject_compute(message)
        repoisoned = list(message.tensors)
        result = self._compare(repoisoned, references.trials[0], poison=POISON_VALUES[1])
        if result.check == "unwritten-output":
            raise _Rejected(_rejected("unwritten-output", result.message))
        agree = compare_outputs(repoisoned, self.trial_outputs[0], atol=settings.atol, rtol=settings.rtol)
        if not agree.ok:
            raise _Rejected(
                _rejected(
                    "uninitialized-read",
                    f"the same inputs gave different outputs when fresh memory held other values: {agree.message}",
                )
            )
        if references.probe is not None:
            self.where = "the exact-arithmetic probe"
            message = self._ask(
                "trial", "trial", seed=references.trial_seeds[0], probe_seed=references.probe_seed, poison=0
            )
            self._reject_compute(message)
            probe = list(message.tensors)
            if len(probe) != len(references.probe) or not all(same_bits(a, b) for a, b in zip(probe, references.probe)):
                detail = compare_outputs(probe, references.probe, atol=0.0, rtol=0.0)
                raise _Rejected(
                    _rejected(
                        "exact-arithmetic-probe",
                        f"on small-integer inputs the result must be exact: {detail.message or 'it differs'}",
                    )
                )

    def _reject_compute(self, message: Message) -> None:
        compute_ops = message.header.get("compute_ops") or {}
        if compute_ops:
            names = ", ".join(f"aten::{name} x{count}" for name, count in sorted(compute_ops.items()))
            raise _Rejected(_rejected("torch-fallback", f"forward ran PyTorch compute operators: {names}"))

    # -- phase 2: timing ------------------------------------------------------------------------

    def _timing(self) -> tuple[dict[str, list[float]], dict[str, list[float]], dict[str, list[float]]]:
        settings = self.settings
        contenders = ["reference", "candidate"] + (["compile"] if settings.baseline == "compile" else [])
        slots = settings.input_sets or 2
        seeds = self.references.series(salt=3)
        calibration: dict[str, list[float]] = {"plain": [], "profiled": []}
        self.where = "timing"
        for _ in range(_CALIBRATION_ROUNDS):
            for kind in ("plain", "profiled"):
                start = time.perf_counter()
                message = self._ask("idle", "idle", profiled=kind == "profiled")
                calibration[kind].append((time.perf_counter() - start) * 1e3 - _number(message, "ms"))

        def one_call(who: str, slot: int, seed: int) -> tuple[float, float, Message]:
            self._ask("prepare", "prepared", who=who, slot=slot, seed=seed)
            start = time.perf_counter()
            message = self._ask("call", "called", who=who, limited=who != "compile")  # compiling takes long
            return (time.perf_counter() - start) * 1e3, _number(message, "ms"), message

        if "compile" in contenders:
            self.where = "compiling the reference with torch.compile"
        warming = time.perf_counter()
        warm_seed = seeds.randrange(2**31)  # warm-up calls are not measured: one draw serves them all
        for round_ in range(max(settings.warmup, 1 if "compile" in contenders else 0)):
            for who in contenders:
                one_call(who, round_ % slots, warm_seed)
            if time.perf_counter() - warming > _WARMUP_ENOUGH_S:
                break  # slow contenders: one full pass warms as well as five
        self.where = "timing"
        self._calibrate(warming_up=True)
        calibrated_before = self._calibrate()
        samples: dict[str, list[float]] = {who: [] for who in contenders}
        parent_samples: dict[str, list[float]] = {who: [] for who in contenders}
        uncalled = 0
        forced = self.rng.randrange(min(_MIN_REPS, settings.reps))
        child = self.session.process.pid
        machine_before = snapshot(child)
        started = time.perf_counter()
        enough = min(_MIN_REPS, settings.reps)

        def repetition(rep: int) -> None:
            nonlocal uncalled
            seed, slot = seeds.randrange(2**31), rep % slots
            order = contenders if rep % 2 == 0 else contenders[::-1]
            for who in order:
                parent_ms, child_ms, message = one_call(who, slot, seed)
                parent_samples[who].append(parent_ms)
                samples[who].append(child_ms)
                if who == "candidate" and not _count(message, "native_calls"):
                    uncalled += 1
            self._sample_timed_call(rep)
            if rep == forced or self.rng.random() < CHECK_PROBABILITY:
                self._check_timed_call(rep, seed)

        reps = 0
        for rep in range(settings.reps):
            repetition(rep)
            reps = rep + 1
            if reps >= enough and time.perf_counter() - started > settings.timing_budget_s:
                break
            if _precise_enough(samples, reps, settings.precision):
                break
            outrun = _outrun(samples, reps, self.to_beat)
            if outrun:
                self.notes.append(f"timing stopped after {reps} repetitions: {outrun}")
                break
        if _forged_timing(samples, parent_samples, calibration):
            # A forged clock disagrees on every call; a busy machine's scheduling delay comes and goes.
            for rep in range(reps, reps + _CONFIRMING_REPS):
                repetition(rep)
            self.notes.append(
                f"the child's clock disagreed with the parent's over {reps} repetitions; "
                f"{_CONFIRMING_REPS} more were timed before judging"
            )
        machine_after = snapshot(child)
        self.machine = (machine_before, machine_after, calibrated_before, self._calibrate())
        self.uncalled = uncalled
        return samples, parent_samples, calibration

    def _calibrate(self, *, warming_up: bool = False) -> list[float]:
        """A fixed multithreaded kernel timed by the parent's clock in the child: a busy machine
        slows it as it slows the reference. ``warming_up`` runs it a few times unmeasured first: its
        first calls in a process ran 1.2-2x slower than later ones (the matrix library's own start),
        which read as a machine that quietened during the timing."""
        times = []
        for _ in range(_CALIBRATION_WARMUP if warming_up else _CALIBRATION_KERNELS):
            start = time.perf_counter()
            self._ask("calibrate", "calibrated", size=CALIBRATION_SIZE)
            times.append((time.perf_counter() - start) * 1e3)
        return times

    def _sample_timed_call(self, rep: int) -> None:
        """Every timed call: elements at positions drawn now, after the call, of the candidate's
        outputs and inputs, against the reference's on the same fresh values in the same child."""
        self.where = f"checking timed call {rep}"
        outputs = [self._positions(t.numel()) for t in self.references.trials[0]]
        inputs = [self._positions(numel) for numel in self.input_sizes]
        message = self._ask("sample", "sample", outputs=outputs, inputs=inputs)
        count = len(outputs) + len(inputs)
        if len(message.tensors) != 2 * count:
            raise _Rejected(_rejected("harness-patched", "the child's sample of a timed call is incomplete"))
        reference, candidate = list(message.tensors[:count]), list(message.tensors[count:])
        got, want = candidate[: len(outputs)], reference[: len(outputs)]
        result = self._compare(got, want, poison=None)
        if not result.ok:
            raise _Rejected(
                _rejected("timed-output-mismatch", f"timed call {rep}, at elements drawn after it: {result.message}")
            )
        for position, (now, before) in enumerate(zip(candidate[len(outputs) :], reference[len(outputs) :])):
            if not same_bits(now, before):
                raise _Rejected(_rejected("input-mutation", f"timed call {rep} changed input {position}"))
        self.where = "timing"

    def _positions(self, numel: int) -> list[int]:
        return [self.rng.randrange(numel) for _ in range(_SAMPLED_ELEMENTS)] if numel else []

    def _check_timed_call(self, rep: int, seed: int) -> None:
        """Compare a timed call's outputs with the reference, and its inputs with what they were."""
        self.where = f"checking timed call {rep}"
        message = self._ask("outputs", "outputs", who="candidate")
        inputs, want = self.references.model.inputs_and_outputs(seed)
        result = self._compare(list(message.tensors), want, poison=None)
        if not result.ok:
            raise _Rejected(_rejected("timed-output-mismatch", f"timed call {rep}: {result.message}"))
        message = self._ask("inputs", "inputs", who="candidate")
        expected = [t for t in inputs if isinstance(t, torch.Tensor)]
        for position, (now, before) in enumerate(zip(message.tensors, expected)):
            if not same_bits(now, before):
                raise _Rejected(_rejected("input-mutation", f"timed call {rep} changed input {position}"))
        if len(message.tensors) != len(expected):
            raise _Rejected(_rejected("input-mutation", f"timed call {rep} replaced its inputs"))
        self.where = "timing"

    def _post_check(self) -> None:
        self.where = "re-checking after timing"
        references = self.references
        message = self._ask("trial", "trial", seed=references.post_seed, poison=0, reuse=False, trial="post")
        self._reject_compute(message)
        result = self._compare(list(message.tensors), references.post, poison=None)
        if not result.ok:
            raise _Rejected(_rejected("drift-after-timing", f"after timing, on fresh inputs: {result.message}"))

    def _finish(self) -> None:
        """The child's last checks (exit handlers, patched functions, processes left, PyTorch
        operators); it then only records for profiling, if asked."""
        self.where = "finishing"
        message = self._ask("finish", "finished")
        self._reject_compute(message)

    def _record_for_profiling(self) -> None:
        """The recordings of one forward the caller asked for, after every check: what happens
        here cannot change the verdict, except a finding of the monitors, which still rejects. A
        candidate that fails at a profiler's smaller sizes (it assumes the task's own) is left
        unrecorded there, with a note."""
        for folder, program in self.record.items():
            self.where = "recording the native calls of one forward for profiling"
            try:
                message = self._ask("record", "recorded", seed=trial_seeds(1)[0], folder=folder, program=program)
            except _Ended as ended:
                if self.session.protocol_error is not None:
                    raise  # tampering with the report channel rejects, whenever it happens
                said = (ended.error or {}).get("message") or "the child ended"
                self.notes.append(f"not recorded for profiling at other sizes: {_one_line(str(said))[:300]}")
                return
            wrong = message.header.get("wrong")
            if wrong:
                self.notes.append(
                    f"not recorded for profiling at other sizes: its output differs from the reference's there "
                    f"({_one_line(str(wrong))[:200]}); a candidate that assumes the task's own sizes is profiled at them"
                )

    # -- judging --------------------------------------------------------------------------------

    def _compare(self, got: list[torch.Tensor], want: list[torch.Tensor], *, poison: float | None) -> Comparison:
        return compare_outputs(
            got,
            want,
            atol=self.settings.atol,
            rtol=self.settings.rtol,
            relative_norm=self.relative_norm,
            poison=poison,
            reference_error=self.reference_error,
        )

    def _judge_timing(
        self,
        samples: dict[str, list[float]],
        parent_samples: dict[str, list[float]],
        calibration: dict[str, list[float]],
    ) -> Verdict:
        settings, notes = self.settings, self.notes
        forged = _forged_timing(samples, parent_samples, calibration)
        if forged:
            return _rejected("forged-timing", forged, notes=notes)
        reference, candidate = summarize(samples["reference"]), summarize(samples["candidate"])
        floor = self.floor
        enforced = floor is not None and _floor_binds(self.task)
        if floor is not None and not enforced:
            notes.append(
                "inputs and outputs of one call fit in twice the last-level cache, so the DRAM roofline "
                "floor does not bound this timing and is not enforced"
            )
        if floor is not None and enforced and candidate.median_ms < floor * ROOFLINE_MARGIN:
            return _rejected(
                "below-roofline",
                f"median {candidate.median_ms:.4g} ms is under {ROOFLINE_MARGIN:g} of the roofline floor of "
                f"{floor:.4g} ms for this task on this machine: the work cannot have been done",
                notes=notes,
            )
        if floor is not None and enforced and candidate.median_ms < floor:
            notes.append(
                f"faster than the measured roofline floor ({floor:.4g} ms): peaks are measured with "
                "torch's own copy and sgemm, which a kernel can beat slightly; refresh with "
                "`pragma roofline --refresh` if this persists"
            )
        speedup = bootstrap_speedup(samples["reference"], samples["candidate"])
        compiled = speedup_vs_compiled = None
        if "compile" in samples:
            compiled = summarize(samples["compile"])
            speedup_vs_compiled = bootstrap_speedup(samples["compile"], samples["candidate"])
        conditions = self._conditions(samples)
        notes.append(
            f"{len(samples['candidate'])} timed calls on fresh inputs, each sampled against the reference "
            "and timed by the parent's clock too; "
            f"{settings.threads} thread(s) on CPU {_cpu_list(conditions.cpus)}"
        )
        return Verdict(
            status=VerdictStatus.CORRECT,
            message=_correct_message(settings, speedup, speedup_vs_compiled, noise=conditions.noise),
            conditions=conditions,
            reference=reference,
            candidate=candidate,
            speedup=speedup,
            compiled_reference=compiled,
            speedup_vs_compiled=speedup_vs_compiled,
            floor_ms=floor,
            notes=notes,
            **self._errors(),
        )

    def _conditions(self, samples: dict[str, list[float]]) -> TimingConditions:
        """The machine around the timing, and whether it makes the timing noisy."""
        assert self.machine is not None and self.settings.threads is not None
        before, after, calibrated_before, calibrated_after = self.machine
        cpus = self.settings.cpus or all_cpus()
        other, steal = usage_between(before, after, cpus)
        calibration = (statistics.median(calibrated_before), statistics.median(calibrated_after))
        best = best_calibration(self.settings.threads, min(calibrated_before + calibrated_after))
        drift = block_drift(samples["reference"], samples["candidate"])
        loads = (before.load1, after.load1)
        return TimingConditions(
            threads=self.settings.threads,
            cpus=cpus,
            seconds=after.wall - before.wall,
            other_cpu=other,
            steal=steal,
            load_average=loads if None not in loads else None,
            frequency_mhz=frequency_mhz(cpus),
            calibration_ms=calibration,
            calibration_best_ms=best,
            drift=drift,
            noise=noise_reasons(
                cpus=len(cpus),
                seconds=after.wall - before.wall,
                other_cpu=other,
                steal=steal,
                calibration_ms=calibration,
                calibration_best_ms=best,
                drift=drift,
            ),
        )

    def _errors(self) -> dict[str, Any]:
        """Worst absolute and relative error over the trials, where, and the whole-output error."""
        if not self.trial_results:
            return {}
        worst = max(self.trial_results, key=lambda result: result.max_abs_error or 0.0)
        norms = [
            result.relative_error_norm
            for result in self.trial_results
            if result.relative_error_norm is not None and math.isfinite(result.relative_error_norm)
        ]
        return {
            "max_abs_error": worst.max_abs_error,
            "max_rel_error": worst.max_rel_error,
            "error_index": worst.index,
            "relative_error_norm": max(norms) if norms else None,
        }

    def _ended_early(self, outcome: SandboxOutcome, error: dict[str, Any] | None, protocol: str | None) -> Verdict:
        where, settings = self.where, self.settings
        notes = self.notes + list(outcome.notes)
        if protocol is not None:
            return _rejected(
                "harness-patched", f"the child's report channel was tampered with: {protocol}", notes=notes
            )
        if outcome.timed_out:
            if self.session.late and self.forward_limit is not None:
                message = (
                    f"no answer within {self.forward_limit:.3g} s (while {where}), {FORWARD_LIMIT_FACTOR:g} times "
                    f"the reference's {self.references.call_ms:.3g} ms: the candidate hangs or is far too slow"
                )
            else:
                message = (
                    f"no result within {settings.wall_limit_s:g} s (while {where}): "
                    "the candidate hangs or is far too slow"
                )
            return Verdict(status=VerdictStatus.TIMEOUT, notes=notes, message=message)
        if error is not None:
            kind = str(error.get("kind"))
            if kind == "sandbox":  # the machine, not the candidate: no verdict can be given
                raise PragmaError(f"cannot verify here: {error.get('message')}")
            status = {"compile": VerdictStatus.COMPILE_ERROR, "out_of_memory": VerdictStatus.OUT_OF_MEMORY}.get(
                kind, VerdictStatus.RUNTIME_ERROR
            )
            diagnostics = tuple(str(d) for d in (error.get("diagnostics"), error.get("traceback")) if d)
            message = str(error.get("message", "failed"))
            if status is VerdictStatus.RUNTIME_ERROR and where != "building the candidate":
                message = f"{where}: {message}"
            if status is VerdictStatus.OUT_OF_MEMORY:
                message += f" (limit {settings.memory_gb:g} GiB of address space)"
            return Verdict(status=status, message=_one_line(message), diagnostics=diagnostics, notes=notes)
        if outcome.signal:
            return Verdict(
                status=VerdictStatus.CRASHED,
                notes=notes,
                diagnostics=_logs(outcome),
                message=f"the candidate crashed with {outcome.signal} while {where}",
            )
        return Verdict(
            status=VerdictStatus.CRASHED,
            notes=notes,
            diagnostics=_logs(outcome),
            message=f"the sandbox child exited with code {outcome.returncode} while {where} without a result",
        )


def _outrun(samples: dict[str, list[float]], reps: int, to_beat: float | None) -> str:
    """Why the candidate cannot clear ``to_beat``, or '' while it may: after :data:`_MIN_REPS`
    repetitions its speedup interval lies wholly below it; after :data:`_PRECISE_REPS` its speedup
    itself is not above it (the interval's bottom, which would have to clear the bar, lies below
    the speedup, so only a speedup that moved up could). More repetitions would only narrow the
    interval of a verdict that cannot matter (looked at every few repetitions, quick bootstrap)."""
    if to_beat is None or reps < _MIN_REPS or reps % _PRECISION_EVERY:
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
    """Whether the speedup's interval is already within ``precision`` of its value (looked at every
    few repetitions from :data:`_PRECISE_REPS` on, with a quick bootstrap)."""
    if not precision or reps < _PRECISE_REPS or reps % _PRECISION_EVERY:
        return False
    speedup = bootstrap_speedup(samples["reference"], samples["candidate"], resamples=500)
    return speedup.high - speedup.low <= 2 * precision * speedup.value


def _forged_timing(
    samples: dict[str, list[float]], parent_samples: dict[str, list[float]], calibration: dict[str, list[float]]
) -> str | None:
    """Whether the child's clock readings disagree with the parent's clock around the same calls.

    The parent's reading of a call is the child's plus the cost of asking (measured with idle round
    trips, with and without the operator recorder) plus however long the parent waited for a CPU
    to read the answer, which on a busy machine can be milliseconds. So the smallest gap over all
    calls is compared, not the typical one: a child that reports less time than its calls took
    leaves every gap larger, the smallest included. One that reports more leaves gaps smaller than
    a round trip with nothing in it can be.
    """
    for who in samples:
        kind = "profiled" if who == "candidate" else "plain"
        fastest_trip = min(calibration[kind])
        gaps = [parent - child for parent, child in zip(parent_samples[who], samples[who])]
        child = statistics.median(samples[who])
        allowance = _FORGERY_SLACK_MS + 0.25 * child
        if min(gaps) > fastest_trip + allowance:
            seen = statistics.median(parent_samples[who])
            return (
                f"the {who}'s own clock read a median {child:.4g} ms per call, but the parent's clock saw "
                f"{seen:.4g} ms around the same calls, never less than {min(gaps):.3g} ms more "
                f"(asking costs {fastest_trip:.3g} ms)"
            )
        if statistics.median(gaps) < fastest_trip - allowance:
            return f"the {who}'s own clock read more time per call than the parent's clock saw around it"
    return None


def _count(message: Message, key: str) -> int:
    value = message.header.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _number(message: Message, key: str) -> float:
    value = message.header.get(key)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
        raise _Rejected(_rejected("harness-patched", f"the child reported a malformed {key}: {value!r:.50}"))
    return float(value)


def _float32_task(task: Task) -> bool:
    analysis = task.analysis
    if analysis is None:
        return False
    dtypes = {str(spec.dtype) for spec in (*analysis.inputs, *analysis.outputs) if spec.is_tensor}
    return (
        bool(dtypes)
        and all("float32" in dtype or "int" in dtype or "bool" in dtype for dtype in dtypes)
        and any("float32" in dtype for dtype in dtypes)
    )


def _floor_binds(task: Task) -> bool:
    """Whether one call's inputs and outputs are at least twice the last-level cache: then most of
    what a call reads comes from DRAM, though the inputs were written just before it."""
    analysis = task.analysis
    if analysis is None:
        return False
    from ..machine.hardware import describe_cpu

    hardware = describe_cpu()
    cache = hardware.l3_total_bytes or hardware.l2_bytes
    moved = sum(spec.nbytes for spec in analysis.inputs) + sum(spec.nbytes for spec in analysis.outputs)
    return cache is not None and moved >= 2 * cache


# -- helpers ----------------------------------------------------------------------------------------


def _harness_hashes(task: Task, settings: VerifySettings) -> dict[str, str]:
    """Hashes of what the child must not change where the OS cannot stop it: pragma's files, the
    task file, and the trust anchors later verifications read (machine peaks, preflight answer)."""
    from ..machine.roofline import peaks_cache_path

    paths = sorted(_PACKAGE_ROOT.rglob("*.py"))
    paths += [peaks_cache_path(settings.thread_count), preflight_path(task, settings)]
    if task.path is not None:
        paths.append(task.path)
    return {str(path): hashlib.sha256(path.read_bytes()).hexdigest() for path in paths if path.exists()}


def _floor_ms(task: Task, settings: VerifySettings, backend: Backend) -> float | None:
    if task.analysis is None:
        return None
    if backend.floor_ms is not None:
        return backend.floor_ms(task.analysis, settings.thread_count)
    from ..machine.roofline import floor_ms, machine_peaks

    return floor_ms(task.analysis, machine_peaks(settings.thread_count)).floor_ms


def _same_outputs(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(same_bits(x, y) for x, y in zip(a, b))


def _mismatch(result: Comparison, trial: int) -> Verdict:
    if result.check:
        return _rejected(result.check, f"trial {trial}: {result.message}")
    return Verdict(
        status=VerdictStatus.WRONG_OUTPUT,
        message=f"trial {trial}: {result.message}",
        max_abs_error=_finite_or_none(result.max_abs_error),
        max_rel_error=_finite_or_none(result.max_rel_error),
        error_index=result.index,
        failing_trial=trial,
    )


def _rejected(check: str, message: str, *, notes: list[str] | tuple[str, ...] = ()) -> Verdict:
    return Verdict(
        status=VerdictStatus.REJECTED,
        failed_check=check,
        message=f"rejected by {check}: {message}",
        notes=(*notes, describe_check(check)),
    )


def _correct_message(settings: VerifySettings, speedup, speedup_vs_compiled=None, noise=()) -> str:  # noqa: ANN001
    text = f"correct in {settings.trials} trials"
    if speedup is not None and noise:
        text += f"; about {speedup.value:.2f}x the reference, but the timing was noisy: {'; '.join(noise)}"
        return text
    if speedup is not None:
        text += f"; {speedup.value:.2f}x the reference (95% CI {speedup.low:.2f}-{speedup.high:.2f})"
    if speedup_vs_compiled is not None:
        text += f", {speedup_vs_compiled.value:.2f}x torch.compile"
    return text


def _cpu_list(cpus: tuple[int, ...]) -> str:
    return ", ".join(map(str, cpus))


def _finite_or_none(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _logs(outcome: SandboxOutcome) -> tuple[str, ...]:
    return tuple(text for text in (outcome.stderr.strip(), outcome.stdout.strip()) if text)
