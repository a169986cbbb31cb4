"""Helpers the offline recipe tests share: write a recipe's module for a task file, and run it
next to the reference on the task's own inputs (a quick check besides the sandboxed verifier)."""

from __future__ import annotations

from pathlib import Path

import torch

from pragma_core import Task, load_task
from pragma_core.offline.graph import trace_reference
from pragma_core.offline.recipe import GenerationContext, Match, Recipe
from pragma_core.tasks import task_namespace


def generated(recipe: Recipe, path: Path, sizes: dict, knobs: dict) -> tuple[Task, Match, str]:
    """The task, the recipe's match (which must exist) and the module written with ``knobs``."""
    task = load_task(path, sizes)
    graph = trace_reference(task)
    match = recipe.match(graph)
    assert match is not None, graph.describe()
    source = recipe.generate(match, knobs, GenerationContext(graph=graph, task_source=task.source, task_key=task.key))
    return task, match, source


def agrees_with_reference(task: Task, source: str) -> None:
    """Run the module here on two input draws; its output must match the reference's at 1e-4
    (integers exactly)."""
    task_ns = task_namespace(task)
    candidate_ns: dict = {}
    exec(compile(source, "candidate.py", "exec"), candidate_ns)
    init = task_ns["get_init_inputs"]()
    for seed in (0, 1):
        torch.manual_seed(seed)
        inputs = task_ns["get_inputs"]()
        want = task_ns["Model"](*init)(*inputs)
        got = candidate_ns["ModelNew"](*init)(*inputs)
        assert got.shape == want.shape and got.dtype == want.dtype
        assert torch.allclose(got, want, atol=1e-4, rtol=1e-4) if got.is_floating_point() else torch.equal(got, want)
