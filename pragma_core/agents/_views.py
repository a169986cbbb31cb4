"""Records turned into the short texts the prompt templates print.

Templates stay free of formatting logic: everything a prompt says about a verdict, a timing, a
profile or a comparison with the best is written here once, in one voice, and bounded (see
:mod:`.clipping`). The Coder's and the Conductor's prompts use the same texts, so the two agents
read the same facts in the same words.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import attrs

from ..profiling.metric_selectors import summary_lines
from ..records import Diagnosis, Metric, Profile, Speedup, Timing, Verdict
from .clipping import clip
from .remedies import Remedy, remedies_for

__all__ = [
    "SelectMetrics",
    "MESSAGE_CHARS",
    "DIAGNOSTICS_CHARS",
    "NOTES_CHARS",
    "METRIC_DOC_CHARS",
    "METRIC_DOCS_CHARS",
    "ProfileFacts",
    "ComparisonRow",
    "speedup_text",
    "verdict_facts",
    "verdict_remedies",
    "diagnostics_text",
    "profile_facts",
    "metric_doc_lines",
    "comparison_rows",
    "delta_lines",
]

SelectMetrics = Callable[[Profile], Sequence[Metric]]
"""A metric selector's ``select``: which metrics of a profile reach the prompt."""

MESSAGE_CHARS = 1_500
DIAGNOSTICS_CHARS = 4_000
NOTES_CHARS = 1_500
METRIC_DOC_CHARS = 800
METRIC_DOCS_CHARS = 8_000


def speedup_text(speedup: Speedup | None) -> str:
    """``1.84x (95% CI 1.79-1.90)``, or ``-`` when there is none."""
    if speedup is None:
        return "-"
    return f"{speedup.value:.2f}x ({speedup.confidence:.0%} CI {speedup.low:.2f}-{speedup.high:.2f})"


def _timing(timing: Timing) -> str:
    return f"{timing.median_ms:.4g} ms median (IQR {timing.iqr_ms:.2g} ms)"


def verdict_facts(verdict: Verdict) -> list[str]:
    """Status, message and every detail the verdict has, one per line (diagnostics apart)."""
    facts = [f"status: {verdict.status.value}", f"message: {clip(verdict.message.strip(), MESSAGE_CHARS)}"]
    if verdict.failed_check:
        facts.append(f"failed integrity check: {verdict.failed_check}")
    if verdict.max_abs_error is not None:
        where = f" at index {tuple(verdict.error_index)}" if verdict.error_index is not None else ""
        facts.append(f"max abs error: {verdict.max_abs_error:.3g}{where}")
    if verdict.max_rel_error is not None:
        facts.append(f"max rel error: {verdict.max_rel_error:.3g}")
    if verdict.failing_trial is not None:
        facts.append(f"failing trial: {verdict.failing_trial}")
    if verdict.reference:
        facts.append(f"reference: {_timing(verdict.reference)}")
    if verdict.candidate:
        facts.append(f"candidate: {_timing(verdict.candidate)}")
    if verdict.speedup:
        facts.append(f"speedup over the reference: {speedup_text(verdict.speedup)}")
    if verdict.speedup_vs_compiled:
        facts.append(f"speedup over torch.compile: {speedup_text(verdict.speedup_vs_compiled)}")
    if verdict.floor_ms is not None:
        attainment = verdict.attainment
        at = f"; the candidate attains {attainment:.0%} of the roofline" if attainment is not None else ""
        facts.append(f"roofline floor: {verdict.floor_ms:.4g} ms{at}")
    if verdict.notes:
        facts.append("notes: " + clip(" ".join(verdict.notes), NOTES_CHARS))
    return facts


def verdict_remedies(verdict: Verdict) -> tuple[Remedy, ...]:
    """Likely causes and remedies of a verdict that is not correct; none for a correct one."""
    return () if verdict.ok else remedies_for(verdict)


def diagnostics_text(verdict: Verdict, limit: int = DIAGNOSTICS_CHARS) -> str:
    """The compiler's or the runtime's own output, at most ``limit`` characters; empty when the
    verdict has none."""
    text = "\n".join(part.rstrip() for part in verdict.diagnostics if part.strip())
    return clip(text, limit) if text else ""


@attrs.frozen(kw_only=True)
class ProfileFacts:
    """A profile as a prompt shows it: metric lines, what is missing and why, notes."""

    profiler: str
    lines: tuple[str, ...]
    not_collected: tuple[str, ...]
    notes: str


