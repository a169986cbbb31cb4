"""``verify(task, candidate)``: the Verifier's verdict on one candidate.

The parent (this module) reads the candidate's source, draws the verification's seeds from the
operating system, computes the reference outputs, the preflight and the roofline floor itself, and
only then starts the sandbox child. It asks the child for one forward at a time and receives the
evidence over a pipe (:mod:`pragma_core.sandbox.child_run`): outputs it compares with its own references,
inputs it compares with what it knows they were, and the child's clock readings it checks against
its own clock around each call. Timed calls get fresh input values, and the parent decides after a
call returns whether to check its outputs. Nothing the child prints or writes to a file is read to
judge it.

This module holds the conversation's course and its correctness trials; the timing is
:mod:`.timing`'s, its judgement :mod:`.judgement`'s, and the verdicts are built in :mod:`.verdicts`.
"""

from __future__ import annotations

import hashlib
import random
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

import attrs
import torch

from ..backends import DEFAULT_BACKEND
from ..errors import BackendUnavailable
from ..machine.timing_slot import busy_slot, timing_slot
from ..plugin_api.components import Backend
from ..plugin_api.registry import get_registry
from ..records import BoundClass, Candidate, Task, Verdict, VerdictStatus
from ..sandbox.child_run import ChildSession
from ..tasks.loading import task_program
from ._conversation import Conversation, count
from ._verdicts import (
    Ended,
    Rejected,
    correct_message,
    ended_early,
    mismatch,
    one_line,
    refused_before_running,
    rejected,
    trial_errors,
)
from .comparison import ROUNDING_FACTOR, Comparison, compare_outputs
from .head_to_head import Incumbent, ParentCode, head_to_head
from .inputs import trial_seeds
from .instrumentation import POISON_VALUES, same_bits
from .judgement import Floors, judge_timing
from .reference import References, compute_references, preflight, preflight_path, reference_error
from .settings import FORWARD_LIMIT_FACTOR, FORWARD_LIMIT_FLOOR_S, VerifySettings
from .static_checks import StaticFindings, read_candidate
from .timing import time_contenders
from .warm_child import WarmChild

__all__ = ["verify"]

