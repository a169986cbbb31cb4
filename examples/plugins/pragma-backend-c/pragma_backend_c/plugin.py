"""The ``cpu-c`` backend's registration: what pragma asks of a backend, answered for C99 kernels."""

from __future__ import annotations

import os
import shutil
from importlib import resources

from pragma_core.backends.loading import exec_module
from pragma_core.plugin_api.components import Availability, Backend
from pragma_core.plugin_api.hookspecs import hookimpl

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
            load=exec_module,  # run the module in the sandbox child, return its ModelNew
            evidence=CallEvidence,
            kernel_hint="cpu-c kernels are the functions of a C source built with pragma_backend_c.load_c",
            recognizes=lambda source: "pragma_backend_c" in source,
        )
    )
