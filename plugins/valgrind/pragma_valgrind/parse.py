"""The valgrind profiler's parser: any cachegrind output in, metrics out; pure, tested on real files.

Three kinds of output are recognised by their shape:

* a ``cachegrind.out`` file (or cg_merge output): program totals with ``kernel=""`` and the totals
  of every function with ``kernel=<function name>``, added over the files it has lines in;
* cg_annotate text: program totals and the functions it lists, for the events it shows;
* the exit summary cachegrind prints (``==PID== I   refs: ...``): program totals only.

Each set of totals gives the raw events present and the rates they allow
(:mod:`pragma_valgrind.metrics`). Anything else raises
:class:`~pragma_core.errors.ProfileParseError` naming what it saw.
"""

from __future__ import annotations

from pragma_core.errors import ProfileParseError
from pragma_core.records import Metric

from .metrics import metrics_from_totals
from .outfile import looks_like_outfile, read_outfile
from .reports import TextReport, looks_like_annotate, looks_like_exit_summary, read_annotate, read_exit_summary

__all__ = ["parse"]


def parse(raw: str) -> list[Metric]:
    """Metrics of a cachegrind.out file, cg_annotate output or cachegrind's exit summary."""
    if not raw.strip():
        raise ProfileParseError("empty input: expected a cachegrind.out file or cg_annotate output")
    if looks_like_outfile(raw):
        out = read_outfile(raw)
        return _metrics(TextReport(events=out.events, totals=out.totals(), functions=out.functions()))
    if looks_like_annotate(raw):
        return _metrics(read_annotate(raw))
    if looks_like_exit_summary(raw):
        return _metrics(read_exit_summary(raw))
    first = raw.strip().splitlines()[0][:60]
    raise ProfileParseError(
        f"not cachegrind output (no 'events:' line, no 'PROGRAM TOTALS' row, no '==PID== I refs:' summary); "
        f"it starts with {first!r}"
    )


def _metrics(report: TextReport) -> list[Metric]:
    metrics = metrics_from_totals(report.totals)
    for function, totals in report.functions.items():
        metrics += metrics_from_totals(totals, kernel=function)
    return metrics
