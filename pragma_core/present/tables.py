"""Human-readable renderings of records: rich tables for the terminal."""

from __future__ import annotations

from rich.table import Table

from ..loop.run_summary import trace_entries
from ..records import Attempt, Baseline, Profile, RunResult, Task, Timing, TimingConditions, Verdict, VerdictStatus

__all__ = ["verdict_table", "machine_text", "profile_table", "attempt_line", "run_table", "trace_text"]

_STATUS_STYLE = {
    VerdictStatus.CORRECT: "bold green",
    VerdictStatus.REJECTED: "bold red",
    VerdictStatus.UNCHANGED: "bold cyan",  # correct, the same code as its parent: not timed
}


def verdict_table(task: Task, candidate_name: str, verdict: Verdict) -> Table:
    table = Table(title=f"{candidate_name} on {task.key}", title_justify="left", show_header=False)
    table.add_column("field", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    style = _STATUS_STYLE.get(verdict.status, "bold yellow")
    table.add_row("status", f"[{style}]{verdict.status.value}[/]")
    if verdict.failed_check:
        table.add_row("failed check", verdict.failed_check)
    table.add_row("message", verdict.message)
    if verdict.relative_error_norm is not None:  # what the verdict rests on first: the whole output's error
        table.add_row("whole-output error", f"{verdict.relative_error_norm:.3g} (||c - r|| / ||r||)")
    if verdict.max_abs_error is not None:
        where = f" at {verdict.error_index}" if verdict.error_index is not None else ""
        table.add_row("max abs error", f"{verdict.max_abs_error:.3g}{where}")
    if verdict.max_rel_error is not None:
        # on a correct candidate a large relative error is where the reference is near zero, which the
        # element check (atol + rtol * |reference|) allows: said, so the figure does not alarm
        why = " (largest where the reference is near zero; each element passed atol + rtol x |reference|)"
        table.add_row("max rel error", f"{verdict.max_rel_error:.3g}" + (why if verdict.ok else ""))
    if verdict.reference:
        table.add_row("reference", _timing(verdict.reference))
    if verdict.compiled_reference:
        table.add_row("torch.compile", _timing(verdict.compiled_reference))
    if verdict.candidate:
        table.add_row("candidate", _timing(verdict.candidate))
    if verdict.speedup and verdict.noisy:
        table.add_row("speedup", f"[yellow]about {verdict.speedup.value:.2f}x, noisy: not a measurement to compare[/]")
    elif verdict.speedup:
        s = verdict.speedup
        table.add_row("speedup", f"{s.value:.2f}x  ({s.confidence:.0%} CI {s.low:.2f}-{s.high:.2f})")
    if verdict.conditions is not None:
        table.add_row("machine", machine_text(verdict.conditions))
    if verdict.speedup_vs_compiled:
        s = verdict.speedup_vs_compiled
        table.add_row("vs torch.compile", f"{s.value:.2f}x  ({s.confidence:.0%} CI {s.low:.2f}-{s.high:.2f})")
    if verdict.floor_ms is not None:
        table.add_row("roofline floor", _floor_text(verdict.floor_ms, verdict.candidate, "this machine's peaks"))
    if verdict.library_floor_ms is not None:
        table.add_row(
            "library floor", _floor_text(verdict.library_floor_ms, verdict.candidate, "torch's sgemm and copy")
        )
    if verdict.seed is not None:
        table.add_row("seed", f"{verdict.seed}  (--seed repeats these inputs)")
    for diagnostic in verdict.diagnostics:
        table.add_row("diagnostics", diagnostic.strip()[-2000:])
    for note in verdict.notes:
        table.add_row("note", note)
    return table


def machine_text(conditions: TimingConditions) -> str:
    """One line on the machine while a verdict's timing ran: threads, CPUs, others' load, noise."""
    parts = [f"{conditions.threads} thread(s) on CPU {', '.join(map(str, conditions.cpus))}"]
    if conditions.other_cpu is not None:
        parts.append(f"others used {conditions.other_cpu:.2f} CPU")
    if conditions.steal is not None:
        parts.append(f"steal {conditions.steal:.2f} CPU")
    if conditions.load_average is not None:
        parts.append(f"load {conditions.load_average[0]:.2f}-{conditions.load_average[1]:.2f}")
    if conditions.frequency_mhz is not None:
        low, high = conditions.frequency_mhz
        parts.append(f"{low:.0f} MHz" if low == high else f"{low:.0f}-{high:.0f} MHz")
    if conditions.calibration_ms is not None:
        before, after = conditions.calibration_ms
        best = f", best {conditions.calibration_best_ms:.3g}" if conditions.calibration_best_ms else ""
        parts.append(f"calibration {before:.3g}/{after:.3g} ms{best}")
    if conditions.memory_probe_ms is not None:
        before, after = conditions.memory_probe_ms
        best = f", best {conditions.memory_probe_best_ms:.3g}" if conditions.memory_probe_best_ms else ""
        parts.append(f"memory probe {before:.3g}/{after:.3g} ms{best}")
    if conditions.drift is not None:
        parts.append(f"drift {conditions.drift:.2f}x")
    text = "; ".join(parts)
    return f"{text}  [yellow]noisy: {'; '.join(conditions.noise)}[/]" if conditions.noisy else text


def _floor_text(floor_ms: float, candidate: Timing | None, what: str) -> str:
    """A floor, what sets it, and the candidate's time as a share of it (its attainment)."""
    text = f"{floor_ms:.4g} ms at {what}"
    if candidate is not None and candidate.median_ms > 0:
        text += f"; the candidate takes {candidate.median_ms / floor_ms:.2f}x it ({floor_ms / candidate.median_ms:.0%})"
    return text


def _timing(timing: Timing) -> str:
    return f"{timing.median_ms:.4g} ms median, IQR {timing.iqr_ms:.3g} ms, {len(timing.samples_ms)} runs"


def profile_table(subject: str, profile: Profile) -> Table:
    """Metrics with kernel, value, unit and meaning; then what could not be collected, and notes."""
    table = Table(title=f"{profile.profiler}: {subject}", title_justify="left")
    for column in ("metric", "kernel", "value", "unit", "meaning"):
        table.add_column(
            column,
            justify="right" if column == "value" else "left",
            overflow="fold",
            no_wrap=column in ("metric", "value"),
        )
    for metric in profile.metrics:
        table.add_row(metric.name, metric.kernel or "-", f"{metric.value:.6g}", metric.unit, metric.meaning)
    for name, reason in profile.not_collected.items():
        table.add_row(name, "-", "[yellow]not collected[/]", "", reason)
    captions = [*profile.notes, *(f"raw: {path}" for path in profile.raw_paths)]
    table.caption = "\n".join(captions) if captions else None
    table.caption_justify = "left"
    return table


def _speedup_text(verdict: Verdict | None) -> str:
    if verdict is None or verdict.speedup is None:
        return "-"
    s = verdict.speedup
    if verdict.noisy:
        return f"~{s.value:.2f}x noisy"
    return f"{s.value:.2f}x [{s.low:.2f}-{s.high:.2f}]"


def attempt_line(attempt: Attempt, best: Attempt | None) -> str:
    """Live progress: attempt, status, speedup, best so far, tokens; then one line per profiler
    that gave no profile of it, with why."""
    status = attempt.verdict.status.value if attempt.verdict else "no verdict"
    best_text = f"best #{best.number} {_speedup_text(best.verdict)}" if best else "no best yet"
    line = (
        f"attempt {attempt.number:>2}  {status:<14} {_speedup_text(attempt.verdict):<20} {best_text}  "
        f"tokens {attempt.usage.prompt}+{attempt.usage.completion}"
    )
    return "\n".join([line, *(f"    no {name} profile: {reason}" for name, reason in attempt.skipped.items())])


def run_table(result: RunResult) -> Table:
    """The summary at the end of a run: every attempt, the best marked."""
    table = Table(
        title=f"{result.task.key}: {len(result.attempts)} attempts, stopped: {result.stop_reason}", title_justify="left"
    )
    for column in ("#", "status", "speedup (95% CI)", "roofline", "bound", "prompt tokens", "s"):
        table.add_column(column, justify="left" if column in ("status", "bound") else "right")
    for attempt in result.attempts:
        verdict = attempt.verdict
        attainment = verdict.attainment if verdict else None
        mark = " *" if attempt.number == result.best_attempt else ""
        table.add_row(
            f"{attempt.number}{mark}",
            verdict.status.value if verdict else "-",
            _speedup_text(verdict),
            f"{attainment:.0%}" if attainment is not None else "-",
            attempt.diagnosis.bound.value if attempt.diagnosis else "-",
            str(attempt.usage.prompt),
            f"{attempt.elapsed_s:.0f}",
        )
    table.caption = (
        "* the best: replaced only by a candidate faster than it side by side (the ratio's interval above 1); "
        "unchanged: the same machine code as its parent, not timed"
    )
    return table


def trace_text(task: Task, attempts: list[Attempt], baseline: Baseline | None = None) -> str:
    """The Conductor's reasoning per attempt, in the spirit of the paper's Listing 1; first what
    the baseline measured and which profilers could not watch the run."""
    lines = [f"trace of {task.key}"]
    if baseline is not None:
        reference = f"{baseline.reference.median_ms:.4g} ms" if baseline.reference else "not timed"
        floor = f", roofline floor {baseline.floor_ms:.4g} ms" if baseline.floor_ms is not None else ""
        if baseline.library_floor_ms is not None:
            floor += f" (at torch's own sgemm and copy rates {baseline.library_floor_ms:.4g} ms)"
        bound = f" ({baseline.bound.value} bound)" if baseline.bound else ""
        lines.append(f"baseline: reference {reference}{floor}{bound}")
        lines += [f"   no {name} profile of the reference: {reason}" for name, reason in baseline.skipped.items()]
    for attempt, best in trace_entries(attempts):
        verdict = attempt.verdict
        lines.append("")
        lines.append(
            f"== attempt {attempt.number}: {verdict.status.value if verdict else '-'} {_speedup_text(verdict)}"
        )
        if verdict is not None and not verdict.ok:
            lines.append(f"   verifier: {verdict.message}")
        history = f"#{best.number} {_speedup_text(best.verdict)}" if best else "none yet"
        lines.append(f"   historical best: {history}; current: {_speedup_text(verdict)}")
        if attempt.diagnosis is not None:
            d = attempt.diagnosis
            attainment = f", {d.roofline_attainment:.0%} of the roofline" if d.roofline_attainment is not None else ""
            lines.append(f"   diagnosis: {d.bound.value} bound{attainment}")
            lines += [f"     - {hint}" for hint in d.hints]
            if d.deltas:
                lines.append("     deltas vs best: " + ", ".join(f"{k} {v:+.3g}" for k, v in d.deltas.items()))
        lines += [f"   no {name} profile: {reason}" for name, reason in attempt.skipped.items()]
        if attempt.guidance is not None:
            lines.append(f"   analysis: {attempt.guidance.analysis}")
            lines += [f"   action: {action}" for action in attempt.guidance.actions]
            if attempt.guidance.extra_metrics:
                lines.append("   asks for: " + ", ".join(attempt.guidance.extra_metrics))
    if attempts:
        lines += ["", *phase_time_lines(attempts)]
    return "\n".join(lines)


_PHASE_HEADERS = {
    "writing": "write",
    "building": "build",
    "verifying": "verify",
    "timing": "timing",
    "finishing": "finish",
    "diagnosing": "diagnose",
    "advising": "advise",
}


def phase_time_lines(attempts: list[Attempt]) -> list[str]:
    """A plain-text table of seconds per phase and attempt: the phases of the loop (a column per
    profiler), the attempt's total, its timed calls and the overhead beyond them (total - timed).
    An attempt from before pragma measured phases shows ``-`` in the phase columns."""
    seen = list(dict.fromkeys(name for attempt in attempts for name in attempt.phase_seconds))
    before = [name for name in ("writing", "building", "verifying", "timing", "finishing") if name in seen]
    after = [name for name in ("diagnosing", "advising") if name in seen]
    middle = sorted(name for name in seen if name not in before and name not in after)  # the profilers
    phases = [*before, *middle, *after]
    headers = ["#", *(_PHASE_HEADERS.get(name, name.removeprefix("profiling:")) for name in phases)]
    headers += ["total", "timed", "overhead"]
    rows = []
    for attempt in attempts:
        cells = [f"{attempt.phase_seconds[name]:.2f}" if name in attempt.phase_seconds else "-" for name in phases]
        timed = attempt.timed_s
        rows.append(
            [
                str(attempt.number),
                *cells,
                f"{attempt.elapsed_s:.2f}",
                f"{timed:.2f}",
                f"{attempt.elapsed_s - timed:.2f}",
            ]
        )
    widths = [max(len(header), *(len(row[i]) for row in rows)) for i, header in enumerate(headers)]
    lines = ["seconds per phase (timed: the timed calls inside timing; overhead: total - timed)"]
    for cells in (headers, *rows):
        lines.append("  ".join(cell.rjust(width) for cell, width in zip(cells, widths)))
    return lines
