"""The sandbox child: builds a candidate, runs the correctness trials, then times it.

Run as ``python -m pragma_core.verifier.worker JOB_DIR`` by the verifier, never by hand and never in
the parent's process. It writes raw material only (candidate outputs, findings, timing samples);
the parent compares outputs against references it computed itself and reduces the statistics.

Phase 1 (correctness): every trial's forward runs under :class:`ForwardMonitor` (fresh memory
poisoned, PyTorch compute recorded); inputs are checked for mutation, outputs for type and for work
after return; trial 0 runs again under a second poison; a small-integer probe runs where the parent
asks. Then the child waits for one line on stdin: ``go`` to time, anything else to stop.

Phase 2 (timing): reference and candidate interleaved on rotated input sets, each candidate call
checked for a compiled-kernel call; then the outputs on fresh inputs (drift after timing).
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

_clock = time.perf_counter  # bound before any candidate code can replace it
_MIN_REPS = 10  # timed repetitions before the time budget may end timing


def main(job_root: str) -> int:
    import torch

    from .. import native
    from .inputs import construct, make_inputs, make_probe_inputs
    from .instrumentation import (
        POISON_VALUES,
        ForwardMonitor,
        IdentityGuard,
        background_activity,
        child_processes,
        hook_load_inline,
        same_bits,
    )
    from .job import JobFiles

    files = JobFiles(Path(job_root))
    job = files.read_json(files.job)
    assert job is not None, "job.json missing"
    torch.set_num_threads(job["threads"])
    findings: list[dict[str, str]] = []

    def phase(name: str) -> None:
        files.phase.write_text(name)

    def fail(kind: str, message: str, **extra: Any) -> int:
        files.write_json(files.error, {"kind": kind, "message": message, "phase": files.phase.read_text(), **extra})
        return 0

    def finding(check: str, message: str) -> None:
        findings.append({"check": check, "message": message})

    def save(label: str, outputs: list[torch.Tensor]) -> None:
        path = files.output(label)
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save([o.detach() for o in outputs], path)

    # -- the task (trusted) and the candidate (not) ----------------------------------------------
    phase("loading the task")
    task_ns: dict[str, Any] = {"__name__": "pragma_task", "__file__": str(files.task)}
    exec(compile(files.task.read_text(), str(files.task), "exec"), task_ns)

    import torch._dynamo  # noqa: F401 - it wraps torch.manual_seed on import; let that happen first
    import torch.nn.functional as functional

    guard = IdentityGuard(
        {
            "time": vars(time),
            "torch": vars(torch),
            "torch.nn.functional": vars(functional),
            "torch.Tensor": dict(vars(torch.Tensor)),
            "torch.nn.Module": dict(vars(torch.nn.Module)),
            "task": task_ns,
            "Model": dict(vars(task_ns["Model"])),
            "worker": globals(),
        }
    )
    hook_load_inline(native.count_calls)

    phase("building the candidate")
    from ..plugins import get_registry
    from ..records import Candidate

    backend = get_registry().backend(job["backend"])
    candidate = Candidate(source=files.candidate.read_text(), backend=job["backend"])
    try:
        model_new = backend.load(candidate, files.workdir)
    except native.NativeBuildError as error:
        return fail("compile", str(error), diagnostics=error.summary())
    except SyntaxError as error:
        return fail("compile", f"candidate.py:{error.lineno}: syntax error: {error.msg}")
    except MemoryError:
        return fail("out_of_memory", "ran out of memory while building or importing the candidate")
    except BaseException as error:  # noqa: BLE001 - anything the candidate raises is its verdict
        text = _describe(error)
        if "Error building extension" in text:
            return fail("compile", text, diagnostics=_traceback_tail(error))
        return fail("runtime", f"importing the candidate raised {text}", traceback=_traceback_tail(error))
    if not issubclass(model_new, torch.nn.Module):
        return fail("runtime", "the candidate's ModelNew is not a torch.nn.Module")
    if issubclass(model_new, task_ns["Model"]):
        finding("reference-reuse", "ModelNew inherits from the reference Model")

    try:
        phase("constructing the models")
        with torch.no_grad():
            reference = construct(task_ns, task_ns["Model"])
            model = construct(task_ns, model_new)
        if any(isinstance(m, task_ns["Model"]) for m in model.modules()):
            finding("reference-reuse", "ModelNew holds an instance of the reference Model")

        # -- phase 1: correctness ---------------------------------------------------------------
        calls_seen = 0
        ops_seen: dict[str, int] = {}
        previous_inputs: list[torch.Tensor] | None = None
        for trial, seed in enumerate(job["trial_seeds"]):
            phase(f"trial {trial}")
            fresh = make_inputs(task_ns, seed)
            if previous_inputs is not None and trial % 2 == 1 and _same_layout(previous_inputs, fresh):
                for buffer, values in zip(previous_inputs, fresh):  # new values, same addresses
                    buffer.copy_(values)
                inputs = previous_inputs
            else:
                inputs = [t.clone() for t in fresh]
            threads_before, children_before = threading.active_count(), child_processes()
            outputs, elapsed, calls = _monitored_forward(
                model, inputs, POISON_VALUES[0], ops_seen, native, ForwardMonitor
            )
            calls_seen += calls
            problem = _check_outputs(outputs)
            if problem:
                finding("tensor-type", problem)
                break
            for position, (now, before) in enumerate(zip(inputs, fresh)):
                if not same_bits(now, before):
                    finding("input-mutation", f"forward changed input {position} (trial {trial})")
            activity = background_activity(
                outputs,
                threads_before=threads_before,
                children_before=children_before,
                settle_s=min(0.25, max(0.02, 2 * elapsed)),
            )
            if activity:
                finding(*activity)
            save(f"trial{trial}", outputs)
            previous_inputs = inputs
            if findings:
                break

        if not findings:
            phase("trial 0 under a second poison")
            inputs = make_inputs(task_ns, job["trial_seeds"][0])
            outputs, _, _ = _monitored_forward(model, inputs, POISON_VALUES[1], ops_seen, native, ForwardMonitor)
            save("repoisoned", outputs)
            if job.get("probe_seed") is not None:
                phase("exact-arithmetic probe")
                like = make_inputs(task_ns, job["trial_seeds"][0])
                outputs, _, _ = _monitored_forward(
                    model,
                    make_probe_inputs(like, job["probe_seed"]),
                    POISON_VALUES[0],
                    ops_seen,
                    native,
                    ForwardMonitor,
                )
                save("probe", outputs)

        changed = guard.changes()
        if changed:
            finding("harness-patched", "the candidate replaced " + ", ".join(changed[:5]))
        files.write_json(
            files.phase1,
            {
                "findings": findings,
                "compute_ops": ops_seen,
                "native_calls": calls_seen,
            },
        )
        if findings or sys.stdin.readline().strip() != "go":
            return 0

        # -- phase 2: timing --------------------------------------------------------------------
        phase("timing")
        timing = _time_interleaved(task_ns, reference, model, job, native, make_inputs, phase)
        phase("re-checking after timing")
        with torch.no_grad():
            outputs = _as_list(model(*make_inputs(task_ns, job["post_seed"])))
        save("post", outputs)
        changed = guard.changes()
        if changed:
            finding("harness-patched", "the candidate replaced " + ", ".join(changed[:5]))
        files.write_json(files.phase2, {"findings": findings, **timing})
        return 0
    except MemoryError:
        return fail("out_of_memory", f"ran out of memory ({files.phase.read_text()})")
    except BaseException as error:  # noqa: BLE001
        text = _describe(error)
        if "can't allocate memory" in text or "not enough memory" in text:
            return fail("out_of_memory", f"ran out of memory ({files.phase.read_text()}): {text}")
        return fail("runtime", f"{files.phase.read_text()}: forward raised {text}", traceback=_traceback_tail(error))


def _monitored_forward(model, inputs, poison, ops_seen, native, monitor_class):  # noqa: ANN001
    """One untimed forward under the monitor; returns outputs, seconds, native calls."""
    import torch

    monitor = monitor_class(poison)
    calls_before = native.native_call_count()
    start = _clock()
    with torch.no_grad(), monitor:
        outputs = _as_list(model(*inputs))
    elapsed = _clock() - start
    for name, count in monitor.compute_ops.items():
        ops_seen[name] = ops_seen.get(name, 0) + count
    return outputs, elapsed, native.native_call_count() - calls_before


def _time_interleaved(task_ns, reference, model, job, native, make_inputs, phase):  # noqa: ANN001
    """Reference, candidate (and compiled reference) in turn, on rotated input sets."""
    import torch

    sets = [make_inputs(task_ns, seed) for seed in job["timing_seeds"]]
    own_copies = [[t.clone() for t in s] for s in sets]
    contenders: list[tuple[str, Any, list[list[torch.Tensor]]]] = [
        ("reference", reference, sets),
        ("candidate", model, own_copies),
    ]
    if job["baseline"] == "compile":
        phase("compiling the reference with torch.compile")
        compiled = torch.compile(reference)
        contenders.append(("compile", compiled, [[t.clone() for t in s] for s in sets]))
    samples: dict[str, list[float]] = {name: [] for name, _, _ in contenders}
    not_called = 0
    with torch.no_grad():
        warming = _clock()
        for _ in range(max(job["warmup"], 1 if job["baseline"] == "compile" else 0)):
            for index in range(len(sets)):
                for _, runner, inputs in contenders:
                    runner(*inputs[index])
            if _clock() - warming > job["timing_budget_s"] / 4:
                break  # slow contenders: one full pass warms as well as five
        phase("timing")
        started = _clock()
        enough = min(_MIN_REPS, job["reps"])
        for rep in range(job["reps"]):
            index = rep % len(sets)
            for name, runner, inputs in contenders:
                calls_before = native.native_call_count()
                start = _clock()
                runner(*inputs[index])
                samples[name].append((_clock() - start) * 1e3)
                if name == "candidate" and native.native_call_count() == calls_before:
                    not_called += 1
            if rep + 1 >= enough and _clock() - started > job["timing_budget_s"]:
                break
    return {"samples_ms": samples, "uncalled_candidate_runs": not_called, "input_sets": len(sets)}


def _as_list(output: Any) -> list[Any]:
    return list(output) if isinstance(output, (list, tuple)) else [output]


def _same_layout(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and x.dtype == y.dtype for x, y in zip(a, b))


def _check_outputs(outputs: list[Any]) -> str | None:
    import torch

    for position, output in enumerate(outputs):
        if type(output) is not torch.Tensor:
            return f"output {position} is a {type(output).__module__}.{type(output).__qualname__}, not a torch.Tensor"
        if output.device.type != "cpu" or output.layout != torch.strided:
            return f"output {position} lives on {output.device} with layout {output.layout}"
    return None


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
