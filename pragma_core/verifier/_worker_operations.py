"""What the sandbox child does for each request of the parent: :data:`OPERATIONS`, a table from a
request's ``op`` to its handler, and :class:`ChildState`, what the handlers share.

Imported by :mod:`.worker` only in the child, after it has pinned its CPU set (torch, imported
here, starts its thread pool on the CPUs it finds) and before the candidate exists: every name
bound here is bound before any candidate code runs, and the worker's identity guard watches this
module's functions and the table. The requests themselves are described in :mod:`.worker`.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from ..records import Candidate
from .inputs import construct, make_inputs, make_probe_inputs
from .instrumentation import (
    POISON_VALUES,
    CandidateAudit,
    ForwardMonitor,
    IdentityGuard,
    OperatorRecorder,
    background_activity,
    child_processes,
    hooks_added,
    same_bits,
)

__all__ = ["OPERATIONS", "ChildState", "Reporter"]

_clock = time.perf_counter  # bound before any candidate code can replace it


class Reporter:
    """The child's replies to the parent, each carrying the findings gathered since the last one:
    its own (:meth:`finding`) and the audit hook's."""

    def __init__(self, writer: Any, audit: CandidateAudit) -> None:
        self.writer, self.audit = writer, audit
        self.findings: list[dict[str, str]] = []

    def finding(self, check: str, message: str) -> None:
        self.findings.append({"check": check, "message": message})

    def reply(self, event: str, tensors: Sequence[Any] = (), **fields: Any) -> None:
        new = self.findings + self.audit.take()
        self.findings.clear()
        self.writer.send({"event": event, "findings": new, **fields}, tensors)


class ChildState:
    """What the handlers share: the task and the candidate as built, the backend's evidence and
    clock, the operator recorder, and the inputs and outputs kept between requests."""

    def __init__(
        self,
        *,
        root: Path,
        task_ns: dict[str, Any],
        backend: Any,
        device: str,
        evidence: Any,
        time_call: Callable[..., Any] | None,
        guard: IdentityGuard,
        report: Reporter,
        model_new: type,
        reference: Any,
        model: Any,
    ) -> None:
        self.root, self.task_ns, self.model_new = root, task_ns, model_new
        self.backend, self.device, self.evidence, self.guard, self.report = backend, device, evidence, guard, report
        self.time_call = time_call  # None: the host clock
        self.reference, self.model = reference, model
        self.contenders: dict[str, Any] = {"reference": reference, "candidate": model}
        self.recorder = OperatorRecorder()
        self.best_recorder: OperatorRecorder | None = None  # the best's, made when the best loads
        self.previous_inputs: list[Any] | None = None
        self.slots: dict[tuple[str, int], list[Any]] = {}
        self.current: dict[str, list[Any]] = {}
        self.last_outputs: dict[str, list[Any]] = {}
        self.generated: tuple[int, list[Any]] | None = None
        self.calibration: tuple[Any, Any] | None = None
        self.fingerprint: Callable[[], str | None] | None = None  # the backend's, None: cannot say
        self.memory_probe: tuple[Any, Any] | None = None

    def stop_recording(self) -> None:
        recorder = self.recorder
        recorder.stop()
        if recorder.disabled and not any(item["check"] == "monitor-disabled" for item in self.report.findings):
            self.report.finding("monitor-disabled", recorder.disabled)
            recorder.disabled = ""


