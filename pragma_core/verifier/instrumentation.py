"""What the sandbox child watches while a candidate runs.

- :class:`ForwardMonitor`: a dispatch mode for correctness runs that poisons every tensor the
  forward allocates (NaN, or another value for the second run) and records the PyTorch compute
  operators it runs; allocation, copies and views are allowed, arithmetic is not.
- :class:`IdentityGuard`: remembers the clocks, torch's functions and the task's definitions before
  the candidate is imported, and names any the candidate replaced.
- :func:`background_activity`: whether outputs still change after forward returned, a Python thread
  it started still runs, or it started a process.
- :func:`hook_load_inline`: makes ``torch.utils.cpp_extension.load_inline`` / ``load`` return
  modules whose calls are counted, so the timed path can prove a compiled kernel ran.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = [
    "ForwardMonitor",
    "IdentityGuard",
    "background_activity",
    "child_processes",
    "hook_load_inline",
    "same_bits",
]

_ALLOCATING_OPS = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})

# What a forward may do with PyTorch around its own kernel: allocate, fill, copy and reshape.
_ALLOWED_OPS = _ALLOCATING_OPS | frozenset(
    {
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "full",
        "full_like",
        "fill",
        "fill_",
        "zero_",
        "new_zeros",
        "new_ones",
        "new_full",
        "scalar_tensor",
        "view",
        "_unsafe_view",
        "reshape",
        "_reshape_alias",
        "view_as",
        "permute",
        "transpose",
        "transpose_",
        "t",
        "t_",
        "expand",
        "expand_as",
        "contiguous",
        "clone",
        "_to_copy",
        "copy_",
        "to",
        "as_strided",
        "select",
        "slice",
        "narrow",
        "unsqueeze",
        "unsqueeze_",
        "squeeze",
        "squeeze_",
        "flatten",
        "unflatten",
        "detach",
        "detach_",
        "alias",
        "lift_fresh",
        "lift_fresh_copy",
        "split",
        "split_with_sizes",
        "chunk",
        "unbind",
        "cat",
        "stack",
        "resize_",
        "set_",
        "_local_scalar_dense",
        "sym_size",
        "sym_stride",
        "sym_numel",
        "sym_storage_offset",
        "is_same_size",
        "_has_compatible_shallow_copy_type",
    }
)

POISON_VALUES = (float("nan"), -3.0e38)
"""First and second poison for floating tensors; integers get the dtype's most negative value."""


def _poison(tensor: torch.Tensor, value: float) -> None:
    if tensor.dtype == torch.bool or tensor.numel() == 0:
        return
    if tensor.is_floating_point() or tensor.is_complex():
        tensor.fill_(value)
    else:
        info = torch.iinfo(tensor.dtype)
        tensor.fill_(info.min + (0 if value != value else 1))


class ForwardMonitor(TorchDispatchMode):
    """Poisons fresh allocations with ``poison`` and counts disallowed operators."""

    def __init__(self, poison: float) -> None:
        super().__init__()
        self.poison = poison
        self.compute_ops: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's API
        result = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name in _ALLOCATING_OPS and isinstance(result, torch.Tensor):
            _poison(result, self.poison)
        elif name not in _ALLOWED_OPS:
            self.compute_ops[name] = self.compute_ops.get(name, 0) + 1
        return result


class IdentityGuard:
    """Snapshot of callables by identity; :meth:`changes` names those replaced since."""

    def __init__(self, namespaces: Mapping[str, Mapping[str, Any]]) -> None:
        self._namespaces = namespaces
        self._snapshot = {
            (label, name): id(value)
            for label, namespace in namespaces.items()
            for name, value in list(namespace.items())
            if callable(value) and not isinstance(value, type(os))
        }

    def changes(self) -> list[str]:
        changed = []
        for (label, name), identity in self._snapshot.items():
            current = self._namespaces[label].get(name)
            if id(current) != identity:
                changed.append(f"{label}.{name}")
        return sorted(changed)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality, NaN included."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() and a.element_size() in (2, 4, 8):
        as_int = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        return torch.equal(a.contiguous().view(as_int), b.contiguous().view(as_int))
    return torch.equal(a, b)


def child_processes() -> set[int]:
    """Process ids of this process's children, from /proc (empty where /proc is missing)."""
    children: set[int] = set()
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as handle:
                children.update(int(pid) for pid in handle.read().split())
    except OSError:
        pass
    return children


def background_activity(
    outputs: Iterable[torch.Tensor],
    *,
    threads_before: int,
    children_before: set[int],
    settle_s: float,
) -> tuple[str, str] | None:
    """Look for work that goes on after forward returned: ``(check, message)`` or None."""
    outputs = list(outputs)
    snapshot = [output.clone() for output in outputs]
    time.sleep(settle_s)
    for position, (output, before) in enumerate(zip(outputs, snapshot)):
        if not same_bits(output, before):
            return (
                "background-work",
                f"output {position} changed {settle_s * 1000:.0f} ms after forward returned: "
                "work must be finished when forward returns",
            )
    if threading.active_count() > threads_before:
        return ("background-work", "forward started a Python thread that is still running")
    new_children = child_processes() - children_before
    if new_children:
        return ("spawned-process", f"forward started {len(new_children)} process(es)")
    return None


def hook_load_inline(count_calls: Any) -> None:
    """Wrap torch's extension loaders so the modules they return count their calls."""
    import torch.utils.cpp_extension as cpp_extension

    for name in ("load_inline", "load"):
        original = getattr(cpp_extension, name)

        def counted(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            module = _original(*args, **kwargs)
            return count_calls(module) if kwargs.get("is_python_module", True) else module

        setattr(cpp_extension, name, counted)
