"""The reference side of verification, computed in the parent from the task alone.

Reference outputs for every trial, for the check after timing and for the small-integer probe are
computed here, in pragma's own process, from seeds drawn fresh for each verification
(:func:`fresh_seed`) and sent to the child one request at a time; the child never sees the
references, so nothing it does can change what it is compared against, and it cannot know an input
before it is asked to run on it. :class:`ReferenceModel` computes the reference on any further seed
(the timed calls the parent checks). The preflight asks whether
trivial outputs (zeros, a constant, a copy of the input, or one fixed output whatever the input)
would pass the task at the configured tolerance; where one would, comparisons add a whole-output
relative check. A fixed output that passes means the task is flawed: its result does not depend on
its inputs (:data:`FIXED_OUTPUT`), so a kernel that computes nothing is correct on it (catalogue 32).
Its answer is cached per task, sizes and tolerance.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import time
from pathlib import Path
from typing import Any

import attrs
import torch

from ..machine.timing_slot import timing_slot
from ..paths import cache_dir
from ..records import Category, Task, Timing
from ..tasks.loading import task_namespace, task_program
from .comparison import compare_outputs
from .inputs import construct, make_inputs, make_probe_inputs, trial_seeds
from .settings import VerifySettings
from .timing_statistics import summarize

__all__ = [
    "FIXED_OUTPUT",
    "ReferenceModel",
    "References",
    "compute_references",
    "fresh_seed",
    "preflight",
    "reference_error",
    "preflight_path",
    "reference_timing",
]


FIXED_OUTPUT = "fixed (the task's output is the same whatever its inputs)"
"""The preflight's name for one output returned for every input: when it passes, the task's result
does not depend on its inputs (a flawed task), which every verdict on the task notes."""

_PREFLIGHT_VERSION = 2
"""Part of the preflight cache's key: answers cached before :data:`FIXED_OUTPUT` was asked are
asked again."""


def fresh_seed() -> int:
    """A seed from the operating system's randomness: no program can derive it in advance."""
    return int.from_bytes(os.urandom(8), "little") >> 1


class ReferenceModel:
    """The task's ``Model`` built in this process: inputs and reference outputs for any seed."""

    def __init__(self, task: Task) -> None:
        self.namespace = task_namespace(task)
        with torch.no_grad():
            self.model = construct(self.namespace, self.namespace["Model"])
        self._exact: torch.nn.Module | None = None  # the float64 copy, built when first asked for

    def inputs(self, seed: int) -> list[Any]:
        return make_inputs(self.namespace, seed)

    def outputs(self, seed: int) -> list[torch.Tensor]:
        with torch.no_grad():
            return _run(self.model, self.inputs(seed), keep_inputs=False)

    def rounding_error(self, seed: int, outputs: list[torch.Tensor]) -> float:
        """The whole-output relative error of ``outputs`` (this model's float32 outputs on the
        inputs of ``seed``) against the same program in float64 on those inputs: the worst over the
        float32 outputs, 0 when the program cannot run in float64 or has none."""
        error = 0.0
        try:
            with torch.no_grad():
                if self._exact is None:
                    self._exact = construct(self.namespace, self.namespace["Model"]).double()
                inputs = [
                    t.double() if isinstance(t, torch.Tensor) and t.dtype == torch.float32 else t
                    for t in self.inputs(seed)
                ]
                exact = _run(self._exact, inputs, keep_inputs=False)
            for got, want in zip(outputs, exact):
                if got.dtype == torch.float32 and want.dtype == torch.float64 and got.shape == want.shape:
                    scale = float(torch.linalg.vector_norm(want))
                    if scale > 0 and math.isfinite(scale):
                        error = max(error, float(torch.linalg.vector_norm(got.double() - want)) / scale)
        except Exception:  # noqa: BLE001 - a program that cannot run in float64 gets no allowance
            error = 0.0
        return error if math.isfinite(error) else 0.0

    def inputs_and_outputs(self, seed: int) -> tuple[list[Any], list[torch.Tensor]]:
        """The inputs of ``seed`` as drawn, and the outputs on them, from one draw: drawing costs
        more than copying (torch.randn of 8M values: 43 ms, a copy: 11 ms)."""
        inputs = self.inputs(seed)
        with torch.no_grad():
            return inputs, _run(self.model, inputs, keep_inputs=True)


@attrs.frozen(kw_only=True)
class References:
    """Reference outputs of one verification, with the seeds they came from (``seed`` is the base
    every other seed derives from, recorded so a verification can be repeated)."""

    seed: int
    trial_seeds: tuple[int, ...]
    trials: tuple[list[torch.Tensor], ...]
    post_seed: int
    post: list[torch.Tensor]
    probe_seed: int | None
    probe: list[torch.Tensor] | None
    model: ReferenceModel = attrs.field(repr=False, eq=False)
    call_ms: float = 0.0
    """The reference's forward time here (the fastest trial): what the time limits follow."""
    input_sizes: tuple[int, ...] = ()
    """Elements in each tensor input, in order."""

    def series(self, salt: int) -> random.Random:
        """A further stream of seeds (the timed calls' inputs), derived from ``seed`` and ``salt``."""
        return random.Random(self.seed * 1_000_003 + salt)


