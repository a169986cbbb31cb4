"""The records pragma passes between its parts and writes to disk.

Every record is a frozen attrs class built with keywords only, checked by validators when it is
made, so a record that exists is a record that makes sense. Change one with :func:`attrs.evolve`.
:mod:`pragma_core.serialization` turns them into plain dicts and JSON and back.

The names follow the design (``docs/architecture.md``): a :class:`Task` is a PyTorch reference
program; the Coder writes a :class:`Candidate`; the Verifier returns a :class:`Verdict` with
:class:`Timing` and a :class:`Speedup`; a Profiler returns a :class:`Profile` of :class:`Metric`;
the Conductor's rules give a :class:`Diagnosis` and its advice is :class:`Guidance`; one iteration
of the loop is an :class:`Attempt` and a whole run a :class:`RunResult`. Language-model traffic is
a :class:`CompletionRequest` answered by a :class:`Completion`.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs
from attrs import validators as v

__all__ = [
    "frozen_tuple",
    "frozen_strings",
    "attempt_speed",
    "Category",
    "VerdictStatus",
    "BoundClass",
    "AgentRole",
    "TensorSpec",
    "TaskAnalysis",
    "Task",
    "Candidate",
    "Timing",
    "TimingConditions",
    "Speedup",
    "HeadToHead",
    "Verdict",
    "Metric",
    "Profile",
    "Diagnosis",
    "Guidance",
    "TokenUsage",
    "ChatMessage",
    "CompletionRequest",
    "Completion",
    "Attempt",
    "Baseline",
    "RunResult",
]


class Category(str, enum.Enum):
    """The six task categories of the PRAGMA paper (KernelBench level 1 groups its problems so)."""

    MATMUL = "matmul"
    ACTIVATION = "activation"
    NORMALIZATION = "normalization"
    POOLING_REDUCTION = "pooling_reduction"
    CONV = "conv"
    OTHER = "other"


class VerdictStatus(str, enum.Enum):
    """What the Verifier concluded about a candidate; only ``correct`` candidates are timed."""

    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    WRONG_OUTPUT = "wrong_output"
    REJECTED = "rejected"
    OUT_OF_MEMORY = "out_of_memory"
    CORRECT = "correct"
    UNCHANGED = "unchanged"


class BoundClass(str, enum.Enum):
    """What limits a kernel, as the Conductor's rules classify it."""

    MEMORY = "memory"
    COMPUTE = "compute"
    LATENCY = "latency"
    FRONTEND = "frontend"
    BAD_SPECULATION = "bad_speculation"
    OVERHEAD = "overhead"
    UNKNOWN = "unknown"


class AgentRole(str, enum.Enum):
    """Who a model request is for: the loop's agents (the planner and the debugger only in a tree or
    beam search), or the knowledge builder's summarizer."""

    CODER = "coder"
    CONDUCTOR = "conductor"
    PLANNER = "planner"
    DEBUGGER = "debugger"
    SUMMARIZER = "summarizer"


# -- converters and validators ------------------------------------------------------------------


def frozen_tuple(items: Iterable[Any]) -> tuple[Any, ...]:
    """The ``converter`` of sequence fields: any iterable becomes a tuple, so records stay frozen.

    ``converter=tuple`` does the same at run time, but mypy's attrs plugin cannot type a generic
    class as a converter; this function it can."""
    return tuple(items)


_non_empty_str = v.and_(v.instance_of(str), v.min_len(1))


def _non_negative(_instance: Any, attribute: attrs.Attribute, value: float | None) -> None:
    if value is not None and not (value >= 0):  # also rejects NaN
        raise ValueError(f"{attribute.name} must be >= 0, got {value!r}")


