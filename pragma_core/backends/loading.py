"""Loading a candidate module in the sandbox child and returning its ``ModelNew``: from its source
(:func:`exec_module`, for C/C++ and CUDA candidates) or from a file (:func:`load_module_file`, for
backends whose machinery reads the candidate's source: Triton's ``@jit`` reads a kernel's source
with :mod:`inspect`)."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

from ..records import Candidate

__all__ = ["exec_module", "load_module_file"]


def exec_module(candidate: Candidate, workdir: Path) -> type:
    """Run the candidate's source as the module ``candidate`` (named ``workdir/candidate.py``, which
    need not exist) and return its ``ModelNew``."""
    module = types.ModuleType("candidate")
    module.__file__ = str(Path(workdir) / "candidate.py")
    sys.modules["candidate"] = module
    exec(compile(candidate.source, "candidate.py", "exec"), module.__dict__)
    return _model_new(module.__dict__)


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
    return _model_new(module.__dict__)


def _model_new(namespace: dict[str, Any]) -> type:
    model_new = namespace.get("ModelNew")
    if not isinstance(model_new, type):
        raise TypeError("the candidate defines no class ModelNew(nn.Module)")
    return model_new
