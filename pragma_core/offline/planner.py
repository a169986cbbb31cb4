"""The offline planner (tree and beam search): the untried knob moves from one attempt, ranked by
the same evidence the rule-based Conductor reads, each an instruction for one child anchored to the
recipe marker comment that records the module's knobs."""

from __future__ import annotations

import json

from ..records import CompletionRequest
from .coder import recognized
from .conductor import rank_moves, read_evidence
from .knobs import defaults, format_move, knobs_of
from .recipe import RECIPE_MARKER

__all__ = ["plan"]

MAX_INSTRUCTIONS = 4
"""Moves one plan proposes: the most promising few, as a model's plan would be."""


def plan(request: CompletionRequest) -> str:
    """The planner's reply: JSON with the ranked instructions for children of ``request.parent``."""
    task, node = request.task, request.parent
    assert task is not None and node is not None and node.verdict is not None
    recipe, _match, _graph = recognized(task)
    knobs = recipe.knobs
    base = knobs_of(node, recipe.family, knobs) or defaults(knobs)
    tried = [k for k in (knobs_of(a, recipe.family, knobs) for a in (*request.history, node)) if k is not None]
    moves = rank_moves(
        knobs,
        base,
        tried,
        read_evidence(node.profiles, task),
        attainment=node.verdict.attainment if node.verdict.ok else None,
        profiled=bool(node.profiles),
    )
    anchor = f"at the `{RECIPE_MARKER.strip()}` marker comment"
    instructions = [f"{anchor}: {format_move(changes, node.number, reason)}" for changes, reason in moves]
    return "```json\n" + json.dumps({"instructions": instructions[:MAX_INSTRUCTIONS]}, indent=2) + "\n```\n"
