"""The bench driver: choose and load the tasks, hand them to an executor, record each row as it
comes, and write the report at the end.

A bench is resumable by running the same command again: tasks with a row in ``bench.json`` are not
run again (their files are not even traced), tasks whose worker was killed continue their run after
its last complete attempt (:mod:`.task_run`), and tasks never started start.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console

from ..errors import PragmaError, TaskError
from ..loop.settings import configured_model, provider_name
from ..progress import progress_bar
from ..records import Task
from ..tasks.loading import load_task, sizes_per_file
from ._task_run import Reporter, TaskJob
from .executors import RowHandler
from .plan import BenchSettings, task_files, task_key
from .store import BenchStore, begin_variant

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
    from .report import write_report

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
    store.root.mkdir(parents=True, exist_ok=True)
    store.save(document)
    rows: dict[str, Any] = variant["tasks"]
    todo = [path for path in files if rows.get(task_key(tree, path), {}).get("status") not in ENDED]
    done_before = len(files) - len(todo)
    if done_before:
        console.print(f"pragma: {done_before} of {len(files)} tasks already ran in {store.root}: not run again")
    jobs = _jobs(tree, todo, settings, store, document, console)
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

        def on_row(key: str, row: dict[str, Any]) -> None:
            rows[key] = row
            store.save(document)
            if key in lines:
                progress.remove_task(lines.pop(key))
            if row.get("status") in ENDED:
                progress.advance(overall)
            progress.console.print(_row_line(key, row), highlight=False, markup=False, soft_wrap=True)

        executor.run(jobs, on_event, on_row)
    document["metrics"] = write_report(store.root, document)
    store.save(document)
    return document


def _resolved(settings: BenchSettings) -> BenchSettings:
    """The settings with the model and provider as the run will use them (``PRAGMA_MODEL``...)."""
    import attrs

    model = configured_model(settings.loop)
    loop = attrs.evolve(settings.loop, model=model)
    return attrs.evolve(settings, loop=attrs.evolve(loop, provider=provider_name(loop)))


def _jobs(
    tree: Path,
    files: list[Path],
    settings: BenchSettings,
    store: BenchStore,
    document: dict[str, Any],
    console: Console,
) -> list[TaskJob]:
    """Load (trace) each file; a file that cannot load gets one line and a place under
    ``unloadable``; a task outside ``--categories`` is left out."""
    plan = sizes_per_file(files, settings.sizes, where=tree) if settings.sizes else {path: {} for path in files}
    unloadable: dict[str, str] = document.setdefault("unloadable", {})
    jobs = []
    with progress_bar(console) as progress:
        bar = progress.add_task("loading tasks", total=len(files))
        for path in files:
            key = task_key(tree, path)
            progress.update(bar, description=f"loading {key}")
            try:
                task: Task = load_task(path, plan[path])
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
                )
            )
    return jobs


_PHASES: dict[str, Callable[[dict[str, Any]], str]] = {
    "starting": lambda e: "starting",
    "queued": lambda e: "queued",
    "fitting": lambda e: f"fitting its sizes to {e['detail']}",
    "resuming": lambda e: "resuming its run",
    "baseline": lambda e: "timing and profiling the reference",
    "planning": lambda e: f"planning changes to attempt {e['attempt']}",
    "confirming": lambda e: "timing the best once more against the baselines",
    "profiling": lambda e: f"attempt {e['attempt']}: profiling with {e['detail']}",
}


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
    if not row.get("correct"):
        return f"{key}: no correct candidate in {row.get('attempts')} attempts ({minutes:.1f} min)"
    figures = []
    for baseline, speedup in (row.get("speedup") or {}).items():
        if speedup is not None:
            figures.append(f"{speedup['value']:.2f}x [{speedup['low']:.2f}-{speedup['high']:.2f}] vs {baseline}")
    said = ", ".join(figures) if figures else "correct (not timed)"
    return f"{key}: {said}, best at attempt {row.get('best_attempt')} of {row.get('attempts')} ({minutes:.1f} min)"
