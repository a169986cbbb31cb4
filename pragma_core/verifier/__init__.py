"""The Verifier: is a candidate correct, honest, and how much faster than the reference?

    from pragma_core import load_task
    from pragma_core.verifier import verify, VerifySettings

    verdict = verify(load_task("examples/tasks/level1/1_GELUTanh.py"), source, VerifySettings(reps=50))
    verdict.status, verdict.speedup

The candidate runs only in a sandboxed child process (``worker``); this process computes the
references, compares, checks integrity (``checks``) and reduces the timings.

The names below are imported when first used: ``verify`` imports torch, and reading the settings
(the command line's defaults, a run's ``run.json``) must not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .checks import CHECKS
    from .settings import VerifySettings
    from .verification import verify
    from .warm_child import WarmChild

__all__ = ["verify", "VerifySettings", "WarmChild", "CHECKS"]

_HOMES = {"verify": "verification", "VerifySettings": "settings", "WarmChild": "warm_child", "CHECKS": "checks"}


def __getattr__(name: str) -> Any:  # PEP 562: the module of a name is imported when it is first used
    if name in _HOMES:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
