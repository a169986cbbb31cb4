"""Conformance suites for plugin authors: subclass one in your plugin's tests.

:class:`ProfilerPluginTests` (and :class:`ProfilerContractTests`) for profilers
(:mod:`.profilers`), :class:`BackendPluginTests` for backends (:mod:`.backends`).
"""

from __future__ import annotations

from .backends import BackendPluginTests
from .profilers import (
    ENV_ABSENT,
    ENV_PROBE,
    RUN_MARKER,
    UNREADABLE_OUTPUTS,
    ProfilerContractTests,
    ProfilerPluginTests,
    environment_program,
    hanging_program,
    survivors,
)

__all__ = [
    "BackendPluginTests",
    "ENV_ABSENT",
    "ENV_PROBE",
    "RUN_MARKER",
    "UNREADABLE_OUTPUTS",
    "ProfilerContractTests",
    "ProfilerPluginTests",
    "environment_program",
    "hanging_program",
    "survivors",
]
