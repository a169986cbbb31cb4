"""Whether ncu can profile here: the ncu binary, and an NVIDIA GPU with its driver loaded.

The probe cannot see the one obstacle that shows only when profiling starts: drivers let only
admin users read the GPU performance counters unless told otherwise, and ncu then fails with
``ERR_NVGPUCTRPERM``. :func:`pragma_ncu.collect.collect` turns that into a one-line reason.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
from pathlib import Path

from pragma_core.errors import ProfilerUnavailable
from pragma_core.plugin_api.components import Availability
from pragma_core.sandbox.tools import run_tool

__all__ = ["NCU_LOCATIONS", "find_ncu", "find_gpu", "probe"]

NCU_LOCATIONS = (
    "/usr/local/cuda*/bin/ncu",
    "/opt/nvidia/nsight-compute*/ncu",
    "/usr/local/NVIDIA-Nsight-Compute*/ncu",
)
"""Where CUDA toolkits and standalone Nsight Compute installs put ncu, when not on PATH."""

_PROC_GPUS = Path("/proc/driver/nvidia/gpus")
_SMI_TIMEOUT_S = 1.5  # nvidia-smi hangs on a wedged driver; the probe must stay fast
_STILL_WORKS = "parsing saved ncu output (pragma_ncu.parse and pragma_ncu.rules); profilers of other devices"


def find_ncu() -> str | None:
    """The ncu executable: on PATH, else the newest one in :data:`NCU_LOCATIONS`; None if absent."""
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in NCU_LOCATIONS:
        candidates = [path for path in glob.glob(pattern) if os.access(path, os.X_OK)]
        if candidates:
            return sorted(candidates)[-1]
    return None


def find_gpu() -> tuple[bool, str]:
    """(True, what was found) when an NVIDIA GPU is visible, else (False, why not)."""
    if _PROC_GPUS.is_dir() and any(_PROC_GPUS.iterdir()):
        return True, f"{len(list(_PROC_GPUS.iterdir()))} GPU(s) in {_PROC_GPUS}"
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False, f"{_PROC_GPUS} does not exist and nvidia-smi is not installed"
    try:
        done = run_tool([smi, "-L"], tool="nvidia-smi", env=os.environ, timeout_s=_SMI_TIMEOUT_S)
    except ProfilerUnavailable as error:
        return False, f"nvidia-smi -L failed ({error})"
    if done.timed_out:
        return False, f"nvidia-smi -L {done.ending}"
    gpus = [line for line in done.stdout_tail.splitlines() if line.startswith("GPU ")]
    if done.ok and gpus:
        return True, gpus[0]
    said = (done.stderr_tail or done.stdout_tail).strip().splitlines()
    detail = said[0] if said else f"exit code {done.returncode}"
    return False, f"nvidia-smi -L lists no GPU ({detail})"


@functools.cache
def probe() -> Availability:
    """Available when ncu is installed and an NVIDIA GPU is visible; the reason names what lacks."""
    problems = []
    if find_ncu() is None:
        where = ", ".join(pattern.removesuffix("/ncu") for pattern in NCU_LOCATIONS)
        problems.append(f"ncu is not installed (not on PATH, nor in {where})")
    has_gpu, detail = find_gpu()
    if not has_gpu:
        problems.append(f"no NVIDIA GPU: {detail}")
    if problems:
        return Availability(available=False, reason="; ".join(problems), still_works=_STILL_WORKS)
    return Availability(available=True)
