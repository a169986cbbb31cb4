"""What a bench runs: its settings, and the task files of a KernelBench-format tree it covers.

A task is known by its path in the tree without ``.py`` (``level1/19_ReLU``): the same as
:attr:`~pragma_core.records.Task.key` in KernelBench's layout, and known before the file is loaded,
so a resumed bench tells finished tasks without tracing them again.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import attrs
from attrs import validators as v

from ..errors import PragmaError
from ..loop.search import SEARCHES
from ..loop.settings import OptimizeSettings
from ..records import Category, frozen_tuple
from ..tasks.loading import find_task_files
from ..verifier import VerifySettings

__all__ = ["BASELINES", "BenchSettings", "task_key", "task_level", "task_files", "variant_name"]

BASELINES = ("eager", "compile")
"""What a task's best is timed against at the end: eager PyTorch, and ``torch.compile`` of it."""

_LEVEL = re.compile(r"level(\d+)$")


def _categories(values: Any) -> tuple[str, ...]:
    chosen = tuple(values)
    known = {category.value for category in Category}
    for value in chosen:
        if value not in known:
            raise PragmaError(f"--categories {value}: not a category; choose from {', '.join(sorted(known))}")
    return chosen


def _baselines(values: Any) -> tuple[str, ...]:
    chosen = tuple(values)
    for value in chosen:
        if value not in BASELINES:
            raise PragmaError(f"--baseline {value}: choose from {', '.join(BASELINES)}")
    if "eager" not in chosen:
        chosen = ("eager", *chosen)  # the loop itself is judged against eager PyTorch
    return chosen


@attrs.frozen(kw_only=True)
class BenchSettings:
    """How a bench runs each task: the tasks chosen (``levels``, ``categories``, ``only``), the
    loop's settings, the sizes (``sizes``: ``--set`` overrides, ``fit_ms``: fitted to a time here)
    and the baselines each task's best is timed against at the end."""

    levels: tuple[int, ...] = attrs.field(default=(), converter=frozen_tuple)
    categories: tuple[str, ...] = attrs.field(default=(), converter=_categories)
    only: tuple[str, ...] = attrs.field(default=(), converter=frozen_tuple)
    model: str | None = None
    provider: str | None = None
    backend: str = "cpu-cpp"
    profile: bool = True
    profilers: tuple[str, ...] = attrs.field(default=("valgrind", "perf"), converter=frozen_tuple)
    max_attempts: int = attrs.field(default=15, validator=v.ge(1))
    patience: int = attrs.field(default=6, validator=v.ge(1))
    target_attainment: float = attrs.field(default=0.9, validator=v.gt(0))
    search: str = attrs.field(default="linear", validator=v.in_(SEARCHES))
    branching: int = attrs.field(default=2, validator=v.ge(1))
    baselines: tuple[str, ...] = attrs.field(default=("eager",), converter=_baselines)
    sizes: dict[str, str] = attrs.field(factory=dict)
    fit_ms: float | None = None
    reps: int = attrs.field(default=100, validator=v.ge(1))
    threads: int | None = None

    @property
    def variant(self) -> str:
        return variant_name(self.profile)

    def comparable(self) -> dict[str, Any]:
        """The settings that decide a task's result: a bench resumed with others would mix two
        experiments in one table (the task choice may change freely)."""
        return {
            "model": self.model,
            "provider": self.provider,
            "backend": self.backend,
            "profilers": list(self.profilers),
            "max_attempts": self.max_attempts,
            "patience": self.patience,
            "target_attainment": self.target_attainment,
            "search": self.search,
            "branching": self.branching,
            "baselines": list(self.baselines),
            "sizes": dict(self.sizes),
            "fit_ms": self.fit_ms,
            "reps": self.reps,
            "threads": self.threads,
        }

    def optimize_settings(self, runs_dir: Path, threads: int) -> OptimizeSettings:
        """The loop's settings for one task, whose run goes in ``runs_dir``."""
        return OptimizeSettings(
            model=self.model,
            provider=self.provider,
            backend=self.backend,
            profilers=self.profilers,
            profile=self.profile,
            max_attempts=self.max_attempts,
            patience=self.patience,
            target_attainment=self.target_attainment,
            search=self.search,
            branching=self.branching,
            runs_dir=runs_dir,
            verify=VerifySettings(reps=self.reps, threads=threads),
        )


def variant_name(profile: bool) -> str:
    """``profiled`` (the loop as designed) or ``unprofiled`` (``--no-profile``: the paper's N-PRAGMA)."""
    return "profiled" if profile else "unprofiled"


def task_key(tree: Path, path: Path) -> str:
    """``level1/19_ReLU``: the file's path in the tree, without ``.py``."""
    return path.relative_to(tree).with_suffix("").as_posix()


def task_level(key: str) -> int | None:
    """The level a key's folder names (``level1/...`` -> 1), None outside a level folder."""
    for part in key.split("/")[:-1]:
        match = _LEVEL.fullmatch(part)
        if match:
            return int(match.group(1))
    return None


def task_files(tree: Path, settings: BenchSettings) -> list[Path]:
    """The task files of ``tree`` the settings choose, in KernelBench order; a missing or empty tree,
    or a choice that leaves nothing, is a clear error."""
    files = find_task_files(tree)
    if settings.levels:
        files = [path for path in files if task_level(task_key(tree, path)) in settings.levels]
        if not files:
            raise PragmaError(
                f"{tree}: no task in level {', '.join(map(str, settings.levels))}; a KernelBench tree has "
                "folders level1, level2, ..."
            )
    if settings.only:
        files = [path for path in files if any(text in task_key(tree, path) for text in settings.only)]
        if not files:
            raise PragmaError(f"{tree}: no task file's name contains {' or '.join(map(repr, settings.only))}")
    return files
