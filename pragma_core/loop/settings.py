"""How a run goes: the loop's settings, the model and provider they choose, and how a run records them.

:class:`OptimizeSettings` is the one definition of a loop setting: the ``pragma optimize`` and
``pragma bench`` options take their defaults from it, a bench holds one for its tasks, and a run
folder's ``run.json`` stores it (:func:`run_info`) and gives it back on ``--resume``
(:func:`settings_of_run`).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

import attrs
from attrs import validators as v

from .._version import __version__
from ..backends import DEFAULT_BACKEND
from ..errors import PragmaError
from ..providers.preflight import check_model
from ..records import frozen_tuple
from ..serialization import from_dict, to_dict
from ..verifier.settings import VerifySettings
from .run_directory import RunDirectory
from .search import SEARCHES

__all__ = [
    "MODEL_VARIABLE",
    "OptimizeSettings",
    "configured_model",
    "provider_name",
    "check_agents",
    "settings_of_run",
    "run_info",
]

MODEL_VARIABLE = "PRAGMA_MODEL"
"""The environment variable that names the model when the settings name none."""


@attrs.frozen(kw_only=True)
class OptimizeSettings:
    """How a run goes. ``profile=False`` is the paper's N-PRAGMA ablation: timing only.

    ``search`` is the strategy over the tree of attempts (:mod:`pragma_core.loop.search`): ``linear``
    (one chain, the default), ``tree`` or ``beam``; ``branching`` the children per round of the
    last two.

    ``model`` None means the one ``PRAGMA_MODEL`` names, if any (:func:`configured_model`).
    ``provider`` None means ``litellm`` when there is a model and the built-in ``offline`` agents
    otherwise (:func:`provider_name`)."""

    model: str | None = None
    provider: str | None = None
    backend: str = DEFAULT_BACKEND
    profilers: tuple[str, ...] = attrs.field(default=("valgrind", "perf"), converter=frozen_tuple)
    profile: bool = True
    max_attempts: int = attrs.field(default=15, validator=v.ge(1))
    patience: int = attrs.field(default=6, validator=v.ge(1))
    target_attainment: float = attrs.field(default=0.9, validator=v.gt(0))
    search: str = attrs.field(default="linear", validator=v.in_(SEARCHES))
    branching: int = attrs.field(default=2, validator=v.ge(1))
    runs_dir: Path = attrs.field(default=Path("runs"), converter=Path)
    verify: VerifySettings = attrs.field(factory=VerifySettings)


def configured_model(settings: OptimizeSettings) -> str | None:
    """The model a run uses: the settings' own, else ``PRAGMA_MODEL``, else None. The one place
    pragma reads that variable."""
    return settings.model or os.environ.get(MODEL_VARIABLE, "").strip() or None


def provider_name(settings: OptimizeSettings) -> str:
    """The provider a run uses: the one named, else litellm with a model, else offline."""
    if settings.provider:
        return settings.provider
    return "litellm" if configured_model(settings) else "offline"


def check_agents(settings: OptimizeSettings) -> None:
    """Raise :class:`~pragma_core.errors.PragmaError` when the agents cannot answer: litellm with
    no model chosen, a model whose key is missing, or a local server that is down (in seconds, not
    after a baseline). The offline agents and other providers need no check here."""
    if provider_name(settings) != "litellm":
        return
    model = configured_model(settings)
    if model is None:
        raise PragmaError(
            "no language model chosen: pass --model (e.g. openai/gpt-4o-mini or ollama/qwen2.5-coder) "
            f"or set {MODEL_VARIABLE}"
        )
    check_model(model)


def settings_of_run(run_dir: Path, **changes: Any) -> OptimizeSettings:
    """The settings a run was started with (from its ``run.json``), with ``changes`` applied:
    what ``--resume`` continues with. A setting the run's pragma did not know yet takes its default."""
    stored = RunDirectory.open(run_dir).info()["settings"]
    settings = from_dict(OptimizeSettings, {**stored, "runs_dir": str(Path(run_dir).parent)})
    return attrs.evolve(settings, **changes)


_NOT_RECORDED = frozenset({"runs_dir"})
"""Settings ``run.json`` leaves out: a run folder may be moved, so its ``runs_dir`` is where it is found."""


def run_info(settings: OptimizeSettings) -> dict:
    """``run.json``'s content: the settings (as :func:`~pragma_core.serialization.to_dict` writes
    them, read back by :func:`settings_of_run`), the versions and the hardware."""
    from ..machine.hardware import describe_cpu

    recorded = {name: value for name, value in to_dict(settings).items() if name not in _NOT_RECORDED}
    return {
        "settings": recorded,
        "versions": {"pragma-core": __version__, "python": platform.python_version()},
        "hardware": to_dict(describe_cpu()),
    }
