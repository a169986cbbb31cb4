"""Writing a candidate: the prompt and reply of the agent that writes an attempt (the Coder, or the
debugger for a failing parent), and a round's candidates written at once and built as they come
(:class:`Writer`)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import attrs

from ..agents.budget import FittedPrompt
from ..agents.extraction import extract_code
from ..agents.prompts import coder_messages, debugger_messages
from ..records import AgentRole, Attempt, Completion, Task
from ..verifier.build_ahead import BuildsAhead
from ._conversation import Agents
from .search import Step

__all__ = ["Writer", "WrittenAhead"]


@attrs.frozen(kw_only=True)
class WrittenAhead:
    """A child of a round written in a thread (its prompt and reply) and built in another."""

    written: Future[tuple[FittedPrompt, Completion]]
    built: Future[tuple[float, float] | None]


@attrs.frozen(kw_only=True)
class Writer:
    """The agents that write a run's candidates, and the builds of a round's candidates ahead of
    their verifications."""

    agents: Agents
    task: Task
    guide: str
    builds: BuildsAhead

    def write(self, step: Step, history: Sequence[Attempt], best: Attempt | None) -> tuple[FittedPrompt, Completion]:
        """The prompt (fitted to the model's context window) and reply of the agent that writes
        ``step``'s candidate: the Coder changes ``step.parent`` (the linear loop: the last attempt)
        following its Conductor's advice, or only ``step.instruction`` when one is given (tree and
        beam search); the debugger fixes the failing parent from its evidence alone."""
        parent = last = step.parent
        if step.writer is AgentRole.DEBUGGER and parent is not None:
            failed = parent
            prompt = self.agents.fit(
                lambda budget: debugger_messages(self.task, self.guide, failed, budget=budget),
                who="the debugger's prompt",
            )
        else:
            prompt = self.agents.fit(
                lambda budget: coder_messages(
                    task=self.task,
                    guide=self.guide,
                    guidance=last.guidance if last else None,
                    best=best,
                    last=last,
                    history=history,
                    instruction=step.instruction,
                    budget=budget,
                ),
                who="the Coder's prompt",
            )
        reply = self.agents.ask(
            step.writer, prompt.messages, verdict=last.verdict if last else None, best=best,
            history=tuple(history), parent=parent, instruction=step.instruction,
        )  # fmt: skip
        return prompt, reply

    def write_ahead(
        self, queue: Sequence[Step], history: Sequence[Attempt], best: Attempt | None
    ) -> list[WrittenAhead]:
        """The candidates of a round of several written at once, each in a thread of its own (a
        language model's replies take seconds; they overlap), and each built as soon as it is
        written (:class:`~pragma_core.verifier.build_ahead.BuildsAhead`: the compilers overlap too).
        The round's attempts are then verified one after another as they come."""
        if len(queue) < 2:
            return []
        pool = ThreadPoolExecutor(max_workers=len(queue), thread_name_prefix="pragma-writer")
        ahead = []
        for step in queue:
            written = pool.submit(self.write, step, tuple(history), best)
            ahead.append(WrittenAhead(written=written, built=self.builds.submit(functools.partial(_source, written))))
        pool.shutdown(wait=False)
        return ahead


def _source(written: Future[tuple[FittedPrompt, Completion]]) -> str | None:
    """The module a writer's reply holds, once it has replied."""
    return extract_code(written.result()[1].text)