def _trial(child: ChildState, request: dict[str, Any]) -> None:
    report, device, evidence = child.report, child.device, child.evidence
    fresh = make_inputs(child.task_ns, request["seed"])
    if request.get("probe_seed") is not None:
        fresh = make_probe_inputs(fresh, request["probe_seed"])
    fresh = _to_device(fresh, device)
    inputs = _refill(child.previous_inputs if request.get("reuse") else None, fresh)
    threads_before, children_before = threading.active_count(), child_processes()
    monitor = ForwardMonitor(POISON_VALUES[request.get("poison", 0)])
    calls_before = evidence.count()
    start = _clock()
    child.recorder.start()
    try:
        with torch.no_grad(), monitor:
            outputs = _as_list(child.model(*inputs))
    finally:
        child.stop_recording()
    elapsed = _clock() - start
    problem = _check_outputs(outputs, device)
    if problem:
        report.finding("tensor-type", problem)
        report.reply("trial", native_calls=evidence.count() - calls_before)
        return
    for position, (now, before) in enumerate(zip(inputs, fresh)):
        if isinstance(now, torch.Tensor) and not same_bits(now, before):
            report.finding("input-mutation", f"forward changed input {position} (trial {request.get('trial')})")
    activity = background_activity(
        outputs,
        threads_before=threads_before,
        children_before=children_before,
        settle_s=min(0.25, max(0.02, 2 * elapsed)),
        poison=POISON_VALUES[request.get("poison", 0)],
    )
    if activity:
        report.finding(*activity)
    child.previous_inputs = inputs
    report.reply(
        "trial",
        outputs,
        native_calls=evidence.count() - calls_before,
        compute_ops=child.recorder.compute_ops,
    )


def _prepare(child: ChildState, request: dict[str, Any]) -> None:
    who, seed = request["who"], request["seed"]
    if child.generated is None or child.generated[0] != seed:
        child.generated = (seed, _to_device(make_inputs(child.task_ns, seed), child.device))
    values = child.generated[1]
    key = (who, int(request.get("slot", 0)))
    child.current[who] = child.slots[key] = _refill(child.slots.get(key), values)
    child.report.reply("prepared")


def _call(child: ChildState, request: dict[str, Any]) -> None:
    who, contenders, evidence = request["who"], child.contenders, child.evidence
    if who == "compile" and "compile" not in contenders:
        contenders["compile"] = torch.compile(child.reference)
    runner, inputs = contenders[who], child.current[who]
    calls_before = evidence.count()
    # The parent's clock runs from this request to the reply: what the worker does for
    # itself (ending the recorder's session, freeing the previous outputs) comes after.
    threads_before = threading.active_count()
    if who == "candidate":
        child.recorder.start()
    else:
        _no_hooks_around(child, who)  # one installed since the candidate's call returned (a finalizer)
        if who == "best" and child.best_recorder is not None:
            child.best_recorder.start()
    with torch.no_grad():
        if child.time_call is None:
            start = _clock()
            outputs = runner(*inputs)
            elapsed_ms = (_clock() - start) * 1e3
        else:
            outputs, elapsed_ms = child.time_call(functools.partial(runner, *inputs))
    child.report.reply("called", ms=elapsed_ms, native_calls=evidence.count() - calls_before)
    if who == "best" and child.best_recorder is not None:
        child.best_recorder.stop()
        child.best_recorder.compute_ops.clear()
    if who == "candidate":
        child.stop_recording()
        if threading.active_count() > threads_before:
            child.report.finding("background-work", "a timed forward started a Python thread that is still running")
    child.last_outputs[who] = _as_list(outputs)
    if who != "candidate":
        _no_hooks_around(child, who)  # one installed while it ran


def _no_hooks_around(child: ChildState, who: str) -> None:
    """A process-wide hook in place around a harness call (the reference's, the best's): code of
    the candidate that would see that call's outputs, which it could copy, or slow it (catalogue 28).
    The recorder looks after each candidate call; this catches one installed between them."""
    added = hooks_added()
    if added:
        child.report.finding(
            "monitor-disabled",
            f"{', '.join(added)} in place around the {who}'s call: code that runs inside the harness's own calls",
        )


def _outputs(child: ChildState, request: dict[str, Any]) -> None:
    outputs = child.last_outputs.get(request["who"], [])
    problem = _check_outputs(outputs, child.device)
    if problem:
        child.report.finding("tensor-type", problem)
        child.report.reply("outputs")
    else:
        child.report.reply("outputs", outputs)


