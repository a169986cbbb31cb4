"""The machine's timing slot: a timing never overlaps busy work of another process, busy work
overlaps busy work, the slot nests within a thread, and it can be turned off."""

from __future__ import annotations

import multiprocessing
import time

import pytest

from pragma_core.machine.timing_slot import SLOT_VARIABLE, busy_slot, slot_path, timing_slot


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

    from pragma_core.machine.timing_slot import start_turn

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


def test_work_that_can_wait_takes_the_slot_only_when_no_timing_holds_it_and_gives_up_when_wanted():
    import threading

    from pragma_core.machine.timing_slot import busy_slot_when_free

    wanted = threading.Event()
    with busy_slot_when_free(wanted) as shared:  # free: shared at once
        assert shared
        process, log = _in_other_process("busy", 0.0)  # busy work of another process runs beside it
        log.get(timeout=30)
        process.join(30)

    process, log = _in_other_process("timing", 1.0)
    with busy_slot_when_free(wanted) as shared:  # waits for the timing, without blocking on it
        began = time.monotonic()
        assert shared
    _, _, other_ended = log.get(timeout=30)
    process.join(30)
    assert began >= other_ended - 0.01

    process, log = _in_other_process("timing", 3.0)
    threading.Timer(0.5, wanted.set).start()
    asked = time.monotonic()
    with busy_slot_when_free(wanted) as shared:  # wanted before the timing ends: holds nothing
        assert not shared
        assert time.monotonic() - asked < 2.0
    log.get(timeout=30)
    process.join(30)


def test_a_child_started_ahead_imports_only_once_another_process_has_timed():
    """The loop's next child imports torch while nobody times; taken while a timing still runs,
    it was never started, and the verification starts its own under its own hold of the slot."""
    from pragma_core.tasks.loading import load_task
    from pragma_core.verifier import VerifySettings
    from pragma_core.verifier.warm_child import ChildAhead

    from .conftest import EXAMPLES

    task = load_task(EXAMPLES / "level1" / "1_GELUTanh.py", {"batch_size": 32, "dim": 1024})
    settings = VerifySettings(threads=2)

    process, log = _in_other_process("timing", 1.5)
    ahead = ChildAhead(task, settings)
    time.sleep(0.5)
    assert ahead.take() is None  # wanted while the timing ran: never started
    log.get(timeout=30)
    process.join(30)

    process, log = _in_other_process("timing", 1.5)
    ahead = ChildAhead(task, settings)
    _, _, other_ended = log.get(timeout=30)
    ended_on_the_wall_clock = time.time() - (time.monotonic() - other_ended)  # as files are dated
    process.join(30)
    time.sleep(0.5)
    child = ahead.take()
    assert child is not None
    with child:
        assert child.folder.task_file.stat().st_mtime >= ended_on_the_wall_clock - 0.05  # began after the timing
        assert child.folder.imported_marker.exists() and child.fits(task, settings)


def test_a_program_ends_while_its_work_that_can_wait_still_waits_for_a_timing(tmp_path):
    """A child started ahead that nobody took, waiting for another process's timing, must not keep
    its program from exiting."""
    import subprocess
    import sys

    from .conftest import EXAMPLES

    process, log = _in_other_process("timing", 30.0)
    script = tmp_path / "ends.py"
    script.write_text(
        "from pragma_core.tasks.loading import load_task\n"
        "from pragma_core.verifier import VerifySettings\n"
        "from pragma_core.verifier.warm_child import ChildAhead\n"
        f"task = load_task({str(EXAMPLES / 'level1' / '1_GELUTanh.py')!r})\n"
        "ahead = ChildAhead(task, VerifySettings(threads=2))\n"
    )
    began = time.monotonic()
    subprocess.run([sys.executable, str(script)], check=True, timeout=60)
    assert time.monotonic() - began < 15  # the timing holds the slot for 30 s
    process.kill()
    process.join(30)
