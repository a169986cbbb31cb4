"""Helpers the offline recipe tests share: write a recipe's module for a task file, check it in this
process the way the sandboxed verifier's correctness phase checks it (fast: no child process, no
second torch import), and run the real sandboxed verifier once per family."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import torch

from pragma_core import Candidate, Task, VerdictStatus, load_task
from pragma_core.native import native_call_count
from pragma_core.offline.graph import trace_reference
from pragma_core.offline.recipe import GenerationContext, Match, Recipe
from pragma_core.tasks.loading import task_namespace
from pragma_core.verifier import VerifySettings, verify
from pragma_core.verifier.comparison import compare_outputs
from pragma_core.verifier.inputs import construct, make_inputs, make_probe_inputs
from pragma_core.verifier.instrumentation import POISON_VALUES, ForwardMonitor, same_bits
from pragma_core.verifier.reference import compute_references, preflight, reference_error
from pragma_core.verifier.static_checks import read_candidate

IN_PROCESS = VerifySettings()
"""The verifier's defaults: 5 trials at atol = rtol = 1e-4."""

SANDBOXED = VerifySettings(threads=2, timeout_s=120, time=False)
"""The real verifier with every integrity check, untimed: at the tests' cache-resident sizes an
honest kernel can beat the DRAM roofline floor, which the timed check would take for skipped work."""


def generated(recipe: Recipe, path: Path, sizes: dict, knobs: dict) -> tuple[Task, Match, str]:
    """The task, the recipe's match (which must exist) and the module written with ``knobs``."""
    task = load_task(path, sizes)
    graph = trace_reference(task)
    match = recipe.match(graph)
    assert match is not None, graph.describe()
    source = recipe.generate(match, knobs, GenerationContext(graph=graph, task_source=task.source, task_key=task.key))
    return task, match, source


