"""The stable import path of the ``cpu-cpp`` backend's native machinery.

A CPU candidate loads its kernel with ``from pragma_core.native import load_library`` (or
``load_extension``); that line keeps working whatever the package layout. The machinery itself
lives in :mod:`pragma_core.backends.cpu_cpp.native`, and every name of its ``__all__`` is
reachable here, looked up on first use (so importing this module does not import torch).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..backends.cpu_cpp.native import *  # noqa: F403

_IMPLEMENTATION = "pragma_core.backends.cpu_cpp.native"

__all__ = list(importlib.import_module(_IMPLEMENTATION).__all__)


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_IMPLEMENTATION), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
