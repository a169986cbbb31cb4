"""The run directory: everything one optimization run produced, written so a crash loses nothing done.

    runs/<run-id>/
        run.json            settings, versions, hardware (never an API key)
        task.py             the task's program, sizes applied
        events.jsonl        append-only: one JSON object per line, flushed as it happens
        baseline/           baseline.json (reference timing, roofline floor, reference profiles),
                            roofline.json and each profiler's raw output of the reference
        attempt-01/         attempt.json (the record), candidate.py, prompts and replies, raw output
        best/               the best correct attempt so far: attempt.json and candidate.py
        plans/              tree and beam search: attempt-NN.json, the planner's ranked changes
                            to that attempt (its children each apply one)
        summary.json        the RunResult, when the run ends

An attempt folder is written under a temporary name and renamed when complete, so a run killed
mid-attempt leaves no half attempt behind; :meth:`RunDirectory.completed_attempts` is what
``--resume`` continues from.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

from ..errors import PragmaError
from ..files import atomic_write_text, output_folder
from ..records import Attempt, Baseline, Plan, RunResult, Task
from ..serialization import read_record, write_record
from ..tasks.loading import task_program

__all__ = ["RunDirectory", "new_run_id"]

_ATTEMPT = re.compile(r"attempt-(\d+)")


def new_run_id(task: Task) -> str:
    """``20261122-031501-19_ReLU``: sortable by time, readable by task."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + re.sub(r"[^A-Za-z0-9_.-]", "_", task.name)


class RunDirectory:
    """One run's folder; creating it writes ``run.json`` and ``task.py``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @classmethod
    def create(cls, runs_dir: Path, task: Task, info: dict[str, Any]) -> RunDirectory:
        output_folder(runs_dir, "--runs-dir")  # a file there is one clear error, before anything runs
        root = Path(runs_dir) / new_run_id(task)
        suffix = 1
        while root.exists():
            suffix += 1
            root = Path(runs_dir) / f"{new_run_id(task)}-{suffix}"
        root.mkdir(parents=True)
        run = cls(root)
        write_record(root / "task.json", task)
        atomic_write_text(root / "task.py", task_program(task))
        atomic_write_text(root / "run.json", json.dumps(info, indent=2, sort_keys=True) + "\n")
        return run

    @classmethod
    def open(cls, root: Path) -> RunDirectory:
        """An existing run, for ``--resume``; a folder that is not a run is a clear error."""
        root = Path(root)
        if not (root / "run.json").is_file() or not (root / "task.json").is_file():
            raise PragmaError(
                f"{root}: not a pragma run directory (no run.json and task.json); "
                "pass the folder `pragma optimize` printed"
            )
        return cls(root)

    # -- reading ---------------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        return json.loads((self.root / "run.json").read_text(encoding="utf-8"))

    def task(self) -> Task:
        return read_record(self.root / "task.json", Task)

    def completed_attempts(self) -> list[Attempt]:
        """Every attempt whose folder was completed, in order."""
        attempts = []
        for folder in sorted(self.root.iterdir()):
            match = _ATTEMPT.fullmatch(folder.name)
            if match and (folder / "attempt.json").is_file():
                attempts.append(read_record(folder / "attempt.json", Attempt))
        return sorted(attempts, key=lambda attempt: attempt.number)

    def baseline(self) -> Baseline | None:
        path = self.root / "baseline" / "baseline.json"
        return read_record(path, Baseline) if path.is_file() else None

    def best(self) -> Attempt | None:
        path = self.root / "best" / "attempt.json"
        return read_record(path, Attempt) if path.is_file() else None

    def plans(self) -> dict[int, Plan]:
        """The planner's plans so far, by the attempt each plans from."""
        folder = self.root / "plans"
        found = [read_record(path, Plan) for path in sorted(folder.glob("attempt-*.json"))] if folder.is_dir() else []
        return {plan.parent: plan for plan in found}

    def events(self) -> list[dict[str, Any]]:
        path = self.root / "events.jsonl"
        if not path.exists():
            return []
        events = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                continue  # a line cut by a crash mid-write
        return events

    # -- writing ---------------------------------------------------------------------------------

    def attempt_folder(self, number: int) -> Path:
        return self.root / f"attempt-{number:02d}"

    def staging_folder(self, number: int) -> Path:
        """Where an attempt's files go while it runs; renamed to its folder when complete."""
        folder = self.root / f".attempt-{number:02d}.partial"
        if folder.exists():
            shutil.rmtree(folder)  # left by a killed run
        folder.mkdir()
        return folder

    def complete_attempt(self, attempt: Attempt, staging: Path, files: dict[str, str]) -> Path:
        """Write the attempt's record and files into its staging folder, then rename it into place."""
        for name, text in files.items():
            atomic_write_text(staging / name, text)
        write_record(staging / "attempt.json", attempt)
        final = self.attempt_folder(attempt.number)
        if final.exists():
            shutil.rmtree(final)
        os.replace(staging, final)
        return final

    def write_plan(self, plan: Plan) -> None:
        write_record(self.root / "plans" / f"attempt-{plan.parent:02d}.json", plan)

    def write_baseline(self, baseline: Baseline) -> None:
        write_record(self.root / "baseline" / "baseline.json", baseline)

    def write_best(self, attempt: Attempt) -> None:
        staging = self.root / ".best.partial"
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir()
        write_record(staging / "attempt.json", attempt)
        if attempt.candidate is not None:
            atomic_write_text(staging / "candidate.py", attempt.candidate.source)
        best = self.root / "best"
        if best.exists():
            old = self.root / ".best.old"
            shutil.rmtree(old, ignore_errors=True)
            os.replace(best, old)
            os.replace(staging, best)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, best)

    def append_event(self, kind: str, **data: Any) -> None:
        """One line in ``events.jsonl``, flushed to disk before returning."""
        line = json.dumps({"time": time.time(), "event": kind, **data}, default=str)
        path = self.root / "events.jsonl"
        with open(path, "ab") as handle:
            if handle.tell() and _last_byte(path) != b"\n":
                line = "\n" + line  # a crash cut the previous line short: start a new one
            handle.write((line + "\n").encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())

    def write_summary(self, result: RunResult) -> None:
        write_record(self.root / "summary.json", result)

    def rebuilt_summary(self) -> RunResult:
        """The run's result made again from what its folder holds (the task, the baseline, every
        completed attempt, and the last ``finished`` event's stop reason and best), for a
        ``summary.json`` that cannot be read; written back."""
        finished = [event for event in self.events() if event.get("event") == "finished"]
        last = finished[-1] if finished else {}
        attempts = tuple(self.completed_attempts())
        best = last.get("best")
        result = RunResult(
            run_id=self.root.name,
            task=self.task(),
            baseline=self.baseline(),
            attempts=attempts,
            best_attempt=best if best in {attempt.number for attempt in attempts} else None,
            stop_reason=str(last.get("stop_reason") or ""),
        )
        self.write_summary(result)
        return result


def _last_byte(path: Path) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1)
