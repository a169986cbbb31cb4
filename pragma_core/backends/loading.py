"""Loading a candidate module from a file in the sandbox child, for backends whose machinery reads
the candidate's source (Triton's ``@jit`` reads a kernel's source with :mod:`inspect`)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from ..records import Candidate

__all__ = ["load_module_file"]


def load_module_file(candidate: Candidate, workdir: Path) -> type:
    """Write the candidate to ``workdir/candidate.py``, import it as the module ``candidate`` and
    return its ``ModelNew``."""
    path = Path(workdir) / "candidate.py"
    path.write_text(candidate.source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("candidate", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import the candidate from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["candidate"] = module
    spec.loader.exec_module(module)
    model_new = module.__dict__.get("ModelNew")
    if not isinstance(model_new, type):
        raise TypeError("the candidate defines no class ModelNew(nn.Module)")
    return model_new
