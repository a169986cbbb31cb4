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
- ``call`` (who): one forward of ``reference``, ``candidate``, ``best`` or ``compile`` on its prepared
  inputs; replies with the child's clock reading and the compiled-kernel calls it made.
- ``outputs`` / ``inputs`` (who): the last call's outputs, or its inputs as they are now.
- ``idle`` (profiled): nothing, for the parent to measure the cost of a round trip.
- ``calibrate`` (size): a fixed multithreaded matrix product, which the parent times to see how
  busy the machine is before and after timing.
- ``probe_memory`` (bytes): a copy between two buffers of that size (beyond the last-level cache),
  which the parent times to see the memory bandwidth before and after timing.
- ``record`` (seed, folder, program): one warm-up forward, then one recorded by the backend's
  replay (``Backend.replay.record()``), saved into ``work/<folder>`` for a profiler's replay (what
  the profiling child would record, without importing torch a second time); with ``program`` (the
  task at a profiler's smaller sizes) the models are built from it and the output is checked
  against the reference's there (``wrong`` says how it differs, and nothing is saved); replies
  with the number of calls and ``saved`` when it saved them. A backend without a replay records
  nothing.
- ``fingerprint``: the fingerprint of the machine code the candidate runs (``machine_code``, None
  where its backend cannot say: ``Backend.machine_code``), asked after the correctness trials.
- ``incumbent`` (source, backend, env): load the loop's best beside the candidate, with ``env``
  set while it loads (its build folder, read only), as the contender ``best`` of ``call``;
  replies ``loaded`` or why not (``error``), which only costs the verdict its head-to-head.
- ``finish``: the monitors' last findings; then the child only records for profiling (``record``)
  until its input ends.

Each request after ``begin`` is handled by its entry in
:data:`~pragma_core.verifier._worker_operations.OPERATIONS`, imported with torch before the candidate
exists.

Every candidate call, checked or timed, runs inside the same operator recorder (the torch
profiler, which sees ATen calls below Python's dispatch modes); only correctness trials add the
poisoning dispatch mode, and the parent checks timed calls by their outputs, chosen after the call.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

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
    from . import _worker_operations as worker_operations
    from .inputs import construct
    from .instrumentation import CandidateAudit

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

    guard = _identity_guard(task_ns, writer, evidence)
    evidence.install()
    threads_at_start = threading.active_count()

    # before the candidate loads: what it then builds and maps is its machine code
    watch = backend.machine_code() if backend.machine_code is not None else None
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
        kind, message, extra = _import_failure(error)
        return _send_error(writer, kind, message, **extra)
    report = worker_operations.Reporter(writer, audit)
    if not (isinstance(model_new, type) and issubclass(model_new, torch.nn.Module)):
        return _send_error(writer, "runtime", "the candidate's ModelNew is not a torch.nn.Module")
    if issubclass(model_new, task_ns["Model"]):
        report.finding("reference-reuse", "ModelNew inherits from the reference Model")

    with torch.no_grad():
        reference = construct(task_ns, task_ns["Model"]).to(device)
        model = construct(task_ns, model_new).to(device)
    if any(isinstance(m, task_ns["Model"]) for m in model.modules()):
        report.finding("reference-reuse", "ModelNew holds an instance of the reference Model")
    if threading.active_count() > threads_at_start:
        report.finding("background-work", "importing or constructing the candidate started a Python thread")
    child = worker_operations.ChildState(
        root=root,
        task_ns=task_ns,
        backend=backend,
        device=device,
        evidence=evidence,
        time_call=time_call,
        guard=guard,
        report=report,
        model_new=model_new,
        reference=reference,
        model=model,
    )
    if watch is not None:
        source = (root / "candidate.py").read_text()
        child.fingerprint = lambda: watch(source)
    report.reply("ready")
    operations = worker_operations.OPERATIONS
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line:
            return 0
        request = json.loads(line)
        operation = operations.get(request["op"])
        if operation is None:
            return _send_error(writer, "runtime", f"unknown request {request['op']!r}")
        operation(child, request)


def _identity_guard(task_ns: dict[str, Any], writer: Any, evidence: Any) -> Any:
    """What the candidate must not replace, watched by identity until ``finish``: the modules and
    clocks the worker reads, torch's functions, the task's, the worker's own, the report channel's
    and the backend's evidence. Built before the candidate is imported."""
    import json

    import torch
    import torch.nn.functional as functional

    from ..sandbox import channel
    from . import _worker_operations as worker_operations
    from .instrumentation import IdentityGuard

    return IdentityGuard(
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
            "worker_operations": vars(worker_operations),
            "worker_operations.OPERATIONS": worker_operations.OPERATIONS,
            "channel": vars(channel),
            "channel.MessageWriter": dict(vars(channel.MessageWriter)),
            "writer": vars(writer),
            "evidence": dict(vars(type(evidence))),
        }
    )


def _import_failure(error: BaseException) -> tuple[str, str, dict[str, str]]:
    """The kind, message and details of the error to report for a candidate whose import or build
    raised ``error`` (other than a backend's build error, a syntax error or running out of memory):
    torch's extension build failures are compile errors with the compiler's diagnostics."""
    text = _describe(error)
    if "Error building extension" in text:
        built = _extension_error(str(error))
        if built is not None:
            return "compile", str(built), {"diagnostics": built.summary()}
        return "compile", text, {"diagnostics": _traceback_tail(error)}
    return "runtime", f"importing the candidate raised {text}", {"traceback": _traceback_tail(error)}


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
