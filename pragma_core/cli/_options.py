"""The options more than one command takes, and those whose default is a setting's: each declared here once.

Their defaults and choices are read from the settings (:class:`~pragma_core.loop.settings.OptimizeSettings`
and :class:`~pragma_core.verifier.settings.VerifySettings`), never written again here. A default is
read when click first needs it (to run a command that takes the option, or to show its ``--help``):
the loop's settings import the plugin registry, which ``pragma --help`` and ``pragma knowledge``
need not wait for.

A group of options comes with the function that turns their values into the settings' keyword
arguments (:func:`loop_settings`, :func:`verify_settings`), so a command's signature takes them as
``**options``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import click

from ..loop.search import SEARCHES
from ..verifier.settings import BASELINES, BUILD_LIMIT_S, FORWARD_LIMIT_FACTOR, FORWARD_LIMIT_FLOOR_S

__all__ = [
    "ALL_CPUS",
    "IDLE_CPUS",
    "SETTING_PARAMETERS",
    "candidate_backend_option",
    "comma_separated",
    "json_option",
    "loop_options",
    "loop_settings",
    "option_group",
    "precision_option",
    "reps_option",
    "runs_dir_option",
    "size_options",
    "threads_option",
    "verification_options",
    "verify_settings",
]

_Decorator = Callable[[Any], Any]


class _SettingDefault:
    """A setting's default as a click option's default: read from its settings class when called
    (click calls a callable default when it needs the value) or shown (``--help`` prints it)."""

    def __init__(self, read: Callable[[], Any], as_option: Callable[[Any], Any] | None = None) -> None:
        self._read = read
        self._as_option = as_option

    def __call__(self) -> Any:
        value = self._read()
        return self._as_option(value) if self._as_option is not None else value

    def __str__(self) -> str:
        return str(self())


def _loop_default(name: str, as_option: Callable[[Any], Any] | None = None) -> _SettingDefault:
    def read() -> Any:
        from ..loop.settings import OptimizeSettings

        return attrs.fields_dict(OptimizeSettings)[name].default

    return _SettingDefault(read, as_option)


def _verify_default(name: str) -> _SettingDefault:
    def read() -> Any:
        from ..verifier.settings import VerifySettings

        return attrs.fields_dict(VerifySettings)[name].default

    return _SettingDefault(read)


def comma_separated(text: str | None) -> tuple[str, ...]:
    """``"valgrind, perf"`` -> ``("valgrind", "perf")``; empty parts are left out."""
    return tuple(part.strip() for part in (text or "").split(",") if part.strip())


def option_group(*options: _Decorator) -> _Decorator:
    """The options in the order given, as one decorator (click lists them in that order)."""

    def decorate(command: Any) -> Any:
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


def json_option(help_text: str = "Print JSON instead of a table.") -> _Decorator:
    """``--json``; ``help_text`` says what is printed."""
    return click.option("--json", "as_json", is_flag=True, help=help_text)


IDLE_CPUS = "the CPUs idle when it starts: all of them on a quiet machine"
"""What ``--threads`` left out means where the verifier decides (verify, optimize)."""
ALL_CPUS = "all CPUs here"
"""What ``--threads`` left out means elsewhere (bench, roofline, profile)."""


def threads_option(default: str) -> _Decorator:
    """``--threads N``; ``default`` says what leaving it out means (:data:`IDLE_CPUS`, :data:`ALL_CPUS`)."""
    return click.option(
        "--threads",
        type=click.IntRange(min=1),
        default=None,
        help=f"Threads for the reference and the candidates [default: {default}].",
    )


_fit_option = click.option(
    "--fit-ms",
    "fit_ms",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="T",
    help="Scale the size constants that shape the inputs, all by one factor, until the eager reference "
    "takes about T ms here (after --set); the sizes used are printed and recorded.",
)

size_options = option_group(
    click.option(
        "--set",
        "assignments",
        multiple=True,
        metavar="NAME=VALUE",
        help="Override a module-level size constant of the task (of every task that has it) with a Python "
        "literal, e.g. batch_size=16 or 'input_shape=(1024,)'. Repeatable.",
    ),
    _fit_option,
)
"""``--set NAME=VALUE`` (any Python literal) and ``--fit-ms T``."""


candidate_backend_option = click.option(
    "--backend",
    "backend_name",
    default=None,
    help="The candidate's backend (see `pragma plugins`) [default: the one its source is written for: "
    "triton when it imports triton, cuda when it builds CUDA sources, else cpu-cpp].",
)
"""``--backend`` of a command given a candidate file (verify, profile)."""

_coder_backend_option = click.option(
    "--backend",
    "backend_name",
    default=_loop_default("backend"),
    show_default=True,
    help="The backend the Coder writes for (see `pragma plugins`); triton with no GPU runs under Triton's "
    "interpreter, checked but not timed.",
)

reps_option = click.option(
    "--reps",
    type=int,
    default=_verify_default("reps"),
    show_default=True,
    help="Timed runs of each program per verification, at most.",
)

precision_option = click.option(
    "--precision",
    type=click.FloatRange(min=0, max=1, max_open=True),
    default=_verify_default("precision"),
    show_default=True,
    help="Stop timing once at least 30 runs gave a speedup interval within this share of its value (0: all runs).",
)


loop_options = option_group(
    click.option(
        "--model",
        default=None,
        help="A litellm model string, e.g. openai/gpt-4o-mini or ollama/qwen2.5-coder [default: $PRAGMA_MODEL, "
        "else the offline agents].",
    ),
    click.option(
        "--provider",
        envvar="PRAGMA_PROVIDER",
        default=None,
        help="The provider plugin that answers the agents (see `pragma plugins`) [env: PRAGMA_PROVIDER; "
        "default: litellm with a model, else offline].",
    ),
    click.option(
        "--max-attempts",
        type=int,
        default=_loop_default("max_attempts"),
        show_default=True,
        help="Attempts per task at most.",
    ),
    click.option(
        "--patience",
        type=int,
        default=_loop_default("patience"),
        show_default=True,
        help="Stop a task after this many attempts without a better one.",
    ),
    click.option(
        "--target-attainment",
        type=click.FloatRange(min=0, min_open=True),
        default=_loop_default("target_attainment"),
        show_default=True,
        help="Stop once the best reaches this share of the task's physical roofline floor here (the machine's "
        "FMA and streaming peaks); above 1.05 never stops a run, for a fixed attempt budget.",
    ),
    click.option(
        "--search",
        type=click.Choice(SEARCHES),
        default=_loop_default("search"),
        show_default=True,
        help="How attempts build on each other: one chain (linear), epsilon-greedy over the tree of attempts "
        "(tree), or the fastest few each round (beam); see docs/search.md.",
    ),
    click.option(
        "--branching",
        type=click.IntRange(min=1),
        default=_loop_default("branching"),
        show_default=True,
        help="Children per round with --search tree (of one attempt) or beam (one each of the fastest K).",
    ),
    click.option(
        "--no-profile",
        is_flag=True,
        help="Timing only, no profiler (the paper's N-PRAGMA ablation); a bench keeps it apart in the same --out.",
    ),
    click.option(
        "--profilers",
        default=_loop_default("profilers", as_option=",".join),
        show_default=True,
        help="Profilers to run, comma-separated (see `pragma plugins`); one that cannot run here is left out, and said.",
    ),
    reps_option,
    _coder_backend_option,
)
"""The loop's options, for ``optimize`` and ``bench``; :func:`loop_settings` reads them."""

