"""Which attempts the loop builds on next: search strategies over the tree of attempts.

Every attempt names its parent, the attempt whose code its Coder changed, so a run's attempts form
a tree (:class:`SearchTree`). Each round a strategy picks the parents of the next attempts; in a
tree or beam search each child applies one untried instruction of its parent's plan (the
planner's ranked changes), so siblings try different changes of the same code.

- ``linear``: the loop as the PRAGMA paper runs it, one chain: every attempt changes the last one,
  following the Conductor's whole advice. The default.
- ``tree``: adaptive epsilon-greedy. Mostly the fastest open node gets ``branching`` children;
  with probability epsilon another open node does, a promising one (its timing's interval reaches
  :data:`PROMISING` of the fastest attempt's speedup: the timing cannot rule out that it is about
  as fast). Epsilon starts at :data:`EPSILON` and shrinks as rounds pass without a better best, so
  a search that stopped finding better code spends its remaining budget on the best. The search
  ends when no promising node is open, as the linear loop ends when no move from its best is left.
- ``beam``: each round one child for each of the ``branching`` fastest open nodes.

A node is open while it is correct and its plan (once asked for) still has an instruction none of
its children applied. Until some attempt is correct, tree and beam take linear steps: the Coder
repairs the last attempt from the Conductor's advice.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Protocol

import attrs

from ..errors import PragmaError
from ..records import AgentRole, Attempt, VerdictStatus, attempt_speed, frozen_tuple

__all__ = [
    "SEARCHES",
    "EPSILON",
    "PROMISING",
    "Step",
    "SearchTree",
    "SearchStrategy",
    "strategy_named",
    "round_seed",
]

SEARCHES = ("linear", "tree", "beam")
"""The built-in strategies, by the name ``--search`` takes."""

EPSILON = 0.3
"""The tree search's chance, in its first round, of expanding a node other than the fastest."""

PROMISING = 0.9
"""A non-best node the tree search may explore: the high end of its speedup's interval reaches this
share of the fastest attempt's median (the mark the search benchmark counts attempts to). A node
far slower than the best is a branch the search has already left behind: a knob move or a local
edit from it rarely closes the gap, and each such child costs a whole attempt."""


@attrs.frozen(kw_only=True)
class Step:
    """One attempt to come: the attempt it changes (None: from the task alone), the instruction of
    that attempt's plan it applies (None: the Conductor's whole advice), and who writes it."""

    parent: Attempt | None = None
    instruction: str | None = None
    writer: AgentRole = AgentRole.CODER


@attrs.frozen(kw_only=True)
class SearchTree:
    """The run's attempts as a tree, with the plans asked for so far (instructions by node)."""

    attempts: tuple[Attempt, ...] = attrs.field(converter=frozen_tuple)
    plans: Mapping[int, tuple[str, ...]] = attrs.field(factory=dict)
    best: Attempt | None = None

    def children(self, number: int) -> list[Attempt]:
        return [attempt for attempt in self.attempts if attempt.parent == number]

    def untried(self, number: int) -> tuple[str, ...] | None:
        """The instructions of ``number``'s plan no child applied yet; None before it has a plan."""
        plan = self.plans.get(number)
        if plan is None:
            return None
        applied = {child.instruction for child in self.children(number)}
        return tuple(instruction for instruction in plan if instruction not in applied)

    def open_nodes(self) -> list[Attempt]:
        """Correct attempts that may still have children, fastest first (untimed ones last)."""
        nodes = [a for a in self.attempts if a.verdict is not None and a.verdict.ok and self.untried(a.number) != ()]
        return sorted(nodes, key=lambda a: (-attempt_speed(a), a.number))

    def to_debug(self) -> list[Attempt]:
        """Children that applied a planned instruction and failed, with no child yet, newest first:
        each gets one fix by the debugger (a failed fix is not fixed again). An ``unchanged`` child
        did not fail: its instruction did nothing, and there is nothing to fix."""
        failed = [
            a
            for a in self.attempts
            if a.writer is AgentRole.CODER
            and a.instruction is not None
            and a.verdict is not None
            and not a.verdict.ok
            and a.verdict.status is not VerdictStatus.UNCHANGED
            and not self.children(a.number)
        ]
        return sorted(failed, key=lambda a: -a.number)

    def stale_attempts(self) -> int:
        """Attempts since the best last changed (all of them when there is no best)."""
        last = self.attempts[-1].number if self.attempts else 0
        return last - (self.best.number if self.best else 0)


