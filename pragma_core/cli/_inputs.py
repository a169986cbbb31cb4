"""The files the commands are given: a task (at the sizes ``--set`` and ``--fit-ms`` ask for) and a
candidate module, and the backend a candidate is for; what is wrong with them is bad input."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from ..errors import CandidateError, TaskError
from ..plugin_api.registry import get_registry
from ..records import Candidate, Task
from ..tasks.loading import load_task, parse_size_assignments

__all__ = ["checked_backend", "load_one_task", "read_candidate"]


def checked_backend(name: str) -> str:
    """``name`` when a backend of that name is installed; otherwise bad input naming the choices."""
    backends = get_registry().backends()
    if name not in backends:
        raise CandidateError(f"--backend {name}: no such backend; installed: {', '.join(sorted(backends))}")
    return name


def load_one_task(
    path: Path, assignments: tuple[str, ...], fit_ms: float | None = None, threads: int | None = None
) -> Task:
    """The task file at ``path`` with the ``--set`` sizes, fitted to ``fit_ms`` when given."""
    if not path.exists():
        raise TaskError(f"{path}: no such task file")
    task = load_task(path, parse_size_assignments(assignments))
    return _fitted(task, fit_ms, threads) if fit_ms is not None else task


def _fitted(task: Task, fit_ms: float, threads: int | None) -> Task:
    """The task at the sizes where its reference takes about ``fit_ms``, said on stderr."""
    from ..sizes.fitting import fit_task

    with Console(stderr=True).status(f"fitting {task.key} to {fit_ms:g} ms", spinner="dots"):
        fitted = fit_task(task, fit_ms, threads=threads)
    click.echo(f"pragma: {task.key} fitted: {fitted.note}", err=True)
    return fitted.task


def read_candidate(path: Path, backend: str | None = None) -> Candidate:
    """The candidate module at ``path``, for ``backend`` (by default the one its source is written
    for); a missing, unreadable or empty file, or an unknown backend, is bad input."""
    if not path.is_file():
        raise CandidateError(f"{path}: no such candidate file")
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise CandidateError(f"{path}: cannot be read ({error})") from None
    if not source.strip():
        raise CandidateError(f"{path}: the candidate file is empty; write a module that defines class ModelNew")
    from ..backends import backend_for_source

    name = checked_backend(backend) if backend is not None else backend_for_source(source, get_registry())
    return Candidate(source=source, backend=name)