def _sample(child: ChildState, request: dict[str, Any]) -> None:
    # A few elements of the last call's outputs and inputs of each contender, at positions
    # the parent chose after the call: every timed call is checked this way.
    # Inputs are compared with the values generated for the call, which nothing touched.
    tensors = []
    pristine = child.generated[1] if child.generated is not None else []
    for who, inputs in (("reference", pristine), ("candidate", child.current.get("candidate", []))):
        outputs = child.last_outputs.get(who, [])
        problem = _check_outputs(outputs, child.device)
        if problem:
            child.report.finding("tensor-type", problem)
            break
        tensors += _pick(outputs, request["outputs"])
        tensors += _pick([t for t in inputs if isinstance(t, torch.Tensor)], request["inputs"])
    child.report.reply("sample", tensors)


def _inputs(child: ChildState, request: dict[str, Any]) -> None:
    child.report.reply("inputs", [t for t in child.current.get(request["who"], []) if isinstance(t, torch.Tensor)])


def _idle(child: ChildState, request: dict[str, Any]) -> None:
    if request.get("profiled"):
        child.recorder.start()
    start = _clock()
    elapsed = _clock() - start
    child.report.reply("idle", ms=elapsed * 1e3)
    if request.get("profiled"):
        child.stop_recording()


def _calibrate(child: ChildState, request: dict[str, Any]) -> None:
    if child.calibration is None:
        numbers, size = torch.Generator().manual_seed(0), int(request["size"])
        child.calibration = (torch.rand(size, size, generator=numbers),) * 2
    torch.mm(*child.calibration)
    child.report.reply("calibrated")


def _probe_memory(child: ChildState, request: dict[str, Any]) -> None:
    if child.memory_probe is None:  # ones, not empty: every page is touched before the first copy
        elements = int(request["bytes"]) // 4
        child.memory_probe = (torch.ones(elements), torch.empty(elements))
    source, destination = child.memory_probe
    destination.copy_(source)
    child.report.reply("probed")


def _fingerprint(child: ChildState, request: dict[str, Any]) -> None:
    machine_code = None
    if child.fingerprint is not None:
        try:
            machine_code = child.fingerprint()
        except Exception:  # noqa: BLE001 - a fingerprint that cannot be taken only means "changed"
            machine_code = None
    child.report.reply("fingerprint", machine_code=machine_code)


def _incumbent(child: ChildState, request: dict[str, Any]) -> None:
    # The loop's best, loaded beside the candidate, with the variables that let it reuse its own
    # build folder (read only) set while it loads; the candidate's module stays "candidate".
    env = {str(key): str(value) for key, value in (request.get("env") or {}).items()}
    saved_env = {key: os.environ.get(key) for key in env}
    saved_module = sys.modules.get("candidate")
    workdir = child.root / "work" / "best"
    try:
        os.environ.update(env)
        workdir.mkdir(parents=True, exist_ok=True)
        model_new = child.backend.load(Candidate(source=request["source"], backend=request["backend"]), workdir)
        with torch.no_grad():
            best = construct(child.task_ns, model_new).to(child.device)
    except BaseException as error:  # noqa: BLE001 - the best not loading costs only the head-to-head
        child.report.reply("incumbent", error=f"{type(error).__name__}: {' '.join(str(error).split())[:300]}")
        return
    finally:
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if saved_module is not None:
            sys.modules["candidate"] = saved_module
    child.contenders["best"] = best
    # The best runs inside a recorder of its own, as the candidate runs inside one: the profiler's
    # cost per operator is on both sides of the head-to-head (without it a kernel identical to the
    # best read 0.88x of it at 0.08 ms a call). What this recorder sees is not the candidate's.
    child.best_recorder = OperatorRecorder()
    child.report.reply("incumbent", loaded=True)


