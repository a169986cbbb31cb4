"""The proof that a Triton candidate launched its own kernels: every launch is counted.

A launch is a call of ``run`` on a ``@triton.jit`` function: :class:`triton.runtime.jit.JITFunction`
on a GPU, :class:`triton.runtime.interpreter.InterpretedFunction` under the interpreter. An
autotuned kernel's benchmarking launches count too. The counting wraps both classes' ``run`` once,
in the sandbox child, before the candidate is loaded.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TritonLaunchEvidence"]

_launches = [0]


class TritonLaunchEvidence:
    """Counts Triton launches in the sandbox child (:class:`~pragma_core.plugin_api.components.KernelEvidence`)."""

    def install(self) -> None:
        from triton.runtime import interpreter, jit

        for kind in (jit.JITFunction, interpreter.InterpretedFunction):
            if getattr(kind.run, "_pragma_counted", False):
                continue
            kind.run = _counted(kind.run)

    def count(self) -> int:
        return _launches[0]


def _counted(run: Any) -> Any:
    def counted_run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("warmup"):
            _launches[0] += 1
        return run(self, *args, **kwargs)

    counted_run._pragma_counted = True  # type: ignore[attr-defined]
    return counted_run
