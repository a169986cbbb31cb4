"""The four kinds of component a plugin registers: backends, profilers, LLM providers, selectors.

Each is a frozen record: data (a unique ``name``, the devices it serves, a description) plus its
behaviour as small callables whose shapes are the protocols below. A plugin builds the record and
hands it to the ``register`` callback of the matching hook (:mod:`pragma_core.plugin_api.hookspecs`)::

    Profiler(
        name="valgrind",
        devices=("cpu",),
        description="cachegrind: simulated caches and branches",
        probe=probe,               # () -> Availability
        default_metrics=("D1 miss rate", "LL miss rate"),
        collect=collect,           # (target, metrics) -> Profile
        parse=parse,               # (raw) -> list[Metric]
        doc_sources=("https://valgrind.org/docs/manual/cg-manual.html",),
    )
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

import attrs
from attrs import validators as v

from ..records import (
    Candidate,
    ChatMessage,
    Completion,
    CompletionRequest,
    Metric,
    Profile,
    Task,
    TaskAnalysis,
    frozen_strings,
)

__all__ = [
    "DEVICE_KINDS",
    "DEFAULT_PROFILE_TIMEOUT_S",
    "Availability",
    "ProfileTarget",
    "Probe",
    "LoadCandidate",
    "KernelEvidence",
    "Clock",
    "RecordedCall",
    "RecordedCalls",
    "KernelReplay",
    "CollectProfile",
    "ParseOutput",
    "Complete",
    "SelectMetrics",
    "DefaultMetrics",
    "Backend",
    "Profiler",
    "LLMProvider",
    "PromptRoom",
    "MetricSelector",
]

DEVICE_KINDS = ("cpu", "cuda", "rocm")
"""The device kinds pragma knows: host CPU, NVIDIA GPU, AMD GPU."""


@attrs.frozen(kw_only=True)
class Availability:
    """Whether a component can run here; when it cannot, precisely why and what still works."""

    available: bool
    reason: str = ""
    still_works: str = ""

    def __attrs_post_init__(self) -> None:
        if not self.available and not self.reason:
            raise ValueError("an unavailable component must say why")


DEFAULT_PROFILE_TIMEOUT_S = 600.0
"""How long one run of a profiling tool may take unless the caller says otherwise: the replay or the
forwards of a target usually take seconds, a tool's own passes (ncu's replays) can take minutes."""


def _optional_strings(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if value is None else frozen_strings(value)


def _environment(value: Mapping[str, str]) -> dict[str, str]:
    """A copy of the environment, refusing what no process can be given (a None, a number)."""
    if not isinstance(value, Mapping):
        raise TypeError(f"env must map variable names to strings, got {type(value).__name__}")
    bad = [key for key, item in value.items() if not isinstance(key, str) or not isinstance(item, str)]
    if bad:
        raise TypeError(f"environment variables must be strings; {bad[0]!r} is {value[bad[0]]!r}")
    return dict(value)


def _current_environment() -> dict[str, str]:
    return dict(os.environ)


@attrs.frozen(kw_only=True)
class ProfileTarget:
    """What a profiler is asked to measure, prepared by pragma so that plugins only run tools.

    ``python_argv`` runs ``repetitions`` forwards of the candidate (the reference when ``candidate``
    is None) after a warm-up, in a fresh Python process; GPU forwards are wrapped in the NVTX range
    ``pragma_forward``. ``replay_argv`` is set for CPU candidates on the native fast path: a small C
    program that replays the kernel calls of one recorded forward ``repetitions`` times, with no
    Python around it. ``kernel_functions``, ``kernel_sources`` and ``kernel_libraries`` name the
    candidate's kernels, their source files as compiled and the built libraries, so metrics can be
    attributed to them and not to the harness. Raw tool output goes into ``out_dir``.

    ``env`` is the complete environment of the profiled program (``prepare_target`` builds it with
    the thread counts and allocator settings of :func:`~pragma_core.sandbox.process.child_environment`; a
    target built by hand gets a copy of this process's environment at construction). A plugin runs
    its tool with it, adding on top only what the tool needs (``LC_ALL=C`` for perf's numbers), and
    never tops it up from ``os.environ``: what is not in ``env`` is not in the program's
    environment. ``timeout_s`` is the longest one run of the tool may take; past it the tool is
    killed with everything it started (:func:`pragma_core.sandbox.tools.run_tool`) and the run is
    reported as timed out.
    """

    task: Task
    candidate: Candidate | None
    out_dir: Path = attrs.field(converter=Path)
    device: str = attrs.field(default="cpu", validator=v.in_(DEVICE_KINDS))
    python_argv: tuple[str, ...] = attrs.field(default=(), converter=frozen_strings)
    replay_argv: tuple[str, ...] | None = attrs.field(default=None, converter=_optional_strings)
    kernel_functions: tuple[str, ...] = attrs.field(default=(), converter=frozen_strings)
    kernel_sources: tuple[str, ...] = attrs.field(default=(), converter=frozen_strings)
    kernel_libraries: tuple[str, ...] = attrs.field(default=(), converter=frozen_strings)
    repetitions: int = attrs.field(default=1, validator=v.ge(1))
    # not in repr: a whole environment holds API keys, and targets end up in logs and test reports
    env: dict[str, str] = attrs.field(factory=_current_environment, converter=_environment, repr=False)
    timeout_s: float = attrs.field(default=DEFAULT_PROFILE_TIMEOUT_S, validator=v.gt(0))


class Probe(Protocol):
    """Says whether the component can run on this machine; fast and side-effect free."""

    def __call__(self) -> Availability: ...


class LoadCandidate(Protocol):
    """Builds a candidate in ``workdir`` (inside the sandbox child) and returns its ModelNew class."""

    def __call__(self, candidate: Candidate, workdir: Path) -> type: ...


class KernelEvidence(Protocol):
    """The proof, inside the sandbox child, that a candidate ran kernels of its backend.

    Made before the candidate is loaded: :meth:`install` sets up whatever watches the backend's
    launches (ctypes calls on the CPU fast path, ``load_inline`` functions, Triton launches), and
    :meth:`count` is how many launches it has seen so far. The verifier rejects a candidate whose
    forward made none (``kernel-not-called``)."""

    def install(self) -> None: ...

    def count(self) -> int: ...


class Clock(Protocol):
    """Times one call inside the sandbox child: returns the call's result and its milliseconds.

    The host clock (``time.perf_counter`` around the call) serves CPU backends; a GPU backend's
    clock flushes the L2, synchronizes the whole device around the call and reads CUDA events."""

    def __call__(self, call: Callable[[], Any]) -> tuple[Any, float]: ...


class RecordedCall(Protocol):
    """One kernel call of a recording: the shared library and the function it called."""

    @property
    def library(self) -> str: ...

    @property
    def function(self) -> str: ...


class RecordedCalls(Protocol):
    """The kernel calls one forward made, as a backend recorded them."""

    @property
    def calls(self) -> Sequence[RecordedCall]: ...

    def save(self, folder: Path) -> object:
        """Write the recording into ``folder``, where :attr:`KernelReplay.load` reads it back."""


@attrs.frozen(kw_only=True)
class KernelReplay:
    """A backend's recording of one forward's kernel calls and their replay with no Python around
    them: what CPU profilers watch, so an interpreter does not drown the kernels in its own work.

    - ``record``: in the sandbox child, a context manager that records the kernel calls made inside
      it and yields them (:class:`RecordedCalls`, saved with ``save(folder)``).
    - ``load``: in the parent, the recording saved in a folder; None when it holds none.
    - ``command``: in the parent, builds the replay driver of a saved recording and returns the
      command that replays it ``repetitions`` times.
    """

    record: Callable[[], AbstractContextManager[RecordedCalls]]
    load: Callable[[Path], RecordedCalls | None]
    command: Callable[[Path, int], tuple[str, ...]]


class CollectProfile(Protocol):
    """Runs the profiler on a target and returns the requested metrics (or why each is missing)."""

    def __call__(self, target: ProfileTarget, metrics: Sequence[str]) -> Profile: ...


class ParseOutput(Protocol):
    """Turns the tool's raw output into metrics; pure, so it is tested on recorded output.

    Output it cannot read raises :class:`~pragma_core.errors.ProfileParseError`."""

    def __call__(self, raw: str) -> list[Metric]: ...


class Complete(Protocol):
    """Answers one request of an agent."""

    def __call__(self, request: CompletionRequest) -> Completion: ...


class SelectMetrics(Protocol):
    """Chooses which metrics of a profile reach the Conductor's prompt."""

    def __call__(self, profile: Profile) -> tuple[Metric, ...]: ...


class DefaultMetrics(Protocol):
    """The metric names to collect by default for a profiler on a device kind."""

    def __call__(self, profiler: Profiler, device: str) -> tuple[str, ...]: ...


_name = [v.instance_of(str), v.matches_re(r"[a-z0-9][a-z0-9_.-]*")]


def _devices(_instance: Any, attribute: attrs.Attribute, value: tuple[str, ...]) -> None:
    unknown = [device for device in value if device not in DEVICE_KINDS]
    if not value or unknown:
        raise ValueError(f"{attribute.name} must be some of {DEVICE_KINDS}, got {value!r}")


@attrs.frozen(kw_only=True)
class Backend:
    """A way to write and run kernels: everything the verifier, profiling and the loop ask of one.

    - ``guide``: the Coder's guide (how a candidate looks, with a worked example).
    - ``probe``: whether it can run here, and why not.
    - ``load``: in the sandbox child, build the candidate and return its ``ModelNew``.
    - ``evidence``: in the child, a fresh :class:`KernelEvidence` (the proof its kernels ran);
      ``kernel_hint`` says how this backend's kernels are run, for the message when none did.
    - ``execution_device``: the device kind a candidate runs on here (``"cpu"`` for the host,
      ``"cuda"`` or ``"rocm"`` for a GPU, which torch calls ``cuda`` either way; the Triton
      interpreter runs on ``"cpu"``); its tensors are moved there, and profilers must watch it.
    - ``timing_refusal``: why times taken here would mean nothing (an interpreter), or ``""``;
      a refused backend is checked for correctness only and its verdict says it was not timed.
    - ``clock``: in the child, makes the :class:`Clock` for timed calls, or returns None for the
      host clock (the default).
    - ``child_environment``: given the candidate's build folder, variables the child takes before
      it loads the candidate (for Triton: ``TRITON_INTERPRET=1`` without a GPU, and its cache).
    - ``replay``: the backend's :class:`KernelReplay`, when it can record one forward's kernel
      calls and replay them natively (``cpu-cpp``'s fast path), the profilers' target on the CPU;
      without one, profilers run the Python forward.
    - ``recognizes``: whether a candidate's source is written for this backend (``pragma verify``
      picks the backend by it when ``--backend`` is not given).
    - ``floor_ms``: the roofline floor of a task (its analysis, the thread count) on the hardware
      this backend runs, which the verifier rejects a time below; None for the host CPU's
      measured peaks (:func:`pragma_core.machine.roofline.machine_peaks`). A GPU backend's comes from the
      GPU's peaks (:mod:`pragma_core.backends.gpu.hardware`).
    - ``machine_code``: in the child, called just before the candidate is loaded; returns a function
      that, given the candidate's source once it has run, fingerprints the machine code it runs
      (equal for two candidates that run the same code, None when it cannot say). None for a
      backend whose builds cannot be fingerprinted: its candidates are never "unchanged".
    """

    name: str = attrs.field(validator=_name)
    device: str = attrs.field(validator=v.in_(DEVICE_KINDS))
    language: str = attrs.field(validator=v.min_len(1))
    description: str = ""
    guide: str = attrs.field(validator=v.min_len(1))
    probe: Probe
    load: LoadCandidate
    evidence: Callable[[], KernelEvidence]
    kernel_hint: str = attrs.field(validator=v.min_len(1))
    execution_device: Callable[[], str] = attrs.field(default=lambda: "cpu")
    timing_refusal: Callable[[], str] = attrs.field(default=lambda: "")
    clock: Callable[[], Clock | None] = attrs.field(default=lambda: None)
    child_environment: Callable[[Path], dict[str, str]] = attrs.field(default=lambda build_dir: {})
    replay: KernelReplay | None = None
    recognizes: Callable[[str], bool] = attrs.field(default=lambda source: False)
    floor_ms: Callable[[TaskAnalysis, int], float | None] | None = None
    machine_code: Callable[[], Callable[[str], str | None]] | None = None


@attrs.frozen(kw_only=True)
class Profiler:
    """A hardware or simulation profiler: what it measures by default and how to run and parse it.

    ``doc_sources`` are the official pages the knowledge builder reads for it; ``formulas`` name
    the metrics the plugin computes itself from the tool's own (``"ipc": "instructions / cycles"``),
    so the compendium documents them by their formula and the documented meaning of each term.
    ``deterministic`` says its counts do not vary between runs (a simulator such as cachegrind,
    which also runs tens of times slower than native): one replayed forward is a whole profile,
    where a sampling or counting profiler replays three.
    """

    name: str = attrs.field(validator=_name)
    devices: tuple[str, ...] = attrs.field(converter=frozen_strings, validator=_devices)
    description: str = ""
    probe: Probe
    default_metrics: tuple[str, ...] = attrs.field(converter=frozen_strings)
    collect: CollectProfile
    parse: ParseOutput
    doc_sources: tuple[str, ...] = attrs.field(default=(), converter=frozen_strings)
    formulas: dict[str, str] = attrs.field(factory=dict)
    deterministic: bool = False


@attrs.frozen(kw_only=True)
class LLMProvider:
    """Answers the agents' requests: a language model, or pragma's offline rules.

    ``prepare``, when given, is called with the task before a run starts and raises
    :class:`~pragma_core.errors.PragmaError` when this provider cannot work on it (the offline
    provider does for a task no recipe knows). ``reads_messages`` is False for a provider that
    answers from the request's structured context alone, so the loop spares the work of filling
    the prompt's documentation search for it. ``room``, when given, says how a prompt stands
    against the model's context window (:class:`PromptRoom`, or None when the window is unknown);
    the loop then cuts the parts of a prompt that give way first until it fits
    (:mod:`pragma_core.agents.budget`).
    """

    name: str = attrs.field(validator=_name)
    description: str = ""
    complete: Complete
    prepare: Callable[[Task], None] | None = None
    reads_messages: bool = True
    room: Callable[[str | None, tuple[ChatMessage, ...]], PromptRoom | None] | None = None


@attrs.frozen(kw_only=True)
class PromptRoom:
    """A prompt against a model's context window: ``tokens`` the prompt takes (as counted for this
    model), ``window`` the model's context in tokens and where that figure came from
    (``window_from``), ``reply_tokens`` kept for the reply. It fits when ``tokens <= limit``."""

    tokens: int = attrs.field(validator=v.ge(0))
    window: int = attrs.field(validator=v.ge(1))
    reply_tokens: int = attrs.field(validator=v.ge(0))
    window_from: str = ""

    @property
    def limit(self) -> int:
        """Tokens a prompt may take: the window less the reply's share."""
        return max(0, self.window - self.reply_tokens)

    @property
    def fits(self) -> bool:
        return self.tokens <= self.limit


@attrs.frozen(kw_only=True)
class MetricSelector:
    """Decides which metrics reach the Conductor and which a profiler collects by default."""

    name: str = attrs.field(validator=_name)
    description: str = ""
    select: SelectMetrics
    defaults: DefaultMetrics
