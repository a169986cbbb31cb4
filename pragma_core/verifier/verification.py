"""``verify(task, candidate)``: the Verifier's verdict on one candidate.

The parent (this module) reads the candidate's source, computes the reference outputs itself,
hashes the task and pragma's own files, and starts the sandbox child. After the child's correctness
runs it compares their outputs with its references and runs the integrity checks; only a candidate
that passes is timed. Timing samples come back raw and are reduced here. Nothing the child prints
is read to judge it.
"""

from __future__ import annotations

import hashlib
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import attrs
import torch

from ..records import Candidate, Task, Verdict, VerdictStatus
from ..sandbox import SandboxedProcess, SandboxLimits, SandboxOutcome, child_environment
from ..statistics import bootstrap_speedup, summarize
from ..tasks import task_program
from .checks import describe_check
from .comparison import Comparison, compare_outputs
from .instrumentation import POISON_VALUES, same_bits
from .job import JobFiles
from .reference import References, compute_references, preflight
from .settings import VerifySettings
from .static_checks import read_candidate

__all__ = ["verify"]

_PACKAGE_ROOT = Path(__file__).resolve().parents[1]

ROOFLINE_MARGIN = 0.5
"""A median under this share of the roofline floor is rejected. Peaks are measured (best of ten
runs of torch's copy and sgemm) and vary by ~15% between runs; an honest kernel can come close to
them, a kernel that skips its work lands far below."""


