"""What the compiler said when a kernel did not build, in a form fit for a prompt.

gcc and clang write ``file:line:col: severity: message`` lines, each followed by the source line
and a caret; the linker writes ``file:(.text+0x14): undefined reference to `foo'``.
:func:`parse_diagnostics` turns such a log into :class:`BuildDiagnostic` records, and
:class:`NativeBuildError` carries them with the whole log. ``str(error)`` is one line naming the
first error; :meth:`NativeBuildError.summary` gives the first few errors with their source lines,
short enough to hand back to the model that wrote the kernel.

Paths in the log are the cache's; the builder rewrites them to a stable display name
(``kernel.cpp``) before they reach these records, so messages do not change from run to run.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import attrs
from attrs import validators as v

from ....errors import PragmaError
from ....records import frozen_tuple

__all__ = [
    "BuildDiagnostic",
    "NativeBuildError",
    "parse_diagnostics",
    "extension_build_error",
    "trim_lines",
    "SUMMARY_ERRORS",
    "SUMMARY_CHARS",
]

SUMMARY_ERRORS = 5
SUMMARY_CHARS = 2000

_SEVERITIES = ("fatal error", "error", "warning", "note")

# kernel.cpp:12:5: error: 'foo' was not declared in this scope   (column optional)
_COMPILER_LINE = re.compile(
    r"^(?P<file>[^\s:][^:\n]*):(?P<line>\d+):(?:(?P<column>\d+):)?\s*"
    r"(?P<severity>fatal error|error|warning|note):\s*(?P<message>.*)$"
)
# kernel.cpp:(.text+0x14): undefined reference to `foo'   (with -g the linker gives a line)
_LINKER_REFERENCE = re.compile(
    r"^(?P<file>[^\s:][^:\n]*):(?:\((?P<section>[^)]*)\)|(?P<line>\d+)):\s*"
    r"(?P<message>(?:undefined reference|multiple definition|relocation|first defined).*)$"
)
# g++: error: unrecognized command-line option '-ffoo'   /   cc1plus: fatal error: ...
_TOOL_LINE = re.compile(r"^(?P<file>[\w.+-]+):\s*(?P<severity>fatal error|error|warning|note):\s*(?P<message>.*)$")
# /usr/bin/ld: cannot find -lfoo: No such file or directory
_LD_LINE = re.compile(r"^(?P<file>(?:\S*/)?ld(?:\.\w+)?):\s*(?P<message>.*)$")
# the source excerpt gcc prints under a diagnostic: "    3 |     foo(x);" and "      |     ^~~"
_CONTEXT_LINE = re.compile(r"^\s*\d*\s*\|")
_LD_EXIT = re.compile(r"ld returned \d+ exit status")


@attrs.frozen(kw_only=True)
class BuildDiagnostic:
    """One message of the compiler or linker: where it points, how serious, and what it says.

    ``line`` and ``column`` are 1-based and None where the tool gave none (linker messages, bad
    flags). ``context`` holds the source excerpt and caret lines the compiler printed under it.
    """

    file: str = attrs.field(validator=v.instance_of(str))
    line: int | None = attrs.field(default=None, validator=v.optional(v.ge(1)))
    column: int | None = attrs.field(default=None, validator=v.optional(v.ge(1)))
    severity: str = attrs.field(validator=v.in_(_SEVERITIES))
    message: str = attrs.field(validator=v.instance_of(str))
    context: tuple[str, ...] = attrs.field(default=(), converter=frozen_tuple)

    @property
    def is_error(self) -> bool:
        return self.severity in ("error", "fatal error")

    @property
    def location(self) -> str:
        """``kernel.cpp:12:5``, or as much of it as is known."""
        parts = [self.file]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def __str__(self) -> str:
        return f"{self.location}: {self.severity}: {self.message}"


def parse_diagnostics(log: str) -> tuple[BuildDiagnostic, ...]:
    """Every compiler and linker message in ``log``, in order, with the source lines under each."""
    found: list[BuildDiagnostic] = []
    context: list[str] = []

    def flush() -> None:
        if found and context:
            found[-1] = attrs.evolve(found[-1], context=tuple(context))
        context.clear()

    for text in log.splitlines():
        line = text.rstrip()
        if not line:
            continue
        if _CONTEXT_LINE.match(line):
            if found:
                context.append(line)
            continue
        diagnostic = _parse_line(line)
        if diagnostic is not None:
            flush()
            found.append(diagnostic)
    flush()
    # "collect2: error: ld returned 1 exit status" only repeats that the linker failed.
    if any(d.is_error and not _LD_EXIT.search(d.message) for d in found):
        found = [d for d in found if not _LD_EXIT.search(d.message)]
    return tuple(found)


def _parse_line(line: str) -> BuildDiagnostic | None:
    match = _COMPILER_LINE.match(line)
    if match:
        column = match["column"]
        return BuildDiagnostic(
            file=match["file"],
            line=int(match["line"]),
            column=int(column) if column else None,
            severity=match["severity"],
            message=match["message"],
        )
    match = _LINKER_REFERENCE.match(line)
    if match:
        number = match["line"]
        return BuildDiagnostic(
            file=match["file"], line=int(number) if number else None, severity="error", message=match["message"]
        )
    match = _LD_LINE.match(line)
    if match:
        message = match["message"]
        if re.search(r"in function [`'‘]", message):
            return None  # a header naming the function the next message is about
        if message.startswith("warning: "):
            return BuildDiagnostic(file=match["file"], severity="warning", message=message[9:])
        return BuildDiagnostic(file=match["file"], severity="error", message=message.removeprefix("error: "))
    match = _TOOL_LINE.match(line)
    if match:
        return BuildDiagnostic(file=match["file"], severity=match["severity"], message=match["message"])
    return None


class NativeBuildError(PragmaError):
    """C or C++ source did not compile, link or load.

    ``diagnostics`` are the parsed messages, ``log`` is everything the compiler wrote (with cache
    paths replaced by the display name), ``display_name`` is what the source is called in both.
    """

    def __init__(
        self,
        *,
        log: str,
        diagnostics: tuple[BuildDiagnostic, ...] | None = None,
        display_name: str = "kernel.cpp",
        stage: str = "compile",
    ):
        self.log = log
        self.diagnostics = parse_diagnostics(log) if diagnostics is None else tuple(diagnostics)
        self.display_name = display_name
        self.stage = stage
        super().__init__(self._one_line())

    def __reduce__(self) -> tuple[Any, ...]:
        # keyword-only arguments: the default (cls, self.args) would not rebuild it in another process
        return (_rebuild, (self.log, self.diagnostics, self.display_name, self.stage))

    @property
    def errors(self) -> tuple[BuildDiagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.is_error)

    def _one_line(self) -> str:
        errors = self.errors
        if errors:
            first = " ".join(str(errors[0]).split())
            more = len(errors) - 1
            tail = f" (and {more} more error{'s' if more > 1 else ''})" if more else ""
            return f"the kernel failed to {self.stage}: {first}{tail}"
        last = next((line for line in reversed(self.log.splitlines()) if line.strip()), "")
        reason = " ".join(last.split()) or "the compiler gave no message"
        return f"the kernel failed to {self.stage}: {reason}"

    def summary(self, *, max_errors: int = SUMMARY_ERRORS, max_chars: int = SUMMARY_CHARS) -> str:
        """The first errors with their source lines, at most ``max_chars`` long, for a prompt."""
        errors = self.errors
        if not errors:
            text = self.log.strip() or str(self)
            if len(text) > max_chars:  # without parsed errors, the end of the log says most
                text = "... (log trimmed)\n" + text[-(max_chars - 18) :]
            return text
        lines: list[str] = []
        for diagnostic in errors[:max_errors]:
            lines.append(str(diagnostic))
            lines.extend(diagnostic.context)
        if len(errors) > max_errors:
            lines.append(f"... and {len(errors) - max_errors} more errors")
        return trim_lines(lines, max_chars)


def _rebuild(log: str, diagnostics: tuple[BuildDiagnostic, ...], display_name: str, stage: str) -> NativeBuildError:
    return NativeBuildError(log=log, diagnostics=diagnostics, display_name=display_name, stage=stage)


def trim_lines(lines: list[str], max_chars: int) -> str:
    """Whole lines up to ``max_chars``, with a note when some were cut."""
    note = "... (trimmed)"
    kept: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > max_chars - len(note) - 1:
            kept.append(note)
            break
        kept.append(line)
        used += len(line) + 1
    return "\n".join(kept)


# torch's extension loader builds main.cpp (and cuda.cu) in its build folder: messages name them so.
_EXTENSION_PATH = re.compile(r"(?:/[^\s:'\"]+)*/((?:main|cuda)\.(?:cpp|cu))\b")


def extension_build_error(
    message: str, parse: Callable[[str], tuple[BuildDiagnostic, ...]] | None = None
) -> NativeBuildError | None:
    """The build error in the message of torch's ``Error building extension`` (``load_inline`` or
    ``load``), with the compiler's diagnostics, its build folder left out of their paths; None when
    the message names no error. ``parse`` reads the log (the nvcc reader for CUDA sources: it also
    reads gcc's and clang's lines); by default gcc's and clang's format."""
    log = _EXTENSION_PATH.sub(r"\1", message)
    diagnostics = (parse or parse_diagnostics)(log)
    if not any(diagnostic.is_error for diagnostic in diagnostics):
        return None
    return NativeBuildError(log=log, diagnostics=diagnostics, display_name="main.cpp")
