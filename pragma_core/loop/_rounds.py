"""Which attempts come next (:class:`RoundPlanner`): the linear loop's one step from the last
attempt; in a tree or beam search, the debugger's fixes of failed children, else the strategy's
picks, each given an instruction of its parent's plan (asked of the planner on first need)."""

from __future__ import annotations

import attrs

from ..agents.prompts import planner_messages
from ..agents.replies import PlanParseError, parse_plan
from ..records import AgentRole, Attempt, Plan, Task
from ._conversation import Agents
from .progress import PhaseReporter
from .run_directory import RunDirectory
from .search import SearchStrategy, SearchTree, Step, round_seed

__all__ = ["RoundPlanner"]


@attrs.frozen(kw_only=True)
class RoundPlanner:
    """What a run needs to choose its next round of attempts and to ask for plans."""

    agents: Agents
    task: Task
    run: RunDirectory
    progress: PhaseReporter
    branching: int

    def next_round(
        self, strategy: SearchStrategy, attempts: list[Attempt], best: Attempt | None, plans: dict[int, Plan]
    ) -> list[Step]:
        """The next attempts: the linear loop's one step from the last attempt; in a tree or beam
        search, first the debugger's fix of each child that failed (once each, newest first, at
        most ``branching``), else the strategy's picks, each given the first instruction of its
        parent's plan (asked of the planner on first need, kept in ``plans``) that no child took.
        Empty when no plan has an instruction left."""
        if strategy.name == "linear" or not attempts:
            return [Step(parent=attempts[-1] if attempts else None)]
        broken = SearchTree(attempts=attempts).to_debug()
        if broken:
            return [Step(parent=a, writer=AgentRole.DEBUGGER) for a in broken[: self.branching]]
        while True:
            tree = SearchTree(attempts=attempts, best=best, plans={n: p.instructions for n, p in plans.items()})
            parents = strategy.parents(tree, self.branching, round_seed(self.run.root.name, attempts))
            queue: list[Step] = []
            asked = False
            for parent in parents:
                if parent.verdict is None or not parent.verdict.ok:  # no correct attempt yet: repair it
                    queue.append(Step(parent=parent))
                    continue
                if parent.number not in plans:
                    plans[parent.number] = self.plan(parent, attempts)
                    asked = True
                    tree = attrs.evolve(tree, plans={**tree.plans, parent.number: plans[parent.number].instructions})
                taken = {step.instruction for step in queue if step.parent is parent}
                options = [i for i in tree.untried(parent.number) or () if i not in taken]
                if options:
                    queue.append(Step(parent=parent, instruction=options[0]))
            if queue or not asked:  # a new plan may leave the picked node with nothing: pick again
                return queue

    def plan(self, node: Attempt, attempts: list[Attempt]) -> Plan:
        """The planner's ranked changes to ``node``, written to the run's ``plans/``. A reply that
        does not parse leaves the node's Conductor actions as its plan, and the plan says so."""
        self.progress(node.number, "planning")
        prompt = self.agents.fit(
            lambda budget: planner_messages(self.task, node, tree=attempts, budget=budget), who="the planner's prompt"
        )
        reply = self.agents.ask(
            AgentRole.PLANNER, prompt.messages, parent=node, history=tuple(attempts), verdict=node.verdict,
            profiles=node.profiles, diagnosis=node.diagnosis,
        )  # fmt: skip
        note = ""
        try:
            instructions = parse_plan(reply.text)
        except PlanParseError as error:
            instructions = node.guidance.actions if node.guidance else ()
            note = f"the planner's reply did not parse ({error}); the Conductor's actions stand in"
        if not instructions:
            note = note or "the planner proposed no change: nothing is left to try from this attempt"
        plan = Plan(
            parent=node.number, instructions=instructions, usage=reply.usage, cost_usd=reply.cost_usd, note=note
        )
        self.run.write_plan(plan)
        self.run.append_event("planned", parent=node.number, instructions=len(plan.instructions))
        return plan