def profile_facts(profile: Profile, metrics: Sequence[Metric], *, with_meanings: bool = False) -> ProfileFacts:
    """``metrics`` (the selected ones) by :func:`summary_lines`; meanings only when asked for,
    since the Conductor's prompt documents each metric once in a section of its own."""
    shown = tuple(metrics) if with_meanings else tuple(attrs.evolve(m, meaning="") for m in metrics)
    missing = tuple(f"{name}: {clip(reason, 200)}" for name, reason in profile.not_collected.items())
    return ProfileFacts(
        profiler=profile.profiler,
        lines=tuple(summary_lines(shown)),
        not_collected=missing[:12] + ((f"... and {len(missing) - 12} more",) if len(missing) > 12 else ()),
        notes=clip(" ".join(profile.notes), NOTES_CHARS) if profile.notes else "",
    )


def metric_doc_lines(metrics: Sequence[Metric], metric_docs: Mapping[str, str] | None) -> list[str]:
    """``name: documentation`` for each metric name once; the index's text before the meaning."""
    docs = metric_docs or {}
    meanings: dict[str, str] = {}
    for metric in metrics:
        meanings.setdefault(metric.name, metric.meaning)
    lines, used = [], 0
    for index, (name, meaning) in enumerate(meanings.items()):
        text = " ".join((docs.get(name) or meaning or "no documentation available").split())
        line = f"{name}: {clip(text, METRIC_DOC_CHARS)}"
        if used + len(line) > METRIC_DOCS_CHARS:
            lines.append(
                f"[... documentation of {len(meanings) - index} more metrics left out to keep the prompt short ...]"
            )
            break
        lines.append(line)
        used += len(line)
    return lines


@attrs.frozen(kw_only=True)
class ComparisonRow:
    """One line of the historical-best-against-current table."""

    name: str
    best: str
    current: str


def _metric_key(metric: Metric) -> str:
    return f"{metric.name} [{metric.kernel}]" if metric.kernel else metric.name


def _value(metric: Metric | None) -> str:
    if metric is None:
        return "-"
    return f"{metric.value:.4g} {metric.unit}".rstrip()


def comparison_rows(
    *,
    current: Verdict,
    current_diagnosis: Diagnosis,
    current_metrics: Sequence[Metric],
    best: Verdict | None,
    best_diagnosis: Diagnosis | None,
    best_metrics: Sequence[Metric],
) -> tuple[ComparisonRow, ...]:
    """Speedup, time, bound class, roofline attainment, then each metric either side measured."""

    def attainment(verdict: Verdict | None, diagnosis: Diagnosis | None) -> str:
        value = (
            diagnosis.roofline_attainment
            if diagnosis and diagnosis.roofline_attainment is not None
            else (verdict.attainment if verdict else None)
        )
        return "-" if value is None else f"{value:.0%}"

    def median(verdict: Verdict | None) -> str:
        return f"{verdict.candidate.median_ms:.4g} ms" if verdict and verdict.candidate else "-"

    rows = [
        ComparisonRow(name="status", best=best.status.value if best else "-", current=current.status.value),
        ComparisonRow(
            name="speedup", best=speedup_text(best.speedup) if best else "-", current=speedup_text(current.speedup)
        ),
        ComparisonRow(name="median time", best=median(best), current=median(current)),
        ComparisonRow(
            name="bound",
            best=best_diagnosis.bound.value if best_diagnosis else "-",
            current=current_diagnosis.bound.value,
        ),
        ComparisonRow(
            name="roofline attainment",
            best=attainment(best, best_diagnosis),
            current=attainment(current, current_diagnosis),
        ),
    ]
    # a metric pairs with the best's of the same name and kernel, else of the same name: a renamed
    # kernel function must not hide the comparison
    best_by_key = {_metric_key(m): m for m in best_metrics}
    best_by_name = {m.name: m for m in reversed(best_metrics)}
    for metric in current_metrics:
        other = best_by_key.get(_metric_key(metric)) or best_by_name.get(metric.name)
        rows.append(ComparisonRow(name=_metric_key(metric), best=_value(other), current=_value(metric)))
    current_names = {m.name for m in current_metrics}
    for metric in best_metrics:
        if metric.name not in current_names:
            rows.append(ComparisonRow(name=_metric_key(metric), best=_value(metric), current="-"))
    return tuple(rows)


def delta_lines(diagnosis: Diagnosis) -> list[str]:
    """``D1 miss rate: -0.2``: the rules' deltas of the current candidate against the best."""
    return [f"{name}: {value:+.4g}" for name, value in diagnosis.deltas.items()]
