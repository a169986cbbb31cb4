"""The machine's timing slot: a timing never overlaps busy work of another process, busy work
overlaps busy work, the slot nests within a thread, and it can be turned off."""

from __future__ import annotations

import multiprocessing
import time

import pytest

from pragma_core.timing_slot import SLOT_VARIABLE, busy_slot, slot_path, timing_slot


@pytest.fixture(autouse=True)
def _own_slot(tmp_path, monkeypatch):
    monkeypatch.setenv(SLOT_VARIABLE, str(tmp_path / "slot.lock"))


def _hold(kind: str, seconds: float, lock_file: str, held, log) -> None:
    import os

    os.environ[SLOT_VARIABLE] = lock_file
    with busy_slot() if kind == "busy" else timing_slot():
        held.set()
        start = time.monotonic()
        time.sleep(seconds)
        log.put((kind, start, time.monotonic()))


def _in_other_process(kind: str, seconds: float):
    context = multiprocessing.get_context("spawn")
    held, log = context.Event(), context.Queue()
    process = context.Process(target=_hold, args=(kind, seconds, str(slot_path()), held, log))
    process.start()
    assert held.wait(30), "the other process never got the slot"
    return process, log


def test_a_timing_waits_for_busy_work_of_another_process():
    process, log = _in_other_process("busy", 1.0)
    with timing_slot():
        began = time.monotonic()
    _, _, other_ended = log.get(timeout=30)
    process.join(30)
    assert began >= other_ended - 0.01


def test_busy_work_waits_for_a_timing_of_another_process():
    process, log = _in_other_process("timing", 1.0)
    with busy_slot():
        began = time.monotonic()
    _, _, other_ended = log.get(timeout=30)
    process.join(30)
    assert began >= other_ended - 0.01


def test_busy_work_overlaps_busy_work():
    process, log = _in_other_process("busy", 2.0)
    with busy_slot():
        began = time.monotonic()
    _, _, other_ended = log.get(timeout=30)
    process.join(30)
    assert began < other_ended - 0.5


def test_the_slot_nests_in_a_thread_and_a_timing_inside_busy_work_takes_it_alone():
    with busy_slot():
        with timing_slot():
            # another process's busy work must wait now: the shared hold was given up for the timing
            context = multiprocessing.get_context("spawn")
            held, log = context.Event(), context.Queue()
            other = context.Process(target=_hold, args=("busy", 0.0, str(slot_path()), held, log))
            other.start()
            assert not held.wait(1.0)
            with busy_slot(), timing_slot():  # nested in a timing: part of it
                pass
        assert held.wait(30)  # back to sharing: the other busy work runs beside ours
        other.join(30)


def test_off_turns_the_slot_off(monkeypatch):
    monkeypatch.setenv(SLOT_VARIABLE, "off")
    assert slot_path() is None
    with timing_slot(), busy_slot():
        pass


def test_one_task_starts_at_a_time_and_the_next_once_the_first_gives_its_turn_up():
    import threading

    from pragma_core.timing_slot import start_turn

    taken: list[float] = []

    def second() -> None:
        with start_turn():
            taken.append(time.monotonic())

    with start_turn() as give_up:
        other = threading.Thread(target=second)
        other.start()
        time.sleep(0.5)
        assert not taken  # waits while the first task starts
        gave_up = time.monotonic()
        give_up()
        other.join(10)
    assert taken and taken[0] >= gave_up
    with start_turn():  # given up early or not, the turn is free after the block
        pass
