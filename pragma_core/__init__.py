"""pragma: make compute kernels faster with a closed loop of agents and hardware profilers.

The pieces, each importable alone:

- tasks: :func:`load_task`, :func:`load_tasks` read PyTorch reference programs (KernelBench format);
- records (:mod:`pragma_core.records`): the frozen data passed between the parts and written to
  disk, with :func:`write_record` / :func:`read_record`;
- verification: :func:`verify` checks a candidate against a task in a sandbox and times it;
- plugins: :func:`get_registry` gives the backends, profilers, LLM providers and metric selectors
  that built-in and installed plugins registered; a plugin implements the hooks of
  :mod:`pragma_core.plugin_api.hookspecs` with :data:`hookimpl`.
"""

from __future__ import annotations

from ._version import __version__
from .errors import CandidateError, PluginError, PragmaError, RecordError, SizeOverrideError, TaskError
from .plugin_api.components import (
    Availability,
    Backend,
    LLMProvider,
    MetricSelector,
    Profiler,
    ProfileTarget,
)
from .plugin_api.hookspecs import hookimpl
from .plugin_api.registry import PluginRegistry, get_registry, reset_registry
from .records import (
    AgentRole,
    Attempt,
    Baseline,
    BoundClass,
    Candidate,
    Category,
    ChatMessage,
    Completion,
    CompletionRequest,
    Diagnosis,
    Guidance,
    Metric,
    Profile,
    RunResult,
    Speedup,
    Task,
    TaskAnalysis,
    TensorSpec,
    Timing,
    TimingConditions,
    TokenUsage,
    Verdict,
    VerdictStatus,
)
from .serialization import from_dict, read_record, to_dict, write_record
from .tasks.categories import infer_category
from .tasks.loading import load_task, load_tasks, parse_size_assignments, task_namespace, task_program

__all__ = [
    "__version__",
    # verification (imported on first use: it brings torch)
    "verify",
    "VerifySettings",
    "optimize",
    "OptimizeSettings",
    # tasks
    "load_task",
    "load_tasks",
    "parse_size_assignments",
    "task_program",
    "task_namespace",
    "infer_category",
    # records
    "AgentRole",
    "Attempt",
    "Baseline",
    "BoundClass",
    "Candidate",
    "Category",
    "ChatMessage",
    "Completion",
    "CompletionRequest",
    "Diagnosis",
    "Guidance",
    "Metric",
    "Profile",
    "RunResult",
    "Speedup",
    "Task",
    "TaskAnalysis",
    "TensorSpec",
    "Timing",
    "TimingConditions",
    "TokenUsage",
    "Verdict",
    "VerdictStatus",
    "to_dict",
    "from_dict",
    "write_record",
    "read_record",
    # plugins
    "hookimpl",
    "Availability",
    "Backend",
    "LLMProvider",
    "MetricSelector",
    "Profiler",
    "ProfileTarget",
    "PluginRegistry",
    "get_registry",
    "reset_registry",
    # errors
    "PragmaError",
    "TaskError",
    "CandidateError",
    "SizeOverrideError",
    "PluginError",
    "RecordError",
]


def __getattr__(name: str):  # noqa: ANN202 - PEP 562 lazy attributes
    if name in ("verify", "VerifySettings"):
        from . import verifier

        return getattr(verifier, name)
    if name == "optimize":
        from .loop.optimizer import optimize

        return optimize
    if name == "OptimizeSettings":
        from .loop.settings import OptimizeSettings

        return OptimizeSettings
    raise AttributeError(f"module 'pragma_core' has no attribute {name!r}")
