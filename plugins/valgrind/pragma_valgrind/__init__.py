"""pragma-valgrind: the ``valgrind`` profiler, cachegrind's simulated cache and branch counts.

Installing the distribution registers the profiler (``pragma_valgrind.plugin``). The parts:
:mod:`.probe` (is valgrind here), :mod:`.collect` (run cachegrind on the replay program),
:mod:`.attribution` (which code is the kernel's), :mod:`.parse` with :mod:`.outfile` and
:mod:`.reports` (read cachegrind.out, cg_annotate and exit-summary text), :mod:`.metrics` (names
and meanings).
"""

from __future__ import annotations

from .collect import collect
from .metrics import DEFAULT_METRICS, PROFILER_NAME
from .parse import parse
from .probe import probe

__version__ = "0.1.0"

__all__ = ["__version__", "collect", "parse", "probe", "DEFAULT_METRICS", "PROFILER_NAME"]
