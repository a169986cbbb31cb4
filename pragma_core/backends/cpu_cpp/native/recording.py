"""Recording the native calls of one forward, so a profiler can replay each call alone.

::

    with record_calls() as recording:
        model(*inputs)
    recording.save(directory)            # calls.json + buffers/<id>.bin
    recording = CallRecording.load(directory)
    lib.relu(*recording.arguments(0))    # the first call again, on fresh copies of its buffers

For every call through a :class:`NativeLibrary` while the block runs, the recording keeps the
library's path, the function, and each argument: a scalar's C type and value; for a pointer, the
memory it points into. A *buffer* is a snapshot of a tensor's whole storage taken just before the
call, so the contents are those the call read. Arguments that share a storage (an in-place call
passing one tensor twice, two views of one tensor) share a buffer and differ by their byte offset
into it, which is how a replay reproduces aliasing. A storage unchanged since an earlier call
reuses that call's buffer rather than being copied again.

Recording is off unless the ``with`` block runs; when off it costs each call one ``is None`` test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import torch
from attrs import validators as v

from ....errors import RecordError
from ....files import atomic_write_text
from ....records import frozen_tuple
from . import library as _library
from .signatures import FunctionSignature

__all__ = [
    "CallRecording",
    "PointerArgument",
    "RecordedCall",
    "ScalarArgument",
    "record_calls",
    "saved_recording",
    "SCHEMA_VERSION",
]

SCHEMA_VERSION = 1


@attrs.frozen(kw_only=True)
class PointerArgument:
    """A tensor passed for a pointer: where it starts in which buffer, and what it holds.

    ``offset`` is in bytes from the start of the buffer, ``buffer_nbytes`` is the buffer's whole
    size; ``dtype`` and ``shape`` are the tensor's, ``const`` says the pointer was ``const``.
    """

    name: str = ""
    buffer: int = attrs.field(validator=[v.instance_of(int), v.ge(0)])
    offset: int = attrs.field(validator=[v.instance_of(int), v.ge(0)])
    buffer_nbytes: int = attrs.field(validator=[v.instance_of(int), v.ge(0)])
    dtype: str = attrs.field(validator=v.instance_of(str))
    shape: tuple[int, ...] = attrs.field(converter=frozen_tuple)
    const: bool = attrs.field(validator=v.instance_of(bool))
    ctype: str = attrs.field(validator=v.instance_of(str))

    @property
    def nbytes(self) -> int:
        """Bytes of the tensor itself, from ``offset`` on."""
        numel = 1
        for size in self.shape:
            numel *= size
        return numel * getattr(torch, self.dtype).itemsize


@attrs.frozen(kw_only=True)
class ScalarArgument:
    """A number passed for a scalar parameter, with the parameter's C type."""

    name: str = ""
    ctype: str = attrs.field(validator=v.instance_of(str))
    value: int | float | bool = attrs.field(validator=v.instance_of((int, float, bool)))


@attrs.frozen(kw_only=True)
class RecordedCall:
    """One call: the library file, the function and its signature, the arguments in order."""

    library: str = attrs.field(validator=v.instance_of(str))
    function: str = attrs.field(validator=v.instance_of(str))
    signature: str = ""
    arguments: tuple[PointerArgument | ScalarArgument, ...] = attrs.field(converter=frozen_tuple)