_PACKAGE_ROOT = Path(__file__).resolve().parents[1]


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
    incumbent: Incumbent | None = None,
    parent_code: ParentCode | None = None,
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
    (a run keeps them in its :class:`~pragma_core.profiling.session.ProfilingSession`); nothing is written where the
    candidate was not found correct, or differed at those sizes.
    ``warm`` is a child started ahead for this task and settings (:class:`WarmChild`): used, and
    closed, when it fits; otherwise a child is started now. A candidate refused before it runs
    (it does not parse, or a static rule rejects it) leaves ``warm`` unused and open. ``to_beat``
    is the speedup the candidate must beat to matter to the caller (the loop's best): timing stops
    once the candidate's interval lies wholly below it (after at least 10 repetitions), or its
    speedup is not above it (after at least 30), and a note says so. ``incumbent`` is the loop's
    best: loaded in the same child and timed interleaved with the candidate on the same inputs,
    it gives the verdict's ``versus_best`` (a best that fails to load gives a note instead), and
    timing stops early once the candidate is clearly slower than it. Every verdict that passes the
    correctness trials carries ``machine_code``, its backend's fingerprint of the code it runs;
    when it equals ``parent_code``'s, the verdict is ``unchanged`` and the candidate is not timed.
    A candidate whose backend cannot run here (its probe says why) raises
    :class:`~pragma_core.errors.BackendUnavailable`.
    """
    settings = settings or VerifySettings()
    settings, threads_note = settings.with_threads()
    if isinstance(candidate, str):
        candidate = Candidate(source=candidate, backend=DEFAULT_BACKEND)
    backend = _available_backend(candidate)
    untimed = backend.timing_refusal() if settings.time else ""
    if untimed:
        settings = attrs.evolve(settings, time=False)
    findings = read_candidate(candidate.source)
    refusal = refused_before_running(task, findings)
    if refusal is not None:
        return refusal
    notes = _notes_before_running(findings, untimed, threads_note)

    with busy_slot():  # building and checking keep cores busy: never during another task's timing
        # Trust anchors, all computed here: the roofline floor (which may measure this machine's
        # peaks, so before any child works), seeds, references, preflight. A contained child cannot
        # write what they read, so they are computed while it imports torch and builds the candidate;
        # where the OS cannot contain it, before it begins, with the files it must not change hashed.
        floors = _floors(task, settings, backend)
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
            trivial, own_error = _check_references(task, references, settings, notes)
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
                floors=floors,
                record=_recording_programs(child, keep_recordings),
                to_beat=to_beat,
                kernel_hint=backend.kernel_hint,
                interpreted=bool(untimed),
                incumbent=incumbent,
                parent_code=parent_code,
            )
            verdict = run.execute(on_phase)
            for kept, folder in _recording_folders(keep_recordings).items():
                if verdict.ok and folder in run.recorded:
                    shutil.copytree(child.folder.work / folder, kept, symlinks=False, dirs_exist_ok=True)

    if not contained and _harness_hashes(task, settings) != hashes_before:
        if task_bytes is not None and task.path is not None and task.path.read_bytes() != task_bytes:
            task.path.write_bytes(task_bytes)  # put the user's task back as it was
        verdict = rejected(
            "harness-modified",
            "files of the task or of pragma changed while the candidate ran (the task file was restored)",
            notes=verdict.notes,
        )
    return attrs.evolve(verdict, seed=references.seed)


def _available_backend(candidate: Candidate) -> Backend:
    """The candidate's backend, which raises :class:`BackendUnavailable` when it cannot run here."""
    backend = get_registry().backend(candidate.backend)
    availability = backend.probe()
    if not availability.available:
        still = f"; still works: {availability.still_works}" if availability.still_works else ""
        raise BackendUnavailable(f"backend {candidate.backend} cannot run here: {availability.reason}{still}")
    return backend


def _notes_before_running(findings: StaticFindings, untimed: str, threads_note: str) -> list[str]:
    """What the verdict notes before the candidate runs: its source's flagged calls and unusual
    constructs, why it is not timed, and the thread count's note."""
    notes = [f"flagged PyTorch calls in forward: {', '.join(findings.flagged_calls)}"] if findings.flagged_calls else []
    notes += list(findings.notes)
    if untimed:
        notes.append(f"not timed: {untimed}")
    if threads_note:
        notes.append(threads_note)
    return notes


def _check_references(
    task: Task, references: References, settings: VerifySettings, notes: list[str]
) -> tuple[list[str], float]:
    """The preflight (which trivial outputs would pass) and the reference's own float32 error,
    each noted in ``notes`` when it matters."""
    trivial = preflight(task, references, settings)
    own_error = reference_error(task, references, settings)
    if own_error > settings.rtol / 10:
        notes.append(
            f"the reference's own float32 result is {own_error:.2g} (whole-output relative) from the same "
            f"program in float64; the whole-output check allows rtol plus {ROUNDING_FACTOR:g} times that"
        )
    if trivial:
        notes.append(
            f"a {', '.join(trivial)} output would pass this task at atol={settings.atol:g}; "
            "outputs are also checked by whole-output relative error"
        )
    return trivial, own_error


def _recording_folders(keep_recordings: Mapping[Path, Task] | None) -> dict[Path, str]:
    """The folder of the child's ``work/`` where it records each recording the caller keeps."""
    return {kept: f"recording-{number}" for number, kept in enumerate(keep_recordings or {})}


def _recording_programs(child: WarmChild, keep_recordings: Mapping[Path, Task] | None) -> dict[str, str | None]:
    """The child's folder for each recording asked for, and the task program to record it at (None:
    the task's own, which the child already has)."""
    folders = _recording_folders(keep_recordings)
    programs = {}
    for kept, sized in (keep_recordings or {}).items():
        program = task_program(sized)
        programs[folders[kept]] = None if program == child.folder.task_program else program
    return programs


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
        floors: Floors,
        record: Mapping[str, str | None] | None = None,
        to_beat: float | None = None,
        kernel_hint: str = "",
        interpreted: bool = False,
        incumbent: Incumbent | None = None,
        parent_code: ParentCode | None = None,
    ) -> None:
        self.session, self.task, self.settings, self.references = session, task, settings, references
        self.incumbent, self.parent_code = incumbent, parent_code
        self.machine_code: str | None = None
        self.kernel_hint, self.interpreted = kernel_hint, interpreted
        self.notes, self.floors = notes, floors
        self.trial_outputs: list[list[torch.Tensor]] = []
        self.trial_results: list[Comparison] = []  # each trial's comparison, for the verdict's errors
        self.rng = random.Random()  # which timed calls are checked: never derivable from the seeds
        # folder -> task program (None: the task's own) to record a correct candidate at
        self.record = dict(record or {})
        self.recorded: set[str] = set()
        """The folders of ``record`` the child saved a recording into."""
        self.to_beat = to_beat  # timing may stop once the candidate is clearly slower than this
        # An interpreted backend runs orders of magnitude slower than the reference: only the
        # whole verification's limit applies to it.
        forward_limit = None if interpreted else settings.forward_limit_s(references.call_ms)
        if forward_limit is not None:
            notes.append(
                f"time limit: {forward_limit:.3g} s per forward ({FORWARD_LIMIT_FACTOR:g}x the {references.call_ms:.3g} ms "
                "the reference took while its expected outputs were computed, beside the candidate's build, "
                f"at least {FORWARD_LIMIT_FLOOR_S:g} s); building may take "
                f"{settings.wall_limit_s:g} s; --timeout sets one limit for the whole verification instead"
            )
        self.child = Conversation(
            session,
            settings,
            forward_limit=forward_limit,
            relative_norm=relative_norm,
            reference_error=reference_error,
            rounding_error=references.model.rounding_error,
        )

    def execute(self, on_phase: Callable[[str], None] | None) -> Verdict:
        """The conversation with the child, which has begun (:meth:`ChildSession.begin`); the child
        is ended on the way out, whatever happens."""
        settings, session = self.settings, self.session
        with session:
            try:
                self.child.receive("ready")
                if on_phase is not None:
                    on_phase("verifying")
                self._correctness()
                self.machine_code = self._fingerprint()
                if self.parent_code is not None and self.machine_code == self.parent_code.machine_code:
                    self._finish()
                    outcome = session.finish()
                    return self._unchanged(outcome.notes)
                if not settings.time:
                    self._finish()
                    outcome = session.finish()
                    untimed = "; not timed (interpreted here)" if self.interpreted else ""
                    return Verdict(
                        status=VerdictStatus.CORRECT,
                        message=correct_message(settings, None) + untimed,
                        notes=[*self.notes, *outcome.notes],
                        machine_code=self.machine_code,
                        **trial_errors(self.trial_results),
                    )
                with_best = self._load_incumbent()
                if on_phase is not None:
                    on_phase("timing")
                with timing_slot():  # other tasks' builds and profiling wait; their model calls go on
                    timings = time_contenders(
                        self.child,
                        self.references,
                        settings,
                        rng=self.rng,
                        to_beat=self.to_beat,
                        notes=self.notes,
                        best=with_best,
                    )
                if on_phase is not None:
                    on_phase("finishing")
                self._post_check()
                self._finish()  # PyTorch operators of timed calls are named before uncalled kernels
                if timings.uncalled:
                    raise Rejected(
                        rejected(
                            "kernel-not-called",
                            f"{timings.uncalled} of {len(timings.samples['candidate'])} timed forwards "
                            "called no compiled kernel",
                        )
                    )
                self._record_for_profiling()
            except Rejected as rejection:
                outcome = session.finish()
                verdict = rejection.verdict
                return attrs.evolve(verdict, notes=(*self.notes, *outcome.notes, *verdict.notes))
            except Ended as ended:
                crashed = ended.error is None and session.protocol_error is None  # wait for its exit status
                return self._ended_early(crashed, ended.error)
            outcome = session.finish()
        self.notes += list(outcome.notes)
        verdict = judge_timing(
            timings,
            task=self.task,
            settings=settings,
            floors=self.floors,
            notes=self.notes,
            trial_results=self.trial_results,
        )
        return self._with_head_to_head(attrs.evolve(verdict, machine_code=self.machine_code), timings.samples)

    # -- the machine code and the best ----------------------------------------------------------

    def _fingerprint(self) -> str | None:
        """The child's fingerprint of the machine code the candidate runs (None: cannot say)."""
        self.child.where = "fingerprinting the built code"
        value = self.child.ask("fingerprint", "fingerprint").header.get("machine_code")
        return value if isinstance(value, str) and value else None

    def _unchanged(self, notes: tuple[str, ...] | list[str]) -> Verdict:
        assert self.parent_code is not None
        which = f"attempt {self.parent_code.attempt}" if self.parent_code.attempt is not None else "its parent"
        return Verdict(
            status=VerdictStatus.UNCHANGED,
            message=(
                f"correct in {self.settings.trials} trials; its built machine code is identical to {which}'s: "
                "not timed (the change did nothing to the code that runs)"
            ),
            notes=[*self.notes, *notes],
            machine_code=self.machine_code,
            **trial_errors(self.trial_results),
        )

    def _load_incumbent(self) -> bool:
        """Load the loop's best in the child beside the candidate; False (and a note) when it has
        no best or the best does not load there."""
        if self.incumbent is None:
            return False
        self.child.where = "loading the loop's best beside the candidate"
        message = self.child.ask("incumbent", "incumbent", limited=False, **self.incumbent.request())
        if message.header.get("loaded") is True:
            return True
        why = one_line(str(message.header.get("error") or "it did not load"))[:300]
        self.notes.append(f"not timed against the loop's best (attempt {self.incumbent.attempt}): {why}")
        return False

    def _with_head_to_head(self, verdict: Verdict, samples: dict[str, list[float]]) -> Verdict:
        versus = head_to_head(verdict, samples, self.incumbent.attempt if self.incumbent else None)
        if versus is None:
            return verdict
        which = f"attempt {versus.attempt}" if versus.attempt is not None else "the best"
        speedup = versus.speedup
        side = f"; side by side {speedup.value:.2f}x {which} (95% CI {speedup.low:.2f}-{speedup.high:.2f})"
        return attrs.evolve(verdict, versus_best=versus, message=verdict.message + side)

    def _ended_early(self, crashed: bool, error: dict[str, object] | None) -> Verdict:
        outcome = self.session.finish(ended=crashed)
        missed_limit = self.child.forward_limit if self.session.late else None
        return ended_early(
            outcome,
            error,
            self.session.protocol_error,
            where=self.child.where,
            notes=self.notes,
            settings=self.settings,
            missed_limit_s=missed_limit,
            reference_ms=self.references.call_ms,
        )

    # -- phase 1: correctness -------------------------------------------------------------------

    def _correctness(self) -> None:
        references, child = self.references, self.child
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
            child.where = f"trial {trial}"
            message = child.receive("trial", within_s=child.forward_limit)
            if trial + 1 < len(seeds):
                ask_trial(trial + 1)
            else:
                ask_second_poison()
            native_calls += count(message, "native_calls")
            child.reject_compute(message)
            got = list(message.tensors)
            result = child.compare(got, want, poison=POISON_VALUES[0], seed=seeds[trial])
            if not result.ok:
                if (
                    previous is not None
                    and _same_outputs(got, previous)
                    and not _same_outputs(want, references.trials[trial - 1])
                ):
                    raise Rejected(
                        rejected(
                            "output-caching", f"trial {trial} returned trial {trial - 1}'s result for new input values"
                        )
                    )
                raise Rejected(mismatch(result, trial))
            self.trial_outputs.append(got)
            self.trial_results.append(result)
            previous = got
        if not native_calls:
            raise Rejected(
                rejected(
                    "kernel-not-called",
                    f"forward never called a kernel of its backend ({self.kernel_hint})",
                )
            )
        self._second_poison()
        if references.probe is not None:
            self._exact_probe(references.probe)

    def _second_poison(self) -> None:
        """Trial 0 again, with fresh memory poisoned with other values: outputs left unwritten, or
        read before they were written, show."""
        child = self.child
        child.where = "trial 0 under a second poison"
        message = child.receive("trial", within_s=child.forward_limit)
        child.reject_compute(message)
        repoisoned = list(message.tensors)
        result = child.compare(
            repoisoned, self.references.trials[0], poison=POISON_VALUES[1], seed=self.references.trial_seeds[0]
        )
        if result.check == "unwritten-output":
            raise Rejected(rejected("unwritten-output", result.message))
        agree = compare_outputs(repoisoned, self.trial_outputs[0], atol=self.settings.atol, rtol=self.settings.rtol)
        if not agree.ok:
            raise Rejected(
                rejected(
                    "uninitialized-read",
                    f"the same inputs gave different outputs when fresh memory held other values: {agree.message}",
                )
            )

    def _exact_probe(self, expected: list[torch.Tensor]) -> None:
        """A linear task on small-integer inputs: the result must match the reference's bit for bit."""
        references, child = self.references, self.child
        child.where = "the exact-arithmetic probe"
        message = child.ask(
            "trial", "trial", seed=references.trial_seeds[0], probe_seed=references.probe_seed, poison=0
        )
        child.reject_compute(message)
        probe = list(message.tensors)
        if len(probe) != len(expected) or not all(same_bits(a, b) for a, b in zip(probe, expected)):
            detail = compare_outputs(probe, expected, atol=0.0, rtol=0.0)
            raise Rejected(
                rejected(
                    "exact-arithmetic-probe",
                    f"on small-integer inputs the result must be exact: {detail.message or 'it differs'}",
                )
            )

    # -- after timing ---------------------------------------------------------------------------

    def _post_check(self) -> None:
        child = self.child
        child.where = "re-checking after timing"
        references = self.references
        message = child.ask("trial", "trial", seed=references.post_seed, poison=0, reuse=False, trial="post")
        child.reject_compute(message)
        result = child.compare(list(message.tensors), references.post, poison=None, seed=references.post_seed)
        if not result.ok:
            raise Rejected(rejected("drift-after-timing", f"after timing, on fresh inputs: {result.message}"))

    def _finish(self) -> None:
        """The child's last checks (exit handlers, patched functions, processes left, PyTorch
        operators); it then only records for profiling, if asked."""
        self.child.where = "finishing"
        message = self.child.ask("finish", "finished")
        self.child.reject_compute(message)

    def _record_for_profiling(self) -> None:
        """The recordings of one forward the caller asked for, after every check: what happens
        here cannot change the verdict, except a finding of the monitors, which still rejects. A
        candidate that fails at a profiler's smaller sizes (it assumes the task's own) is left
        unrecorded there, with a note."""
        for folder, program in self.record.items():
            self.child.where = "recording the native calls of one forward for profiling"
            try:
                message = self.child.ask("record", "recorded", seed=trial_seeds(1)[0], folder=folder, program=program)
            except Ended as ended:
                if self.session.protocol_error is not None:
                    raise  # tampering with the report channel rejects, whenever it happens
                said = (ended.error or {}).get("message") or "the child ended"
                self.notes.append(f"not recorded for profiling at other sizes: {one_line(str(said))[:300]}")
                return
            wrong = message.header.get("wrong")
            if message.header.get("saved"):
                self.recorded.add(folder)
            if wrong:
                self.notes.append(
                    f"not recorded for profiling at other sizes: its output differs from the reference's there "
                    f"({one_line(str(wrong))[:200]}); a candidate that assumes the task's own sizes is profiled at them"
                )


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


def _floors(task: Task, settings: VerifySettings, backend: Backend) -> Floors:
    """The task's physical roofline floor here, the floor at the library's own rates (torch's
    sgemm and copy, shown beside it; None where the backend has no such figure), and which roof
    sets the physical one."""
    if task.analysis is None:
        return Floors()
    if backend.floor_ms is not None:
        return Floors(physical_ms=backend.floor_ms(task.analysis, settings.thread_count))
    from ..machine.roofline import floor_ms, library_floor_ms, machine_peaks

    peaks = machine_peaks(settings.thread_count)
    physical = floor_ms(task.analysis, peaks)
    return Floors(
        physical_ms=physical.floor_ms,
        library_ms=library_floor_ms(task.analysis, peaks).floor_ms,
        memory_bound=physical.bound is BoundClass.MEMORY,
    )


def _same_outputs(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(same_bits(x, y) for x, y in zip(a, b))
