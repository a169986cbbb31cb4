"""The pipe a sandbox child reports over: framed messages of a JSON header and raw tensors.

The parent creates the pipe and hands the child its write end before any candidate code exists in
the child, so nothing the child reports needs a file the candidate could write. A message is a
4-byte length, a JSON header, then the bytes of each tensor the header lists (dtype and shape).
The parent decodes tensors from raw bytes with a fixed set of dtypes, never with pickle, so a
message can carry wrong numbers but never code; and it bounds every message's size, so a flood
ends the verification instead of the parent's memory.

Whatever arrives is evidence to check, not a verdict: outputs are compared with references the
parent computed, times with the parent's own clock.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

__all__ = ["ChannelError", "Message", "MessageReader", "MessageWriter", "EVIDENCE_FD_VARIABLE", "widen_pipe"]

EVIDENCE_FD_VARIABLE = "PRAGMA_EVIDENCE_FD"
"""The environment variable that tells the child which descriptor is the write end of its pipe."""

_LENGTH = struct.Struct("<Q")
_HEADER_LIMIT = 1 << 20  # a header is a few hundred bytes of JSON; 1 MiB means something is wrong

# The dtypes outputs and inputs may have, by the name the header carries.
_DTYPES = (
    "float64",
    "float32",
    "float16",
    "bfloat16",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
    "complex64",
    "complex128",
)


class ChannelError(Exception):
    """The child's messages broke the protocol: malformed, too large, or not what was asked."""


@attrs.frozen
class Message:
    """One message: its header (a dict) and the tensors that followed it."""

    header: dict[str, Any]
    tensors: tuple[Any, ...] = ()

    @property
    def event(self) -> str:
        return str(self.header.get("event", ""))


class MessageWriter:
    """The child's end: writes whole messages to a descriptor, tensors straight from their memory."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._write = os.write  # bound now, before any candidate code runs

    def send(self, header: dict[str, Any], tensors: Sequence[Any] = ()) -> None:
        import torch

        payloads = []
        described = []
        for tensor in tensors:
            if not isinstance(tensor, torch.Tensor):
                raise TypeError(f"only tensors travel as payloads, not {type(tensor).__name__}")
            plain = tensor.detach().cpu().resolve_conj().resolve_neg().contiguous()
            if plain.numel():
                payloads.append(plain.reshape(-1).view(torch.uint8).numpy().data)
            described.append({"dtype": str(plain.dtype).removeprefix("torch."), "shape": list(plain.shape)})
        head = json.dumps({**header, "tensors": described}).encode()
        self._write_all(memoryview(_LENGTH.pack(len(head)) + head))
        for data in payloads:
            self._write_all(data)

    def _write_all(self, view: memoryview) -> None:
        while view:
            written = self._write(self._fd, view)
            view = view[written:]


class MessageReader:
    """The parent's end: reads one message at a time within a deadline and a size bound.

    Tensors are read straight into the memory of the tensor that holds them: a 32 MB output costs
    one copy out of the pipe, not three."""

    def __init__(self, fd: int, *, max_bytes: int) -> None:
        self._fd = fd
        self._max_bytes = max_bytes

    def receive(self, deadline: float, *, alive: Callable[[], bool] | None = None) -> Message | None:
        """The next message, or None when the child closed the pipe, ended, or the deadline
        (``time.monotonic()``) passed first. Raises :class:`ChannelError` on a broken message."""
        head_length = self._read_bytes(_LENGTH.size, deadline, alive)
        if head_length is None:
            return None
        (length,) = _LENGTH.unpack(head_length)
        if length > _HEADER_LIMIT:
            raise ChannelError(f"a message header of {length} bytes")
        head = self._read_bytes(length, deadline, alive)
        if head is None:
            return None
        try:
            header = json.loads(bytes(head))
        except ValueError as error:
            raise ChannelError(f"a message header that is not JSON: {error}") from None
        if not isinstance(header, dict):
            raise ChannelError("a message header that is not a JSON object")
        specs = [_tensor_spec(spec) for spec in header.pop("tensors", None) or []]
        if sum(nbytes for _, _, nbytes in specs) > self._max_bytes:
            raise ChannelError(f"a message of more than {self._max_bytes} bytes of tensors")
        tensors = []
        for dtype, shape, nbytes in specs:
            tensor = self._read_tensor(dtype, shape, nbytes, deadline, alive)
            if tensor is None:
                return None
            tensors.append(tensor)
        return Message(header=header, tensors=tuple(tensors))

    def _read_bytes(self, count: int, deadline: float, alive: Callable[[], bool] | None) -> bytearray | None:
        data = bytearray(count)
        return data if self._read_into(memoryview(data), deadline, alive) else None

    def _read_tensor(
        self, dtype: str, shape: tuple[int, ...], nbytes: int, deadline: float, alive: Callable[[], bool] | None
    ) -> Any:
        import torch

        torch_dtype = getattr(torch, dtype)
        raw = torch.empty(nbytes, dtype=torch.uint8)
        if nbytes and not self._read_into(raw.numpy().data, deadline, alive):
            return None
        if torch_dtype == torch.bool:
            return raw.to(torch.bool).reshape(shape)  # any non-zero byte is true, as torch reads it
        return raw.view(torch_dtype).reshape(shape)

    def _read_into(self, view: memoryview, deadline: float, alive: Callable[[], bool] | None) -> bool:
        """Fill ``view`` from the pipe: False when the child closed it, ended, or the deadline passed."""
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            ready, _, _ = select.select([self._fd], [], [], min(remaining, 0.05))
            if not ready:
                if alive is not None and not alive() and not _readable(self._fd):
                    return False
                continue
            count = os.readv(self._fd, [view])
            if not count:
                return False
            view = view[count:]
        return True


def widen_pipe(fd: int) -> None:
    """Give a pipe the largest buffer an unprivileged process may set (``fs.pipe-max-size``, 1 MiB
    by default, instead of 64 KiB): fewer switches between writer and reader per megabyte sent.
    Where the OS does not allow it, the pipe stays as it was."""
    try:
        import fcntl

        with open("/proc/sys/fs/pipe-max-size") as handle:
            largest = int(handle.read())
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, largest)
    except (OSError, ValueError, ImportError, AttributeError):
        pass


def _readable(fd: int) -> bool:
    ready, _, _ = select.select([fd], [], [], 0)
    return bool(ready)


def _tensor_spec(spec: Any) -> tuple[str, tuple[int, ...], int]:
    if not isinstance(spec, dict) or spec.get("dtype") not in _DTYPES:
        raise ChannelError(f"a tensor of unknown dtype: {spec!r:.100}")
    shape = spec.get("shape")
    if not isinstance(shape, list) or not all(isinstance(size, int) and size >= 0 for size in shape):
        raise ChannelError(f"a tensor with a malformed shape: {shape!r:.100}")
    import torch

    numel = 1
    for size in shape:
        numel *= size
    return spec["dtype"], tuple(shape), numel * getattr(torch, spec["dtype"]).itemsize
