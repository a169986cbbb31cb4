"""C99 kernels for pragma: build a C source once and call its functions with torch tensors.

    from pragma_backend_c import load_c

    kernels = load_c(SOURCE)                 # compiled with the system C compiler, cached by content
    kernels.relu(x, out, x.numel())          # each call is counted: the proof the kernels ran

The build, the argument checks against the C signatures and the content-hash cache are pragma's
(``pragma_core.native.load_library`` with ``language="c"``); this package adds its own count of
the calls, so the backend's evidence is its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["CKernels", "load_c", "call_count"]

_calls = [0]


def call_count() -> int:
    """How many calls went through every :class:`CKernels` so far."""
    return _calls[0]


class CKernels:
    """The functions of one built C source, as attributes; every call is counted."""

    def __init__(self, library: Any) -> None:
        self._library = library

    def __getattr__(self, name: str) -> Any:
        function = getattr(self._library, name)

        def counted(*args: Any) -> Any:
            _calls[0] += 1
            return function(*args)

        return counted


def load_c(source: str, *, flags: Iterable[str] = ()) -> CKernels:
    """Build ``source`` as C99 (cached by content) and return its functions."""
    from pragma_core.native import load_library

    return CKernels(load_library(source, language="c", flags=list(flags)))
