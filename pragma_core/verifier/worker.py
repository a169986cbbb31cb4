"""The sandbox child of a verification: builds the candidate, then runs what the parent asks.

Run as ``python -m pragma_core.verifier.worker JOB_DIR`` by the verifier (through
:class:`~pragma_core.sandbox.child_run.ChildSession`), never by hand and never in the parent's process. It
reports over the pipe the parent opened before this program started; it writes no file the parent
reads. It decides nothing: it sends outputs, inputs, its own clock readings and what its monitors
saw, and the parent compares, times and judges.

Requests, one JSON line each on stdin:

- ``begin`` (env, writable, lock_down): the candidate is ready in the job folder. The child may be
  started before the candidate exists, so that Python and torch are imported while the parent does
  other work; until ``begin`` it runs nothing else. Then it takes the build folder's environment
  and, when the sandbox allows (``lock_down``), makes every file system read-only but the
  ``writable`` folders (:func:`pragma_core.sandbox.init.lock_down`) before it reads the task or the
  candidate.
- ``trial`` (seed, poison, reuse, probe_seed): one forward on fresh inputs under the poisoning
  dispatch mode; input mutation, output types and work after return are checked here; replies
  with the outputs.
- ``prepare`` (who, slot, seed): fresh input values for a contender's input slot, before a call.
- ``call`` (who): one forward of ``reference``, ``candidate`` or ``compile`` on its prepared
  inputs; replies with the child's clock reading and the compiled-kernel calls it made.
- ``outputs`` / ``inputs`` (who): the last call's outputs, or its inputs as they are now.
- ``idle`` (profiled): nothing, for the parent to measure the cost of a round trip.
- ``calibrate`` (size): a fixed multithreaded matrix product, which the parent times to see how
  busy the machine is before and after timing.
- ``record`` (seed, folder, program): one warm-up forward, then one under ``record_calls()``,
  saved into ``work/<folder>`` for a profiler's replay (what the profiling child would record,
  without importing torch a second time); with ``program`` (the task at a profiler's smaller
  sizes) the models are built from it and the output is checked against the reference's there
  (``wrong`` says how it differs, and nothing is saved); replies with the number of calls.
- ``finish``: the monitors' last findings; then the child only records for profiling (``record``)
  until its input ends.

Every candidate call, checked or timed, runs inside the same operator recorder (the torch
profiler, which sees ATen calls below Python's dispatch modes); only correctness trials add the
poisoning dispatch mode, and the parent checks timed calls by their outputs, chosen after the call.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

_clock = time.perf_counter  # bound before any candidate code can replace it
_watchers: list[Any] = []  # the audit hook, once installed


def main(job_root: str) -> int:
    from ..sandbox.channel import EVIDENCE_FD_VARIABLE, MessageWriter

    writer = MessageWriter(int(os.environ.pop(EVIDENCE_FD_VARIABLE)))
    try:
        return _serve(Path(job_root), writer)
    except BaseException as error:  # noqa: BLE001 - anything the candidate raises is its verdict
        _report_error(writer, error, "running the candidate")
        return 0


def _serve(root: Path, writer: Any) -> int:
    import json

    _pin_cpus(root)  # before torch starts its thread pool, which inherits the CPU set
    import torch

    from ..backends import torch_device
    from ..errors import PragmaError
    from ..plugin_api.registry import get_registry
    from ..sandbox.child_run import load_candidate, load_task
    from .inputs import construct, make_inputs, make_probe_inputs
    from .instrumentation import (
        POISON_VALUES,
        CandidateAudit,
        ForwardMonitor,
        IdentityGuard,
        OperatorRecorder,
        background_activity,
        child_processes,
        same_bits,
    )

    # Everything above may run before the candidate exists (a child started ahead of its work);
    # nothing below runs before the parent says which candidate and the world is read-only.
    _say_imported(root)
    refused = _begin()
    if refused:
        return _send_error(writer, "sandbox", refused)
    job, task_ns = load_task(root)
    torch.set_num_threads(job["threads"])
    backend = get_registry().backend(job["backend"])
    device = torch_device(backend.execution_device())
    evidence = backend.evidence()
    time_call = backend.clock()  # None: the host clock
    audit = CandidateAudit(writable=[Path(folder) for folder in job.get("writable", [root / "work"])])
    audit.install()
    _watchers.append(audit)

    import torch.nn.functional as functional

    from ..sandbox import channel

    guard = IdentityGuard(
        {
            "time": vars(time),
            "os": vars(os),
            "json": vars(json),
            "torch": vars(torch),
            "torch.nn.functional": vars(functional),
            "torch.Tensor": dict(vars(torch.Tensor)),
            "torch.nn.Module": dict(vars(torch.nn.Module)),
            "task": task_ns,
            "Model": dict(vars(task_ns["Model"])),
            "worker": globals(),
            "channel": vars(channel),
            "channel.MessageWriter": dict(vars(channel.MessageWriter)),
            "writer": vars(writer),
            "evidence": dict(vars(type(evidence))),
        }
    )
    evidence.install()
    threads_at_start = threading.active_count()

    try:
        model_new = load_candidate(root, job)
    except PragmaError as error:  # a backend's build error (NativeBuildError has its diagnostics)
        summary = error.summary() if hasattr(error, "summary") else str(error)
        return _send_error(writer, "compile", str(error), diagnostics=summary)
    except SyntaxError as error:
        return _send_error(writer, "compile", f"candidate.py:{error.lineno}: syntax error: {error.msg}")
    except MemoryError:
        return _send_error(writer, "out_of_memory", "ran out of memory while building or importing the candidate")
    except BaseException as error:  # noqa: BLE001
        text = _describe(error)
        if "Error building extension" in text:
            built = _extension_error(str(error))
            if built is not None:
                return _send_error(writer, "compile", str(built), diagnostics=built.summary())
            return _send_error(writer, "compile", text, diagnostics=_traceback_tail(error))
        return _send_error(
            writer, "runtime", f"importing the candidate raised {text}", traceback=_traceback_tail(error)
        )
    findings: list[dict[str, str]] = []

    def finding(check: str, message: str) -> None:
        findings.append({"check": check, "message": message})

    def reply(event: str, tensors: list[Any] = (), **fields: Any) -> None:  # type: ignore[assignment]
        new = findings + audit.take()
        findings.clear()
        writer.send({"event": event, "findings": new, **fields}, tensors)

    if not (isinstance(model_new, type) and issubclass(model_new, torch.nn.Module)):
        return _send_error(writer, "runtime", "the candidate's ModelNew is not a torch.nn.Module")
    if issubclass(model_new, task_ns["Model"]):
        finding("reference-reuse", "ModelNew inherits from the reference Model")

    with torch.no_grad():
        reference = construct(task_ns, task_ns["Model"]).to(device)
        model = construct(task_ns, model_new).to(device)
    if any(isinstance(m, task_ns["Model"]) for m in model.modules()):
        finding("reference-reuse", "ModelNew holds an instance of the reference Model")
    if threading.active_count() > threads_at_start:
        finding("background-work", "importing or constructing the candidate started a Python thread")
    contenders: dict[str, Any] = {"reference": reference, "candidate": model}
    recorder = OperatorRecorder()

    def stop_recording() -> None:
        recorder.stop()
        if recorder.disabled and not any(item["check"] == "monitor-disabled" for item in findings):
            finding("monitor-disabled", recorder.disabled)
            recorder.disabled = ""

    reply("ready")

    previous_inputs: list[Any] | None = None
    slots: dict[tuple[str, int], list[Any]] = {}
    current: dict[str, list[Any]] = {}
    last_outputs: dict[str, list[Any]] = {}
    generated: tuple[int, list[Any]] | None = None
    calibration: tuple[Any, Any] | None = None
    stdin = sys.stdin.buffer

    while True:
        line = stdin.readline()
        if not line:
            return 0
        request = json.loads(line)
        op = request["op"]

        if op == "trial":
            fresh = make_inputs(task_ns, request["seed"])
            if request.get("probe_seed") is not None:
                fresh = make_probe_inputs(fresh, request["probe_seed"])
            fresh = _to_device(fresh, device)
            inputs = _refill(previous_inputs if request.get("reuse") else None, fresh)
            threads_before, children_before = threading.active_count(), child_processes()
            monitor = ForwardMonitor(POISON_VALUES[request.get("poison", 0)])
            calls_before = evidence.count()
            start = _clock()
            recorder.start()
            try:
                with torch.no_grad(), monitor:
                    outputs = _as_list(model(*inputs))
            finally:
                stop_recording()
            elapsed = _clock() - start
            problem = _check_outputs(outputs, device)
            if problem:
                finding("tensor-type", problem)
                reply("trial", native_calls=evidence.count() - calls_before)
                continue
            for position, (now, before) in enumerate(zip(inputs, fresh)):
                if isinstance(now, torch.Tensor) and not same_bits(now, before):
                    finding("input-mutation", f"forward changed input {position} (trial {request.get('trial')})")
            activity = background_activity(
                outputs,
                threads_before=threads_before,
                children_before=children_before,
                settle_s=min(0.25, max(0.02, 2 * elapsed)),
            )
            if activity:
                finding(*activity)
            previous_inputs = inputs
            reply(
                "trial",
                outputs,
                native_calls=evidence.count() - calls_before,
                compute_ops=recorder.compute_ops,
            )

        elif op == "prepare":
            who, seed = request["who"], request["seed"]
            if generated is None or generated[0] != seed:
                generated = (seed, _to_device(make_inputs(task_ns, seed), device))
            values = generated[1]
            key = (who, int(request.get("slot", 0)))
            current[who] = slots[key] = _refill(slots.get(key), values)
            reply("prepared")

        elif op == "call":
            who = request["who"]
            if who == "compile" and "compile" not in contenders:
                contenders["compile"] = torch.compile(reference)
            runner, inputs = contenders[who], current[who]
            calls_before = evidence.count()
            # The parent's clock runs from this request to the reply: what the worker does for
            # itself (ending the recorder's session, freeing the previous outputs) comes after.
            threads_before = threading.active_count()
            if who == "candidate":
                recorder.start()
            with torch.no_grad():
                if time_call is None:
                    start = _clock()
                    outputs = runner(*inputs)
                    elapsed_ms = (_clock() - start) * 1e3
                else:
                    outputs, elapsed_ms = time_call(functools.partial(runner, *inputs))
            reply("called", ms=elapsed_ms, native_calls=evidence.count() - calls_before)
            if who == "candidate":
                stop_recording()
                if threading.active_count() > threads_before:
                    finding("background-work", "a timed forward started a Python thread that is still running")
            last_outputs[who] = _as_list(outputs)

        elif op == "outputs":
            outputs = last_outputs.get(request["who"], [])
            problem = _check_outputs(outputs, device)
            if problem:
                finding("tensor-type", problem)
                reply("outputs")
            else:
                reply("outputs", outputs)

        elif op == "sample":
            # A few elements of the last call's outputs and inputs of each contender, at positions
            # the parent chose after the call: every timed call is checked this way.
            # Inputs are compared with the values generated for the call, which nothing touched.
            tensors = []
            pristine = generated[1] if generated is not None else []
            for who, inputs in (("reference", pristine), ("candidate", current.get("candidate", []))):
                outputs = last_outputs.get(who, [])
                problem = _check_outputs(outputs, device)
                if problem:
                    finding("tensor-type", problem)
                    break
                tensors += _pick(outputs, request["outputs"])
                tensors += _pick([t for t in inputs if isinstance(t, torch.Tensor)], request["inputs"])
            reply("sample", tensors)

        elif op == "inputs":
            reply("inputs", [t for t in current.get(request["who"], []) if isinstance(t, torch.Tensor)])

        elif op == "idle":
            if request.get("profiled"):
                recorder.start()
            start = _clock()
            elapsed = _clock() - start
            reply("idle", ms=elapsed * 1e3)
            if request.get("profiled"):
                stop_recording()

        elif op == "calibrate":
            if calibration is None:
                numbers, size = torch.Generator().manual_seed(0), int(request["size"])
                calibration = (torch.rand(size, size, generator=numbers),) * 2
            torch.mm(*calibration)
            reply("calibrated")

        elif op == "record":
            # At the task's sizes, or at a profiler's smaller ones (``program``: the task's program
            # with other size constants), where the output is checked against the reference's:
            # a candidate that assumes the task's own sizes computes something else there.
            sized_ns, sized_model, sized_reference = task_ns, model, None
            from .comparison import output_difference  # here: only a recording depends on it

            if request.get("program"):
                sized_ns = {"__name__": "pragma_task", "__file__": str(root / "task.py")}
                exec(compile(request["program"], str(root / "task.py"), "exec"), sized_ns)
                with torch.no_grad():
                    sized_model = construct(sized_ns, model_new)
                    sized_reference = construct(sized_ns, sized_ns["Model"])
            recorded_inputs = make_inputs(sized_ns, request["seed"])
            originals = [t.clone() if isinstance(t, torch.Tensor) else t for t in recorded_inputs]
            if not backend.records_calls:
                reply("recorded", calls=0, wrong="")
                continue
            from ..backends.cpu_cpp.native import record_calls

            with torch.no_grad():
                sized_model(*recorded_inputs)  # lazy builds and first touch happen outside the recording
                with record_calls() as recording:
                    outputs = sized_model(*recorded_inputs)
                wrong = output_difference(outputs, sized_reference(*originals)) if sized_reference else ""
            if wrong:
                reply("recorded", calls=0, wrong=wrong)
                continue
            recording.save(root / "work" / str(request.get("folder") or "recording"))
            reply("recorded", calls=len(recording.calls))

        elif op == "finish":
            # Exit handlers (atexit, weakref.finalize) run now, while the audit hook can still
            # report what they do: a handler that writes outside the folders is caught here.
            import atexit

            atexit._run_exitfuncs()
            changed = guard.changes()
            if changed:
                finding("harness-patched", "the candidate replaced " + ", ".join(changed[:5]))
            if child_processes():
                finding("spawned-process", f"the candidate started {len(child_processes())} process(es)")
            reply("finished", compute_ops=recorder.compute_ops)
            # Only recordings for profiling may follow; the verdict's checks are done.

        else:
            return _send_error(writer, "runtime", f"unknown request {op!r}")


def _say_imported(root: Path) -> None:
    """Leave the marker that tells the parent the imports are done (it holds the machine's timing
    slot for a child started ahead until then)."""
    from ..sandbox.child_run import IMPORTED_MARKER

    with contextlib.suppress(OSError):
        (root / IMPORTED_MARKER).touch()


def _begin() -> str:
    """Wait for the parent's ``begin`` (its candidate is written by then), take the build folder's
    environment it sends, and make the file systems read-only but the job's folders when the parent
    says the sandbox can. Returns what went wrong, or an empty string."""
    import json
    import tempfile

    from ..sandbox.init import SetupFailed, lock_down

    line = sys.stdin.buffer.readline()
    request = json.loads(line) if line.strip() else {}
    if request.get("op") != "begin":
        return f"expected the parent's begin, got {line[:80]!r}"
    os.environ.update({str(key): str(value) for key, value in (request.get("env") or {}).items()})
    tempfile.tempdir = None  # TMPDIR is the build folder's now
    if not request.get("lock_down"):
        return ""
    try:
        lock_down([str(folder) for folder in request.get("writable") or []])
    except SetupFailed as failure:
        return f"the sandbox could not make the file systems read-only: {failure}"
    return ""


def _pin_cpus(root: Path) -> None:
    """Run on the job's CPU set, when it names one (the verifier's choice of idle CPUs)."""
    import json

    cpus = json.loads((root / "job.json").read_text()).get("cpus")
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cpus)


def _pick(tensors: list[Any], positions: list[list[int]]) -> list[Any]:
    """The elements at ``positions`` (flat indices, one list per tensor), as small tensors."""
    import torch

    picked = []
    for tensor, where in zip(tensors, positions):
        flat = tensor.detach().reshape(-1)
        index = torch.tensor([p for p in where if 0 <= p < flat.numel()], dtype=torch.int64)
        picked.append(flat[index].clone())
    return picked


def _refill(buffers: list[Any] | None, values: list[Any]) -> list[Any]:
    """``values`` in ``buffers`` when they have the same layout (new values at the same addresses),
    else in fresh copies; the values themselves stay untouched."""
    import torch

    if buffers is None or not _same_layout(buffers, values):
        return [value.clone() if isinstance(value, torch.Tensor) else value for value in values]
    for position, (buffer, value) in enumerate(zip(buffers, values)):
        if isinstance(buffer, torch.Tensor):
            buffer.copy_(value)
        else:
            buffers[position] = value
    return buffers


def _send_error(writer: Any, kind: str, message: str, **extra: Any) -> int:
    """Report an error, with what the audit hook saw first: a write outside the folders that then
    failed is the finding, not the exception it caused."""
    findings = [finding for audit in _watchers for finding in audit.take()]
    writer.send({"event": "error", "kind": kind, "message": message, "findings": findings, **extra})
    return 0


def _report_error(writer: Any, error: BaseException, where: str) -> None:
    text = _describe(error)
    if isinstance(error, MemoryError) or "can't allocate memory" in text or "not enough memory" in text:
        _send_error(writer, "out_of_memory", f"ran out of memory ({where}): {text}")
    else:
        _send_error(writer, "runtime", f"forward raised {text}", traceback=_traceback_tail(error))


def _to_device(values: list[Any], device: str) -> list[Any]:
    """The task's inputs (made on the CPU) where the backend runs; unchanged on the CPU."""
    if device == "cpu":
        return values
    import torch

    return [value.to(device) if isinstance(value, torch.Tensor) else value for value in values]


