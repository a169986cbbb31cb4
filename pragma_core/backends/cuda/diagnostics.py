"""What nvcc said when a CUDA kernel did not build, as :class:`~pragma_core.native.BuildDiagnostic` records.

nvcc runs several tools and each writes its own format; :func:`parse_nvcc_diagnostics` reads them
all, in the order they came, into the records the ``cpu-cpp`` backend uses, so a verdict, a prompt
and :class:`~pragma_core.native.NativeBuildError` treat a CUDA build like a C++ one:

- the CUDA front end (EDG's ``cudafe++`` and ``cicc``), ``kernel.cu(12): error: identifier "foo" is
  undefined``, then the source line and a caret under the culprit (the column comes from the
  caret), and for templates ``detected during instantiation of ...`` lines; warnings carry a number
  (``warning #177-D:``), dropped here, kept in the log;
- the host compiler (gcc, clang) for preprocessing and host code: ``kernel.cu:2:10: fatal error:
  ...``, the format :func:`~pragma_core.native.parse_diagnostics` reads, and ``gcc: error: ...``;
- the PTX assembler: ``ptxas error   : Entry function '...' uses too much shared data``, or with a
  place, ``ptxas /tmp/tmpxft_..._kernel.ptx, line 43; error   : ...`` (a line of the generated PTX,
  not of the source: the file is named ``kernel.ptx`` so nobody mistakes one for the other);
- the driver itself: ``nvcc fatal   : Unsupported gpu architecture 'sm_50'``.

hipcc is clang and writes the ``file:line:col:`` format, which this parser reads as well.

:func:`stable_log` rewrites the paths of a build folder in a log to display names before it is
parsed, so messages read the same from run to run (``kernel.cu``, ``kernel.ptx``).
"""

from __future__ import annotations

import re

import attrs

from ..cpu_cpp.native import BuildDiagnostic, parse_diagnostics

__all__ = ["parse_nvcc_diagnostics", "stable_log"]

# kernel.cu(6): error: identifier "zero" is undefined  /  kernel.cu(5): warning #177-D: variable ...
_FRONT_END = re.compile(
    r"^(?P<file>\S(?:.*?\S)?)\((?P<line>\d+)\): "
    r"(?P<severity>catastrophic error|internal error|error|warning|remark|note)"
    r"(?: #\d+(?:-[A-Z])?)?: (?P<message>.*)$"
)
# ptxas error   : ...   /   ptxas /tmp/tmpxft_0000_00000000-6_kernel.ptx, line 43; error   : ...
_PTXAS = re.compile(
    r"^ptxas(?: (?P<file>[^,]+), line (?P<line>\d+);)? (?P<severity>fatal|error|warning|info)\s*: (?P<message>.*)$"
)
# nvcc fatal   : Unsupported gpu architecture 'sm_50'
_DRIVER = re.compile(r"^nvcc (?P<severity>fatal|error|warning)\s*: (?P<message>.*)$")
# the front end's closing count, "2 errors detected in the compilation of "kernel.cu"."
_FRONT_END_TOTAL = re.compile(r"^\d+ errors? detected in the compilation of ")
_PTXAS_ABORTED = "Ptx assembly aborted due to errors"
# "                 from kernel.cu:2:" continues gcc's "In file included from ..." line
_INCLUDED_FROM = re.compile(r"^\s+from \S.*[:,]$")

_SEVERITY = {
    "catastrophic error": "fatal error",
    "internal error": "fatal error",
    "fatal": "fatal error",
    "error": "error",
    "warning": "warning",
    "remark": "note",
    "note": "note",
    "info": "note",
}

# Generated files of nvcc's own temporary folder: /tmp/tmpxft_00005784_00000000-6_kernel.ptx
_NVCC_TEMPORARY = re.compile(
    r"(?:\S*/)?tmpxft_[0-9a-f]+_[0-9a-f]+-\d+_(?P<stem>[\w.+-]+?)\.(?P<suffix>ptx|cubin|ii|c|cpp)\b"
)


