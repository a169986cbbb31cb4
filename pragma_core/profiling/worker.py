"""The profiling child: records a candidate's native calls, or runs forwards for a profiler to watch.

    python -m pragma_core.profiling.worker record JOB_DIR     # one forward under record_calls()
    python -m pragma_core.profiling.worker run JOB_DIR REPS   # REPS forwards after a warm-up

``JOB_DIR`` holds ``task.py``, ``job.json`` and, when a candidate is profiled, ``candidate.py``;
they are loaded as the verifier's child loads them (:mod:`pragma_core.child_run`). Candidate code
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


def _setup(job_dir: Path) -> tuple[Any, list[Any]]:
    import torch

    from ..child_run import load_candidate, load_task
    from ..verifier.inputs import construct, make_inputs, trial_seeds

    job, namespace = load_task(job_dir)
    torch.set_num_threads(job["threads"])
    model_class = namespace["Model"]
    if (job_dir / "candidate.py").exists():
        model_class = load_candidate(job_dir, job)
    device = job.get("device", "cpu")
    model = construct(namespace, model_class)
    inputs = make_inputs(namespace, trial_seeds(1)[0])
    if device == "cuda":
        model, inputs = model.cuda(), [t.cuda() for t in inputs]
    return model, inputs


def record(job_dir: Path) -> int:
    import torch

    from ..native import record_calls

    model, inputs = _setup(job_dir)
    with torch.no_grad():
        model(*inputs)  # warm-up: lazy builds and first-touch happen outside the recording
        with record_calls() as recording:
            model(*inputs)
    recording.save(job_dir / "recording")
    return 0


def run(job_dir: Path, repetitions: int) -> int:
    import torch

    model, inputs = _setup(job_dir)
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
    sys.exit(record(job) if mode == "record" else run(job, int(sys.argv[3])))