def agrees_with_reference(task: Task, source: str) -> None:
    """Fail unless the module computes what the sandboxed verifier's correctness phase demands,
    run here with the verifier's own pieces.

    As in the sandbox: both models are built from the model seed; every trial draws the verifier's
    inputs (the second trial into the first one's buffers) and its output must have the reference's
    shape and dtype and match it (NaN where the reference has NaN, integers exactly, the
    whole-output relative check where trivial outputs would pass); fresh memory is poisoned, so an
    element left unwritten fails, and trial 0 runs again under a second poison and must agree; the
    forward may run no PyTorch compute, must call its compiled kernel and must leave its inputs
    alone; the small-integer probe of linear tasks must match bit for bit; and a fresh draw after
    the trials must match too. What only the sandbox checks (a replaced clock or torch function,
    work after return, started processes, changed harness files) is left to the one sandboxed run
    per family.
    """
    settings = IN_PROCESS
    findings = read_candidate(source)
    assert not (findings.syntax_error or findings.missing_model_new or findings.reference_reuse), findings
    references = compute_references(task, settings)
    relative_norm = bool(preflight(task, references, settings))
    own_error = reference_error(task, references, settings)
    task_ns = task_namespace(task)
    candidate_ns: dict[str, Any] = {"__name__": "candidate"}
    exec(compile(source, "candidate.py", "exec"), candidate_ns)
    with torch.no_grad():
        model = construct(task_ns, candidate_ns["ModelNew"])

    def outputs_on(inputs: list[torch.Tensor], poison: float, label: str) -> list[torch.Tensor]:
        before = [_copy(t) for t in inputs]
        monitor = ForwardMonitor(poison)
        calls = native_call_count()
        with torch.no_grad(), monitor:
            output = model(*inputs)
        assert not monitor.compute_ops, f"{label}: forward ran PyTorch compute {monitor.compute_ops}"
        assert native_call_count() > calls, f"{label}: forward called no compiled kernel"
        assert all(
            same_bits(now, was) if isinstance(now, torch.Tensor) else now == was for now, was in zip(inputs, before)
        ), f"{label}: forward changed its inputs"
        outputs = list(output) if isinstance(output, (list, tuple)) else [output]
        assert all(type(t) is torch.Tensor for t in outputs), f"{label}: outputs are not plain tensors"
        return outputs

    def matches(got: list[torch.Tensor], want: list[torch.Tensor], label: str, poison: float | None, seed: int) -> None:
        result = compare_outputs(
            got,
            want,
            atol=settings.atol,
            rtol=settings.rtol,
            relative_norm=relative_norm,
            poison=poison,
            reference_error=own_error,
            draw_error=lambda: references.model.rounding_error(seed, want),
        )
        assert result.ok, f"{label}: {result.message}"

    previous: list[torch.Tensor] | None = None
    first: list[torch.Tensor] = []
    for trial, (seed, want) in enumerate(zip(references.trial_seeds, references.trials)):
        fresh = make_inputs(task_ns, seed)
        if previous is not None and trial % 2 == 1 and all(_same_shape(a, b) for a, b in zip(previous, fresh)):
            for buffer, values in zip(previous, fresh):  # new values at the previous trial's addresses
                if isinstance(buffer, torch.Tensor):
                    buffer.copy_(values)
            inputs = previous
        else:
            inputs = [_copy(t) for t in fresh]
        got = outputs_on(inputs, POISON_VALUES[0], f"trial {trial}")
        matches(got, want, f"trial {trial}", POISON_VALUES[0], seed)
        if trial == 0:
            first = [t.clone() for t in got]  # a copy, as the sandbox saves it
        previous = inputs

    again = outputs_on(make_inputs(task_ns, references.trial_seeds[0]), POISON_VALUES[1], "trial 0 repoisoned")
    matches(again, references.trials[0], "trial 0 under a second poison", POISON_VALUES[1], references.trial_seeds[0])
    agree = compare_outputs(again, first, atol=settings.atol, rtol=settings.rtol)
    assert agree.ok, f"the same inputs gave other outputs when fresh memory held other values: {agree.message}"
    if references.probe is not None and references.probe_seed is not None:
        like = make_inputs(task_ns, references.trial_seeds[0])
        probe = outputs_on(make_probe_inputs(like, references.probe_seed), POISON_VALUES[0], "probe")
        assert len(probe) == len(references.probe) and all(map(same_bits, probe, references.probe)), (
            "on small-integer inputs the result must be exact"
        )
    post = outputs_on(make_inputs(task_ns, references.post_seed), POISON_VALUES[0], "a fresh draw")
    matches(post, references.post, "a fresh draw after the trials", POISON_VALUES[0], references.post_seed)


def _same_shape(a: Any, b: Any) -> bool:
    return a.shape == b.shape if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) else True


def _copy(item: Any) -> Any:
    """A tensor's copy; a plain value (a float argument) as it is."""
    return item.clone() if isinstance(item, torch.Tensor) else item


def verified_in_sandbox(task: Task, source: str) -> None:
    """Fail unless the real verifier (sandboxed child, every integrity check) says CORRECT."""
    verdict = verify(task, Candidate(source=source, backend="cpu-cpp"), SANDBOXED)
    assert verdict.status is VerdictStatus.CORRECT, verdict.message


def task_file(
    tmp_path: Path, name: str, init: str, forward: str, shape: str | tuple[int, ...] = "(4, 6, 10, 12)"
) -> Path:
    """A small task file in ``tmp_path``: ``init`` is one statement of ``Model.__init__``, ``forward``
    the expression ``forward(x)`` returns, ``shape`` the input's shape (``"(4, 6)"`` or a tuple)."""
    path = tmp_path / f"{name}.py"
    path.write_text(
        textwrap.dedent(f"""\
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                {init}

            def forward(self, x):
                return {forward}


        def get_inputs():
            return [torch.randn{shape}]


        def get_init_inputs():
            return []
        """)
    )
    return path


def unknown_chain(tmp_path: Path) -> Path:
    """A task no recipe knows: a convolution whose channels are then sorted, an operator the fusion
    planner does not place."""
    return task_file(
        tmp_path,
        "conv_then_sort",
        "self.conv = nn.Conv2d(3, 8, 3)",
        "torch.sort(self.conv(x), dim=1).values",
        "(2, 3, 16, 16)",
    )
