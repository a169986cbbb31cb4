"""What the sandbox child watches while a candidate runs.

- :class:`ForwardMonitor`: a dispatch mode for correctness runs that poisons every tensor the
  forward allocates (NaN, or another value for the second run) and records the PyTorch compute
  operators it runs; allocation, copies and views are allowed, arithmetic is not.
- :class:`OperatorRecorder`: the torch profiler around every candidate call, checked or timed: it
  sees ATen operators below Python's dispatch modes, so popping the modes hides nothing, and
  switching it off is itself a finding.
- :class:`CandidateAudit`: a Python audit hook (which cannot be removed) that attributes file
  writes outside the child's folders, process starts and garbage-collector walks to the
  candidate's own code.
- :class:`IdentityGuard`: remembers the clocks, torch's functions and the task's definitions before
  the candidate is imported, and names any the candidate replaced.
- :func:`hooks_added`: process-wide hooks that run code inside the harness's own calls (PyTorch's
  global module hooks, torch-function and dispatch modes left on their stacks, Python's trace and
  profile functions), added since this module was imported, before any candidate existed: a hook
  on every module sees the child's reference run, its outputs and the inputs it shares with the
  candidate, and can slow it (catalogue 28). The recorder looks after every candidate call.
- :func:`background_activity`: whether outputs still change after forward returned, a Python thread
  it started still runs, or it started a process.

The proof that a candidate ran its backend's kernels is the backend's own
(:attr:`pragma_core.plugin_api.components.Backend.evidence`).
"""

from __future__ import annotations

import math
import os
import sys
import sysconfig
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = [
    "CandidateAudit",
    "ForwardMonitor",
    "OperatorRecorder",
    "IdentityGuard",
    "background_activity",
    "holds_poison",
    "LATE_WRITE_WATCH_S",
    "child_processes",
    "hooks_added",
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
        # Seen by the operator recorder above the decompositions the dispatch mode sees: reads of
        # one value, conjugate and negative-bit resolution (no-ops on real tensors), and views.
        "item",
        "is_nonzero",
        "resolve_conj",
        "resolve_neg",
        "conj",
        "_conj",
        "size",
        "stride",
        "numel",
        "dim",
        "movedim",
        "moveaxis",
        "swapaxes",
        "swapdims",
        "diagonal",
        "broadcast_to",
        "view_as_real",
        "view_as_complex",
        "unfold",
        "type_as",
        "empty_permuted",
        "_shape_as_tensor",
        "as_strided_",
        "lift",
    }
)

POISON_VALUES = (float("nan"), -3.0e38)
"""First and second poison for floating tensors; integers get the dtype's most negative value."""


def _poison(tensor: torch.Tensor, value: float) -> None:
    if tensor.dtype == torch.bool or tensor.numel() == 0:
        return
    tensor.fill_(value if tensor.is_floating_point() or tensor.is_complex() else _integer_poison(tensor.dtype, value))


def _integer_poison(dtype: torch.dtype, value: float) -> int:
    """What an integer tensor is poisoned with for the floating poison ``value``."""
    return torch.iinfo(dtype).min + (0 if math.isnan(value) else 1)


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


def _without_dynamo_import(mode: type[TorchDispatchMode]) -> None:
    """torch wraps every dispatch mode's handler so that dynamo never traces into it, and that
    wrapper imports torch._dynamo at the first call: a second of every verification. Dynamo does not
    run during the trials, so the handler is its own dynamo-disabled form (the attribute torch's
    wrapper caches it under); were torch to rename it, the import simply happens as before."""
    handler = getattr(mode.__dict__.get("__torch_dispatch__"), "__wrapped__", None)
    if handler is not None:
        setattr(handler, "__dynamo_disable", handler)


_without_dynamo_import(ForwardMonitor)


