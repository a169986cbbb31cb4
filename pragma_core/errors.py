"""The errors pragma raises on purpose.

Every error a user can cause (a bad task file, a bad ``--set`` value, a plugin that will not load)
is a :class:`PragmaError`. Its message is one line, written for the person who has to act on it:
what is wrong, where, and what to do. The CLI prints it and exits with code 2; anything else is a
bug in pragma and keeps its traceback.
"""

from __future__ import annotations

import traceback
from pathlib import Path

__all__ = [
    "describe_exception",
    "PragmaError",
    "TaskError",
    "CandidateError",
    "SizeOverrideError",
    "PluginError",
    "RecordError",
    "ProfileParseError",
    "ProfilerUnavailable",
    "BackendUnavailable",
    "ProviderError",
    "PromptTooLong",
]


class PragmaError(Exception):
    """Base class: bad input or configuration that the user can fix."""


class TaskError(PragmaError):
    """A task file is missing, does not parse, or does not follow the KernelBench format."""


class CandidateError(PragmaError):
    """A candidate file given to pragma is missing, unreadable or empty."""


class SizeOverrideError(TaskError):
    """A ``--set NAME=VALUE`` override names no size constant of the task, or has a bad value."""


class PluginError(PragmaError):
    """A plugin failed to load or conflicts with another (raised in strict mode or on lookup)."""


class ProfileParseError(PragmaError):
    """A profiler's output is not in a format its parser knows; the message says what was seen."""


class ProfilerUnavailable(PragmaError):
    """A profiler cannot run here; the message is the probe's reason."""


class BackendUnavailable(PragmaError):
    """A candidate's backend cannot run here; the message is the probe's reason."""


class ProviderError(PragmaError):
    """The model provider could not answer: a call refused, or failed after its retries (a server
    that stopped, a wrong key). A run stops there with its finished attempts kept; resuming it
    asks again."""


class PromptTooLong(PragmaError):
    """A prompt does not fit the model's context window even with every part that can give way
    cut; the message says how many tokens it needs and how many the model takes."""


class RecordError(PragmaError):
    """A record file on disk cannot be read: wrong schema version, wrong kind, or bad fields."""


def describe_exception(error: BaseException, path: Path) -> str:
    """``ValueError: bad size (line 12)``: the error and the deepest line of the task it came from."""
    text = " ".join(str(error).split())
    line = None
    for frame in traceback.extract_tb(error.__traceback__):
        if frame.filename == str(path):
            line = frame.lineno
    where = f" (line {line})" if line is not None else ""
    return f"{type(error).__name__}: {text}{where}" if text else f"{type(error).__name__}{where}"