@attrs.define
class CallRecording:
    """The calls recorded, in order, and the buffer snapshots they point into (uint8 tensors)."""

    calls: list[RecordedCall] = attrs.field(factory=list)
    buffers: dict[int, torch.Tensor] = attrs.field(factory=dict)
    # storage address -> the buffer last snapshotted from it, to reuse when unchanged
    _latest: dict[int, int] = attrs.field(factory=dict, repr=False)

    def record(self, library: Any, signature: FunctionSignature, args: tuple[Any, ...]) -> None:
        """Keep one call; the library calls this just before the native function runs."""
        this_call: dict[int, int] = {}  # storage address -> buffer id, for aliasing within the call
        arguments: list[PointerArgument | ScalarArgument] = []
        for param, value in zip(signature.params, args):
            if not param.pointer:
                arguments.append(
                    ScalarArgument(name=param.name, ctype=param.ctype, value=_python_scalar(param.ctype, value))
                )
                continue
            storage = value.untyped_storage()
            address = storage.data_ptr()
            if address not in this_call:
                this_call[address] = self._snapshot(storage)
            arguments.append(
                PointerArgument(
                    name=param.name,
                    buffer=this_call[address],
                    offset=value.data_ptr() - address,
                    buffer_nbytes=storage.nbytes(),
                    dtype=str(value.dtype).removeprefix("torch."),
                    shape=tuple(value.shape),
                    const=param.const,
                    ctype=param.ctype,
                )
            )
        self.calls.append(
            RecordedCall(
                library=str(library.path), function=signature.name, signature=str(signature), arguments=tuple(arguments)
            )
        )

    def _snapshot(self, storage: torch.UntypedStorage) -> int:
        current = torch.empty(0, dtype=torch.uint8).set_(storage)
        previous = self._latest.get(storage.data_ptr())
        if previous is not None and torch.equal(self.buffers[previous], current):
            return previous
        buffer = len(self.buffers)
        self.buffers[buffer] = current.clone()
        self._latest[storage.data_ptr()] = buffer
        return buffer

    def arguments(self, index: int) -> list[Any]:
        """The arguments of call ``index`` rebuilt on fresh copies of its buffers, aliasing kept."""
        fresh: dict[int, torch.Tensor] = {}
        rebuilt: list[Any] = []
        for argument in self.calls[index].arguments:
            if isinstance(argument, ScalarArgument):
                rebuilt.append(argument.value)
                continue
            if argument.buffer not in fresh:
                fresh[argument.buffer] = self.buffers[argument.buffer].clone()
            raw = fresh[argument.buffer][argument.offset : argument.offset + argument.nbytes]
            rebuilt.append(raw.view(getattr(torch, argument.dtype)).reshape(argument.shape))
        return rebuilt

    def save(self, directory: str | Path) -> Path:
        """Write ``calls.json`` and ``buffers/<id>.bin`` into ``directory``; return the JSON path."""
        directory = Path(directory)
        (directory / "buffers").mkdir(parents=True, exist_ok=True)
        for buffer, contents in self.buffers.items():
            with open(directory / "buffers" / f"{buffer}.bin", "wb") as handle:
                handle.write(contents.numpy().data)
        document = {
            "schema_version": SCHEMA_VERSION,
            "buffers": [
                {"id": buffer, "nbytes": contents.numel(), "file": f"buffers/{buffer}.bin"}
                for buffer, contents in self.buffers.items()
            ],
            "calls": [_call_to_dict(call) for call in self.calls],
        }
        path = directory / "calls.json"
        atomic_write_text(path, json.dumps(document, indent=1) + "\n")  # last: marks it complete
        return path

    @classmethod
    def load(cls, directory: str | Path) -> CallRecording:
        """Read a recording that :meth:`save` wrote."""
        directory = Path(directory)
        path = directory / "calls.json"
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise RecordError(f"cannot read the call recording {path}: {error}") from None
        version = document.get("schema_version") if isinstance(document, dict) else None
        if version != SCHEMA_VERSION:
            raise RecordError(
                f"{path} has schema_version {version!r}; this pragma reads version {SCHEMA_VERSION}: "
                "record the calls again"
            )
        recording = cls()
        try:
            for entry in document["buffers"]:
                file = directory / entry["file"]
                size = file.stat().st_size
                if size != entry["nbytes"]:
                    raise RecordError(f"{file} holds {size} bytes, calls.json says {entry['nbytes']}")
                contents = torch.from_file(str(file), shared=False, size=size, dtype=torch.uint8)
                recording.buffers[int(entry["id"])] = contents
            recording.calls = [_call_from_dict(call) for call in document["calls"]]
        except (KeyError, TypeError, ValueError, OSError) as error:
            raise RecordError(f"{path} is not a valid call recording: {type(error).__name__}: {error}") from None
        return recording


def saved_recording(directory: str | Path) -> CallRecording | None:
    """The recording :meth:`CallRecording.save` wrote into ``directory``; None when it holds none
    (a forward that made no native call leaves its folder empty)."""
    return CallRecording.load(directory) if (Path(directory) / "calls.json").is_file() else None


@contextmanager
def record_calls() -> Iterator[CallRecording]:
    """Record every native library call made inside the ``with`` block (the innermost block wins)."""
    recording = CallRecording()
    previous = _library._recording[0]
    _library._recording[0] = recording
    try:
        yield recording
    finally:
        _library._recording[0] = previous


def _python_scalar(ctype: str, value: Any) -> int | float | bool:
    if ctype in ("float", "double"):
        return float(value)
    if ctype == "bool":
        return bool(value)
    return int(value)


def _call_to_dict(call: RecordedCall) -> dict[str, Any]:
    arguments = []
    for argument in call.arguments:
        kind = "pointer" if isinstance(argument, PointerArgument) else "scalar"
        arguments.append({"kind": kind, **attrs.asdict(argument)})
    return {"library": call.library, "function": call.function, "signature": call.signature, "arguments": arguments}


def _call_from_dict(data: dict[str, Any]) -> RecordedCall:
    arguments: list[PointerArgument | ScalarArgument] = []
    for entry in data["arguments"]:
        fields = {key: value for key, value in entry.items() if key != "kind"}
        if entry["kind"] == "pointer":
            arguments.append(PointerArgument(**fields))
        elif entry["kind"] == "scalar":
            arguments.append(ScalarArgument(**fields))
        else:
            raise ValueError(f"unknown argument kind {entry['kind']!r}")
    return RecordedCall(
        library=data["library"], function=data["function"], signature=data.get("signature", ""), arguments=arguments
    )