class SearchStrategy(Protocol):
    """Picks the parents of the next round's attempts (a parent may repeat: several children);
    an empty list means nothing is left to try."""

    @property
    def name(self) -> str: ...

    def parents(self, tree: SearchTree, branching: int, rng: random.Random) -> list[Attempt]: ...


@attrs.frozen
class LinearSearch:
    """Every attempt changes the last one (the loop of the PRAGMA paper)."""

    name: str = "linear"

    def parents(self, tree: SearchTree, branching: int, rng: random.Random) -> list[Attempt]:
        return list(tree.attempts[-1:])


@attrs.frozen
class TreeSearch:
    """Adaptive epsilon-greedy: ``branching`` children of the fastest open node, or, with a chance
    that shrinks as the best stops improving, of another open node that is promising; nothing
    when no open node is promising."""

    name: str = "tree"
    epsilon: float = EPSILON

    def parents(self, tree: SearchTree, branching: int, rng: random.Random) -> list[Attempt]:
        nodes = tree.open_nodes()
        if not nodes:
            return _repair_step(tree)
        fastest = max(attempt_speed(a) for a in tree.attempts)
        if not _promising(nodes[0], fastest):
            return []  # every plan of a promising node is used up: only branches left far behind remain
        chance = self.epsilon / (1 + tree.stale_attempts() / branching)  # per round without a better best
        others = [node for node in nodes[1:] if _promising(node, fastest)]
        chosen = rng.choice(others) if others and rng.random() < chance else nodes[0]
        return [chosen] * branching


@attrs.frozen
class BeamSearch:
    """One child of each of the ``branching`` fastest open nodes per round."""

    name: str = "beam"

    def parents(self, tree: SearchTree, branching: int, rng: random.Random) -> list[Attempt]:
        nodes = tree.open_nodes()
        if not nodes:
            return _repair_step(tree)
        beam = nodes[:branching]
        return [beam[index % len(beam)] for index in range(branching)]


def _promising(node: Attempt, fastest: float) -> bool:
    """Whether the high end of ``node``'s speedup interval reaches :data:`PROMISING` of the fastest
    attempt's median (every node is when no attempt was timed: nothing tells them apart)."""
    verdict = node.verdict
    high = verdict.speedup.high if verdict is not None and verdict.speedup is not None else 0.0
    return not fastest or high >= PROMISING * fastest


def _repair_step(tree: SearchTree) -> list[Attempt]:
    """No correct node to expand: a linear step from the last attempt, unless one is correct (then
    every plan was tried and nothing is left)."""
    if any(a.verdict is not None and a.verdict.ok for a in tree.attempts):
        return []
    return list(tree.attempts[-1:])


_STRATEGIES: dict[str, SearchStrategy] = {s.name: s for s in (LinearSearch(), TreeSearch(), BeamSearch())}


def strategy_named(name: str) -> SearchStrategy:
    """The built-in strategy ``name`` (one of :data:`SEARCHES`)."""
    try:
        return _STRATEGIES[name]
    except KeyError:
        raise PragmaError(f"--search {name}: not a search strategy; choose one of {', '.join(SEARCHES)}") from None


def round_seed(run_id: str, attempts: Sequence[Attempt]) -> random.Random:
    """The random choices of a round, fixed by the run and how far it got: a resumed run makes the
    same choice the interrupted one would have."""
    return random.Random(f"{run_id}:{len(attempts)}")
