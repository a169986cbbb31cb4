"""The ``cpu-c`` backend's registration: what pragma asks of a backend, answered for C99 kernels."""

from __future__ import annotations

import os
import shutil
import sys
import types
from importlib import resources
from pathlib import Path

from pragma_core.components import Availability, Backend
from pragma_core.hookspecs import hookimpl
from pragma_core.records import Candidate

from . import call_count

BACKEND_NAME = "cpu-c"


class CallEvidence:
    """The proof a forward ran this backend's kernels: the calls through ``load_c``'s functions."""

    def install(self) -> None:  # nothing to hook: the kernels count themselves
        pass

    def count(self) -> int:
        return call_count()


def probe() -> Availability:
    compiler = os.environ.get("CC") or "gcc"
    if shutil.which(compiler) is None:
        return Availability(available=False, reason=f"no C compiler: {compiler} is not on PATH (install gcc or set CC)")
    return Availability(available=True)


def load(candidate: Candidate, workdir: Path) -> type:
    """Run the candidate's module (in the sandbox child) and return its ``ModelNew``."""
    module = types.ModuleType("candidate")
    module.__file__ = str(Path(workdir) / "candidate.py")
    sys.modules["candidate"] = module
    exec(compile(candidate.source, "candidate.py", "exec"), module.__dict__)
    model_new = module.__dict__.get("ModelNew")
    if not isinstance(model_new, type):
        raise TypeError("the candidate defines no class ModelNew(nn.Module)")
    return model_new


@hookimpl
def pragma_register_backends(register):
    register(
        Backend(
            name=BACKEND_NAME,
            device="cpu",
            language="c",
            description="C99 kernels for the host CPU, built by the system C compiler (an example plugin)",
            guide=resources.files(__package__).joinpath("guide.md").read_text(encoding="utf-8"),
            probe=probe,
            load=load,
            evidence=CallEvidence,
            kernel_hint="cpu-c kernels are the functions of a C source built with pragma_backend_c.load_c",
            recognizes=lambda source: "pragma_backend_c" in source,
        )
    )
