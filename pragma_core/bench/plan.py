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

from ..errors import PragmaError
from ..loop.settings import OptimizeSettings
from ..records import Category, frozen_tuple
from ..serialization import to_dict
from ..tasks.loading import find_task_files
from ..verifier.settings import BASELINES, VerifySettings
from .confirmations import RETIME_AFTER_S

__all__ = ["BenchSettings", "task_key", "task_level", "task_files", "variant_name"]

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


_COMPARED_LOOP = (
    "model",
    "provider",
    "backend",
    "profilers",
    "max_attempts",
    "patience",
    "target_attainment",
    "search",
    "branching",
)
_COMPARED_VERIFY = ("reps", "threads")
"""The loop's settings a resumed bench must keep (:meth:`BenchSettings.comparable`): ``profile`` is
the variant itself, ``runs_dir`` is each task's own, and of the verification's settings a bench sets
only these two."""


@attrs.frozen(kw_only=True, init=False)
class BenchSettings:
    """How a bench runs each task: the tasks chosen (``levels``, ``categories``, ``only``), the
    loop's settings (``loop``: what ``pragma optimize`` runs with; each task's run gets its own
    ``runs_dir`` and thread count), the sizes (``sizes``: ``--set`` overrides, ``fit_ms``: fitted
    to a time here) and the baselines each task's best is timed against at the end.

    The loop's settings may also be given by name, the verification's too:
    ``BenchSettings(max_attempts=3, reps=10)`` holds ``OptimizeSettings(max_attempts=3,
    verify=VerifySettings(reps=10))``. ``loop.verify.threads`` None times each task with every CPU
    here (:func:`~pragma_core.bench._task_run.machine_threads`). ``retime_after_s`` is the least
    time between two confirmations of a task's best (:data:`~.confirmations.RETIME_AFTER_S`): it
    decides when a figure is measured, not what it measures, so a resumed bench may change it."""

    loop: OptimizeSettings = attrs.field(factory=OptimizeSettings)
    levels: tuple[int, ...] = attrs.field(default=(), converter=frozen_tuple)
    categories: tuple[str, ...] = attrs.field(default=(), converter=_categories)
    only: tuple[str, ...] = attrs.field(default=(), converter=frozen_tuple)
    baselines: tuple[str, ...] = attrs.field(default=("eager",), converter=_baselines)
    sizes: dict[str, str] = attrs.field(factory=dict)
    fit_ms: float | None = None
    retime_after_s: float = attrs.field(default=RETIME_AFTER_S, validator=attrs.validators.ge(0))

    def __init__(self, *, loop: OptimizeSettings | None = None, **settings: Any) -> None:
        own = {name: settings.pop(name) for name in _OWN_FIELDS if name in settings}
        loop = loop or OptimizeSettings()
        verify = {name: settings.pop(name) for name in _VERIFY_FIELDS if name in settings}
        if verify:
            settings["verify"] = attrs.evolve(loop.verify, **verify)
        self.__attrs_init__(loop=attrs.evolve(loop, **settings), **own)

    @property
    def variant(self) -> str:
        return variant_name(self.loop.profile)

    def comparable(self) -> dict[str, Any]:
        """The settings that decide a task's result: a bench resumed with others would mix two
        experiments in one table (the task choice may change freely)."""
        loop = to_dict(self.loop)
        return {
            **{name: loop[name] for name in _COMPARED_LOOP},
            "baselines": list(self.baselines),
            "sizes": dict(self.sizes),
            "fit_ms": self.fit_ms,
            **{name: loop["verify"][name] for name in _COMPARED_VERIFY},
        }

    def optimize_settings(self, runs_dir: Path, threads: int) -> OptimizeSettings:
        """The loop's settings for one task, whose run goes in ``runs_dir`` and times with ``threads``."""
        return attrs.evolve(self.loop, runs_dir=runs_dir, verify=attrs.evolve(self.loop.verify, threads=threads))


_OWN_FIELDS = frozenset(field.name for field in attrs.fields(BenchSettings)) - {"loop"}
_VERIFY_FIELDS = frozenset(field.name for field in attrs.fields(VerifySettings))


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