class OperatorRecorder:
    """Records the ATen compute operators run inside ``with recorder:`` blocks, through the torch
    profiler (RecordFunction, below Python's dispatch modes). Only the outermost operators count:
    what an allowed operator (a copy, an allocation) does inside is its own business.

    ``compute_ops`` maps operator name to count over every block; ``disabled`` says how the
    profiler was switched off from inside a block, if it was.
    """

    def __init__(self) -> None:
        self.compute_ops: dict[str, int] = {}
        self.disabled = ""
        self._profile: Any = None
        with self:  # the first session pays the profiler's start-up, not a call
            pass

    def __enter__(self) -> OperatorRecorder:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        # The autograd profiler itself: torch.profiler.profile wraps it and imports torch._inductor
        # (and so torch._dynamo) on its first start, a second of every verification for nothing.
        self._profile = torch.autograd.profiler.profile(use_cpu=True, use_kineto=True)
        self._profile.__enter__()
        with torch.autograd.profiler.record_function(_SENTINELS[0]):
            pass

    def stop(self) -> None:
        """End the session and count what it saw (a few hundred microseconds: the worker does this
        after it has answered, outside the time the parent measures)."""
        profiler, self._profile = self._profile, None
        try:
            with torch.autograd.profiler.record_function(_SENTINELS[1]):
                pass
            profiler.__exit__(None, None, None)
            events = profiler.function_events or []
        except Exception as error:  # noqa: BLE001 - the candidate stopped the profiler itself
            self.disabled = self.disabled or f"the operator recorder was switched off during forward ({error})"
            return
        if not set(_SENTINELS) <= {event.name for event in events}:
            self.disabled = self.disabled or "the operator recorder was switched off or restarted during forward"
            return
        added = hooks_added()
        if added:
            self.disabled = self.disabled or (
                f"the candidate left {', '.join(added)} in place: code that runs inside the harness's own calls "
                "(its reference run and its checks), which the operator recorder does not watch"
            )
        for event in events:
            name = event.name
            if not name.startswith("aten::") or _inside_aten(event):
                continue
            op = name.removeprefix("aten::")
            if op not in _ALLOWED_OPS:
                self.compute_ops[op] = self.compute_ops.get(op, 0) + 1


_SENTINELS = ("pragma.recorder.start", "pragma.recorder.end")

_MODULE_HOOKS = (
    "_global_forward_pre_hooks",
    "_global_forward_hooks",
    "_global_backward_pre_hooks",
    "_global_backward_hooks",
    "_global_buffer_registration_hooks",
    "_global_module_registration_hooks",
    "_global_parameter_registration_hooks",
)
"""torch.nn's process-wide hook tables (``register_module_forward_hook`` ...): each runs on every
module's call, the child's reference model included."""


def _hook_state() -> dict[str, Any]:
    """What runs code inside every call now: the size of each global module hook table and of the
    torch-function and dispatch mode stacks, and Python's trace and profile functions."""
    from torch.nn.modules import module

    state: dict[str, Any] = {
        f"torch.nn.modules.module.{name}": len(getattr(module, name, ())) for name in _MODULE_HOOKS
    }
    state["a torch-function mode"] = torch._C._len_torch_function_stack()
    state["a dispatch mode"] = torch._C._len_torch_dispatch_stack()
    state["sys.settrace"], state["sys.setprofile"] = sys.gettrace(), sys.getprofile()
    return state


_HOOKS_AT_IMPORT = tuple(_hook_state().items())
"""The state before any candidate code runs: the worker imports this module before the candidate."""


def hooks_added(since: tuple[tuple[str, Any], ...] = _HOOKS_AT_IMPORT) -> list[str]:
    """The hooks and modes in place now that were not in ``since`` (default: at this module's
    import); empty when none were added. Meant for moments when the harness itself holds no mode
    (between calls)."""
    before = dict(since)
    added = []
    for what, now in _hook_state().items():
        was = before.get(what)
        if isinstance(now, int) and isinstance(was, int) and now > was:
            added.append(what)
        elif not isinstance(now, int) and now is not was:
            added.append(what)
    return added


def _inside_aten(event: Any) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::"):
            return True
        parent = parent.cpu_parent
    return False


