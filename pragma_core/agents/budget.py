"""How much of each part a prompt carries (:class:`PromptBudget`), and the order in which the parts
give way when a prompt does not fit the model's context window (:func:`fit_prompt`).

A prompt is built from a budget; the full budget is what a model with a large window gets. When
the provider says the prompt does not fit (:class:`~pragma_core.plugin_api.components.PromptRoom`),
the prompt is built again with less, one step at a time, in this order (:data:`GIVE_WAY`):

1. the profilers' documentation (metric entries and related passages);
2. the table of earlier attempts, down to the last three;
3. the best attempt's code and profile, where it is not the attempt being judged or changed;
4. compiler and runtime output beyond 1,000 characters;
5. the backend's guide beyond 1,500 characters;
6. the Conductor's analysis and actions beyond 1,000 characters;
7. then, halving each time, the code shown and the reference program, down to 1,000 characters each.

What stays to the end is what no agent can work without: the task, the code in question and the
verdict on it. A prompt still too long then raises :class:`~pragma_core.errors.PromptTooLong`,
naming the tokens it needs and those the model takes::

    fitted = fit_prompt(lambda budget: coder_messages(task, guide, budget=budget), room)
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from ..errors import PromptTooLong
from ..plugin_api.components import PromptRoom
from ..records import ChatMessage
from ._views import DIAGNOSTICS_CHARS
from .history import MAX_HISTORY_ROWS

__all__ = [
    "CODE_CHARS",
    "TASK_CHARS",
    "GUIDANCE_CHARS",
    "GIVE_WAY",
    "PromptBudget",
    "FULL_BUDGET",
    "FittedPrompt",
    "fit_prompt",
]

CODE_CHARS = 24_000
"""Characters of candidate code one prompt carries, shared by the code parts it shows."""

TASK_CHARS = 8_000
"""Characters of the task's reference source a prompt carries."""

GUIDANCE_CHARS = 4_000
"""Characters of the Conductor's analysis and, separately, of its actions the Coder sees."""

_FEWEST_HISTORY_ROWS = 3
_CUT_DIAGNOSTICS_CHARS = 1_000
_CUT_GUIDE_CHARS = 1_500
_CUT_GUIDANCE_CHARS = 1_000
_FEWEST_CHARS = 1_000  # code and reference are never cut below this: an agent needs to see them


@attrs.frozen(kw_only=True)
class PromptBudget:
    """What one prompt carries: characters of each part (None: all of it), rows of earlier
    attempts, whether documentation and the best attempt are shown; ``gave_way`` says, in words,
    what was cut from the full budget."""

    code_chars: int = CODE_CHARS
    task_chars: int = TASK_CHARS
    guidance_chars: int = GUIDANCE_CHARS
    diagnostics_chars: int = DIAGNOSTICS_CHARS
    guide_chars: int | None = None
    history_rows: int = MAX_HISTORY_ROWS
    documentation: bool = True
    best: bool = True
    gave_way: tuple[str, ...] = ()

    def less(self, what: str, *, replacing: str = "", **changes: object) -> PromptBudget:
        """This budget with ``changes``, and ``what`` said of it; an earlier step whose words start
        with ``replacing`` (the same part cut before, less) is no longer said."""
        kept = tuple(step for step in self.gave_way if not (replacing and step.startswith(replacing)))
        return attrs.evolve(self, gave_way=(*kept, what), **changes)  # type: ignore[arg-type]


FULL_BUDGET = PromptBudget()
"""Everything a prompt can carry: what a model with a large context window gets."""


def _halvings(budget: PromptBudget) -> PromptBudget | None:
    """The code and the reference cut to half (never below :data:`_FEWEST_CHARS`), or None when
    neither can be cut further."""
    code = max(_FEWEST_CHARS, budget.code_chars // 2)
    task = max(_FEWEST_CHARS, budget.task_chars // 2)
    if code == budget.code_chars and task == budget.task_chars:
        return None
    return budget.less(
        f"code beyond {code:,} and the reference beyond {task:,} characters",
        replacing="code beyond",
        code_chars=code,
        task_chars=task,
    )


GIVE_WAY: tuple[Callable[[PromptBudget], PromptBudget], ...] = (
    lambda b: b.less("the profilers' documentation", documentation=False),
    lambda b: b.less(f"earlier attempts but the last {_FEWEST_HISTORY_ROWS}", history_rows=_FEWEST_HISTORY_ROWS),
    lambda b: b.less("the best attempt's code and profile", best=False),
    lambda b: b.less(
        f"compiler output beyond {_CUT_DIAGNOSTICS_CHARS:,} characters", diagnostics_chars=_CUT_DIAGNOSTICS_CHARS
    ),
    lambda b: b.less(f"the backend's guide beyond {_CUT_GUIDE_CHARS:,} characters", guide_chars=_CUT_GUIDE_CHARS),
    lambda b: b.less(
        f"the Conductor's advice beyond {_CUT_GUIDANCE_CHARS:,} characters", guidance_chars=_CUT_GUIDANCE_CHARS
    ),
)
"""The steps a prompt gives way by, in order, before the code and the reference are halved."""


@attrs.frozen(kw_only=True)
class FittedPrompt:
    """A prompt as sent: its messages, the budget it was built with, and how it stood against the
    model's window (None: the provider does not know the window, so nothing was fitted)."""

    messages: tuple[ChatMessage, ...]
    budget: PromptBudget
    room: PromptRoom | None

    @property
    def gave_way(self) -> tuple[str, ...]:
        return self.budget.gave_way

    def note(self) -> str:
        """One line for the attempt's files: what was cut to fit, or "" when nothing was."""
        if not self.gave_way or self.room is None:
            return ""
        room = self.room
        return (
            f"fitted to {room.limit:,} tokens ({room.window:,}-token context window from {room.window_from}, "
            f"{room.reply_tokens:,} kept for the reply): left out {'; '.join(self.gave_way)}; "
            f"the prompt takes {room.tokens:,}"
        )


def fit_prompt(
    build: Callable[[PromptBudget], tuple[ChatMessage, ...]],
    room: Callable[[tuple[ChatMessage, ...]], PromptRoom | None],
    *,
    who: str = "the prompt",
) -> FittedPrompt:
    """The prompt ``build`` makes from the fullest budget that ``room`` says fits; raises
    :class:`~pragma_core.errors.PromptTooLong` when even the smallest does not."""
    budget = FULL_BUDGET
    messages = build(budget)
    standing = room(messages)
    if standing is None or standing.fits:
        return FittedPrompt(messages=messages, budget=budget, room=standing)
    steps = list(GIVE_WAY)
    while True:
        smaller = steps.pop(0)(budget) if steps else _halvings(budget)
        if smaller is None:
            raise PromptTooLong(
                f"{who} needs {standing.tokens:,} tokens with everything that can give way left out "
                f"({'; '.join(budget.gave_way)}), but the model takes {standing.limit:,} "
                f"(a {standing.window:,}-token context window from {standing.window_from}, "
                f"{standing.reply_tokens:,} kept for the reply): choose a model with a larger context "
                "window, or start its server with a larger one"
            )
        budget = smaller
        messages = build(budget)
        standing = room(messages)
        if standing is None or standing.fits:
            return FittedPrompt(messages=messages, budget=budget, room=standing)