runs_dir_option = click.option(
    "--runs-dir",
    type=click.Path(path_type=Path),
    default=_loop_default("runs_dir"),
    show_default=True,
    help="Where each run gets its folder.",
)

SETTING_PARAMETERS = {"profile": "no_profile", "backend": "backend_name"}
"""The loop settings whose option's parameter has another name (the rest are named alike)."""


def loop_settings(options: dict[str, Any]) -> dict[str, Any]:
    """The :class:`~pragma_core.loop.settings.OptimizeSettings` keyword arguments (``verify`` aside)
    that :func:`loop_options` gave, taken out of ``options``."""
    settings = {
        name: options.pop(name)
        for name in ("model", "provider", "max_attempts", "patience", "target_attainment", "search", "branching")
    }
    return settings | {
        "profile": not options.pop("no_profile"),
        "profilers": comma_separated(options.pop("profilers")),
        "backend": options.pop("backend_name"),
    }


verification_options = option_group(
    click.option(
        "--trials",
        type=int,
        default=_verify_default("trials"),
        show_default=True,
        help="Correctness trials with fresh inputs.",
    ),
    click.option(
        "--warmup", type=int, default=_verify_default("warmup"), show_default=True, help="Untimed runs before timing."
    ),
    reps_option,
    precision_option,
    click.option(
        "--timing-budget",
        "timing_budget_s",
        type=float,
        default=_verify_default("timing_budget_s"),
        show_default=True,
        help="Seconds of timing after which it stops early (at least 10 runs).",
    ),
    click.option(
        "--baseline",
        type=click.Choice(BASELINES),
        default=_verify_default("baseline"),
        show_default=True,
        help="compile: also time torch.compile of the reference.",
    ),
    threads_option(IDLE_CPUS),
    click.option(
        "--atol",
        type=float,
        default=_verify_default("atol"),
        show_default=True,
        help="Absolute tolerance of the output comparison.",
    ),
    click.option(
        "--rtol",
        type=float,
        default=_verify_default("rtol"),
        show_default=True,
        help="Relative tolerance of the output comparison.",
    ),
    click.option(
        "--timeout",
        "timeout_s",
        type=float,
        default=None,
        help=f"One wall-time limit in seconds for the whole verification [default: building may take "
        f"{BUILD_LIMIT_S:g} s, each forward {FORWARD_LIMIT_FACTOR:g}x the reference's time, at least "
        f"{FORWARD_LIMIT_FLOOR_S:g} s].",
    ),
    click.option(
        "--memory-gb",
        type=float,
        default=_verify_default("memory_gb"),
        show_default=True,
        help="Address-space limit of the candidate.",
    ),
    click.option("--no-timing", is_flag=True, help="Check correctness only."),
    click.option(
        "--seed",
        type=click.IntRange(min=0),
        default=None,
        help="Repeat a verification's inputs exactly (the verdict records its seed) [default: fresh each time].",
    ),
)
"""What ``verify`` takes of the verifier's settings; :func:`verify_settings` reads them."""


def verify_settings(options: dict[str, Any]) -> dict[str, Any]:
    """The :class:`~pragma_core.verifier.settings.VerifySettings` keyword arguments that
    :func:`verification_options` gave, taken out of ``options``."""
    names = ("trials", "warmup", "reps", "precision", "timing_budget_s", "baseline", "threads", "atol", "rtol")
    settings = {name: options.pop(name) for name in (*names, "timeout_s", "memory_gb", "seed")}
    return settings | {"time": not options.pop("no_timing")}
