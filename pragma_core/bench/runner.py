"""The bench driver: choose and load the tasks, hand them to an executor, record each row as it
comes, and write the report at the end.

A bench is resumable by running the same command again: tasks with a row in ``bench.json`` are not
run again (their files are not even traced), tasks whose worker was killed continue their run after
its last complete attempt (:mod:`._task_run`), and tasks never started start.

Once every task ended, the tasks whose confirmation disagreed with the loop's best or was timed in
a disturbed window (:mod:`.confirmations`) have their best timed again, in the same executor: up to
:data:`~.confirmations.EXTRA_CONFIRMATIONS` rounds, each after the other tasks' (so a disturbance
has passed, or at least ``--retime-after`` seconds). A bench resumed before a round finished times
what is still due.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console

from ..errors import PragmaError, TaskError
from ..files import output_folder
from ..loop.settings import configured_model, provider_name
from ..progress import progress_bar
from ..records import Task
from ..tasks.loading import load_task, sizes_per_file
from ._task_run import Reporter, TaskJob, retime_job
from .confirmations import EXTRA_CONFIRMATIONS
from .executors import RowHandler
from .plan import BenchSettings, task_files, task_key
from .report import flag_text, interval, write_report
from .store import BenchStore, begin_variant, sizes_fitted_before

__all__ = ["Executor", "run_bench", "ENDED"]

ENDED = ("finished", "failed")
"""Row statuses a resumed bench keeps; an ``error`` or ``crashed`` task is run again."""


class Executor(Protocol):
    def run(self, jobs: list[TaskJob], on_event: Reporter, on_row: RowHandler) -> None: ...


def run_bench(
    tree: Path, out: Path, settings: BenchSettings, executor: Executor, console: Console | None = None
) -> dict[str, Any]:
    """Run (or resume) the bench of ``settings`` over ``tree`` into ``out``; returns ``bench.json``'s
    content. Every task's row is saved as soon as it ends. Ctrl-C (KeyboardInterrupt) propagates
    after the workers saved their complete attempts."""
    console = console or Console(stderr=True)
    tree = Path(tree).resolve()
    store = BenchStore(out)
    document = store.load()
    if document.get("tree") not in (None, str(tree)):
        raise PragmaError(
            f"{store.path}: this bench ran the tasks of {document['tree']}, not {tree}; pass another --out"
        )
    settings = _resolved(settings)
    files = task_files(tree, settings)
    variant = begin_variant(document, settings, tree)
    output_folder(store.root, "--out")
    store.save(document)
    rows: dict[str, Any] = variant["tasks"]
    todo = [path for path in files if rows.get(task_key(tree, path), {}).get("status") not in ENDED]
    done_before = len(files) - len(todo)
    if done_before:
        console.print(f"pragma: {done_before} of {len(files)} tasks already ran in {store.root}: not run again")
    # the overrides are checked against every chosen task, run before or now: a finished bench resumes
    sizes = sizes_per_file(files, settings.sizes, where=tree) if settings.sizes else {}
    jobs = _jobs(tree, todo, sizes, settings, store, document, console)
    store.save(document)
    if jobs:
        from ..knowledge.library import open_index

        open_index()  # built once, here, before the workers open it: the Conductor's first turn is not a race
    chosen = done_before + len(jobs)

    with progress_bar(console) as progress:
        overall = progress.add_task(f"bench ({settings.variant})", total=chosen, completed=done_before)
        lines: dict[str, Any] = {}

        def on_event(event: dict[str, Any]) -> None:
            key = event["key"]
            if key not in lines:
                lines[key] = progress.add_task("", total=None)
            progress.update(lines[key], description=f"  {key}: {_phase(event)}")
            said = _SAID.get(event["phase"])
            if said is not None:  # a line that stays: what a resumed bench picked up, or mended
                progress.console.print(f"{key}: {said(event)}", highlight=False, markup=False, soft_wrap=True)

        def on_row(key: str, row: dict[str, Any], *, counted: bool = True) -> None:
            rows[key] = row
            store.save(document)
            if key in lines:
                progress.remove_task(lines.pop(key))
            if counted and row.get("status") in ENDED:
                progress.advance(overall)
            progress.console.print(_row_line(key, row), highlight=False, markup=False, soft_wrap=True)

        executor.run(jobs, on_event, on_row)
        keys = [task_key(tree, path) for path in files]
        for _ in range(EXTRA_CONFIRMATIONS):
            due = [key for key in keys if ((rows.get(key) or {}).get("confirmation") or {}).get("due")]
            if not due:
                break
            _retime(due, rows, settings, store, executor, progress, on_event, partial(on_row, counted=False))
    document["metrics"] = write_report(store.root, document)
    store.save(document)
    return document


def _retime(
    due: list[str],
    rows: dict[str, Any],
    settings: BenchSettings,
    store: BenchStore,
    executor: Executor,
    progress: Any,
    on_event: Reporter,
    on_row: Callable[[str, dict[str, Any]], None],
) -> None:
    """One round of re-timing: each due task's best timed once more in a job of its own. A job
    that could not time it (its run folder gone, the verification stopped) leaves the task's row
    as it was, said in one line: the figures already there are not lost."""
    progress.console.print(
        f"pragma: timing the best of {len(due)} task(s) again, their confirmation disagreed with the loop's "
        "best or was disturbed: " + ", ".join(due),
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    before = {key: rows[key] for key in due}
    jobs = [retime_job(key, rows[key], settings, store.runs_dir(settings.variant, key).resolve()) for key in due]

    def on_retimed(key: str, row: dict[str, Any]) -> None:
        if row.get("status") not in ENDED:
            progress.console.print(
                f"{key}: could not be timed again, its row stays as it was: {row.get('error')}",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
            row = before[key]
        else:
            row = row | {"seconds": round(before[key].get("seconds", 0.0) + row.get("seconds", 0.0), 3)}
        on_row(key, row)

    executor.run(jobs, on_event, on_retimed)


def _resolved(settings: BenchSettings) -> BenchSettings:
    """The settings with the model and provider as the run will use them (``PRAGMA_MODEL``...)."""
    import attrs

    model = configured_model(settings.loop)
    loop = attrs.evolve(settings.loop, model=model)
    return attrs.evolve(settings, loop=attrs.evolve(loop, provider=provider_name(loop)))


def _jobs(
    tree: Path,
    files: list[Path],
    sizes: dict[Path, dict[str, Any]],
    settings: BenchSettings,
    store: BenchStore,
    document: dict[str, Any],
    console: Console,
) -> list[TaskJob]:
    """Load (trace) each file at its ``sizes``; a file that cannot load gets one line and a place
    under ``unloadable``; a task outside ``--categories`` is left out."""
    unloadable: dict[str, str] = document.setdefault("unloadable", {})
    jobs = []
    with progress_bar(console) as progress:
        bar = progress.add_task("loading tasks", total=len(files))
        for path in files:
            key = task_key(tree, path)
            progress.update(bar, description=f"loading {key}")
            try:
                task: Task = load_task(path, sizes.get(path, {}))
            except TaskError as error:
                unloadable[key] = str(error)
                progress.console.print(
                    f"pragma: cannot load {key}: {error}", highlight=False, markup=False, soft_wrap=True
                )
                progress.advance(bar)
                continue
            unloadable.pop(key, None)
            progress.advance(bar)
            if settings.categories and task.category.value not in settings.categories:
                continue
            jobs.append(
                TaskJob(
                    key=key,
                    task=task,
                    category=task.category.value,
                    settings=settings,
                    runs_dir=store.runs_dir(settings.variant, key).resolve(),
                    fitted_sizes=sizes_fitted_before(document, settings, key),
                )
            )
    return jobs


_PHASES: dict[str, Callable[[dict[str, Any]], str]] = {
    "starting": lambda e: "starting",
    "queued": lambda e: "queued",
    "fitting": lambda e: f"fitting its sizes to {e['detail']}",
    "sizes_kept": lambda e: f"at the sizes the bench's other variant was fitted to ({e['detail']})",
    "resuming": lambda e: f"resuming its run after attempt {e['attempt']}",
    "rebuilt": lambda e: "its summary made again from the run folder",
    "baseline": lambda e: "timing and profiling the reference",
    "planning": lambda e: f"planning changes to attempt {e['attempt']}",
    "confirming": lambda e: "timing the best once more against the baselines",
    "waiting": lambda e: f"waiting {e['detail']} before timing its best again",
    "retiming": lambda e: f"timing the best again (confirmation {e['detail']})",
    "profiling": lambda e: f"attempt {e['attempt']}: profiling with {e['detail']}",
}


_SAID: dict[str, Callable[[dict[str, Any]], str]] = {
    "resuming": lambda e: (
        f"resuming its run after attempt {e['attempt']}"
        if e["attempt"]
        else "resuming its run before its first attempt"
    ),
    "rebuilt": lambda e: (
        f"its summary.json could not be read ({e['detail']}); made again from its "
        f"{e['attempt']} attempts in the run folder"
    ),
    "sizes_kept": lambda e: f"not fitted again: at the sizes the bench's other variant ran it at ({e['detail']})",
}
"""Events a bench says on a line of their own, beside the status lines that come and go: what a
resumed bench picked up or mended, and the sizes a second variant took over."""


def _phase(event: dict[str, Any]) -> str:
    shown = _PHASES.get(event["phase"])
    return shown(event) if shown else f"attempt {event['attempt']}: {event['phase']}"


def _row_line(key: str, row: dict[str, Any]) -> str:
    status = row.get("status")
    if status == "crashed":
        said = (row.get("error") or "").strip().splitlines()
        return f"{key}: crashed (run again when the bench is resumed): {said[-1] if said else 'no reason given'}"
    if status == "failed":
        return f"{key}: could not run: {row.get('error')}"
    if status == "error":
        return f"{key}: stopped (run again when the bench is resumed): {row.get('error')}"
    minutes = row.get("loop_seconds", row.get("seconds", 0)) / 60
    stopped = f"; stopped: {row['stop_reason']}" if row.get("stop_reason") else ""
    if not row.get("correct"):
        return f"{key}: no correct candidate in {row.get('attempts')} attempts{stopped} ({minutes:.1f} min)"
    figures = []
    for baseline, speedup in (row.get("speedup") or {}).items():
        if speedup is not None:
            figures.append(f"{interval(speedup)} vs {baseline}")
    said = ", ".join(figures) if figures else "correct (not timed)"
    if figures and row.get("loop_best"):
        said += f" (the loop's best read {interval(row['loop_best'])}"
        flagged = flag_text(row)
        said += f"; {flagged})" if flagged else ")"
    best = f"best at attempt {row.get('best_attempt')} of {row.get('attempts')}{stopped}"
    return f"{key}: {said}, {best} ({minutes:.1f} min)"
