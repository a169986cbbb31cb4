"""The reference side of verification, computed in the parent from the task alone.

Reference outputs for every trial, for the check after timing and for the small-integer probe are
computed here, in pragma's own process, from the same seeds the sandbox child uses; the child never
sees them, so nothing it does can change what it is compared against. The preflight asks whether
trivial outputs (zeros, a constant, a copy of the input) would pass the task at the configured
tolerance; where one would, comparisons add a whole-output relative check. Its answer is cached per
task, sizes and tolerance.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import attrs
import torch

from ..paths import cache_dir
from ..records import Category, Task, Timing
from ..statistics import summarize
from ..tasks import task_namespace, task_program
from .comparison import compare_outputs
from .inputs import construct, make_inputs, make_probe_inputs, trial_seeds
from .settings import VerifySettings

__all__ = ["References", "compute_references", "preflight", "reference_timing"]


@attrs.frozen(kw_only=True)
class References:
    trial_seeds: tuple[int, ...]
    trials: tuple[list[torch.Tensor], ...]
    post_seed: int
    post: list[torch.Tensor]
    probe_seed: int | None
    probe: list[torch.Tensor] | None
    timing_seeds: tuple[int, ...]


def compute_references(task: Task, settings: VerifySettings, *, input_sets: int) -> References:
    namespace = task_namespace(task)
    seeds = trial_seeds(settings.trials)
    (post_seed,) = trial_seeds(1, salt=1)
    (probe_seed,) = trial_seeds(1, salt=2)
    with torch.no_grad():
        model = construct(namespace, namespace["Model"])
        trials = tuple(_run(model, make_inputs(namespace, seed)) for seed in seeds)
        post = _run(model, make_inputs(namespace, post_seed))
        probe = None
        if _probe_applies(task):
            probe = _run(model, make_probe_inputs(make_inputs(namespace, seeds[0]), probe_seed))
            if not all(_exact_integers(t) for t in probe):
                probe = None
    return References(
        trial_seeds=tuple(seeds),
        trials=trials,
        post_seed=post_seed,
        post=post,
        probe_seed=probe_seed if probe is not None else None,
        probe=probe,
        timing_seeds=tuple(trial_seeds(input_sets, salt=3)),
    )


def preflight(task: Task, references: References, settings: VerifySettings) -> list[str]:
    """Which trivial outputs would pass this task (cached); an empty list means none would."""
    key = hashlib.sha256(
        json.dumps([task_program(task), settings.trials, settings.atol, settings.rtol]).encode()
    ).hexdigest()[:32]
    path = cache_dir("preflight") / f"{key}.json"
    try:
        return list(json.loads(path.read_text())["passing"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    namespace = task_namespace(task)
    passing = []
    for name, make in _trivial_outputs(namespace, references):
        outputs = [make(seed, trial) for seed, trial in zip(references.trial_seeds, references.trials)]
        if all(
            got is not None and compare_outputs(got, want, atol=settings.atol, rtol=settings.rtol).ok
            for got, want in zip(outputs, references.trials)
        ):
            passing.append(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"task": task.key, "passing": passing}))
    return passing


def reference_timing(task: Task, settings: VerifySettings) -> Timing:
    """The reference alone, timed here with the run's threads: the baseline a run starts from.

    Verdicts time the reference again, interleaved with each candidate; this one is for the record
    of what the machine gave before any attempt.
    """
    import time

    namespace = task_namespace(task)
    previous = torch.get_num_threads()
    torch.set_num_threads(settings.threads)
    try:
        with torch.no_grad():
            model = construct(namespace, namespace["Model"])
            inputs = make_inputs(namespace, trial_seeds(1, salt=3)[0])
            for _ in range(max(settings.warmup, 1)):
                model(*inputs)
            samples = []
            for _ in range(settings.reps):
                start = time.perf_counter()
                model(*inputs)
                samples.append((time.perf_counter() - start) * 1e3)
    finally:
        torch.set_num_threads(previous)
    return summarize(samples)


def _trivial_outputs(namespace: dict[str, Any], references: References):  # noqa: ANN202
    def zeros(_seed: int, want: list[torch.Tensor]) -> list[torch.Tensor]:
        return [torch.zeros_like(t) for t in want]

    def constant(_seed: int, want: list[torch.Tensor]) -> list[torch.Tensor]:
        return [torch.full_like(t, t.double().mean().item() if t.is_floating_point() else 0) for t in want]

    def input_copy(seed: int, want: list[torch.Tensor]) -> list[torch.Tensor] | None:
        first = make_inputs(namespace, seed)[0]
        if len(want) != 1 or first.shape != want[0].shape or first.dtype != want[0].dtype:
            return None
        return [first]

    return [("zeros", zeros), ("constant", constant), ("input copy", input_copy)]


def _run(model: torch.nn.Module, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    output = model(*[t.clone() for t in inputs])
    return list(output) if isinstance(output, (list, tuple)) else [output]


def _probe_applies(task: Task) -> bool:
    """Linear tasks without parameters: small-integer inputs give exact results."""
    analysis = task.analysis
    return task.category is Category.MATMUL and analysis is not None and analysis.parameter_bytes == 0


def _exact_integers(tensor: torch.Tensor) -> bool:
    if not tensor.is_floating_point():
        return True
    finite = bool(tensor.isfinite().all())
    return finite and bool(torch.equal(tensor, tensor.round())) and float(tensor.abs().max()) < 2**24
