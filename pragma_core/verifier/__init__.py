"""The Verifier: is a candidate correct, honest, and how much faster than the reference?

    from pragma_core import load_task
    from pragma_core.verifier import verify, VerifySettings

    verdict = verify(load_task("examples/tasks/level1/1_GELUTanh.py"), source, VerifySettings(reps=50))
    verdict.status, verdict.speedup

The candidate runs only in a sandboxed child process (``worker``); this process computes the
references, compares, checks integrity (``checks``) and reduces the timings.
"""

from .checks import CHECKS
from .settings import VerifySettings
from .verification import verify
from .warm_child import WarmChild

__all__ = ["verify", "VerifySettings", "WarmChild", "CHECKS"]
