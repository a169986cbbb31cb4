"""One timing at a time on a machine: a lock that timing holds alone and other busy work shares.

A timing is only worth its interval when the cores are its own. When several tasks run on one
machine (``pragma bench --workers 2``, two ``pragma optimize`` in two terminals, several Ray tasks
on one node), each timing (a verification's timed calls, the reference's baseline, size fitting,
measuring the machine's peaks) holds the **timing slot** exclusively, while work that keeps cores
busy (building and checking a candidate, profiling it) holds it shared: busy work overlaps other
busy work and model calls, never a timing. Waiting for a model holds nothing.

The slot is an ``flock`` on ``/tmp/pragma-timing-slot.lock`` (``$PRAGMA_TIMING_SLOT`` names another
file; ``off`` turns the slot off), so it spans processes and dies with its holder. A second file is
a turnstile: once a timing waits, new busy work queues behind it, so timings are not starved.
Within one thread the slot nests: busy work inside a timing is part of it, and a timing inside busy
work (a verification's timed calls after its build) gives up the shared hold while it times.
Work that may wait but need not (a child started ahead to import torch) takes the slot with
:func:`busy_slot_when_free`, which never blocks: it gives up when its caller needs the work done.

Beside the slot, :func:`start_turn` lets one bench task at a time start on the machine, so tasks
do not stay in step.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["SLOT_VARIABLE", "slot_path", "timing_slot", "busy_slot", "busy_slot_when_free", "start_turn"]

SLOT_VARIABLE = "PRAGMA_TIMING_SLOT"
"""The environment variable naming the slot's lock file; ``off`` turns the slot off."""

_held = threading.local()  # .mode: None, "shared" or "exclusive"; .fd: the lock's descriptor


def slot_path() -> Path | None:
    """The lock file of this machine's timing slot, or None when ``$PRAGMA_TIMING_SLOT`` is ``off``."""
    chosen = os.environ.get(SLOT_VARIABLE, "").strip()
    if chosen.lower() == "off":
        return None
    if chosen:
        return Path(chosen)
    # One file for the whole machine: /tmp whatever TMPDIR says, so every shell finds the same slot.
    folder = "/tmp" if os.access("/tmp", os.W_OK) else tempfile.gettempdir()
    return Path(folder) / "pragma-timing-slot.lock"


@contextmanager
def timing_slot() -> Iterator[None]:
    """Hold the machine's timing slot alone while the block times something."""
    mode = getattr(_held, "mode", None)
    if mode == "exclusive" or slot_path() is None:
        yield
        return
    if mode == "shared":
        _release()  # a timing after a build in the same thread: stop sharing, then take it alone
    _acquire(fcntl.LOCK_EX)
    try:
        yield
    finally:
        _release()
        if mode == "shared":
            _acquire(fcntl.LOCK_SH)


@contextmanager
def busy_slot() -> Iterator[None]:
    """Share the machine's timing slot while the block keeps cores busy (never during a timing)."""
    if getattr(_held, "mode", None) is not None or slot_path() is None:
        yield
        return
    _acquire(fcntl.LOCK_SH)
    try:
        yield
    finally:
        _release()


@contextmanager
def busy_slot_when_free(stop: threading.Event, poll_s: float = 0.02) -> Iterator[bool]:
    """Share the slot for busy work that can wait, as soon as no timing holds it or waits for it.

    Never blocks: tries every ``poll_s`` seconds, and stops trying once ``stop`` is set (the work
    is wanted now). The block gets True while it shares the slot, False when it holds nothing
    (``stop`` was set first). Held already in this thread, or with the slot off: True at once."""
    if getattr(_held, "mode", None) is not None or slot_path() is None:
        yield True
        return
    while not _acquire(fcntl.LOCK_SH, wait=False):
        if stop.wait(poll_s):
            yield False
            return
    try:
        yield True
    finally:
        _release()


def _open(path: Path) -> int:
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    with contextlib.suppress(OSError):  # another user's file keeps the mode its owner set
        os.fchmod(descriptor, 0o666)  # other users of the machine share the slot
    return descriptor


def _acquire(operation: int, *, wait: bool = True) -> bool:
    """Take the slot (``operation``: shared or exclusive) through the turnstile; without ``wait``,
    only if that needs no waiting (False when it would)."""
    path = slot_path()
    assert path is not None
    now = 0 if wait else fcntl.LOCK_NB
    gate = _open(path.with_name(path.name + ".gate"))
    descriptor = None
    try:
        fcntl.flock(gate, fcntl.LOCK_EX | now)  # the turnstile: behind a waiting timing, nobody passes
        descriptor = _open(path)
        fcntl.flock(descriptor, operation | now)
    except BlockingIOError:
        if descriptor is not None:
            os.close(descriptor)
        return False
    finally:
        os.close(gate)
    _held.fd = descriptor
    _held.mode = "exclusive" if operation == fcntl.LOCK_EX else "shared"
    return True


def _release() -> None:
    os.close(_held.fd)  # closing drops the flock
    _held.fd = None
    _held.mode = None


@contextmanager
def start_turn() -> Iterator[Callable[[], None]]:
    """Hold the machine's start turn while a task starts; the block gets a function that gives it up.

    A task of a bench starts (fits its sizes, measures the machine, times and profiles its
    reference, writes its first candidate) while no other task on this machine does: it holds the
    turn until it first waits for its model, then gives it up. Tasks started together whose
    attempts are alike would otherwise stay in step, building and timing at the same moments and
    waiting for their models at the same moments; one start after another, each builds and times
    while the other waits (4 examples, 5 s model replies: two workers 1.44x faster than one
    started together, 1.73x one start after another; docs/bench.md). The turn is an ``flock``
    beside the timing slot's file (off with the slot), so it orders the tasks of one machine
    whatever started them: local workers, Ray tasks on one node, two benches."""
    path = slot_path()
    descriptor: list[int] = []
    if path is not None:
        descriptor.append(_open(path.with_name(path.name + ".start")))
        fcntl.flock(descriptor[0], fcntl.LOCK_EX)

    def give_up() -> None:
        if descriptor:
            os.close(descriptor.pop())  # closing drops the flock

    try:
        yield give_up
    finally:
        give_up()
