"""The proof that a C or C++ candidate ran its own kernels: every native call is counted.

Calls through :func:`~pragma_core.native.load_library` and :func:`~pragma_core.native.load_extension`
count themselves; modules from ``torch.utils.cpp_extension.load_inline`` (or ``load``) are wrapped
as they are built, so their functions count too. The ``cuda`` and ``hip`` backends, whose kernels
come from ``load_inline``, use the same evidence.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NativeCallEvidence", "hook_load_inline"]


class NativeCallEvidence:
    """Counts native calls in the sandbox child (:class:`~pragma_core.plugin_api.components.KernelEvidence`)."""

    def install(self) -> None:
        from .native import count_calls

        hook_load_inline(count_calls)

    def count(self) -> int:
        from .native import native_call_count

        return native_call_count()


def hook_load_inline(count_calls: Any) -> None:
    """Wrap torch's extension loaders so the modules they return count their calls."""
    import torch.utils.cpp_extension as cpp_extension

    for name in ("load_inline", "load"):
        original = getattr(cpp_extension, name)

        def counted(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            module = _original(*args, **kwargs)
            return count_calls(module) if kwargs.get("is_python_module", True) else module

        setattr(cpp_extension, name, counted)