def verify(
    task: Task,
    candidate: Candidate | str,
    settings: VerifySettings | None = None,
    *,
    job_dir: Path | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> Verdict:
    """Check ``candidate`` (a :class:`Candidate` or the source of a module defining ``ModelNew``)
    against ``task`` in a sandboxed child process, and time it when it is correct.

    ``job_dir`` keeps the job's files (outputs, logs) there; by default a temporary folder is used
    and removed afterwards. ``on_phase`` hears where the check goes after building the candidate,
    for a live display: ``"verifying"`` (the correctness trials), then ``"timing"``.
    """
    settings = settings or VerifySettings()
    if isinstance(candidate, str):
        candidate = Candidate(source=candidate, backend="cpu-cpp")
    findings = read_candidate(candidate.source)
    if findings.syntax_error:
        return Verdict(status=VerdictStatus.COMPILE_ERROR, message=findings.syntax_error)
    if findings.missing_model_new:
        return Verdict(status=VerdictStatus.RUNTIME_ERROR, message="the candidate defines no class ModelNew(nn.Module)")
    if findings.reference_reuse:
        return _rejected("reference-reuse", findings.reference_reuse)
    notes = [f"flagged PyTorch calls in forward: {', '.join(findings.flagged_calls)}"] if findings.flagged_calls else []

    input_sets = settings.input_sets or _input_sets_for(task)
    references = compute_references(task, settings, input_sets=input_sets)
    trivial = preflight(task, references, settings)
    if trivial:
        notes.append(
            f"a {', '.join(trivial)} output would pass this task at atol={settings.atol:g}; "
            "outputs are also checked by whole-output relative error"
        )

    keep = job_dir is not None
    root = Path(job_dir) if job_dir is not None else Path(tempfile.mkdtemp(prefix="pragma-verify-"))
    try:
        files = _prepare_job(root, task, candidate, settings, references)
        hashes_before = _harness_hashes(task)
        verdict = _run_child(
            files, task, settings, references, relative_norm=bool(trivial), notes=notes, on_phase=on_phase
        )
        if _harness_hashes(task) != hashes_before:
            verdict = _rejected(
                "harness-modified",
                "files of the task or of pragma changed while the candidate ran",
                notes=verdict.notes,
            )
        return verdict
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


# -- the child ------------------------------------------------------------------------------------


def _run_child(
    files: JobFiles,
    task: Task,
    settings: VerifySettings,
    references: References,
    *,
    relative_norm: bool,
    notes: list[str],
    on_phase: Callable[[str], None] | None = None,
) -> Verdict:
    watch = _PhaseWatcher(files.phase, on_phase) if on_phase is not None else None
    limits = SandboxLimits(
        wall_s=settings.timeout_s,
        address_space_bytes=int(settings.memory_gb * 1024**3),
        isolate_network=settings.isolate_network,
    )
    argv = [sys.executable, "-m", "pragma_core.verifier.worker", str(files.root)]
    with SandboxedProcess(
        argv, cwd=files.workdir, log_dir=files.logs, limits=limits, env=child_environment(settings.threads)
    ) as child:
        if not child.wait_for(files.phase1, on_poll=watch):
            return _ended_early(files, child.finish(), settings, notes)
        if watch is not None:
            watch.look()  # the trials may have taken less than one look's interval
        phase1 = files.read_json(files.phase1) or {}
        problem = _judge_correctness(files, phase1, references, settings, relative_norm)
        if problem is not None or not settings.time:
            child.send("stop")
            notes += list(child.finish().notes)
            if problem is not None:
                return attrs.evolve(problem, notes=(*notes, *problem.notes))
            return Verdict(
                status=VerdictStatus.CORRECT,
                message=_correct_message(settings, None),
                notes=notes,
                **_errors_of(files, references, settings, relative_norm),
            )
        child.send("go")
        if on_phase is not None:
            on_phase("timing")
        if not child.wait_for(files.phase2):
            return _ended_early(files, child.finish(), settings, notes)
        outcome = child.finish()
    notes += list(outcome.notes)
    phase2 = files.read_json(files.phase2) or {}
    return _judge_timing(files, task, phase2, references, settings, relative_norm, notes)


def _judge_correctness(
    files: JobFiles, phase1: dict, references: References, settings: VerifySettings, relative_norm: bool
) -> Verdict | None:
    for finding in phase1.get("findings", []):
        return _rejected(finding["check"], finding["message"])
    compute_ops = phase1.get("compute_ops") or {}
    if compute_ops:
        names = ", ".join(f"aten::{name} x{count}" for name, count in sorted(compute_ops.items()))
        return _rejected("torch-fallback", f"forward ran PyTorch compute operators: {names}")
    if not phase1.get("native_calls"):
        return _rejected(
            "kernel-not-called",
            "forward never called a compiled kernel (cpu-cpp kernels run through "
            "pragma_core.native.load_library, load_extension or torch.utils.cpp_extension.load_inline)",
        )
    previous: list[torch.Tensor] | None = None
    for trial, want in enumerate(references.trials):
        got = _load(files, f"trial{trial}")
        if got is None:
            return Verdict(status=VerdictStatus.RUNTIME_ERROR, message=f"trial {trial} produced no readable outputs")
        result = compare_outputs(
            got, want, atol=settings.atol, rtol=settings.rtol, relative_norm=relative_norm, poison=POISON_VALUES[0]
        )
        if not result.ok:
            if (
                previous is not None
                and trial > 0
                and _same_outputs(got, previous)
                and not _same_outputs(want, references.trials[trial - 1])
            ):
                return _rejected(
                    "output-caching", f"trial {trial} returned trial {trial - 1}'s result for new input values"
                )
            return _mismatch(result, trial)
        previous = got
    repoisoned = _load(files, "repoisoned")
    first = _load(files, "trial0")
    if repoisoned is not None and first is not None:
        result = compare_outputs(
            repoisoned,
            references.trials[0],
            atol=settings.atol,
            rtol=settings.rtol,
            relative_norm=relative_norm,
            poison=POISON_VALUES[1],
        )
        if result.check == "unwritten-output":
            return _rejected("unwritten-output", result.message)
        agree = compare_outputs(repoisoned, first, atol=settings.atol, rtol=settings.rtol)
        if not agree.ok:
            return _rejected(
                "uninitialized-read",
                f"the same inputs gave different outputs when fresh memory held other values: {agree.message}",
            )
    if references.probe is not None:
        probe = _load(files, "probe")
        if (
            probe is None
            or not all(same_bits(a, b) for a, b in zip(probe, references.probe))
            or len(probe) != len(references.probe)
        ):
            detail = compare_outputs(probe or [], references.probe, atol=0.0, rtol=0.0)
            return _rejected(
                "exact-arithmetic-probe",
                f"on small-integer inputs the result must be exact: {detail.message or 'it differs'}",
            )
    return None


def _judge_timing(
    files: JobFiles,
    task: Task,
    phase2: dict,
    references: References,
    settings: VerifySettings,
    relative_norm: bool,
    notes: list[str],
) -> Verdict:
    for finding in phase2.get("findings", []):
        return _rejected(finding["check"], finding["message"], notes=notes)
    post = _load(files, "post")
    result = compare_outputs(
        post or [], references.post, atol=settings.atol, rtol=settings.rtol, relative_norm=relative_norm
    )
    if post is None or not result.ok:
        return _rejected(
            "drift-after-timing", f"after timing, on fresh inputs: {result.message or 'no outputs'}", notes=notes
        )
    uncalled = int(phase2.get("uncalled_candidate_runs", 0))
    samples = phase2.get("samples_ms", {})
    if uncalled:
        timed = len(samples.get("candidate", ())) or settings.reps
        return _rejected(
            "kernel-not-called", f"{uncalled} of {timed} timed forwards called no compiled kernel", notes=notes
        )
    reference, candidate = summarize(samples["reference"]), summarize(samples["candidate"])
    floor = _floor_ms(task, settings)
    in_cache = _fits_in_cache(task, int(phase2.get("input_sets", 1)))
    if floor is not None and in_cache:
        notes.append(
            "the rotated inputs and outputs fit in the last-level cache, so the DRAM roofline floor "
            "does not bound this timing and is not enforced"
        )
    if floor is not None and not in_cache and candidate.median_ms < floor * ROOFLINE_MARGIN:
        return _rejected(
            "below-roofline",
            f"median {candidate.median_ms:.4g} ms is under {ROOFLINE_MARGIN:g} of the roofline floor of "
            f"{floor:.4g} ms for this task on this machine: the work cannot have been done",
            notes=notes,
        )
    if floor is not None and not in_cache and candidate.median_ms < floor:
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
    notes.append(f"{phase2.get('input_sets', 1)} input set(s) rotated; {settings.threads} thread(s)")
    return Verdict(
        status=VerdictStatus.CORRECT,
        message=_correct_message(settings, speedup, speedup_vs_compiled),
        reference=reference,
        candidate=candidate,
        speedup=speedup,
        compiled_reference=compiled,
        speedup_vs_compiled=speedup_vs_compiled,
        floor_ms=floor,
        notes=notes,
        **_errors_of(files, references, settings, relative_norm),
    )


def _ended_early(files: JobFiles, outcome: SandboxOutcome, settings: VerifySettings, notes: list[str]) -> Verdict:
    where = _read_text(files.phase) or "starting"
    notes = notes + list(outcome.notes)
    error = files.read_json(files.error)
    if outcome.timed_out:
        return Verdict(
            status=VerdictStatus.TIMEOUT,
            notes=notes,
            message=f"no result within {settings.timeout_s:g} s (while {where}): the candidate hangs or is far too slow",
        )
    if error is not None:
        kind = str(error.get("kind"))
        status = {"compile": VerdictStatus.COMPILE_ERROR, "out_of_memory": VerdictStatus.OUT_OF_MEMORY}.get(
            kind, VerdictStatus.RUNTIME_ERROR
        )
        diagnostics = tuple(filter(None, [error.get("diagnostics"), error.get("traceback")]))
        message = error.get("message", "failed")
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


# -- helpers ----------------------------------------------------------------------------------------


def _prepare_job(
    root: Path, task: Task, candidate: Candidate, settings: VerifySettings, references: References
) -> JobFiles:
    files = JobFiles(root)
    files.workdir.mkdir(parents=True, exist_ok=True)
    files.task.write_text(task_program(task))
    files.candidate.write_text(candidate.source)
    files.write_json(
        files.job,
        {
            "backend": candidate.backend,
            "threads": settings.threads,
            "trial_seeds": list(references.trial_seeds),
            "post_seed": references.post_seed,
            "probe_seed": references.probe_seed,
            "timing_seeds": list(references.timing_seeds),
            "warmup": settings.warmup,
            "reps": settings.reps,
            "timing_budget_s": settings.timing_budget_s,
            "baseline": settings.baseline,
        },
    )
    return files


def _harness_hashes(task: Task) -> dict[str, str]:
    paths = sorted(_PACKAGE_ROOT.rglob("*.py"))
    if task.path is not None and task.path.exists():
        paths.append(task.path)
    return {str(path): hashlib.sha256(path.read_bytes()).hexdigest() for path in paths}


class _PhaseWatcher:
    """Reads the phase the child writes (``phase.txt``) a few times a second and says when it has
    moved from building the candidate to the correctness trials. For display only: the candidate
    can write that file too."""

    _EVERY_S = 0.25

    def __init__(self, path: Path, on_phase: Callable[[str], None]) -> None:
        self._path, self._on_phase = path, on_phase
        self._said = False
        self._last_look = 0.0

    def __call__(self) -> None:
        if time.monotonic() - self._last_look >= self._EVERY_S:
            self.look()

    def look(self) -> None:
        self._last_look = time.monotonic()
        if self._said:
            return
        try:
            text = self._path.read_text(errors="replace")
        except OSError:
            return
        if text.startswith(("constructing", "trial")):
            self._said = True
            self._on_phase("verifying")


def _input_sets_for(task: Task) -> int:
    """Enough rotated input sets that their total exceeds twice the last-level cache, at most 8."""
    analysis = task.analysis
    if analysis is None:
        return 1
    input_bytes = max(1, sum(spec.nbytes for spec in analysis.inputs))
    from ..hardware import describe_cpu

    hardware = describe_cpu()
    cache = hardware.l3_total_bytes or hardware.l2_bytes or 32 * 1024**2
    return max(1, min(8, math.ceil(2 * cache / input_bytes)))


def _fits_in_cache(task: Task, input_sets: int) -> bool:
    """Whether every rotated input set with its outputs fits in the last-level cache together: then
    timed runs read from cache, not DRAM, and the memory roof does not bind."""
    analysis = task.analysis
    if analysis is None:
        return False
    from ..hardware import describe_cpu

    hardware = describe_cpu()
    cache = hardware.l3_total_bytes or hardware.l2_bytes
    moved = input_sets * sum(spec.nbytes for spec in analysis.inputs) + sum(spec.nbytes for spec in analysis.outputs)
    return cache is not None and moved + analysis.parameter_bytes <= cache


def _floor_ms(task: Task, settings: VerifySettings) -> float | None:
    if task.analysis is None:
        return None
    from ..roofline import floor_ms, machine_peaks

    return floor_ms(task.analysis, machine_peaks(settings.threads)).floor_ms


def _load(files: JobFiles, label: str) -> list[torch.Tensor] | None:
    path = files.output(label)
    if not path.exists():
        return None
    try:
        # weights_only: tensors and plain containers only, never code from the child.
        value = torch.load(path, weights_only=True)
    except Exception:  # noqa: BLE001 - anything unreadable is the candidate's problem
        return None
    return value if isinstance(value, list) else None


def _same_outputs(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(same_bits(x, y) for x, y in zip(a, b))


def _errors_of(files: JobFiles, references: References, settings: VerifySettings, relative_norm: bool) -> dict:
    """Worst absolute and relative error over the trials, and where."""
    worst: Comparison | None = None
    for trial, want in enumerate(references.trials):
        got = _load(files, f"trial{trial}")
        if got is None:
            continue
        result = compare_outputs(got, want, atol=settings.atol, rtol=settings.rtol, relative_norm=relative_norm)
        if worst is None or (result.max_abs_error or 0) > (worst.max_abs_error or 0):
            worst = result
    if worst is None:
        return {}
    return {"max_abs_error": worst.max_abs_error, "max_rel_error": worst.max_rel_error, "error_index": worst.index}


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


def _correct_message(settings: VerifySettings, speedup, speedup_vs_compiled=None) -> str:  # noqa: ANN001
    text = f"correct in {settings.trials} trials"
    if speedup is not None:
        text += f"; {speedup.value:.2f}x the reference (95% CI {speedup.low:.2f}-{speedup.high:.2f})"
    if speedup_vs_compiled is not None:
        text += f", {speedup_vs_compiled.value:.2f}x torch.compile"
    return text


def _finite_or_none(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _read_text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _logs(outcome: SandboxOutcome) -> tuple[str, ...]:
    return tuple(text for text in (outcome.stderr.strip(), outcome.stdout.strip()) if text)
