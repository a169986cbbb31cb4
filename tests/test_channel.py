"""The report pipe between the sandbox child and the parent: whole messages, tensors as raw bytes
of known dtypes, and a clear error for anything else, never code."""

from __future__ import annotations

import json
import os
import struct
import time

import pytest
import torch

from pragma_core.sandbox.channel import ChannelError, MessageReader, MessageWriter


@pytest.fixture
def pipe():
    read_end, write_end = os.pipe()
    yield MessageReader(read_end, max_bytes=1 << 20), MessageWriter(write_end), write_end
    for fd in (read_end, write_end):
        try:
            os.close(fd)
        except OSError:
            pass


def soon() -> float:
    return time.monotonic() + 5


def test_tensors_of_every_kind_arrive_bit_for_bit(pipe):
    reader, writer, _ = pipe
    sent = [
        torch.randn(3, 4),
        torch.tensor(7),
        torch.tensor([True, False, True]),
        torch.randn(5).bfloat16(),
        torch.empty(0, 3),
        torch.arange(6).reshape(2, 3).t(),  # not contiguous
        torch.randn(2, dtype=torch.float64),
    ]
    writer.send({"event": "trial", "native_calls": 2}, sent)
    message = reader.receive(soon())
    assert message.event == "trial" and message.header["native_calls"] == 2
    assert len(message.tensors) == len(sent)
    for got, want in zip(message.tensors, sent):
        assert got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want)


def test_a_closed_pipe_is_the_end_not_an_error(pipe):
    reader, _, write_end = pipe
    os.close(write_end)
    assert reader.receive(soon()) is None


def test_the_deadline_ends_the_wait(pipe):
    reader, _, _ = pipe
    started = time.monotonic()
    assert reader.receive(time.monotonic() + 0.2) is None
    assert time.monotonic() - started < 2


def _raw(write_end: int, header: bytes, payload: bytes = b"") -> None:
    os.write(write_end, struct.pack("<Q", len(header)) + header + payload)


@pytest.mark.parametrize(
    "header, error",
    [
        (b"not json", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (json.dumps({"event": "x", "tensors": [{"dtype": "object", "shape": [1]}]}).encode(), "unknown dtype"),
        (json.dumps({"event": "x", "tensors": [{"dtype": "float32", "shape": [-1]}]}).encode(), "malformed shape"),
        (json.dumps({"event": "x", "tensors": [{"dtype": "float32", "shape": [1 << 20]}]}).encode(), "more than"),
    ],
)
def test_a_broken_message_is_a_channel_error(pipe, header, error):
    reader, _, write_end = pipe
    _raw(write_end, header)
    with pytest.raises(ChannelError, match=error):
        reader.receive(soon())


def test_a_giant_header_is_refused_before_it_is_read(pipe):
    reader, _, write_end = pipe
    os.write(write_end, struct.pack("<Q", 1 << 40))
    with pytest.raises(ChannelError, match="header"):
        reader.receive(soon())