_STDLIB = sysconfig.get_paths()["stdlib"]
_TRUSTED_MACHINERY = (
    str(Path(__file__).resolve().parents[1] / "backends" / "cpu_cpp" / "native"),
    str(Path(torch.__file__).parent / "utils" / "cpp_extension.py"),
    str(Path(torch.__file__).parent / "_inductor"),
    str(Path(torch.__file__).parent / "_dynamo"),
)
_CANDIDATE_FILE = "candidate.py"
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_PATH_EVENTS = {
    "os.remove": 0,
    "os.rmdir": 0,
    "os.rename": 1,
    "os.truncate": 0,
    "os.chmod": 0,
    "os.chown": 0,
    "os.link": 1,
    "os.symlink": 1,
    "os.mkdir": 0,
    "os.utime": 0,
    "shutil.rmtree": 0,
    "shutil.move": 1,
    "shutil.copyfile": 1,
}
_SPAWN_EVENTS = frozenset(
    {
        "subprocess.Popen",
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "os.kill",
        "os.killpg",
        "pty.spawn",
    }
)
_WALK_EVENTS = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames"})
_NETWORK_EVENTS = frozenset({"socket.connect", "socket.bind", "socket.sendto", "socket.getaddrinfo"})


class CandidateAudit:
    """An audit hook that records what the candidate's own code does to the world outside its
    folders: ``take()`` returns the findings (check, message) gathered since the last call.

    An event counts when the candidate's module (``candidate.py``) is on the stack and no trusted
    machinery (pragma's kernel builder, torch's extension builder and compiler) stands between it
    and the event; garbage-collector walks count when the candidate asked for them directly.
    """

    def __init__(self, writable: Sequence[Path]) -> None:
        self._writable = tuple(str(Path(folder).resolve()) for folder in writable)
        self._findings: list[tuple[str, str]] = []
        self._busy = threading.local()
        self._getframe = sys._getframe

    def install(self) -> None:
        sys.addaudithook(self._hook)

    def take(self) -> list[dict[str, str]]:
        taken = [{"check": check, "message": message} for check, message in self._findings]
        del self._findings[:]
        return taken

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if getattr(self._busy, "on", False):
            return
        interesting = (
            event == "open"
            or event in _PATH_EVENTS
            or event in _SPAWN_EVENTS
            or event in _WALK_EVENTS
            or event in _NETWORK_EVENTS
        )
        if not interesting:
            return
        self._busy.on = True
        try:
            self._judge(event, args)
        finally:
            self._busy.on = False

    def _judge(self, event: str, args: tuple[Any, ...]) -> None:
        line = self._candidate_line(direct=event in _WALK_EVENTS)
        if line is None:
            return
        where = f"candidate.py line {line}"
        if event == "open":
            path, mode, flags = (list(args) + [None, None, 0])[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & _WRITE_FLAGS)
            if writing and isinstance(path, (str, bytes, os.PathLike)) and not self._inside(path):
                self._record("sandbox-escape", f"{where} opened {os.fsdecode(path)} for writing")
        elif event in _PATH_EVENTS:
            position = _PATH_EVENTS[event]
            paths = [args[0]] if position == 0 else list(args[:2])
            for path in paths:
                if isinstance(path, (str, bytes, os.PathLike)) and not self._inside(path):
                    self._record("sandbox-escape", f"{where}: {event} on {os.fsdecode(path)}")
                    break
        elif event in _SPAWN_EVENTS:
            self._record("spawned-process", f"{where}: {event}")
        elif event in _WALK_EVENTS:
            self._record("forbidden-construct", f"{where}: {event}() walks the interpreter's objects")
        else:
            self._record("sandbox-escape", f"{where}: {event} (no network for candidates)")

    def _record(self, check: str, message: str) -> None:
        if len(self._findings) < 20:
            self._findings.append((check, message))

    def _inside(self, path: str | bytes | os.PathLike) -> bool:
        try:
            resolved = str(Path(os.fsdecode(path)).resolve())
        except (OSError, ValueError):
            return False
        if resolved == os.devnull:
            return True
        return any(resolved == folder or resolved.startswith(folder + os.sep) for folder in self._writable)

    def _candidate_line(self, *, direct: bool) -> int | None:
        """The candidate's line behind the current event, or None when it is not the candidate's."""
        frame: Any = self._getframe(3)
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename == _CANDIDATE_FILE:
                return frame.f_lineno
            if filename.startswith(_TRUSTED_MACHINERY):
                return None
            if direct and not filename.startswith(_STDLIB):
                return None
            frame = frame.f_back
        return None


