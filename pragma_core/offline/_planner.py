"""The offline planner (tree and beam search): the untried knob moves from one attempt, ranked by
the same evidence the rule-based Conductor reads and then by what the same move did elsewhere in the
tree, each an instruction for one child anchored to the recipe marker comment that records the
module's knobs."""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from ..records import Attempt, CompletionRequest, attempt_speed
from .coder import recognized
from .conductor import rank_moves, read_evidence
from .knobs import defaults, format_move, knobs_of
from .recipe import RECIPE_MARKER, Knob

__all__ = ["plan", "move_outcomes", "HELPED", "HURT"]

MAX_INSTRUCTIONS = 4
"""Moves one plan proposes: the most promising few, as a model's plan would be."""

HELPED, HURT = 1.03, 0.97
"""A move whose children ran this much faster (slower) than their parents, in the geometric mean
of the medians, goes first (last) in a plan."""


def plan(request: CompletionRequest) -> str:
    """The planner's reply: JSON with the ranked instructions for children of ``request.parent``."""
    task, node = request.task, request.parent
    assert task is not None and node is not None and node.verdict is not None
    recipe, _match, _graph = recognized(task)
    knobs = recipe.knobs
    base = knobs_of(node, recipe.family, knobs) or defaults(knobs)
    attempts = [a for a in request.history if a.number != node.number] + [node]
    tried = [k for k in (knobs_of(a, recipe.family, knobs) for a in attempts) if k is not None]
    moves = rank_moves(
        knobs,
        base,
        tried,
        read_evidence(node.profiles, task),
        attainment=node.verdict.attainment if node.verdict.ok else None,
        profiled=bool(node.profiles),
    )
    moves = _by_tree_evidence(moves, move_outcomes(attempts, recipe.family, knobs))
    anchor = f"at the `{RECIPE_MARKER.strip()}` marker comment"
    instructions = [f"{anchor}: {format_move(changes, node.number, reason)}" for changes, reason in moves]
    return "```json\n" + json.dumps({"instructions": instructions[:MAX_INSTRUCTIONS]}, indent=2) + "\n```\n"


def move_outcomes(
    attempts: Sequence[Attempt], family: str, knobs: Mapping[str, Knob]
) -> dict[frozenset, list[tuple[float, int, int]]]:
    """What each knob move did where a child made it: (the child's median speedup over its parent's,
    child, parent) by the move's changes; a child that failed counts as 0."""
    by_number = {attempt.number: attempt for attempt in attempts}
    outcomes: dict[frozenset, list[tuple[float, int, int]]] = {}
    for child in attempts:
        parent = by_number.get(child.parent) if child.parent is not None else None
        if parent is None or not attempt_speed(parent) or child.verdict is None:
            continue
        before, after = knobs_of(parent, family, knobs), knobs_of(child, family, knobs)
        if before is None or after is None:
            continue
        changes = frozenset((name, value) for name, value in after.items() if before.get(name) != value)
        if changes:
            ratio = attempt_speed(child) / attempt_speed(parent) if child.verdict.ok else 0.0
            outcomes.setdefault(changes, []).append((ratio, child.number, parent.number))
    return outcomes


def _by_tree_evidence(
    moves: list[tuple[dict[str, Any], str]], outcomes: Mapping[frozenset, list[tuple[float, int, int]]]
) -> list[tuple[dict[str, Any], str]]:
    """The moves that helped elsewhere first, those that hurt or failed last, each with what it did."""
    helped, neutral, hurt = [], [], []
    for changes, reason in moves:
        seen = outcomes.get(frozenset(changes.items()))
        if not seen:
            neutral.append((changes, reason))
            continue
        ratios = [r for r, _, _ in seen]
        ratio = 0.0 if 0.0 in ratios else statistics.geometric_mean(ratios)
        _, child, parent = seen[-1]
        if ratio == 0.0:
            hurt.append((changes, f"{reason}; it failed when attempt {child} made it on attempt {parent}"))
        elif ratio >= HELPED:
            helped.append((changes, f"{reason}; it made attempt {child} {ratio - 1:.0%} faster than attempt {parent}"))
        elif ratio <= HURT:
            hurt.append((changes, f"{reason}; it made attempt {child} {1 - ratio:.0%} slower than attempt {parent}"))
        else:
            neutral.append((changes, reason))
    return helped + neutral + hurt