def stable_log(log: str, *, folder: str, display_names: dict[str, str] | None = None) -> str:
    """``log`` with the build ``folder`` and nvcc's temporary files replaced by display names.

    ``display_names`` maps file names inside ``folder`` to what messages should call them (a
    ``kernel.hip`` that hipify wrote is still the ``kernel.cu`` the candidate holds); other files
    of the folder keep their name without the folder. nvcc's own intermediates
    (``/tmp/tmpxft_..._kernel.ptx``) become ``kernel.ptx``.
    """
    folder = folder.rstrip("/")
    for name, display in (display_names or {}).items():
        log = log.replace(f"{folder}/{name}", display)
    log = log.replace(f"{folder}/", "")
    return _NVCC_TEMPORARY.sub(lambda match: f"{match['stem']}.{match['suffix']}", log)


def parse_nvcc_diagnostics(log: str) -> tuple[BuildDiagnostic, ...]:
    """Every message of nvcc and the tools it ran, in order, each with the lines printed under it.

    Lines that only count or repeat errors (``1 error detected in the compilation of ...``,
    ``ptxas fatal : Ptx assembly aborted due to errors`` beside the errors it sums up) are left
    out; a log with no message in a known format gives an empty tuple.
    """
    found: list[BuildDiagnostic] = []
    context: list[str] = []

    def flush() -> None:
        if found and context:
            found[-1] = _with_context(found[-1], context)
        context.clear()

    include_chain = False
    for text in log.splitlines():
        line = text.rstrip()
        if not line.strip():
            continue
        if line.startswith("In file included from ") or (include_chain and _INCLUDED_FROM.match(line)):
            flush()  # gcc's chain of includes leading to the next message: not about the last one
            include_chain = True
            continue
        include_chain = False
        diagnostic = _parse_line(line)
        if diagnostic is not None:
            flush()
            found.append(diagnostic)
        elif line[0].isspace() and found:
            context.append(line)  # a source line, a caret, "detected during ..." or gcc's "  2 | ..."
        else:
            flush()  # "compilation terminated.", "Remark: ...", the closing count: about no one message
    flush()
    if any(d.is_error and d.message != _PTXAS_ABORTED for d in found):
        found = [d for d in found if d.message != _PTXAS_ABORTED]
    return tuple(found)


def _parse_line(line: str) -> BuildDiagnostic | None:
    if _FRONT_END_TOTAL.match(line):
        return None
    match = _FRONT_END.match(line)
    if match:
        return BuildDiagnostic(
            file=match["file"],
            line=int(match["line"]),
            severity=_SEVERITY[match["severity"]],
            message=match["message"],
        )
    match = _PTXAS.match(line)
    if match:
        number = match["line"]
        return BuildDiagnostic(
            file=match["file"] or "ptxas",
            line=int(number) if number and int(number) > 0 else None,
            severity=_SEVERITY[match["severity"]],
            message=match["message"],
        )
    match = _DRIVER.match(line)
    if match:
        return BuildDiagnostic(file="nvcc", severity=_SEVERITY[match["severity"]], message=match["message"])
    host = parse_diagnostics(line)  # gcc's and clang's file:line:col: format, and "gcc: error: ..."
    return host[0] if host else None


def _with_context(diagnostic: BuildDiagnostic, lines: list[str]) -> BuildDiagnostic:
    """``diagnostic`` with its printed context, and the column its caret points at when it had none."""
    column = diagnostic.column
    if column is None and len(lines) >= 2 and _is_front_end_source_line(lines[0]) and lines[1].strip() == "^":
        # The front end prints the source line indented by two spaces and the caret under it.
        source, caret = lines[0], lines[1]
        if "\t" not in source and caret.index("^") >= 2:
            column = caret.index("^") - 1
    return attrs.evolve(diagnostic, context=tuple(lines), column=column)


def _is_front_end_source_line(line: str) -> bool:
    return line.startswith("  ") and "|" not in line[:8] and not line.lstrip().startswith("detected during")
