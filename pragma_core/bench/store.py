"""The bench directory: ``bench.json`` with every finished task, and each task's run folder.

    DIR/
        bench.json                  the record (schema in docs/bench.md), rewritten whole after each task
        report.md                   the tables (pragma report DIR writes it again)
        plots/*.png                 the figures
        runs/<variant>/<task>/      the task's run directory (pragma optimize's layout), one per task

``<variant>`` is ``profiled`` or ``unprofiled`` (``--no-profile``): the two halves of the profiling
ablation live side by side in one bench. ``<task>`` is the task's key with ``/`` as ``__``.

Only the driver writes ``bench.json``, and only whole (a temporary file renamed into place), so a
bench killed at any moment keeps every task it had finished; a task whose run folder exists but is
not in ``bench.json`` is resumed after its last complete attempt.
"""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path
from typing import Any

from .._version import __version__
from ..errors import PragmaError
from ..files import atomic_write_text
from .plan import BenchSettings

__all__ = ["SCHEMA_VERSION", "BenchStore", "begin_variant", "sizes_fitted_before"]

SCHEMA_VERSION = 1
"""The version of ``bench.json``'s layout; a reader refuses a newer one."""


class BenchStore:
    """One bench directory (created on first use)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.path = self.root / "bench.json"

    def load(self) -> dict[str, Any]:
        """The bench's record; an empty one for a new directory. A file that is not a bench's is a
        clear error naming it."""
        if not self.path.exists():
            return {
                "schema": SCHEMA_VERSION,
                "pragma": __version__,
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "machine": {"node": platform.node(), "processor": platform.processor() or platform.machine()},
                "tree": None,
                "variants": {},
                "unloadable": {},
            }
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise PragmaError(f"{self.path}: not a readable bench record ({error}); pass another --out") from None
        if not isinstance(document, dict) or "variants" not in document:
            raise PragmaError(f"{self.path}: not a pragma bench record (no variants); pass another --out")
        if document.get("schema", 0) > SCHEMA_VERSION:
            raise PragmaError(
                f"{self.path}: written by a newer pragma (schema {document['schema']}); upgrade pragma to read it"
            )
        return document

    def save(self, document: dict[str, Any]) -> None:
        document["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        atomic_write_text(self.path, json.dumps(document, indent=2, sort_keys=False) + "\n")

    def runs_dir(self, variant: str, key: str) -> Path:
        """Where the task's run folder goes (one run per task and variant)."""
        return self.root / "runs" / variant / key.replace("/", "__")


_RECORDED_LATER = {"search": "linear", "branching": 2, "target_attainment": 0.9}
"""Settings a bench record from before they existed lacks, with the value its tasks ran with."""


def begin_variant(document: dict[str, Any], settings: BenchSettings, tree: Path) -> dict[str, Any]:
    """The variant's part of the record, created for a new bench; a resumed one must have been
    started with the same settings (a clear error names the first that differs)."""
    if document.get("tree") is None:
        document["tree"] = str(tree)
    variants = document["variants"]
    wanted = settings.comparable()
    variant = variants.get(settings.variant)
    if variant is None:
        variant = variants[settings.variant] = {"settings": wanted, "tasks": {}}
        return variant
    for name, value in wanted.items():
        before = variant["settings"].get(name, _RECORDED_LATER.get(name))
        if before != value:
            raise PragmaError(
                f"this bench's {settings.variant} tasks ran with {name}={before!r}, not {value!r}: resume with the "
                "same settings, or pass another --out for a new bench"
            )
    return variant


def sizes_fitted_before(document: dict[str, Any], settings: BenchSettings, key: str) -> dict[str, Any] | None:
    """The sizes another variant of this bench ran ``key`` at, when it fitted them to the same
    ``--fit-ms`` with the same ``--set`` sizes: the profiled and the timing-only halves of the
    ablation then time the same task (a second fit lands a few percent away, often on other
    sizes). None when no other variant ran it, or fitted otherwise."""
    if settings.fit_ms is None:
        return None
    for name, variant in document.get("variants", {}).items():
        ran = variant.get("settings", {})
        if name == settings.variant or ran.get("fit_ms") != settings.fit_ms or ran.get("sizes") != dict(settings.sizes):
            continue
        row = variant.get("tasks", {}).get(key) or {}
        if row.get("status") == "finished" and row.get("sizes"):
            return dict(row["sizes"])
    return None