def _as_list(output: Any) -> list[Any]:
    return list(output) if isinstance(output, (list, tuple)) else [output]


def _same_layout(a: list[Any], b: list[Any]) -> bool:
    import torch

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
    import torch

    for position, output in enumerate(outputs):
        if type(output) is not torch.Tensor:
            return f"output {position} is a {type(output).__module__}.{type(output).__qualname__}, not a torch.Tensor"
        if output.device.type != device or output.layout != torch.strided:
            return f"output {position} lives on {output.device} with layout {output.layout}"
    return None


def _extension_error(message: str) -> Any:
    """torch's extension build failure as a :class:`~pragma_core.native.NativeBuildError` with the
    compiler's diagnostics (nvcc's, gcc's or clang's), or None when none can be read."""
    from ..backends.cpu_cpp.native.diagnostics import extension_build_error
    from ..backends.cuda.diagnostics import parse_nvcc_diagnostics

    return extension_build_error(message, parse_nvcc_diagnostics)


def _describe(error: BaseException) -> str:
    text = " ".join(str(error).split())
    if len(text) > 1500:
        text = text[:1500] + " ..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _traceback_tail(error: BaseException) -> str:
    lines = traceback.format_exception(type(error), error, error.__traceback__)
    return "".join(lines)[-3000:]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
