"""The profiling child: records a candidate's native calls, or runs forwards for a profiler to watch.

    python -m pragma_core.profiling.worker record JOB_DIR FOLDER   # one forward recorded into FOLDER
    python -m pragma_core.profiling.worker run JOB_DIR REPS   # REPS forwards after a warm-up

``JOB_DIR`` holds ``task.py``, ``job.json`` and, when a candidate is profiled, ``candidate.py``;
they are loaded as the verifier's child loads them (:mod:`pragma_core.sandbox.child_run`). Candidate code
runs only here, in a child the parent started in the sandbox (``record``) or under a profiler
(``run``), contained the same way. On a GPU the timed forwards sit inside the NVTX range ``pragma_forward``, which
ncu and rocprof filter on.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

NVTX_RANGE = "pragma_forward"
WRONG_AT_THIS_SIZE = 3
"""``record``'s exit code when the candidate's output differs from the reference's at the sizes
profiled (the reason is the last line of its stderr)."""


def _setup(job_dir: Path) -> tuple[Any, list[Any], dict[str, Any], dict[str, Any]]:
    import torch

    from ..sandbox.child_run import load_candidate, load_task
    from ..verifier.inputs import construct, make_inputs, trial_seeds

    job, namespace = load_task(job_dir)
    torch.set_num_threads(job["threads"])
    model_class = namespace["Model"]
    if (job_dir / "candidate.py").exists():
        model_class = load_candidate(job_dir, job)
    device = job.get("device", "cpu")
    model = construct(namespace, model_class)
    inputs = make_inputs(namespace, trial_seeds(1)[0])
    if device in ("cuda", "rocm"):  # a ROCm GPU is a cuda device to torch
        model, inputs = model.cuda(), [t.cuda() for t in inputs]
    return model, inputs, namespace, job


def record(job_dir: Path, folder: Path) -> int:
    """One forward of the candidate recorded by its backend's replay (``Backend.replay.record``)
    into ``folder``, after a warm-up, if its output is right at these sizes."""
    import torch

    from ..plugin_api.registry import get_registry
    from ..verifier.comparison import output_difference
    from ..verifier.inputs import construct

    model, inputs, namespace, job = _setup(job_dir)
    replay = get_registry().backend(job["backend"]).replay
    assert replay is not None, "only a backend with a replay records"
    originals = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    with torch.no_grad():
        model(*inputs)  # warm-up: lazy builds and first-touch happen outside the recording
        with replay.record() as recording:
            outputs = model(*inputs)
        expected = construct(namespace, namespace["Model"])(*originals)
    # The verifier checked the candidate at the task's sizes; a profile may be taken at smaller
    # ones, where a candidate that assumes the task's own sizes computes something else.
    wrong = output_difference(outputs, expected)
    if wrong:
        print(
            f"at the sizes profiled, the candidate's output differs from the reference's ({wrong}); a candidate "
            "that assumes the task's own sizes must be profiled at them (pragma profile --full-size)",
            file=sys.stderr,
        )
        return WRONG_AT_THIS_SIZE
    recording.save(folder)
    return 0


def run(job_dir: Path, repetitions: int) -> int:
    import torch

    model, inputs, _namespace, _job = _setup(job_dir)
    cuda = torch.cuda.is_available() and any(t.is_cuda for t in inputs)
    marker = torch.cuda.nvtx.range(NVTX_RANGE) if cuda else contextlib.nullcontext()
    with torch.no_grad():
        for _ in range(2):
            model(*inputs)
        if cuda:
            torch.cuda.synchronize()
        with marker:
            for _ in range(repetitions):
                model(*inputs)
            if cuda:
                torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    mode, job = sys.argv[1], Path(sys.argv[2])
    sys.exit(record(job, Path(sys.argv[3])) if mode == "record" else run(job, int(sys.argv[3])))
