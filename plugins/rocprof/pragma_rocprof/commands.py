"""The rocprofv3 command lines pragma runs, built by pure functions so they are tested without a GPU.

The hardware counts only a few counters at once, and ``rocprofv3 --pmc`` fails when the set does
not fit one pass. So the counters are split into passes of at most ``per_pass`` names, and each
pass is its own run of the program::

    rocprofv3 --pmc FETCH_SIZE WRITE_SIZE --kernel-trace --marker-trace --output-format csv \\
        -d OUT/pass_1 -o rocprof [--kernel-include-regex 'relu_kernel'] -- python run.py

Every run also traces kernels (for durations); with no counter at all there is a single run with
the trace alone. The options are those of rocprofiler-sdk's ``source/docs/how-to/using-rocprofv3.rst``
(the options table): ``--kernel-include-regex`` limits counter collection to the candidate's
kernels ("Filters counter-collection and thread-trace data to include the kernels matching the
specified regular expression"). The kernel trace is not among the data it names: pragma reads
every dispatch, library kernels among them, from it (:mod:`pragma_core.profiling.library_kernels`); were a
version to filter the trace too, the library kernels would go unseen. rocprofv3 has no option that limits
collection to a ROCTx range, as ncu's ``--nvtx-include`` does; ``--marker-trace`` records the
``pragma_forward`` range so that :mod:`pragma_rocprof.forward` can keep the dispatches inside it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = ["COUNTERS_PER_PASS", "OUTPUT_NAME", "split_passes", "kernel_include_regex", "build_command"]

COUNTERS_PER_PASS = 8
"""Counters requested per run by default. A derived metric counts as one name although it may use
several hardware counters; a pass the hardware still cannot count is split again at run time."""

OUTPUT_NAME = "rocprof"
"""The ``-o`` name: rocprofv3 writes ``rocprof_counter_collection.csv``, ``rocprof_kernel_trace.csv``."""


def split_passes(counters: Iterable[str], per_pass: int = COUNTERS_PER_PASS) -> list[tuple[str, ...]]:
    """Counters in request order, each once, cut into passes of at most ``per_pass``.

    No counters give no passes (the caller then runs the trace alone).
    """
    if per_pass < 1:
        raise ValueError(f"per_pass must be at least 1, got {per_pass}")
    unique = list(dict.fromkeys(counters))
    return [tuple(unique[start : start + per_pass]) for start in range(0, len(unique), per_pass)]


def kernel_include_regex(kernel_functions: Sequence[str]) -> str | None:
    """A ``--kernel-include-regex`` that matches the candidate's kernels, or None to count all.

    rocprofv3 searches the regex in the demangled name (``void relu_kernel<float>(float*, int)``),
    so the plain names joined by ``|`` suffice; pragma attributes metrics exactly afterwards.
    """
    names = [name.strip() for name in kernel_functions if name.strip()]
    return "|".join(re.escape(name) for name in dict.fromkeys(names)) or None


def build_command(
    rocprofv3: str | Path,
    counters: Sequence[str],
    out_dir: str | Path,
    python_argv: Sequence[str],
    *,
    name: str = OUTPUT_NAME,
    kernel_regex: str | None = None,
) -> tuple[str, ...]:
    """One rocprofv3 run: the counters of one pass (or none), the kernel and marker (ROCTx) traces,
    CSV into ``out_dir``; with ``kernel_regex``, counters of the matching kernels only."""
    if not python_argv:
        raise ValueError("nothing to profile: the target has no python_argv")
    command = [str(rocprofv3)]
    if counters:
        command += ["--pmc", *counters]
    # Options as documented in rocprofiler-sdk source/docs/how-to/using-rocprofv3.rst (options table).
    command += ["--kernel-trace", "--marker-trace", "--output-format", "csv", "-d", str(out_dir), "-o", name]
    if kernel_regex:
        command += ["--kernel-include-regex", kernel_regex]
    return (*command, "--", *python_argv)
