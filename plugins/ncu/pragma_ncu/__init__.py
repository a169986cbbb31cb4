"""pragma-ncu: NVIDIA Nsight Compute (``ncu``) as a pragma profiler for CUDA kernels.

    from pragma_ncu import library_kernels, parse, rules
    metrics = parse(open("ncu-raw.csv").read())        # list[Metric], one per launch and metric
    advice = rules(open("ncu-details.csv").read())     # list[Rule]: OPT/WRN/INF with est. speedup
    library_kernels(["square_kernel_0d1d234", "ampere_sgemm_128x64_nn"])  # ["ampere_sgemm_128x64_nn"]

pragma finds the profiler through the entry point; :func:`collect` runs ncu on a profile target
(where ncu and an NVIDIA GPU exist), :func:`probe` says whether it can. Parsing needs neither.
"""

from __future__ import annotations

from pragma_core.profiling.library_kernels import library_kernels, library_note, library_of

from .collect import collect
from .command import details_command, kernel_regex, profile_command
from .metrics import DEFAULT_METRICS, MEANINGS, meaning_of, rejection_reason
from .parse import Rule, parse, read, rules
from .probe import probe

__all__ = [
    "DEFAULT_METRICS",
    "MEANINGS",
    "Rule",
    "collect",
    "details_command",
    "kernel_regex",
    "library_kernels",
    "library_note",
    "library_of",
    "meaning_of",
    "parse",
    "probe",
    "profile_command",
    "read",
    "rejection_reason",
    "rules",
]
