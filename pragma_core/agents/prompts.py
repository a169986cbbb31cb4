"""The chat messages the loop sends to the Coder and to the Conductor, built from records.

Pure functions, no model calls: the loop passes what it has, gets a system and a user message,
and hands them to an LLM provider inside a :class:`~pragma_core.records.CompletionRequest`::

    messages = coder_messages(task, backend.guide, guidance=guidance, best=best, last=last,
                              history=attempts)
    messages = conductor_messages(task, candidate, verdict, diagnosis, profiles=profiles, best=best,
                                  metric_docs=docs)

The Conductor's prompt has the PRAGMA paper's five parts (current code; verifier findings with
likely causes and remedies; documentation of the profiled metrics; the profile; the best code with
its profile and verdict) and the rules' diagnosis as a historical-best-against-current table. The
Coder's prompt has the task, the backend's guide, the Conductor's guidance, the best and the last
code, and a one-line row per earlier attempt.

Both stay bounded however long the run: code parts share :data:`CODE_CHARS` characters and keep
head and tail of anything longer, the table of attempts keeps the newest rows, and diagnostics,
notes and documentation have their own limits. Each builder takes a
:class:`~pragma_core.agents.budget.PromptBudget`: the full one by default, less when the prompt
must fit a small context window (:func:`~pragma_core.agents.budget.fit_prompt`). The wording is in
``templates/*.j2``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..profiling import metric_selectors
from ..records import Attempt, Candidate, ChatMessage, Diagnosis, Guidance, Metric, Profile, Task, Verdict
from ._views import (
    METRIC_DOC_CHARS,
    SelectMetrics,
    comparison_rows,
    delta_lines,
    diagnostics_text,
    metric_doc_lines,
    profile_facts,
    speedup_text,
    verdict_facts,
    verdict_remedies,
)
from .budget import CODE_CHARS, FULL_BUDGET, GUIDANCE_CHARS, TASK_CHARS, PromptBudget
from .clipping import clip
from .history import MAX_HISTORY_ROWS, history_rows
from .rendering import render_parts

__all__ = [
    "CODE_CHARS",
    "TASK_CHARS",
    "GUIDANCE_CHARS",
    "PLAN_LEADERS",
    "coder_messages",
    "conductor_messages",
    "planner_messages",
    "debugger_messages",
]

_MAX_ACTIONS = 8
PLAN_LEADERS = 5
"""Rows of the tree's fastest attempts a planner's prompt shows."""
_MAX_RELATED = 4
_MAX_UNMEASURED = 12


def coder_messages(
    task: Task,
    guide: str,
    *,
    guidance: Guidance | None = None,
    best: Attempt | None = None,
    last: Attempt | None = None,
    history: Sequence[Attempt] = (),
    history_limit: int = MAX_HISTORY_ROWS,
    instruction: str | None = None,
    budget: PromptBudget = FULL_BUDGET,
) -> tuple[ChatMessage, ...]:
    """System and user message asking the Coder for the next candidate.

    ``guide`` is the backend's guide (:attr:`Backend.guide`); ``guidance`` the Conductor's advice
    after the last attempt; ``best`` the best correct attempt so far and ``last`` the latest one
    (both may be None, and may be the same attempt); ``history`` the earlier attempts, shown as one
    row each, newest ``history_limit`` only, never with their code. With ``instruction`` (tree and
    beam search) ``last`` is the attempt to change and the instruction the one change to make; the
    Conductor's analysis of ``last`` comes with it, its actions do not. ``budget`` bounds each part.
    """
    best_source = best.candidate.source if best is not None and best.candidate is not None else None
    best = best if best_source is not None else None
    if best is not None and last is not None and not budget.best and last.number != best.number:
        best, best_source = None, None  # given way: the Coder changes the last attempt
    last_source = last.candidate.source if last is not None and last.candidate is not None else None
    last_is_best = best is not None and last is not None and last.number == best.number
    last_repeats_best = (
        best_source is not None and last_source is not None and last_source.strip() == best_source.strip()
    )
    sources = [best_source, None if last_repeats_best else last_source]
    best_code, last_code = _share_code_budget(sources, budget.code_chars)
    rows, omitted = history_rows(history, limit=min(history_limit, budget.history_rows))
    parts = render_parts(
        "coder.j2",
        task=_task_view(task, budget),
        guide=_guide(guide, budget),
        guidance=_guidance_view(guidance, budget.guidance_chars),
        instruction=clip(" ".join(instruction.split()), budget.guidance_chars) if instruction else None,
        best=None
        if best is None
        else {
            "number": best.number,
            "speedup": speedup_text(best.verdict.speedup if best.verdict else None),
            "code": best_code,
        },
        last=None if last is None else _last_view(last, last_code, last_is_best, last_repeats_best, budget),
        rows=[
            {
                "number": row.number,
                "status": row.status,
                "speedup": "-" if row.speedup is None else f"{row.speedup:.2f}x",
                "summary": row.summary.replace("|", "\\|") or "-",
            }
            for row in rows
        ],
        omitted=omitted,
        code_clipped=any(
            code is not None and code != source.strip("\n")
            for code, source in zip((best_code, last_code), sources)
            if source is not None
        ),
    )
    return _messages(parts)


def conductor_messages(
    task: Task,
    candidate: Candidate | None,
    verdict: Verdict,
    diagnosis: Diagnosis,
    *,
    profiles: Sequence[Profile] = (),
    best: Attempt | None = None,
    metric_docs: Mapping[str, str] | None = None,
    related_docs: Sequence[str] = (),
    unmeasured_citations: Sequence[str] = (),
    select: SelectMetrics = metric_selectors.select,
    attempt: int | None = None,
    budget: PromptBudget = FULL_BUDGET,
) -> tuple[ChatMessage, ...]:
    """System and user message asking the Conductor for :class:`Guidance` on the current attempt.

    ``candidate`` is None when the Coder's reply held no module. ``profiles`` are the current
    candidate's, one per profiler (none when it was not correct, or with ``--no-profile``);
    ``best`` is the best attempt before this one; ``metric_docs`` maps metric names to their
    documentation from the knowledge index (a metric without an entry is documented by its
    one-line meaning); ``related_docs`` are compendium entries that match the diagnosis, one line
    each; ``unmeasured_citations`` the metric names the Conductor's previous reply cited that its
    profiles had not measured (pointed out to it); ``select`` is the configured metric selector's
    choice of what reaches the prompt; ``attempt`` numbers the current attempt (default: the
    candidate's); ``budget`` bounds each part. The reply is read with
    :func:`pragma_core.agents.replies.parse_guidance`.
    """
    number = attempt if attempt is not None else (candidate.attempt if candidate else None)
    selected = [(profile, tuple(select(profile))) for profile in profiles]
    current_metrics: tuple[Metric, ...] = tuple(m for _, metrics in selected for m in metrics)
    current_is_best = best is not None and number is not None and best.number == number
    best_source = best.candidate.source if best is not None and best.candidate is not None else None
    best = best if best_source is not None and not current_is_best and budget.best else None
    best_selected = [(profile, tuple(select(profile))) for profile in best.profiles] if best else []
    best_metrics: tuple[Metric, ...] = tuple(m for _, metrics in best_selected for m in metrics)
    current_code, best_code = _share_code_budget(
        [candidate.source if candidate else None, best_source if best else None], budget.code_chars
    )
    documented = budget.documentation
    parts = render_parts(
        "conductor.j2",
        task=_task_view(task, budget),
        number="" if number is None else f" (attempt {number})",
        code=current_code,
        facts=verdict_facts(verdict),
        diagnostics=diagnostics_text(verdict, budget.diagnostics_chars),
        remedies=verdict_remedies(verdict),
        metric_docs=metric_doc_lines(current_metrics + best_metrics, metric_docs if documented else {}),
        related_docs=[
            clip(" ".join(line.split()), METRIC_DOC_CHARS)
            for line in (related_docs[:_MAX_RELATED] if documented else ())
        ],
        unmeasured=list(unmeasured_citations[:_MAX_UNMEASURED]),
        profiles=[profile_facts(profile, metrics) for profile, metrics in selected],
        not_profiled=(
            "only correct candidates are profiled."
            if not verdict.ok
            else "profiling is off for this run, or no profiler could run here; judge by the timing."
        ),
        best=None if best is None else _best_view(best, best_code, best_selected),
        current_is_best=current_is_best,
        comparison=comparison_rows(
            current=verdict,
            current_diagnosis=diagnosis,
            current_metrics=current_metrics,
            best=best.verdict if best else None,
            best_diagnosis=best.diagnosis if best else None,
            best_metrics=best_metrics,
        ),
        deltas=delta_lines(diagnosis),
        diagnosis=diagnosis,
    )
    return _messages(parts)


def planner_messages(
    task: Task,
    node: Attempt,
    *,
    tree: Sequence[Attempt] = (),
    select: SelectMetrics = metric_selectors.select,
    limit: int = _MAX_ACTIONS,
    budget: PromptBudget = FULL_BUDGET,
) -> tuple[ChatMessage, ...]:
    """System and user message asking the planner for ranked changes to ``node`` (a correct
    attempt), each for one child. Its context is bounded and its own: the node's code, verdict,
    profiles and the Conductor's analysis of it, the instructions its children already applied, and
    the :data:`PLAN_LEADERS` fastest attempts of ``tree`` (one row each, never their code). The
    reply is read with :func:`pragma_core.agents.replies.parse_plan`."""
    source = node.candidate.source if node.candidate is not None else ""
    (code,) = _share_code_budget([source], budget.code_chars)
    verdict = node.verdict
    timed = [a for a in tree if a.verdict is not None and a.verdict.ok and a.verdict.speedup is not None]
    timed.sort(key=lambda a: -(a.verdict.speedup.value if a.verdict and a.verdict.speedup else 0.0))
    parts = render_parts(
        "planner.j2",
        task=_task_view(task, budget),
        node={
            "number": node.number,
            "speedup": speedup_text(verdict.speedup if verdict else None),
            "code": code or "",
            "facts": verdict_facts(verdict) if verdict else [],
            "profiles": [profile_facts(profile, tuple(select(profile))) for profile in node.profiles],
        },
        analysis=clip(node.guidance.analysis.strip(), budget.guidance_chars) if node.guidance else "",
        tried=[
            clip(" ".join(a.instruction.split()), budget.guidance_chars // _MAX_ACTIONS)
            for a in tree
            if a.parent == node.number and a.instruction
        ],
        leaders=[
            {
                "number": a.number,
                "parent": a.parent or "-",
                "speedup": speedup_text(a.verdict.speedup if a.verdict else None),
                "instruction": clip(" ".join((a.instruction or "-").split()), 160).replace("|", "\\|"),
            }
            for a in timed[: min(PLAN_LEADERS, budget.history_rows)]
        ],
        limit=limit,
    )
    return _messages(parts)


def debugger_messages(
    task: Task, guide: str, failed: Attempt, *, budget: PromptBudget = FULL_BUDGET
) -> tuple[ChatMessage, ...]:
    """System and user message asking the debugger to fix ``failed`` (an attempt that applied one
    instruction and did not come out correct). Its context is the failure alone: the task, the
    backend's guide, the failing code and the Verifier's evidence; no history, no best, no plan."""
    source = failed.candidate.source if failed.candidate is not None else ""
    (code,) = _share_code_budget([source], budget.code_chars)
    view = _last_view(failed, code, False, False, budget)
    view["instruction"] = clip(" ".join((failed.instruction or "-").split()), budget.guidance_chars)
    parts = render_parts("debugger.j2", task=_task_view(task, budget), guide=_guide(guide, budget), failed=view)
    return _messages(parts)


# -- views of records for the templates ---------------------------------------------------------


def _messages(parts: dict[str, str]) -> tuple[ChatMessage, ...]:
    return (ChatMessage(role="system", content=parts["system"]), ChatMessage(role="user", content=parts["user"]))


def _task_view(task: Task, budget: PromptBudget) -> dict[str, str]:
    source = clip(task.source.strip(), budget.task_chars, comment="# ")
    return {"key": task.key, "category": task.category.value, "source": source}


def _guide(guide: str, budget: PromptBudget) -> str:
    return guide.strip() if budget.guide_chars is None else clip(guide.strip(), budget.guide_chars)


def _guidance_view(guidance: Guidance | None, chars: int) -> dict[str, object] | None:
    if guidance is None:
        return None
    actions = [clip(" ".join(action.split()), chars // _MAX_ACTIONS) for action in guidance.actions]
    if len(actions) > _MAX_ACTIONS:
        actions = actions[:_MAX_ACTIONS] + [f"({len(actions) - _MAX_ACTIONS} further actions left out)"]
    analysis = clip(guidance.analysis.strip(), chars) or "(no analysis given)"
    return {"analysis": analysis, "actions": actions}


def _last_view(
    last: Attempt, code: str | None, is_best: bool, repeats_best: bool, budget: PromptBudget
) -> dict[str, object]:
    verdict = last.verdict
    if verdict is not None:
        status, facts = verdict.status.value, verdict_facts(verdict)
    elif last.candidate is None:
        status, facts = "no code in the reply", ["The reply held no Python module defining ModelNew."]
    else:
        status, facts = "not verified", []
    return {
        "number": last.number,
        "status": status,
        "is_best": is_best,
        "repeats_best": repeats_best,
        "facts": facts,
        "diagnostics": diagnostics_text(verdict, budget.diagnostics_chars) if verdict else "",
        "remedies": verdict_remedies(verdict) if verdict else (),
        "code": code,
    }


def _best_view(
    best: Attempt, code: str | None, selected: Sequence[tuple[Profile, tuple[Metric, ...]]]
) -> dict[str, object]:
    verdict = best.verdict
    return {
        "number": best.number,
        "speedup": speedup_text(verdict.speedup if verdict else None),
        "facts": verdict_facts(verdict) if verdict else [],
        "profiles": [profile_facts(profile, metrics) for profile, metrics in selected],
        "code": code,
    }


def _share_code_budget(sources: Sequence[str | None], chars: int) -> list[str | None]:
    """Each source clipped so together they fit ``chars`` characters; short ones leave room to others."""
    shown = sorted(
        ((i, source) for i, source in enumerate(sources) if source is not None), key=lambda item: len(item[1])
    )
    result: list[str | None] = [None] * len(sources)
    remaining = chars
    for count, (i, source) in enumerate(shown):
        share = remaining // (len(shown) - count)
        clipped = clip(source.strip("\n"), share, comment="# ")
        result[i] = clipped
        remaining -= min(len(clipped), share)
    return result
