"""Whether rocprofv3 can run here: the tool, an AMD GPU, access to it. Fast and without side effects.

The GPU is found in the KFD topology the amdgpu driver publishes under ``/sys/class/kfd`` (a node
with SIMDs is a GPU); only where that is missing is ``rocminfo`` asked, once per process.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import tempfile
from pathlib import Path

from pragma_core import Availability
from pragma_core.errors import ProfilerUnavailable
from pragma_core.sandbox.tools import run_tool

__all__ = ["probe", "find_rocprofv3", "gpu_targets", "STILL_WORKS"]

KFD_DEVICE = "/dev/kfd"
KFD_TOPOLOGY = "/sys/class/kfd/kfd/topology/nodes"
ROCMINFO_SECONDS = 1.5

STILL_WORKS = (
    "parsing rocprofv3 / rocprof v1 CSV output recorded on another machine (pragma_rocprof.parse), "
    "building the rocprofv3 commands, and every other profiler"
)


def find_rocprofv3() -> str | None:
    """rocprofv3 on PATH, else under $ROCM_PATH/bin or /opt/rocm*/bin (newest first), else None."""
    found = shutil.which("rocprofv3")
    if found:
        return found
    roots = [os.environ["ROCM_PATH"]] if os.environ.get("ROCM_PATH") else []
    roots += ["/opt/rocm", *sorted(glob.glob("/opt/rocm-*"), reverse=True)]
    for root in roots:
        candidate = Path(root) / "bin" / "rocprofv3"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def gpu_targets() -> list[str] | None:
    """The AMD GPUs the driver exposes (``gfx90a``...); None when the KFD topology is missing."""
    nodes = Path(KFD_TOPOLOGY)
    if not nodes.is_dir():
        return None
    targets = []
    for properties in sorted(nodes.glob("*/properties")):
        fields = dict(line.split(None, 1) for line in _read(properties).splitlines() if len(line.split(None, 1)) == 2)
        if int(fields.get("simd_count", "0") or 0) > 0:
            targets.append(_gfx_name(int(fields.get("gfx_target_version", "0") or 0)))
    return targets


@functools.cache
def probe() -> Availability:
    """Available when rocprofv3 is installed and an AMD GPU is present and usable by this user.

    Cached for the process (it may run ``rocminfo``); ``probe.cache_clear()`` asks again.
    """
    tool = find_rocprofv3()
    gpu_problem = _gpu_problem()
    problems = []
    if tool is None:
        problems.append(
            "rocprofv3 is not installed (not on PATH nor in /opt/rocm*/bin): install ROCm 6.2 or newer "
            "with rocprofiler-sdk, or add its bin folder to PATH"
        )
    if gpu_problem:
        problems.append(gpu_problem)
    if problems:
        return Availability(available=False, reason="; ".join(problems), still_works=STILL_WORKS)
    return Availability(available=True, reason=f"{tool} on an AMD GPU", still_works="")


def _gpu_problem() -> str:
    if not os.path.exists(KFD_DEVICE):
        return (
            f"no AMD GPU: {KFD_DEVICE} is missing (the amdgpu driver is not loaded, or this container "
            f"was started without --device={KFD_DEVICE} --device=/dev/dri)"
        )
    if not os.access(KFD_DEVICE, os.R_OK | os.W_OK):
        return (
            f"{KFD_DEVICE} exists but this user may not open it: add the user to the 'render' and "
            "'video' groups, then log in again"
        )
    targets = gpu_targets()
    if targets is None:
        targets = _rocminfo_targets()
    if targets is not None and not targets:
        return "no AMD GPU: the ROCm driver is loaded but lists no GPU agent (only CPUs)"
    return ""


def _rocminfo_targets() -> list[str] | None:
    """GPU names from ``rocminfo``, or None when it is absent or does not answer in time."""
    rocminfo = shutil.which("rocminfo") or next(iter(sorted(glob.glob("/opt/rocm*/bin/rocminfo"))), None)
    if rocminfo is None:
        return None
    with tempfile.TemporaryDirectory(prefix="pragma-rocminfo-") as folder:
        listing = Path(folder) / "rocminfo.txt"  # a few KB per agent: more than a message's tail
        try:
            result = run_tool(
                [rocminfo], tool="rocminfo", env=os.environ, timeout_s=ROCMINFO_SECONDS, stdout_path=listing
            )
        except ProfilerUnavailable:
            return None
        if result.timed_out:
            return None
        text = listing.read_text(errors="replace")
    return sorted(set(re.findall(r"^\s*Name:\s+(gfx[0-9a-f]+)\s*$", text, re.MULTILINE)))


def _gfx_name(version: int) -> str:
    """KFD's ``gfx_target_version`` 90010 -> ``gfx90a``; 110000 -> ``gfx1100``."""
    major, minor, step = version // 10000, version // 100 % 100, version % 100
    return f"gfx{major}{minor:x}{step:x}"


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