def compute_references(task: Task, settings: VerifySettings, *, seed: int | None = None) -> References:
    """References for ``settings.trials`` trials, the check after timing and the probe; seeds derive
    from ``seed`` (default: :func:`fresh_seed`)."""
    base = fresh_seed() if seed is None else seed
    rng = random.Random(base)
    seeds = [rng.randrange(2**31) for _ in range(settings.trials)]
    post_seed, probe_seed = rng.randrange(2**31), rng.randrange(2**31)
    reference = ReferenceModel(task)
    times = []
    trial_outputs = []
    input_sizes: tuple[int, ...] = ()
    with torch.no_grad():
        for seed in seeds:
            inputs = reference.inputs(seed)
            input_sizes = tuple(t.numel() for t in inputs if isinstance(t, torch.Tensor))
            started = time.perf_counter()
            trial_outputs.append(_run(reference.model, inputs, keep_inputs=False))
            times.append((time.perf_counter() - started) * 1e3)
        trials = tuple(trial_outputs)
        post = reference.outputs(post_seed)
        probe = None
        if _probe_applies(task):
            probe_inputs = make_probe_inputs(reference.inputs(seeds[0]), probe_seed)
            probe = _run(reference.model, probe_inputs, keep_inputs=False)
            if not all(_exact_integers(t) for t in probe):
                probe = None
    return References(
        seed=base,
        trial_seeds=tuple(seeds),
        trials=trials,
        post_seed=post_seed,
        post=post,
        probe_seed=probe_seed if probe is not None else None,
        probe=probe,
        model=reference,
        call_ms=min(times),
        input_sizes=input_sizes,
    )


def preflight_path(task: Task, settings: VerifySettings) -> Path:
    """Where the preflight answer for this task, sizes and tolerance is cached."""
    key = hashlib.sha256(
        json.dumps([_PREFLIGHT_VERSION, task_program(task), settings.trials, settings.atol, settings.rtol]).encode()
    ).hexdigest()[:32]
    return cache_dir("preflight") / f"{key}.json"


def preflight(task: Task, references: References, settings: VerifySettings) -> list[str]:
    """Which trivial outputs would pass this task (cached); an empty list means none would."""
    path = preflight_path(task, settings)
    try:
        return list(json.loads(path.read_text())["passing"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    passing = []
    for name, make in _trivial_outputs(references.model.namespace, references):
        outputs = [make(seed, trial) for seed, trial in zip(references.trial_seeds, references.trials)]
        if all(
            got is not None and compare_outputs(got, want, atol=settings.atol, rtol=settings.rtol).ok
            for got, want in zip(outputs, references.trials)
        ):
            passing.append(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"task": task.key, "passing": passing}))
    return passing


def reference_error(task: Task, references: References, settings: VerifySettings) -> float:
    """The reference's own whole-output relative error on trial 0's inputs
    (:meth:`ReferenceModel.rounding_error`, cached per task). A float32 sum of millions of values is
    that far from the exact result."""
    path = preflight_path(task, settings).with_suffix(".rounding.json")
    try:
        return float(json.loads(path.read_text())["reference_error"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    error = references.model.rounding_error(references.trial_seeds[0], references.trials[0])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"task": task.key, "reference_error": error}))
    return error


def reference_timing(task: Task, settings: VerifySettings) -> Timing:
    """The reference alone, timed here with the run's threads: the baseline a run starts from.

    Verdicts time the reference again, interleaved with each candidate; this one is for the record
    of what the machine gave before any attempt.
    """
    namespace = task_namespace(task)
    previous = torch.get_num_threads()
    torch.set_num_threads(settings.thread_count)
    try:
        with torch.no_grad(), timing_slot():
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

    def fixed(_seed: int, _want: list[torch.Tensor]) -> list[torch.Tensor] | None:
        # The first trial's outputs for every trial: with one trial there is nothing to tell.
        return references.trials[0] if len(references.trials) > 1 else None

    return [("zeros", zeros), ("constant", constant), ("input copy", input_copy), (FIXED_OUTPUT, fixed)]


def _run(model: torch.nn.Module, inputs: list[Any], *, keep_inputs: bool) -> list[torch.Tensor]:
    """The model's outputs; on copies of the inputs when the caller keeps them (a reference may
    write into its inputs), else on the inputs themselves."""
    if keep_inputs:
        inputs = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    output = model(*inputs)
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
