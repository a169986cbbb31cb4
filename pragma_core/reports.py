"""Human-readable renderings of records: rich tables for the terminal."""

from __future__ import annotations

from rich.table import Table

from .records import Profile, Task, Timing, Verdict, VerdictStatus

__all__ = ["verdict_table", "profile_table"]

_STATUS_STYLE = {VerdictStatus.CORRECT: "bold green", VerdictStatus.REJECTED: "bold red"}


def verdict_table(task: Task, candidate_name: str, verdict: Verdict) -> Table:
    table = Table(title=f"{candidate_name} on {task.key}", title_justify="left", show_header=False)
    table.add_column("field", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    style = _STATUS_STYLE.get(verdict.status, "bold yellow")
    table.add_row("status", f"[{style}]{verdict.status.value}[/]")
    if verdict.failed_check:
        table.add_row("failed check", verdict.failed_check)
    table.add_row("message", verdict.message)
    if verdict.max_abs_error is not None:
        where = f" at {verdict.error_index}" if verdict.error_index is not None else ""
        table.add_row("max abs error", f"{verdict.max_abs_error:.3g}{where}")
    if verdict.max_rel_error is not None:
        table.add_row("max rel error", f"{verdict.max_rel_error:.3g}")
    if verdict.reference:
        table.add_row("reference", _timing(verdict.reference))
    if verdict.compiled_reference:
        table.add_row("torch.compile", _timing(verdict.compiled_reference))
    if verdict.candidate:
        table.add_row("candidate", _timing(verdict.candidate))
    if verdict.speedup:
        s = verdict.speedup
        table.add_row("speedup", f"{s.value:.2f}x  ({s.confidence:.0%} CI {s.low:.2f}-{s.high:.2f})")
    if verdict.speedup_vs_compiled:
        s = verdict.speedup_vs_compiled
        table.add_row("vs torch.compile", f"{s.value:.2f}x  ({s.confidence:.0%} CI {s.low:.2f}-{s.high:.2f})")
    if verdict.floor_ms is not None:
        attainment = verdict.attainment
        text = f"{verdict.floor_ms:.4g} ms"
        if attainment is not None:
            text += f"  (candidate at {attainment:.0%} of the roofline)"
        table.add_row("roofline floor", text)
    for diagnostic in verdict.diagnostics:
        table.add_row("diagnostics", diagnostic.strip()[-2000:])
    for note in verdict.notes:
        table.add_row("note", note)
    return table


def _timing(timing: Timing) -> str:
    return f"{timing.median_ms:.4g} ms median, IQR {timing.iqr_ms:.3g} ms, {len(timing.samples_ms)} runs"


def profile_table(subject: str, profile: Profile) -> Table:
    """Metrics with kernel, value, unit and meaning; then what could not be collected, and notes."""
    table = Table(title=f"{profile.profiler}: {subject}", title_justify="left")
    for column in ("metric", "kernel", "value", "unit", "meaning"):
        table.add_column(column, justify="right" if column == "value" else "left",
                         overflow="fold", no_wrap=column in ("metric", "value"))
    for metric in profile.metrics:
        table.add_row(metric.name, metric.kernel or "-", f"{metric.value:.6g}", metric.unit, metric.meaning)
    for name, reason in profile.not_collected.items():
        table.add_row(name, "-", "[yellow]not collected[/]", "", reason)
    captions = [*profile.notes, *(f"raw: {path}" for path in profile.raw_paths)]
    table.caption = "\n".join(captions) if captions else None
    table.caption_justify = "left"
    return table