def _finite(_instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise ValueError(f"{attribute.name} must be a finite number, got {value!r}")


def _seconds(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    _finite(instance, attribute, value)
    _non_negative(instance, attribute, value)


def frozen_strings(value: Iterable[str]) -> tuple[str, ...]:
    """The ``converter`` of string-sequence fields: a tuple, refusing one string (which ``tuple``
    would split into characters)."""
    if isinstance(value, str):
        raise TypeError(f"expected a sequence of strings, got the single string {value!r}")
    return tuple(value)


def _optional_path(value: Any) -> Path | None:
    return None if value is None else Path(value)


# -- tasks --------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class TensorSpec:
    """Shape, dtype and size in bytes of one tensor a task takes or returns.

    A forward argument that is a plain Python value (KernelBench passes ``s = 3.14`` to a
    matrix-scalar product) has ``value``, its ``repr``; its ``dtype`` is the Python type's name
    (``float``), its shape ``()`` and its ``nbytes`` 0: it is passed as it is, never drawn afresh.
    """

    shape: tuple[int, ...] = attrs.field(converter=frozen_tuple)
    dtype: str = attrs.field(validator=_non_empty_str)
    nbytes: int = attrs.field(validator=[v.instance_of(int), v.ge(0)])
    value: str | None = None

    @property
    def is_tensor(self) -> bool:
        return self.value is None


@attrs.frozen(kw_only=True)
class TaskAnalysis:
    """What one forward of the reference does: tensors in and out, operators, FLOPs and bytes.

    ``flops`` is what :mod:`torch.utils.flop_counter` counts: matrix products, convolutions and
    attention. Elementwise work counts zero there; such tasks are bound by ``min_bytes``.
    """

    inputs: tuple[TensorSpec, ...] = attrs.field(converter=frozen_tuple)
    outputs: tuple[TensorSpec, ...] = attrs.field(converter=frozen_tuple)
    parameter_bytes: int = attrs.field(validator=[v.instance_of(int), v.ge(0)])
    flops: int = attrs.field(validator=[v.instance_of(int), v.ge(0)])
    ops: dict[str, int] = attrs.field(factory=dict)
    traced_on: str = attrs.field(validator=v.in_(("meta", "cpu")))
    warnings: tuple[str, ...] = attrs.field(default=(), converter=frozen_strings)
    """What the task's own code warned while traced (a torch UserWarning about its arguments, say):
    kept here, and so in every run folder's task.json, instead of on the user's terminal."""

    @property
    def min_bytes(self) -> int:
        """Bytes any implementation must move: read inputs and parameters once, write outputs."""
        tensors = self.inputs + self.outputs
        return sum(t.nbytes for t in tensors) + self.parameter_bytes


@attrs.frozen(kw_only=True)
class Task:
    """A PyTorch reference program in KernelBench format, with the size overrides applied."""

    name: str = attrs.field(validator=_non_empty_str)
    source: str = attrs.field(validator=v.instance_of(str))
    path: Path | None = attrs.field(default=None, converter=_optional_path)
    category: Category = attrs.field(converter=Category)
    sizes: dict[str, Any] = attrs.field(factory=dict)
    level: int | None = attrs.field(default=None, validator=v.optional(v.ge(1)))
    problem_id: int | None = attrs.field(default=None, validator=v.optional(v.ge(0)))
    analysis: TaskAnalysis | None = None
    _program: str | None = attrs.field(default=None, init=False, eq=False, repr=False)
    """The source with ``sizes`` applied, derived once per task by
    :func:`~pragma_core.tasks.loading.task_program` (which every part asks) and kept here: not an
    argument, not stored, and a task evolved to other sizes derives its own."""

    @property
    def key(self) -> str:
        """``level1/19_ReLU`` for a task in a KernelBench tree, else the name."""
        return f"level{self.level}/{self.name}" if self.level is not None else self.name


# -- candidates and verdicts --------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Candidate:
    """Source of a Python module defining ``class ModelNew``, for one backend.

    ``attempt`` is the loop iteration that wrote it; 0 means it came from outside the loop.
    """

    source: str = attrs.field(validator=_non_empty_str)
    backend: str = attrs.field(validator=_non_empty_str)
    attempt: int = attrs.field(default=0, validator=[v.instance_of(int), v.ge(0)])


@attrs.frozen(kw_only=True)
class Timing:
    """Repeated measurements of one program, in milliseconds: median and interquartile range."""

    median_ms: float = attrs.field(validator=_non_negative)
    iqr_ms: float = attrs.field(validator=_non_negative)
    samples_ms: tuple[float, ...] = attrs.field(converter=frozen_tuple, default=())

    @samples_ms.validator
    def _check_samples(self, attribute: attrs.Attribute, value: tuple[float, ...]) -> None:
        for sample in value:
            _non_negative(self, attribute, sample)


@attrs.frozen(kw_only=True)
class Speedup:
    """Reference time over candidate time, with a confidence interval (bootstrap by default)."""

    value: float = attrs.field(validator=[_finite, v.gt(0)])
    low: float = attrs.field(validator=_finite)
    high: float = attrs.field(validator=_finite)
    confidence: float = attrs.field(default=0.95, validator=[v.gt(0), v.lt(1)])

    def __attrs_post_init__(self) -> None:
        if not self.low <= self.value <= self.high:
            raise ValueError(f"speedup {self.value} lies outside its interval [{self.low}, {self.high}]")


@attrs.frozen(kw_only=True)
class TimingConditions:
    """The machine while a verdict's timed calls ran, and whether that makes the timing noisy.

    ``threads`` and ``cpus`` (the CPU set, affinity) are what the reference and the candidate both
    ran with. ``other_cpu`` and ``steal`` are cores' worth of time, averaged over the timing's
    ``seconds``, that other processes used on those CPUs and that the hypervisor took;
    ``load_average`` is the 1-minute load before and after; ``frequency_mhz`` the lowest and
    highest current frequency of the CPUs, where readable. ``calibration_ms`` is a fixed
    multithreaded kernel's median time before and after the timing, ``calibration_best_ms`` the
    fastest this machine has run it with these threads. ``drift`` is the highest speedup over the
    lowest across consecutive blocks of the timing. ``memory_probe_ms`` is a copy well beyond the
    last-level cache, its median time before and after the timing (what memory-bound kernels depend
    on, which the compute calibration does not see), ``memory_probe_best_ms`` the fastest this
    machine has run it with these threads. ``noise`` holds the reasons the timing cannot
    be trusted, empty when it can; None fields were not readable here.
    """

    threads: int = attrs.field(validator=v.ge(1))
    cpus: tuple[int, ...] = attrs.field(converter=frozen_tuple)
    seconds: float = attrs.field(default=0.0, validator=_non_negative)
    other_cpu: float | None = attrs.field(default=None, validator=_non_negative)
    steal: float | None = attrs.field(default=None, validator=_non_negative)
    load_average: tuple[float, float] | None = attrs.field(
        default=None, converter=attrs.converters.optional(frozen_tuple)
    )
    frequency_mhz: tuple[float, float] | None = attrs.field(
        default=None, converter=attrs.converters.optional(frozen_tuple)
    )
    calibration_ms: tuple[float, float] | None = attrs.field(
        default=None, converter=attrs.converters.optional(frozen_tuple)
    )
    calibration_best_ms: float | None = attrs.field(default=None, validator=_non_negative)
    memory_probe_ms: tuple[float, float] | None = attrs.field(
        default=None, converter=attrs.converters.optional(frozen_tuple)
    )
    memory_probe_best_ms: float | None = attrs.field(default=None, validator=_non_negative)
    drift: float | None = attrs.field(default=None, validator=_non_negative)
    noise: tuple[str, ...] = attrs.field(default=(), converter=frozen_strings)

    @property
    def noisy(self) -> bool:
        """True when something disturbed the timing enough that its interval cannot be trusted."""
        return bool(self.noise)


@attrs.frozen(kw_only=True)
class HeadToHead:
    """A candidate timed against the loop's best in the same process, their calls interleaved.

    ``attempt`` is the best's attempt number (None outside a loop); ``best`` its timing there;
    ``speedup`` the best's time over the candidate's, so above 1 means the candidate is faster.
    """

    attempt: int | None = None
    best: Timing
    speedup: Speedup


@attrs.frozen(kw_only=True)
class Verdict:
    """The Verifier's finding on one candidate.

    ``message`` is short and fit for a prompt. ``failed_check`` names the integrity check behind a
    ``rejected`` status. Errors are the worst over all trials; ``error_index`` says where. Timings
    are of the reference, the candidate and, with ``--baseline compile``, ``torch.compile`` of the
    reference; ``floor_ms`` is the roofline floor of the task on this machine.
    ``relative_error_norm`` is the whole-output error ``||c - r|| / ||r||`` (worst output and trial);
    ``seed`` is the verification's base seed, drawn fresh each time, from which every input derives.
    ``conditions`` describe the machine while the timing ran (:class:`TimingConditions`); a
    ``noisy`` verdict's speedup is a rough figure, not a measurement to compare.
    ``floor_ms`` is the physical floor (the machine's FMA and streaming peaks);
    ``library_floor_ms`` the same at what torch's own sgemm and copy attain, shown beside it.
    ``versus_best`` is the candidate timed side by side with the loop's best (:class:`HeadToHead`);
    ``machine_code`` a fingerprint of what the candidate built and runs (its native libraries'
    code and the module around them), equal for two candidates that run the same machine code.
    An ``unchanged`` verdict is a candidate whose fingerprint is its parent's: not timed.
    """

    status: VerdictStatus = attrs.field(converter=VerdictStatus)
    message: str = attrs.field(validator=_non_empty_str)
    failed_check: str | None = None
    max_abs_error: float | None = attrs.field(default=None, validator=_non_negative)
    max_rel_error: float | None = attrs.field(default=None, validator=_non_negative)
    error_index: tuple[int, ...] | None = attrs.field(default=None, converter=attrs.converters.optional(frozen_tuple))
    failing_trial: int | None = attrs.field(default=None, validator=v.optional(v.ge(0)))
    diagnostics: tuple[str, ...] = attrs.field(default=(), converter=frozen_strings)
    reference: Timing | None = None
    candidate: Timing | None = None
    speedup: Speedup | None = None
    compiled_reference: Timing | None = None
    speedup_vs_compiled: Speedup | None = None
    floor_ms: float | None = attrs.field(default=None, validator=_non_negative)
    notes: tuple[str, ...] = attrs.field(default=(), converter=frozen_strings)
    relative_error_norm: float | None = attrs.field(default=None, validator=_non_negative)
    seed: int | None = None
    conditions: TimingConditions | None = None
    library_floor_ms: float | None = attrs.field(default=None, validator=_non_negative)
    versus_best: HeadToHead | None = None
    machine_code: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.status is VerdictStatus.REJECTED and not self.failed_check:
            raise ValueError("a rejected verdict must name the integrity check that failed")
        if (self.speedup or self.speedup_vs_compiled) and self.status is not VerdictStatus.CORRECT:
            raise ValueError(f"only a correct candidate has a speedup, not a {self.status.value} one")

    @property
    def attainment(self) -> float | None:
        """Roofline floor over the candidate's median time: 1.0 is as fast as the machine allows."""
        if self.floor_ms is None or self.candidate is None or self.candidate.median_ms <= 0:
            return None
        return self.floor_ms / self.candidate.median_ms

    @property
    def ok(self) -> bool:
        """True when the candidate is correct."""
        return self.status is VerdictStatus.CORRECT

    @property
    def noisy(self) -> bool:
        """True when the timing ran on a machine too busy (or drifting) to trust its interval."""
        return self.conditions is not None and self.conditions.noisy


# -- profiles and the Conductor -----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Metric:
    """One named measurement from a profiler, attributed to a kernel where the tool says which."""

    name: str = attrs.field(validator=_non_empty_str)
    value: float = attrs.field(validator=_finite)
    unit: str = ""
    kernel: str = ""
    profiler: str = attrs.field(validator=_non_empty_str)
    meaning: str = ""


@attrs.frozen(kw_only=True)
class Profile:
    """What one profiler run returned: metrics, where its raw output lies, and what it could not do.

    ``not_collected`` maps each requested metric that is absent to the reason, so nothing a caller
    asked for disappears silently. ``sizes`` are the size constants the task was profiled at where
    they differ from the task's own (a reduced profiling size; empty: the task's sizes), and the
    counts are those of a forward at these sizes.
    """

    profiler: str = attrs.field(validator=_non_empty_str)
    metrics: tuple[Metric, ...] = attrs.field(default=(), converter=frozen_tuple)
    raw_paths: tuple[str, ...] = attrs.field(default=(), converter=frozen_strings)
    notes: tuple[str, ...] = attrs.field(default=(), converter=frozen_strings)
    not_collected: dict[str, str] = attrs.field(factory=dict)
    sizes: dict[str, Any] = attrs.field(factory=dict)

    def get(self, name: str, kernel: str | None = None) -> Metric | None:
        """The first metric of that name (and kernel, when given), or None."""
        for metric in self.metrics:
            if metric.name == name and (kernel is None or metric.kernel == kernel):
                return metric
        return None


@attrs.frozen(kw_only=True)
class Diagnosis:
    """The rule-based reading of a profile: what bounds the kernel and what to look at next."""

    bound: BoundClass = attrs.field(converter=BoundClass)
    roofline_attainment: float | None = attrs.field(default=None, validator=_non_negative)
    deltas: dict[str, float] = attrs.field(factory=dict)
    hints: tuple[str, ...] = attrs.field(default=(), converter=frozen_strings)
    request_metrics: tuple[str, ...] = attrs.field(default=(), converter=frozen_strings)


@attrs.frozen(kw_only=True)
class Guidance:
    """The Conductor's advice to the Coder after one attempt; ``done`` says no change is left worth
    an attempt, and the run ends. ``unmeasured_citations`` are metric names its reply cites that
    no profile it read had measured (the loop's citation check), shown to it on the next turn."""

    analysis: str = attrs.field(validator=v.instance_of(str))
    actions: tuple[str, ...] = attrs.field(default=(), converter=frozen_strings)
    extra_metrics: tuple[str, ...] = attrs.field(default=(), converter=frozen_strings)
    new_best: bool = attrs.field(default=False, validator=v.instance_of(bool))
    done: bool = attrs.field(default=False, validator=v.instance_of(bool))
    unmeasured_citations: tuple[str, ...] = attrs.field(default=(), converter=frozen_strings)


# -- model traffic ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class TokenUsage:
    """Tokens a model call (or a sum of calls) consumed."""

    prompt: int = attrs.field(default=0, validator=[v.instance_of(int), v.ge(0)])
    completion: int = attrs.field(default=0, validator=[v.instance_of(int), v.ge(0)])

    @property
    def total(self) -> int:
        return self.prompt + self.completion

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(prompt=self.prompt + other.prompt, completion=self.completion + other.completion)


@attrs.frozen(kw_only=True)
class ChatMessage:
    """One chat message."""

    role: str = attrs.field(validator=v.in_(("system", "user", "assistant")))
    content: str = attrs.field(validator=v.instance_of(str))


@attrs.frozen(kw_only=True)
class CompletionRequest:
    """What an agent asks of an LLM provider: chat messages plus the structured context.

    The structured fields carry the same facts as the messages, so a provider that is not a
    language model (the offline rule-based one) can answer from them directly: ``candidate``,
    ``verdict``, ``profiles`` and ``diagnosis`` are of the attempt the Conductor judges (for the
    Coder: ``verdict`` is the last attempt's); ``best`` is the best before it; ``history`` the
    attempts before it, oldest first. ``backend`` names the backend the candidate is written for.
    In a tree or beam search, ``parent`` is the attempt the Coder changes (and the planner plans
    from) and ``instruction`` the one change the Coder applies.
    """

    role: AgentRole = attrs.field(converter=AgentRole)
    messages: tuple[ChatMessage, ...] = attrs.field(converter=frozen_tuple, validator=v.min_len(1))
    model: str | None = None
    task: Task | None = None
    candidate: Candidate | None = None
    verdict: Verdict | None = None
    profiles: tuple[Profile, ...] = attrs.field(default=(), converter=frozen_tuple)
    diagnosis: Diagnosis | None = None
    best: Attempt | None = None
    history: tuple[Attempt, ...] = attrs.field(default=(), converter=frozen_tuple)
    backend: str | None = None
    parent: Attempt | None = None
    instruction: str | None = None


@attrs.frozen(kw_only=True)
class Completion:
    """A provider's answer: text, token usage, cost in US dollars (None when unknown), latency, and
    why the model stopped (``finish_reason``: ``"stop"``, ``"length"`` when the reply was cut at
    its token limit, None when the provider does not say)."""

    text: str = attrs.field(validator=v.instance_of(str))
    model: str = attrs.field(validator=_non_empty_str)
    usage: TokenUsage = attrs.field(factory=TokenUsage)
    cost_usd: float | None = attrs.field(default=None, validator=_non_negative)
    latency_s: float = attrs.field(default=0.0, validator=_non_negative)
    finish_reason: str | None = None

    @property
    def cut_at_token_limit(self) -> bool:
        """Whether the model stopped because the reply reached its token limit."""
        return self.finish_reason == "length"


# -- the loop -----------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Attempt:
    """Everything of one iteration of the loop. Parts stay None where the iteration stopped early.

    ``skipped`` names each profiler of the run that gave no profile of this candidate, with why:
    it cannot watch this candidate, or it failed (a failure of the plugin itself says so).
    ``elapsed_s`` is the attempt's wall time; ``phase_seconds`` splits it by phase (a phase it did
    not reach is absent): ``writing`` (the Coder), ``building`` (sandbox start and the candidate's build),
    ``verifying`` (correctness trials), ``timing``, ``profiling:<profiler>`` for each profiler,
    ``diagnosing`` and ``advising`` (the Conductor, a repair request included). Attempts written
    before pragma measured phases have none."""

    number: int = attrs.field(validator=[v.instance_of(int), v.ge(1)])
    parent: int | None = attrs.field(default=None, validator=v.optional([v.instance_of(int), v.ge(1)]))
    """The attempt whose code this one's Coder changed (its parent in the search tree); None for
    code written from the task alone."""
    instruction: str | None = None
    """The one instruction of the parent's plan the Coder applied (tree and beam search); None when
    the Coder followed the Conductor's whole advice (the linear loop)."""
    writer: AgentRole = attrs.field(default=AgentRole.CODER, converter=AgentRole)
    """Who wrote the candidate: the Coder, or the debugger fixing its parent's failure (tree and
    beam search)."""
    candidate: Candidate | None = None
    verdict: Verdict | None = None
    profiles: tuple[Profile, ...] = attrs.field(default=(), converter=frozen_tuple)
    skipped: dict[str, str] = attrs.field(factory=dict)
    diagnosis: Diagnosis | None = None
    guidance: Guidance | None = None
    usage: TokenUsage = attrs.field(factory=TokenUsage)
    cost_usd: float | None = attrs.field(default=None, validator=_non_negative)
    """What the attempt's model calls cost in US dollars, as the provider reported it (None: unknown)."""
    usage_by_role: dict[str, TokenUsage] = attrs.field(factory=dict)
    """``usage`` split by the agent that spent it (``coder`` or ``debugger``, and ``conductor``);
    empty in attempts written before pragma split it."""
    elapsed_s: float = attrs.field(default=0.0, validator=_non_negative)
    phase_seconds: dict[str, float] = attrs.field(
        factory=dict, validator=v.deep_mapping(key_validator=_non_empty_str, value_validator=_seconds)
    )

    @property
    def timed_s(self) -> float:
        """Seconds of the timed calls themselves (every sample of the reference, the candidate and
        ``torch.compile`` in the verdict; warm-up calls not included): the part of ``elapsed_s``
        that is measurement, not overhead. 0 when nothing was timed."""
        verdict = self.verdict
        if verdict is None:
            return 0.0
        timings = (verdict.reference, verdict.candidate, verdict.compiled_reference)
        return sum(sum(timing.samples_ms) for timing in timings if timing is not None) / 1000


@attrs.frozen(kw_only=True)
class Plan:
    """The planner's ranked changes to one attempt's code (tree and beam search): each child of
    that attempt applies one ``instructions`` entry, most promising first. ``note`` says when the
    planner's reply did not parse and the Conductor's actions stood in."""

    parent: int = attrs.field(validator=[v.instance_of(int), v.ge(1)])
    instructions: tuple[str, ...] = attrs.field(default=(), converter=frozen_strings)
    usage: TokenUsage = attrs.field(factory=TokenUsage)
    cost_usd: float | None = attrs.field(default=None, validator=_non_negative)
    note: str = ""


@attrs.frozen(kw_only=True)
class Baseline:
    """What a run measures before attempt 1: the reference's time on this machine, the task's
    roofline floor and bound, the reference's profiles, and why a profiler could not watch it
    (``skipped``: a profiler that cannot run on this machine at all is named there too, and the
    run's attempts go on without it). ``floor_ms`` is the physical floor (the machine's own
    peaks), ``library_floor_ms`` the floor at torch's own sgemm and copy rates, shown beside it."""

    reference: Timing | None = None
    floor_ms: float | None = attrs.field(default=None, validator=_non_negative)
    library_floor_ms: float | None = attrs.field(default=None, validator=_non_negative)
    bound: BoundClass | None = attrs.field(default=None, converter=attrs.converters.optional(BoundClass))
    profiles: tuple[Profile, ...] = attrs.field(default=(), converter=frozen_tuple)
    skipped: dict[str, str] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class RunResult:
    """One task's whole run: the baseline, every attempt, which one is best and why it stopped."""

    run_id: str = attrs.field(validator=_non_empty_str)
    task: Task
    baseline: Baseline | None = None
    attempts: tuple[Attempt, ...] = attrs.field(default=(), converter=frozen_tuple)
    best_attempt: int | None = None
    stop_reason: str = ""

    def __attrs_post_init__(self) -> None:
        numbers = [attempt.number for attempt in self.attempts]
        if self.best_attempt is not None and self.best_attempt not in numbers:
            raise ValueError(f"best_attempt {self.best_attempt} is not among attempts {numbers}")

    @property
    def best(self) -> Attempt | None:
        """The best correct attempt, or None when no attempt was correct."""
        for attempt in self.attempts:
            if attempt.number == self.best_attempt:
                return attempt
        return None


def attempt_speed(attempt: Attempt) -> float:
    """The median speedup of an attempt's verdict; 0 when it has none (failed or untimed)."""
    verdict = attempt.verdict
    return verdict.speedup.value if verdict is not None and verdict.speedup is not None else 0.0