class IdentityGuard:
    """Snapshot of callables by identity; :meth:`changes` names those replaced since, and the
    process-wide hooks added since (:func:`hooks_added`).

    torch wraps some of its own functions when a part of it is first imported (``torch._dynamo``
    wraps ``torch.manual_seed``, which the worker would otherwise pay a second import of torch for,
    up front): a replacement that wraps the original (``__wrapped__``) with code from torch's own
    package is torch's, not a patch."""

    def __init__(self, namespaces: Mapping[str, Mapping[str, Any]]) -> None:
        self._namespaces = namespaces
        self._snapshot = {
            (label, name): value
            for label, namespace in namespaces.items()
            for name, value in list(namespace.items())
            if callable(value) and not isinstance(value, type(os))
        }
        self._hooks = tuple(_hook_state().items())

    def changes(self) -> list[str]:
        changed = []
        for (label, name), original in self._snapshot.items():
            current = self._namespaces[label].get(name)
            if current is not original and not _torch_wrapper_of(current, original):
                changed.append(f"{label}.{name}")
        return sorted(changed) + hooks_added(self._hooks)


_TORCH_PACKAGE = str(Path(torch.__file__).resolve().parent) + os.sep


def _torch_wrapper_of(current: Any, original: Any) -> bool:
    code = getattr(current, "__code__", None)
    return (
        getattr(current, "__wrapped__", None) is original
        and code is not None
        and str(Path(code.co_filename).resolve()).startswith(_TORCH_PACKAGE)
    )


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


LATE_WRITE_WATCH_S = 0.5
"""How long outputs that still hold the poison after the settle window are watched further: a
kernel that returns at once and writes from a detached thread is caught by its late write, not
mistaken for one that never writes, on a machine busy enough to delay that thread past the
settle window (seen on two loaded cores). Only outputs with poison left pay for it."""


def holds_poison(tensor: torch.Tensor, poison: float) -> bool:
    """Whether any element of ``tensor`` holds the value :class:`ForwardMonitor` poisons fresh
    memory with (NaN poison: any NaN)."""
    if tensor.dtype == torch.bool or tensor.numel() == 0 or tensor.is_complex():
        return False
    if tensor.is_floating_point():
        return bool(tensor.isnan().any()) if math.isnan(poison) else bool((tensor == poison).any())
    return bool((tensor == _integer_poison(tensor.dtype, poison)).any())


def background_activity(
    outputs: Iterable[torch.Tensor],
    *,
    threads_before: int,
    children_before: set[int],
    settle_s: float,
    poison: float | None = None,
) -> tuple[str, str] | None:
    """Look for work that goes on after forward returned: ``(check, message)`` or None. Outputs
    are compared again after ``settle_s``, and where one still holds ``poison``, for up to
    :data:`LATE_WRITE_WATCH_S` more."""
    outputs = list(outputs)
    snapshot = [output.clone() for output in outputs]
    time.sleep(settle_s)
    waited = settle_s
    watch = poison is not None and any(holds_poison(output, poison) for output in outputs)
    while True:
        for position, (output, before) in enumerate(zip(outputs, snapshot)):
            if not same_bits(output, before):
                return (
                    "background-work",
                    f"output {position} changed within {waited * 1000:.0f} ms after forward returned: "
                    "work must be finished when forward returns",
                )
        if not watch or waited >= settle_s + LATE_WRITE_WATCH_S:
            break
        time.sleep(0.02)
        waited += 0.02
    if threading.active_count() > threads_before:
        return ("background-work", "forward started a Python thread that is still running")
    new_children = child_processes() - children_before
    if new_children:
        return ("spawned-process", f"forward started {len(new_children)} process(es)")
    return None
