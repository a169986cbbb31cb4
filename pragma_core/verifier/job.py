"""The job folder the parent and the sandbox child share, and what each writes into it.

Parent writes: ``task.py`` (sizes applied), ``candidate.py``, ``job.json`` (seeds and settings).
Child writes: ``phase.txt`` (where it is, so a crash can be placed), ``outputs/<label>.pt``
(candidate outputs, tensors only), ``phase1.json`` after the correctness runs, ``phase2.json``
after timing, ``error.json`` when the candidate could not be built or run. The child works in
``work/``; its stdout and stderr go to ``logs/``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

from ..files import atomic_write_text

__all__ = ["JobFiles"]


@attrs.frozen
class JobFiles:
    root: Path = attrs.field(converter=Path)

    @property
    def task(self) -> Path:
        return self.root / "task.py"

    @property
    def candidate(self) -> Path:
        return self.root / "candidate.py"

    @property
    def job(self) -> Path:
        return self.root / "job.json"

    @property
    def workdir(self) -> Path:
        return self.root / "work"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def phase(self) -> Path:
        return self.root / "phase.txt"

    @property
    def phase1(self) -> Path:
        return self.root / "phase1.json"

    @property
    def phase2(self) -> Path:
        return self.root / "phase2.json"

    @property
    def error(self) -> Path:
        return self.root / "error.json"

    def output(self, label: str) -> Path:
        return self.root / "outputs" / f"{label}.pt"

    def write_json(self, path: Path, data: dict[str, Any]) -> None:
        atomic_write_text(path, json.dumps(data, indent=1))

    def read_json(self, path: Path) -> dict[str, Any] | None:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None
