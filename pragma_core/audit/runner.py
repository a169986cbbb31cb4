"""Running the audit: every candidate of the manifest verified against its task, row by row.

The tasks are copied to a temporary folder first, so a candidate that edits the task it is checked
against edits a copy. The files the parent trusts across verifications (the cached machine peaks
and preflight answers under pragma's cache folder) are read before each candidate and put back
after it; a row says when the candidate had changed them. With ``workers`` above one, candidates
are verified in that many processes at once (each verification is a child process anyway; the
parent's side draws seeded random inputs, which threads would share).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

import attrs

from ..backends import DEFAULT_BACKEND
from ..errors import PragmaError
from ..paths import cache_dir
from ..records import Candidate, VerdictStatus
from ..verifier import VerifySettings, verify
from .manifest import CASES, AuditCase

__all__ = ["AUDIT_SETTINGS", "AuditError", "AuditRow", "audit_case", "audit_cases", "run_audit"]

_HERE = Path(__file__).resolve().parent
CANDIDATES = _HERE / "candidates"
TASKS = _HERE / "tasks"

AUDIT_SETTINGS = VerifySettings(
    trials=3, warmup=1, reps=10, timing_budget_s=0.5, threads=1, timeout_s=300, input_sets=2
)
"""Few repetitions and one thread: the audit asks which check fires, not how fast a kernel is.
Three trials, because the check for cached outputs writes new values into the same buffers on
every other trial; a timeout long enough for a first ``load_inline`` build."""

_TRUSTED = ("roofline", "preflight")  # cache folders the parent reads in later verifications


class AuditError(PragmaError):
    """The audit cannot run as asked (no candidate matches the filter)."""


@attrs.frozen(kw_only=True)
class AuditRow:
    """One candidate's verdict beside the one the manifest expects. ``status`` is None when
    ``verify`` itself raised: the candidate broke the harness, and ``message`` says how."""

    candidate: str
    task: str
    entry: int | None
    expected: VerdictStatus
    expected_check: str | None
    status: VerdictStatus | None
    check: str | None
    ok: bool
    seconds: float
    message: str
    uncertain: str = ""


def audit_cases(only: str | None = None) -> list[AuditCase]:
    """The manifest's cases whose candidate or task name contains ``only``, or whose catalogue entry
    is ``only`` (``"honest"`` selects the honest candidates); all of them when ``only`` is None."""
    if only is None:
        return list(CASES)
    chosen = [
        case
        for case in CASES
        if only in case.candidate or only in case.task or (case.entry is not None and only == str(case.entry))
    ]
    if not chosen:
        raise AuditError(
            f"no audit candidate matches {only!r}: give part of a candidate or task name, or an entry number"
        )
    return chosen


def run_audit(
    only: str | None = None,
    settings: VerifySettings | None = None,
    on_result: Callable[[AuditRow], None] | None = None,
    *,
    workers: int = 1,
) -> list[AuditRow]:
    """Verify each candidate of the manifest (those :func:`audit_cases` selects with ``only``)
    against its task and compare the verdict with the expected one.

    ``settings`` default to :data:`AUDIT_SETTINGS`; ``on_result`` hears each row as it is done;
    ``workers`` verifies that many candidates at once. Rows come back in the manifest's order.
    """
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    cases = audit_cases(only)
    settings = settings or AUDIT_SETTINGS
    from ..machine.roofline import machine_peaks

    machine_peaks(settings.thread_count)  # measured once here, never by two verifications at a time
    with tempfile.TemporaryDirectory(prefix="pragma-audit-tasks-") as scratch:
        task_files = _copy_tasks({case.task for case in cases}, Path(scratch))
        rows: dict[str, AuditRow] = {}
        if workers == 1:
            for case in cases:
                row = _audit_one(case, task_files[case.task], settings)
                rows[case.candidate] = row
                if on_result is not None:
                    on_result(row)
        else:
            with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
                # The builds against torch's headers (tens of seconds each) first, side by side: a
                # build holds the timing slot shared, so one beside the other workers' timings stalls them.
                ordered = sorted(cases, key=lambda case: not _builds_against_torch(case))
                futures = [pool.submit(_audit_one, case, task_files[case.task], settings) for case in ordered]
                for future in as_completed(futures):
                    row = future.result()
                    rows[row.candidate] = row
                    if on_result is not None:
                        on_result(row)
    return [rows[case.candidate] for case in cases]


def audit_case(case: AuditCase, settings: VerifySettings | None = None) -> AuditRow:
    """One case of the manifest verified as :func:`run_audit` verifies it (its task copied first),
    in this process: a test suite spreads the cases over its own workers this way."""
    settings = settings or AUDIT_SETTINGS
    from ..machine.roofline import machine_peaks

    machine_peaks(settings.thread_count)
    with tempfile.TemporaryDirectory(prefix="pragma-audit-tasks-") as scratch:
        task_files = _copy_tasks([case.task], Path(scratch))
        return _audit_one(case, task_files[case.task], settings)


def _builds_against_torch(case: AuditCase) -> bool:
    """Whether the candidate compiles against torch's C++ headers (a torch extension), which
    takes tens of seconds where a plain kernel takes one."""
    source = (CANDIDATES / f"{case.candidate}.py").read_text()
    return "torch/extension.h" in source or "load_inline" in source or "torch=True" in source


def _audit_one(case: AuditCase, task_file: Path, settings: VerifySettings) -> AuditRow:
    from ..tasks.loading import load_task

    task = load_task(task_file)
    source = (CANDIDATES / f"{case.candidate}.py").read_text()
    trusted = _snapshot(_TRUSTED)
    started = time.perf_counter()
    status: VerdictStatus | None
    notes = ""
    try:
        verdict = verify(task, Candidate(source=source, backend=DEFAULT_BACKEND), settings)
        status, check, message = verdict.status, verdict.failed_check, verdict.message
        notes = " ".join(verdict.notes)
    except Exception as error:  # noqa: BLE001 - a candidate that breaks verify() is the finding
        status, check, message = None, None, f"verify() raised {type(error).__name__}: {error}"
    seconds = time.perf_counter() - started
    changed = _restore(trusted)
    if changed:
        message += f" [the candidate changed {', '.join(changed)} in pragma's cache; restored]"
    ok = status is case.expected and (
        check in (case.check, *case.also) if case.expected is VerdictStatus.REJECTED else True
    )
    if case.noted and case.noted not in notes:
        ok = False
        message += f" [no note says {case.noted!r}]"
    return AuditRow(
        candidate=case.candidate,
        task=case.task,
        entry=case.entry,
        expected=case.expected,
        expected_check=case.check,
        status=status,
        check=check,
        ok=ok,
        seconds=round(seconds, 2),
        message=message,
        uncertain=case.uncertain,
    )


def _copy_tasks(names: Iterable[str], folder: Path) -> dict[str, Path]:
    copies = {}
    for name in sorted(names):
        copies[name] = folder / f"{name}.py"
        shutil.copyfile(TASKS / f"{name}.py", copies[name])
    return copies


def _snapshot(folders: Iterable[str]) -> dict[Path, bytes]:
    return {path: path.read_bytes() for folder in folders for path in _files(cache_dir(folder))}


def _restore(snapshot: dict[Path, bytes]) -> list[str]:
    """Put the trusted files back as they were; the names of those that had changed. Files added
    meanwhile are the parent's own answers for this verification and are kept."""
    changed = []
    for path, content in snapshot.items():
        try:
            current: bytes | None = path.read_bytes()
        except OSError:
            current = None
        if current != content:
            changed.append(f"{path.parent.name}/{path.name}")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
    return changed


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*") if p.is_file()) if folder.is_dir() else []
