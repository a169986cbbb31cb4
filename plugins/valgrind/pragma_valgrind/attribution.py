"""Which (file, function) entries of a cachegrind.out belong to the candidate's kernels.

Cachegrind records, for each instruction, the source file and line of its debug information
(``fl=``) and the function symbol around it (``fn=``); it does not record the shared object. An
entry belongs to the kernels when either

* its file is one of ``target.kernel_sources`` (kernels built with ``-g``; this also catches helper
  functions of the kernel source and kernel code inlined into another function), or
* its function is one of ``target.kernel_functions`` or a compiler-made part of one: GCC's OpenMP
  outlined bodies ``relu._omp_fn.0``, clones ``relu.cold``, ``relu.part.0``, ``relu.isra.0``, clang's
  ``relu.omp_outlined``, and C++ names ``relu(float const*, float*, long)``. This works without
  debug information (``fl=???``) and catches code inlined from headers into the kernel.

Everything else, the replay harness that loads buffers, libc, the OpenMP runtime, is left out.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import attrs

from .outfile import CachegrindOut

__all__ = ["Attribution", "attribute", "is_part_of", "same_source"]


def _keys(value: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class Attribution:
    """The kernel entries found, and how: by source file, by function name, or both."""

    keys: tuple[tuple[str, str], ...] = attrs.field(converter=_keys)
    by_source: frozenset[str] = frozenset()
    by_function: frozenset[str] = frozenset()

    @property
    def functions(self) -> tuple[str, ...]:
        """The function names of the kernel entries, in the file's order, once each."""
        return tuple(dict.fromkeys(function for _file, function in self.keys))


def is_part_of(symbol: str, function: str) -> bool:
    """Whether the symbol cachegrind names is ``function`` or code the compiler split off from it."""
    return symbol == function or symbol.startswith((function + ".", function + "("))


def same_source(recorded: str, source: str) -> bool:
    """Whether cachegrind's ``fl=`` path names the source file ``source``.

    Absolute paths compare after normalising (and resolving links); a relative one, as compiled
    from another folder, matches the end of ``source`` at a path separator.
    """
    if recorded in ("", "???"):
        return False
    recorded_norm = os.path.normpath(recorded)
    source_norm = os.path.normpath(source)
    if os.path.isabs(recorded_norm):
        return recorded_norm == source_norm or os.path.realpath(recorded_norm) == os.path.realpath(source_norm)
    return source_norm == recorded_norm or source_norm.endswith(os.sep + recorded_norm)


def attribute(out: CachegrindOut, functions: Iterable[str], sources: Iterable[str]) -> Attribution:
    """The entries of ``out`` that are kernel code (see the module docstring)."""
    functions = tuple(functions)
    sources = tuple(sources)
    files = {file for file, _function in out.costs}
    kernel_files = frozenset(file for file in files if any(same_source(file, source) for source in sources))
    keys = []
    by_function = set()
    for file, symbol in out.costs:
        named = symbol != "???" and any(is_part_of(symbol, function) for function in functions)
        if named:
            by_function.add(symbol)
        if named or file in kernel_files:
            keys.append((file, symbol))
    return Attribution(keys=keys, by_source=kernel_files, by_function=frozenset(by_function))
