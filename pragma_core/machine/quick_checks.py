"""A quick check of the recorded peaks, kept for a minute for the other pragma processes of this boot.

:func:`~pragma_core.machine.roofline.machine_peaks` checks the recorded peaks once per process with a
quick copy over the STREAM arrays: 2 GB of memory touched for the first time, which on a virtual
machine that hands idle memory back to its host takes seconds (2.2-2.6 s in each process on the
project's 2-core VM, where the copy itself takes 0.4 s), in every ``pragma`` command and every worker
of a bench. The bandwidth it reads moves over minutes, not seconds, so a check that another process
made on this boot, against the same record, less than
:data:`~pragma_core.machine.roofline.QUICK_CHECK_SHARED_S` ago stands for this process's own::

    reading = recent_check(peaks_path, record.measured_at, boot, within_s=60.0)  # GB/s, or None
    keep_check(peaks_path, record.measured_at, boot, reading)  # after a check that kept the record

Only a check that kept the record is kept: one that read far above it measures the peaks again,
which changes the record, and the next process checks the new one itself.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from ..files import atomic_write_text

__all__ = ["check_path", "recent_check", "keep_check"]


def check_path(peaks_path: Path) -> Path:
    """Where the last quick check of the peaks recorded at ``peaks_path`` is kept (beside them)."""
    return peaks_path.with_name(f"{peaks_path.stem}.quick-check.json")


def recent_check(peaks_path: Path, measured_at: str, boot: str, *, within_s: float) -> float | None:
    """The reading (GB/s) of a quick check made on boot ``boot`` of the record measured at
    ``measured_at``, less than ``within_s`` seconds ago; None when there is none (or it cannot be read)."""
    try:
        kept = json.loads(check_path(peaks_path).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict) or kept.get("boot_id") != boot or kept.get("measured_at") != measured_at:
        return None
    checked_at, reading = _number(kept.get("checked_at")), _number(kept.get("gbs"))
    if checked_at is None or reading is None:
        return None
    if not (0 <= time.time() - checked_at < within_s and 0 < reading < math.inf):
        return None
    return reading


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def keep_check(peaks_path: Path, measured_at: str, boot: str, reading: float) -> None:
    """Keep a quick check's ``reading`` of the record measured at ``measured_at`` for the other
    processes; where it cannot be written, each process goes on checking for itself."""
    kept = {"boot_id": boot, "measured_at": measured_at, "checked_at": time.time(), "gbs": reading}
    try:
        atomic_write_text(check_path(peaks_path), json.dumps(kept))
    except OSError:
        pass
