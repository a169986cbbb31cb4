"""Whether cachegrind can run here: valgrind on PATH and answering ``valgrind --version``.

Cachegrind simulates the caches and the branch predictor, so it needs no hardware counters and no
permission such as ``perf_event_paranoid``: valgrind itself is all. The version is asked once per
valgrind binary (``functools.cache``) and is quoted in every profile's notes.
"""

from __future__ import annotations

import functools
import os
import shutil

from pragma_core.errors import ProfilerUnavailable
from pragma_core.plugin_api.components import Availability
from pragma_core.sandbox.tools import run_tool

__all__ = ["probe", "valgrind_version", "STILL_WORKS"]

STILL_WORKS = (
    "parsing cachegrind output recorded elsewhere (cachegrind.out, cg_annotate text), "
    "and the other CPU profilers such as perf"
)
_VERSION_TIMEOUT_S = 5.0


def probe() -> Availability:
    """Available when valgrind is on PATH and prints its version."""
    path = shutil.which("valgrind")
    if path is None:
        return Availability(
            available=False,
            reason="valgrind is not installed (no `valgrind` on PATH); install it, e.g. `apt-get install valgrind`",
            still_works=STILL_WORKS,
        )
    answered, text = valgrind_version(path)
    if not answered:
        return Availability(
            available=False, reason=f"`{path} --version` failed ({text}); reinstall valgrind", still_works=STILL_WORKS
        )
    return Availability(available=True)


@functools.cache
def valgrind_version(path: str) -> tuple[bool, str]:
    """``(True, "valgrind-3.19.0")``, or ``(False, what went wrong)`` when the binary does not answer."""
    try:
        run = run_tool([path, "--version"], tool="valgrind", env=os.environ, timeout_s=_VERSION_TIMEOUT_S)
    except ProfilerUnavailable as error:
        return False, str(error)
    if run.timed_out:
        return False, run.ending
    lines = (run.stdout_tail.strip() or run.stderr_tail.strip()).splitlines()
    first = lines[0].strip() if lines else ""
    if not run.ok or not first:
        return False, f"exit code {run.returncode}" + (f": {first}" if first else "")
    return True, first
