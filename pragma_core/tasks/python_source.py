"""Parsing Python source with :mod:`ast` from several threads at once.

CPython 3.11 keeps the AST constructor's recursion depth in interpreter-wide state, so two threads
parsing at the same moment can fail with ``SystemError: AST constructor recursion depth mismatch``
(python/cpython#106905). The loop parses in threads (a round's children are written and built at
once), so every parse of pragma goes through :func:`parse`, one at a time.
"""

from __future__ import annotations

import ast
import threading
from typing import Any

__all__ = ["parse"]

_one_at_a_time = threading.Lock()


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> Any:
    """:func:`ast.parse`, never beside another call of this function."""
    with _one_at_a_time:
        return ast.parse(source, filename=filename, mode=mode)
