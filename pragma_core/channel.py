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

__all__ = ["ChannelError", "Message", "MessageReader", "MessageWriter", "EVIDENCE_FD_VARIABLE"]

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
    """The child's end: writes whole messages to a descriptor."""

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
            plain = tensor.detach().contiguous().cpu()
            flat = plain.reshape(-1)
            payloads.append(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
            described.append({"dtype": str(plain.dtype).removeprefix("torch."), "shape": list(plain.shape)})
        head = json.dumps({**header, "tensors": described}).encode()
        self._write_all(_LENGTH.pack(len(head)) + head)
        for data in payloads:
            self._write_all(data)

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = self._write(self._fd, view)
            view = view[written:]


class MessageReader:
    """The parent's end: reads one message at a time within a deadline and a size bound."""

    def __init__(self, fd: int, *, max_bytes: int) -> None:
        self._fd = fd
        self._max_bytes = max_bytes
        self._buffer = bytearray()

    def receive(self, deadline: float, *, alive: Callable[[], bool] | None = None) -> Message | None:
        """The next message, or None when the child closed the pipe, ended, or the deadline
        (``time.monotonic()``) passed first. Raises :class:`ChannelError` on a broken message."""
        head_length = self._read_exactly(_LENGTH.size, deadline, alive)
        if head_length is None:
            return None
        (length,) = _LENGTH.unpack(head_length)
        if length > _HEADER_LIMIT:
            raise ChannelError(f"a message header of {length} bytes")
        head = self._read_exactly(length, deadline, alive)
        if head is None:
            return None
        try:
            header = json.loads(bytes(head))
        except ValueError as error:
            raise ChannelError(f"a message header that is not JSON: {error}") from None
        if not isinstance(header, dict):
            raise ChannelError("a message header that is not a JSON object")
        tensors = []
        total = 0
        for spec in header.pop("tensors", None) or []:
            dtype, shape, nbytes = _tensor_spec(spec)
            total += nbytes
            if total > self._max_bytes:
                raise ChannelError(f"a message of more than {self._max_bytes} bytes of tensors")
            data = self._read_exactly(nbytes, deadline, alive)
            if data is None:
                return None
            tensors.append(_tensor_from(bytes(data), dtype, shape))
        return Message(header=header, tensors=tuple(tensors))

    def _read_exactly(self, count: int, deadline: float, alive: Callable[[], bool] | None) -> bytearray | None:
        while len(self._buffer) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self._fd], [], [], min(remaining, 0.05))
            if not ready:
                if alive is not None and not alive() and not _readable(self._fd):
                    return None
                continue
            chunk = os.read(self._fd, max(65536, min(count - len(self._buffer), 1 << 24)))
            if not chunk:
                return None
            self._buffer += chunk
        data = self._buffer[:count]
        del self._buffer[:count]
        return data


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


def _tensor_from(data: bytes, dtype: str, shape: tuple[int, ...]) -> Any:
    import torch

    torch_dtype = getattr(torch, dtype)
    if not data:
        return torch.empty(shape, dtype=torch_dtype)
    if torch_dtype == torch.bool:
        return torch.frombuffer(bytearray(data), dtype=torch.uint8).to(torch.bool).reshape(shape)
    return torch.frombuffer(bytearray(data), dtype=torch_dtype).reshape(shape)