def _record(child: ChildState, request: dict[str, Any]) -> None:
    # At the task's sizes, or at a profiler's smaller ones (``program``: the task's program
    # with other size constants), where the output is checked against the reference's:
    # a candidate that assumes the task's own sizes computes something else there.
    root, report = child.root, child.report
    sized_ns, sized_model, sized_reference = child.task_ns, child.model, None
    from .comparison import output_difference  # here: only a recording depends on it

    if request.get("program"):
        sized_ns = {"__name__": "pragma_task", "__file__": str(root / "task.py")}
        exec(compile(request["program"], str(root / "task.py"), "exec"), sized_ns)
        with torch.no_grad():
            sized_model = construct(sized_ns, child.model_new)
            sized_reference = construct(sized_ns, sized_ns["Model"])
    recorded_inputs = make_inputs(sized_ns, request["seed"])
    originals = [t.clone() if isinstance(t, torch.Tensor) else t for t in recorded_inputs]
    replay = child.backend.replay
    if replay is None:
        report.reply("recorded", calls=0, wrong="")
        return
    with torch.no_grad():
        sized_model(*recorded_inputs)  # lazy builds and first touch happen outside the recording
        with replay.record() as recording:
            outputs = sized_model(*recorded_inputs)
        wrong = output_difference(outputs, sized_reference(*originals)) if sized_reference else ""
    if wrong:
        report.reply("recorded", calls=0, wrong=wrong)
        return
    recording.save(root / "work" / str(request["folder"]))
    report.reply("recorded", calls=len(recording.calls), saved=True)


def _finish(child: ChildState, request: dict[str, Any]) -> None:
    # Exit handlers (atexit, weakref.finalize) run now, while the audit hook can still
    # report what they do: a handler that writes outside the folders is caught here.
    import atexit

    atexit._run_exitfuncs()
    changed = child.guard.changes()
    if changed:
        child.report.finding("harness-patched", "the candidate replaced " + ", ".join(changed[:5]))
    if child_processes():
        child.report.finding("spawned-process", f"the candidate started {len(child_processes())} process(es)")
    child.report.reply("finished", compute_ops=child.recorder.compute_ops)
    # Only recordings for profiling may follow; the verdict's checks are done.


OPERATIONS: dict[str, Callable[[ChildState, dict[str, Any]], None]] = {
    "trial": _trial,
    "prepare": _prepare,
    "call": _call,
    "outputs": _outputs,
    "sample": _sample,
    "inputs": _inputs,
    "idle": _idle,
    "calibrate": _calibrate,
    "probe_memory": _probe_memory,
    "fingerprint": _fingerprint,
    "incumbent": _incumbent,
    "record": _record,
    "finish": _finish,
}
"""The handler of each request the parent may send after ``begin``; any other ends the child."""


def _pick(tensors: list[Any], positions: list[list[int]]) -> list[Any]:
    """The elements at ``positions`` (flat indices, one list per tensor), as small tensors."""
    picked = []
    for tensor, where in zip(tensors, positions):
        flat = tensor.detach().reshape(-1)
        index = torch.tensor([p for p in where if 0 <= p < flat.numel()], dtype=torch.int64)
        picked.append(flat[index].clone())
    return picked


def _refill(buffers: list[Any] | None, values: list[Any]) -> list[Any]:
    """``values`` in ``buffers`` when they have the same layout (new values at the same addresses),
    else in fresh copies; the values themselves stay untouched."""
    if buffers is None or not _same_layout(buffers, values):
        return [value.clone() if isinstance(value, torch.Tensor) else value for value in values]
    for position, (buffer, value) in enumerate(zip(buffers, values)):
        if isinstance(buffer, torch.Tensor):
            buffer.copy_(value)
        else:
            buffers[position] = value
    return buffers


def _to_device(values: list[Any], device: str) -> list[Any]:
    """The task's inputs (made on the CPU) where the backend runs; unchanged on the CPU."""
    if device == "cpu":
        return values
    return [value.to(device) if isinstance(value, torch.Tensor) else value for value in values]


def _as_list(output: Any) -> list[Any]:
    return list(output) if isinstance(output, (list, tuple)) else [output]


def _same_layout(a: list[Any], b: list[Any]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if isinstance(x, torch.Tensor) and (x.shape != y.shape or x.dtype != y.dtype):
            return False
    return True


def _check_outputs(outputs: list[Any], device: str) -> str | None:
    """Why ``outputs`` are not plain tensors on ``device`` (where the backend runs), or None."""
    for position, output in enumerate(outputs):
        if type(output) is not torch.Tensor:
            return f"output {position} is a {type(output).__module__}.{type(output).__qualname__}, not a torch.Tensor"
        if output.device.type != device or output.layout != torch.strided:
            return f"output {position} lives on {output.device} with layout {output.layout}"
    return None
