"""The ncu command lines pragma runs, built by pure functions so they are tested without a GPU.

One profiling run writes a report and prints the raw page as CSV::

    ncu --csv --page raw --metrics <list> --section SpeedOfLight --section LaunchStats
        --section Occupancy --nvtx --nvtx-include pragma_forward/ --kernel-name-base demangled
        [--kernel-name regex:<a>|<b>] --target-processes all -f -o <out_dir>/ncu-report <python ...>

Only kernels inside the NVTX push/pop range ``pragma_forward`` are profiled: the timed forwards,
not the harness's warm-up or checks. The three sections add no kernel metric pragma asks for; they
make ncu run its rules, whose advice a second, GPU-free command reads back from the report::

    ncu --import <out_dir>/ncu-report.ncu-rep --csv --page details
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

__all__ = ["NVTX_RANGE", "RULE_SECTIONS", "REPORT_SUFFIX", "kernel_regex", "profile_command", "details_command"]

NVTX_RANGE = "pragma_forward"
"""The NVTX range pragma's profiling worker wraps the timed forwards in (see its ``worker``)."""

RULE_SECTIONS = ("SpeedOfLight", "LaunchStats", "Occupancy")
"""Sections whose rules give advice on the default metrics (ncu's ``basic`` set)."""

REPORT_SUFFIX = ".ncu-rep"


def kernel_regex(kernel_functions: Sequence[str]) -> str:
    """An ncu ``regex:`` alternation matching any of the names; empty when none is given.

    ncu matches it partially against the demangled name, so ``relu_kernel`` matches
    ``void relu_kernel<float>(float const*, float*, int)``.
    """
    names = dict.fromkeys(name for name in kernel_functions if name)
    return "|".join(re.escape(name) for name in names)


def profile_command(
    ncu: str,
    program: Sequence[str],
    metrics: Sequence[str],
    *,
    report: Path | str | None = None,
    kernel_functions: Sequence[str] = (),
    sections: Sequence[str] = RULE_SECTIONS,
) -> list[str]:
    """The ncu command that profiles ``program`` and prints the raw page as CSV on stdout."""
    if not program:
        raise ValueError("nothing to profile: the program's command line is empty")
    argv = [ncu, "--csv", "--page", "raw"]
    if metrics:
        argv += ["--metrics", ",".join(metrics)]
    for section in sections:
        argv += ["--section", section]
    argv += ["--nvtx", "--nvtx-include", f"{NVTX_RANGE}/", "--kernel-name-base", "demangled"]
    if pattern := kernel_regex(kernel_functions):
        argv += ["--kernel-name", f"regex:{pattern}"]
    argv += ["--target-processes", "all"]
    if report is not None:
        argv += ["-f", "-o", str(report)]
    return argv + list(program)


def details_command(ncu: str, report: Path | str) -> list[str]:
    """The command that prints a saved report's details page, rule results included, as CSV."""
    return [ncu, "--import", str(report), "--csv", "--page", "details"]
