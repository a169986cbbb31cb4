"""The ``pragma`` command line.

Bad input (a task file, a ``--set`` value, a plugin in strict mode) prints one line on standard
error and exits with code 2; ``--debug`` (or ``PRAGMA_DEBUG=1``) shows the traceback instead.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import click
from click.core import ParameterSource
from rich.console import Console
from rich.table import Table

from ._version import __version__
from .backends import DEFAULT_BACKEND
from .errors import CandidateError, PragmaError, TaskError
from .loop.search import SEARCHES
from .plugin_api.components import Probe
from .plugin_api.registry import PluginRegistry, get_registry
from .progress import progress_bar
from .records import Candidate, Task
from .serialization import to_dict
from .tasks.loading import find_task_files, load_task, parse_size_assignments, sizes_per_file

EXIT_BAD_INPUT = 2

_debug = False


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="pragma")
@click.option("--debug", is_flag=True, envvar="PRAGMA_DEBUG", help="Show tracebacks for errors.")
def cli(debug: bool) -> None:
    """Make compute kernels faster with a closed loop of agents and hardware profilers.

    A task is a PyTorch reference program in KernelBench format; see `pragma tasks`.
    """
    global _debug
    _debug = debug


_precision_option = click.option(
    "--precision",
    type=click.FloatRange(min=0, max=1, max_open=True),
    default=0.02,  # VerifySettings.precision's default (the verifier imports torch, the CLI does not yet)
    show_default=True,
    help="Stop timing once at least 30 runs gave a speedup interval within this share of its value (0: all runs).",
)


def _backend_option(help_text: str, default: str | None = None) -> Callable[[Any], Any]:
    return click.option("--backend", "backend_name", default=default, show_default=default is not None, help=help_text)


_CANDIDATE_BACKEND_HELP = (
    "The candidate's backend (see `pragma plugins`) [default: the one its source is written for: "
    "triton when it imports triton, cuda when it builds CUDA sources, else cpu-cpp]."
)


def _checked_backend(name: str) -> str:
    """``name`` when a backend of that name is installed; otherwise bad input naming the choices."""
    backends = get_registry().backends()
    if name not in backends:
        raise CandidateError(f"--backend {name}: no such backend; installed: {', '.join(sorted(backends))}")
    return name


@cli.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def plugins_command(as_json: bool) -> None:
    """List plugins: distribution, version, hooks, what each registers, and load failures; then
    whether each backend and profiler can run on this machine, and why not.

    Environment: PRAGMA_LOAD_PLUGINS=a,b loads only those installed plugins;
    PRAGMA_DISABLE_PLUGINS=a,b skips plugins; PRAGMA_STRICT_PLUGINS=1 makes a failure an error.
    """
    registry = get_registry()
    plugins, failures = registry.plugins(), registry.failures()
    here = _availability(registry)
    if as_json:
        payload = {
            "plugins": [attrs.asdict(plugin) for plugin in plugins],
            "failures": [attrs.asdict(failure) for failure in failures],
            "availability": here,
        }
        click.echo(json.dumps(payload, indent=2))
        return
    table = Table(title="pragma plugins", title_justify="left")
    for column in ("plugin", "distribution", "version", "registers", "hooks"):
        table.add_column(column, overflow="fold")
    for plugin in plugins:
        registers = "\n".join(f"{kind}: {', '.join(names)}" for kind, names in plugin.registers.items())
        table.add_row(
            plugin.name + (" (built-in)" if plugin.builtin else ""),
            plugin.distribution or "-",
            plugin.version or "-",
            registers or "-",
            "\n".join(plugin.hooks) or "-",
        )
    console = _stdout()
    console.print(table)
    if failures:
        failed = Table(title="failed to load", title_justify="left", title_style="bold red")
        for column in ("plugin", "distribution", "version", "stage", "error"):
            failed.add_column(column, overflow="fold")
        for failure in failures:
            failed.add_row(
                failure.name, failure.distribution or "-", failure.version or "-", failure.stage, failure.error
            )
        console.print(failed)
    usable = Table(title="on this machine", title_justify="left")
    for column in ("kind", "name", "runs here", "why not, or what it lacks", "what still works"):
        usable.add_column(column, overflow="fold")
    for row in here:
        answer = "[green]yes[/]" if row["available"] else "[red]no[/]"
        usable.add_row(row["kind"], row["name"], answer, row["reason"] or "-", row["still_works"] or "-")
    console.print(usable)


def _availability(registry: PluginRegistry) -> list[dict[str, Any]]:
    """Each backend's and profiler's probe: can it run on this machine, and if not, why."""
    probes: list[tuple[str, str, Probe]] = [("backend", name, b.probe) for name, b in registry.backends().items()]
    probes += [("profiler", name, p.probe) for name, p in registry.profilers().items()]
    rows = []
    for kind, name, probe in sorted(probes, key=lambda row: row[:2]):
        try:
            answer = probe()
            available, reason, still = answer.available, answer.reason, answer.still_works
        except Exception as error:  # a probe that fails is itself the answer
            available, reason, still = False, f"its probe failed: {type(error).__name__}: {error}", ""
        rows.append({"kind": kind, "name": name, "available": available, "reason": reason, "still_works": still})
    return rows


def _search_options(command: Any) -> Any:
    """``--search`` and ``--branching``, for ``optimize`` and ``bench``."""
    command = click.option(
        "--branching",
        type=click.IntRange(min=1),
        default=2,
        show_default=True,
        help="Children per round with --search tree (of one attempt) or beam (one each of the fastest K).",
    )(command)
    return click.option(
        "--search",
        type=click.Choice(SEARCHES),
        default="linear",
        show_default=True,
        help="How attempts build on each other: one chain (linear), epsilon-greedy over the tree of attempts "
        "(tree), or the fastest few each round (beam); see docs/search.md.",
    )(command)


_FIT_OPTION = click.option(
    "--fit-ms",
    "fit_ms",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="T",
    help="Scale the size constants that shape the inputs, all by one factor, until the eager reference "
    "takes about T ms here (after --set); the sizes used are printed and recorded.",
)


_TARGET_OPTION = click.option(
    "--target-attainment",
    type=click.FloatRange(min=0, min_open=True),
    default=0.9,
    show_default=True,
    help="Stop once the best reaches this share of the task's roofline floor here; above 2 never stops a run "
    "(a time under half the floor is rejected), for a fixed attempt budget.",
)


def _size_options(command: Any) -> Any:
    """``--set NAME=VALUE`` (any Python literal) and ``--fit-ms T``."""
    command = _FIT_OPTION(command)
    return click.option(
        "--set",
        "assignments",
        multiple=True,
        metavar="NAME=VALUE",
        help="Override a module-level size constant of the task with a Python literal (batch_size=16, "
        "'input_shape=(1024,)'). Repeatable.",
    )(command)


@cli.command("tasks")
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "--set",
    "assignments",
    multiple=True,
    metavar="NAME=VALUE",
    help="Override a module-level size constant of the tasks with a Python literal, e.g. --set batch_size=16. "
    "Repeatable.",
)
@_FIT_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def tasks_command(path: Path, assignments: tuple[str, ...], fit_ms: float | None, as_json: bool) -> None:
    """List the tasks in PATH (a KernelBench tree or one file).

    For each: category, input and output tensors, reference FLOPs (torch.utils.flop_counter: matrix
    products, convolutions, attention) and the minimal bytes moved (inputs, parameters and outputs
    once); with --fit-ms, the sizes fitted. Files that fail are reported one line each on stderr,
    and under "errors" in the JSON ({"tasks": [...], "errors": [{"path": ..., "error": ...}]}); the
    exit code is then 2.
    """
    sizes = parse_size_assignments(assignments)
    if not path.exists():
        raise TaskError(f"{path}: no such task file or directory")
    files = [path] if path.is_file() else find_task_files(path)
    plan = sizes_per_file(files, sizes, where=path) if path.is_dir() else {path: sizes}
    tasks: list[Task] = []
    errors: list[tuple[Path, TaskError]] = []
    with progress_bar() as progress:
        bar = progress.add_task("tracing tasks", total=len(files))
        for file in files:
            progress.update(bar, description=f"{'fitting' if fit_ms else 'tracing'} {file.name}")
            try:
                task = load_task(file, plan[file])
                if fit_ms is not None:
                    from .sizes.fitting import fit_task

                    task = fit_task(task, fit_ms).task
                tasks.append(task)
            except TaskError as failure:
                errors.append((file, failure))
            progress.advance(bar)
    if as_json:
        listing = {
            "tasks": [_task_summary(task) for task in tasks],
            "errors": [{"path": str(file), "error": str(error)} for file, error in errors],
        }
        click.echo(json.dumps(listing, indent=2))
    elif tasks:
        _stdout().print(_tasks_table(tasks))
    for _file, error in errors:
        click.echo(f"pragma: error: {error}", err=True)
    if errors:
        raise SystemExit(EXIT_BAD_INPUT)


def _load_one_task(
    path: Path, assignments: tuple[str, ...], fit_ms: float | None = None, threads: int | None = None
) -> Task:
    if not path.exists():
        raise TaskError(f"{path}: no such task file")
    task = load_task(path, parse_size_assignments(assignments))
    return _fitted(task, fit_ms, threads) if fit_ms is not None else task


def _fitted(task: Task, fit_ms: float, threads: int | None) -> Task:
    """The task at the sizes where its reference takes about ``fit_ms``, said on stderr."""
    from .sizes.fitting import fit_task

    with Console(stderr=True).status(f"fitting {task.key} to {fit_ms:g} ms", spinner="dots"):
        fitted = fit_task(task, fit_ms, threads=threads)
    click.echo(f"pragma: {task.key} fitted: {fitted.note}", err=True)
    return fitted.task


def _read_candidate(path: Path, backend: str | None = None) -> Candidate:
    """The candidate module at ``path``, for ``backend`` (by default the one its source is written
    for); a missing, unreadable or empty file, or an unknown backend, is bad input."""
    if not path.is_file():
        raise CandidateError(f"{path}: no such candidate file")
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise CandidateError(f"{path}: cannot be read ({error})") from None
    if not source.strip():
        raise CandidateError(f"{path}: the candidate file is empty; write a module that defines class ModelNew")
    from .backends import backend_for_source

    name = _checked_backend(backend) if backend is not None else backend_for_source(source, get_registry())
    return Candidate(source=source, backend=name)


@cli.command("verify")
@click.argument("task_path", metavar="TASK", type=click.Path(path_type=Path))
@click.argument("candidate_path", metavar="CANDIDATE", type=click.Path(path_type=Path))
@_size_options
@click.option("--trials", default=5, show_default=True, help="Correctness trials with fresh inputs.")
@click.option("--warmup", default=5, show_default=True, help="Untimed runs before timing.")
@click.option("--reps", default=100, show_default=True, help="Timed runs of each program, at most.")
@_precision_option
@click.option(
    "--timing-budget",
    "timing_budget_s",
    default=60.0,
    show_default=True,
    help="Seconds of timing after which it stops early (at least 10 runs).",
)
@click.option(
    "--baseline",
    type=click.Choice(["eager", "compile"]),
    default="eager",
    show_default=True,
    help="compile: also time torch.compile of the reference.",
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=None,
    help="Threads for both programs [default: the CPUs idle now: all of them on a quiet machine].",
)
@click.option("--atol", default=1e-4, show_default=True, help="Absolute tolerance of the output comparison.")
@click.option("--rtol", default=1e-4, show_default=True, help="Relative tolerance of the output comparison.")
@click.option(
    "--timeout",
    "timeout_s",
    type=float,
    default=None,
    help="One wall-time limit in seconds for the whole verification [default: building may take 600 s, "
    "each forward 100x the reference's time, at least 20 s].",
)
@click.option("--memory-gb", default=16.0, show_default=True, help="Address-space limit of the candidate.")
@click.option("--no-timing", is_flag=True, help="Check correctness only.")
@_backend_option(_CANDIDATE_BACKEND_HELP)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=None,
    help="Repeat a verification's inputs exactly (the verdict records its seed) [default: fresh each time].",
)
@click.option(
    "--keep", type=click.Path(path_type=Path), default=None, help="Keep the job folder (task, candidate, logs) here."
)
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON.")
def verify_command(
    task_path: Path,
    candidate_path: Path,
    assignments: tuple[str, ...],
    fit_ms: float | None,
    trials: int,
    warmup: int,
    reps: int,
    precision: float,
    timing_budget_s: float,
    baseline: str,
    threads: int | None,
    atol: float,
    rtol: float,
    timeout_s: float | None,
    memory_gb: float,
    no_timing: bool,
    backend_name: str | None,
    seed: int | None,
    keep: Path | None,
    as_json: bool,
) -> None:
    """Check CANDIDATE (a module defining ModelNew) against TASK in a sandbox, and time it.

    A backend that runs interpreted here (Triton with no GPU) is checked for correctness only; the
    verdict says it was not timed.

    Exit code 0 when the candidate is correct, 1 when it is not, 2 for bad input.
    """
    from .verifier import VerifySettings, verify

    task = _load_one_task(task_path, assignments, fit_ms, threads)
    candidate = _read_candidate(candidate_path, backend_name)
    options: dict[str, Any] = dict(
        trials=trials,
        warmup=warmup,
        reps=reps,
        precision=precision,
        timing_budget_s=timing_budget_s,
        baseline=baseline,
        atol=atol,
        rtol=rtol,
        timeout_s=timeout_s,
        memory_gb=memory_gb,
        time=not no_timing,
        seed=seed,
    )
    if threads is not None:
        options["threads"] = threads
    settings = VerifySettings(**options)
    with Console(stderr=True).status(f"verifying {candidate_path.name} against {task.key}", spinner="dots"):
        verdict = verify(task, candidate, settings, job_dir=keep)
    if as_json:
        click.echo(json.dumps(to_dict(verdict), indent=2))
    else:
        from .present.tables import verdict_table

        _stdout().print(verdict_table(task, candidate_path.name, verdict))
    if verdict.noisy:
        assert verdict.conditions is not None
        Console(stderr=True).print(
            "[yellow]warning:[/] the machine was busy while timing ("
            + "; ".join(verdict.conditions.noise)
            + "): the speedup is a rough figure; verify again on a quiet machine"
        )
    if not verdict.ok:
        raise SystemExit(1)


@cli.command("audit")
@click.option(
    "--only",
    default=None,
    metavar="TEXT",
    help="Only candidates or tasks whose name contains TEXT, or catalogue entry TEXT.",
)
@click.option("--workers", default=1, show_default=True, help="Candidates verified at once, each in its own process.")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
def audit_command(only: str | None, workers: int, as_json: bool) -> None:
    """Check the verifier itself: verify every cheating and honest candidate of pragma's audit
    against its task and compare each verdict with the one it must get (see docs/audit.md).

    Exit code 0 when every verdict is as expected, 1 otherwise.
    """
    from .audit import audit_cases, run_audit

    cases = audit_cases(only)  # a filter that matches nothing fails here, before anything runs
    with progress_bar() as bar:
        job = bar.add_task("auditing the verifier", total=len(cases))
        rows = run_audit(only, on_result=lambda row: bar.advance(job), workers=workers)
    if as_json:
        click.echo(json.dumps([to_dict(row) for row in rows], indent=2))
    else:
        table = Table(title=f"pragma audit: {len(rows)} candidates", title_justify="left")
        for column in ("candidate", "entry", "expected", "got", "ok", "seconds"):
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(
                row.candidate,
                "honest" if row.entry is None else str(row.entry),
                _verdict_text(row.expected, row.expected_check),
                _verdict_text(row.status, row.check) if row.status is not None else "verify() raised",
                "[green]yes[/]" if row.ok else "[red]no[/]",
                f"{row.seconds:.1f}",
            )
        wrong = sum(not row.ok for row in rows)
        table.caption = f"{len(rows) - wrong} as expected, {wrong} not"
        _stdout().print(table)
    if not all(row.ok for row in rows):
        raise SystemExit(1)


def _verdict_text(status: Any, check: str | None) -> str:
    return f"{status.value}: {check}" if check else status.value


@cli.command("roofline")
@click.argument("task_path", metavar="TASK", type=click.Path(path_type=Path))
@_size_options
@click.option("--threads", type=int, default=None, help="Threads [default: all CPUs here].")
@click.option("--refresh", is_flag=True, help="Measure the machine's peaks again.")
@click.option("--json", "as_json", is_flag=True, help="Print the task's floor and the machine's peaks as JSON.")
def roofline_command(
    task_path: Path,
    assignments: tuple[str, ...],
    fit_ms: float | None,
    threads: int | None,
    refresh: bool,
    as_json: bool,
) -> None:
    """The roofline floor of TASK on this machine: minimal bytes over peak bandwidth, FLOPs over
    peak FLOP rate (both measured once and cached)."""
    from .machine.roofline import floor_ms, machine_peaks, roofline_table
    from .verifier.settings import VerifySettings

    task = _load_one_task(task_path, assignments, fit_ms, threads)
    peaks = machine_peaks(threads or VerifySettings().thread_count, refresh=refresh)
    if as_json:
        assert task.analysis is not None  # load_task always analyzes
        document = {
            "task": task.key,
            "flops": task.analysis.flops,
            "min_bytes": task.analysis.min_bytes,
            "floor": to_dict(floor_ms(task.analysis, peaks)),
            "peaks": to_dict(peaks),
        }
        click.echo(json.dumps(document, indent=2))
        return
    _stdout().print(roofline_table(task, peaks))


@cli.command("profile")
@click.argument("task_path", metavar="TASK", type=click.Path(path_type=Path))
@click.argument("candidate_path", metavar="[CANDIDATE]", required=False, type=click.Path(path_type=Path))
@click.option(
    "--profiler", "profiler_name", required=True, help="A profiler from `pragma plugins`, e.g. valgrind or perf."
)
@click.option("--metrics", default="", help="Extra metrics to collect, comma-separated.")
@_size_options
@click.option(
    "--repetitions",
    type=click.IntRange(min=1),
    default=None,
    help="Forwards (or replays) the profiler watches [default: 1 for a deterministic profiler such as "
    "cachegrind, else 3].",
)
@click.option(
    "--timeout",
    "timeout_s",
    default=600.0,
    show_default=True,
    help="Seconds one run of the profiler's tool may take before it is stopped.",
)
@click.option("--threads", type=int, default=None, help="Threads [default: all CPUs here].")
@click.option(
    "--full-size",
    is_flag=True,
    help="Profile at the task's own sizes [default: a task whose data is above twice the last-level cache "
    "the profiler sees (cachegrind: the simulated one, this machine's L2) is profiled smaller, its outer "
    "dimensions shrunk as far as its FLOPs per byte allow; the profile's first note says the sizes].",
)
@click.option(
    "--keep",
    type=click.Path(path_type=Path),
    default=None,
    help="Keep the job and the raw tool output in this folder [default: a temporary folder, removed].",
)
@click.option("--json", "as_json", is_flag=True, help="Print the profile as JSON.")
@_backend_option(_CANDIDATE_BACKEND_HELP)
def profile_command(
    task_path: Path,
    candidate_path: Path | None,
    profiler_name: str,
    metrics: str,
    assignments: tuple[str, ...],
    fit_ms: float | None,
    repetitions: int | None,
    timeout_s: float,
    threads: int | None,
    full_size: bool,
    keep: Path | None,
    as_json: bool,
    backend_name: str | None,
) -> None:
    """Profile CANDIDATE (or, without one, the reference of TASK) and list its metrics.

    Fast-path CPU candidates are recorded once in the sandbox and replayed natively under the
    profiler, so the numbers are the kernels' own. A task whose data is above twice the last-level
    cache the profiler sees is profiled at smaller sizes (see docs/profiling.md); --full-size keeps
    its own. The raw tool output is kept only with --keep.
    """
    from .present.tables import profile_table
    from .profiling import profile

    task = _load_one_task(task_path, assignments, fit_ms, threads)
    candidate = _read_candidate(candidate_path, backend_name) if candidate_path is not None else None
    extra = [name.strip() for name in metrics.split(",") if name.strip()]
    subject = candidate_path.name if candidate_path else "the reference"
    with tempfile.TemporaryDirectory(prefix="pragma-profile-") as scratch:
        folder = keep if keep is not None else Path(scratch)
        with Console(stderr=True).status(f"profiling {subject} of {task.key} with {profiler_name}", spinner="dots"):
            result = profile(
                task,
                candidate,
                profiler=profiler_name,
                metrics=extra,
                out_dir=folder,
                repetitions=repetitions,
                threads=threads,
                timeout_s=timeout_s,
                full_size=full_size,
            )
    if keep is None:  # the folder is gone: point to nothing in it
        result = attrs.evolve(result, raw_paths=(), notes=(*result.notes, "raw tool output not kept (use --keep DIR)"))
    if as_json:
        click.echo(json.dumps(to_dict(result), indent=2))
    else:
        _stdout().print(profile_table(f"{subject} on {task.key}", result))


@cli.command("optimize")
@click.argument("task_path", metavar="[TASK]", type=click.Path(path_type=Path), required=False)
@click.option(
    "--model",
    default=None,
    help="A litellm model string, e.g. openai/gpt-4o-mini or ollama/qwen2.5-coder [default: $PRAGMA_MODEL, "
    "else the offline agents].",
)
@click.option(
    "--provider",
    envvar="PRAGMA_PROVIDER",
    default=None,
    help="The provider plugin that answers the agents (see `pragma plugins`) [env: PRAGMA_PROVIDER; "
    "default: litellm with a model, else offline].",
)
@_size_options
@click.option("--max-attempts", default=15, show_default=True, help="Attempts at most.")
@click.option("--patience", default=6, show_default=True, help="Stop after this many attempts without a better one.")
@_TARGET_OPTION
@_search_options
@click.option("--no-profile", is_flag=True, help="Timing only, no profiler (the paper's N-PRAGMA ablation).")
@click.option(
    "--profilers",
    default="valgrind,perf",
    show_default=True,
    help="Profilers to run, comma-separated (see `pragma plugins`); one that cannot run here is left out, and said.",
)
@click.option("--reps", default=100, show_default=True, help="Timed runs per verification, at most.")
@_precision_option
@_backend_option(
    "The backend the Coder writes for (see `pragma plugins`); triton with no GPU runs under Triton's "
    "interpreter, checked but not timed.",
    default=DEFAULT_BACKEND,
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=None,
    help="Threads for reference and candidates [default: the CPUs idle when the run starts].",
)
@click.option(
    "--runs-dir",
    type=click.Path(path_type=Path),
    default=Path("runs"),
    show_default=True,
    help="Where each run gets its folder.",
)
@click.option(
    "--resume",
    type=click.Path(path_type=Path),
    default=None,
    metavar="RUN_DIR",
    help="Continue the run in this folder (give no TASK: the run keeps its own).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the run summary as JSON at the end (fields in docs/loop.md); progress goes to stderr.",
)
@click.pass_context
def optimize_command(
    context: click.Context,
    task_path: Path | None,
    model: str | None,
    provider: str | None,
    assignments: tuple[str, ...],
    fit_ms: float | None,
    max_attempts: int,
    patience: int,
    target_attainment: float,
    search: str,
    branching: int,
    no_profile: bool,
    profilers: str,
    reps: int,
    precision: float,
    backend_name: str,
    threads: int | None,
    runs_dir: Path,
    resume: Path | None,
    as_json: bool,
) -> None:
    """Optimize TASK with the agent loop; every attempt is written under --runs-dir.

    \b
      pragma optimize TASK [OPTIONS]
      pragma optimize --resume RUN_DIR [OPTIONS]

    The agents are a language model with --model (or PRAGMA_MODEL), else the built-in offline
    agents: a recipe Coder and a rule-based Conductor, no network needed.

    With --resume RUN_DIR the task and settings come from that run (options given on the command
    line override them, e.g. a larger --max-attempts); it continues after its last complete
    attempt. Ctrl-C stops after saving what is complete and prints the command that continues.
    """
    from .loop.optimizer import optimize
    from .loop.profiles import unavailable_profilers
    from .loop.progress import Progress
    from .loop.run_summary import run_summary
    from .loop.settings import OptimizeSettings, check_agents, configured_model, provider_name, settings_of_run
    from .present.tables import attempt_line, run_table
    from .verifier import VerifySettings

    if resume is None and task_path is None:
        raise click.UsageError("give a TASK, or --resume RUN_DIR")
    if resume is not None and task_path is not None:
        raise click.UsageError("give either a TASK or --resume RUN_DIR, not both (a resumed run keeps its task)")
    given = {
        name
        for name in context.params
        if context.get_parameter_source(name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
    }
    options: dict[str, Any] = dict(
        model=model,
        provider=provider,
        max_attempts=max_attempts,
        patience=patience,
        target_attainment=target_attainment,
        search=search,
        branching=branching,
        profile=not no_profile,
        profilers=tuple(p.strip() for p in profilers.split(",") if p.strip()),
        backend=_checked_backend(backend_name),
    )
    option_of = {"profile": "no_profile", "backend": "backend_name"}
    verify_options: dict[str, Any] = {"reps": reps, "precision": precision}
    if threads is not None:
        verify_options["threads"] = threads
    if resume is not None:
        settings = settings_of_run(
            resume, **{key: value for key, value in options.items() if option_of.get(key, key) in given}
        )
        changed = {key: value for key, value in verify_options.items() if key in given}
        settings = attrs.evolve(settings, verify=attrs.evolve(settings.verify, **changed))
    else:
        settings = OptimizeSettings(**options, runs_dir=runs_dir, verify=VerifySettings(**verify_options))
    # Everything that can be wrong with the settings fails here, before the task is traced.
    check_agents(settings)  # no model chosen, a missing key or a dead server: in seconds
    untimed = get_registry().backend(settings.backend).timing_refusal()
    if untimed:
        click.echo(
            f"pragma: backend {settings.backend}: {untimed}; attempts are checked, not timed or profiled, and the "
            "run stops at the first correct one",
            err=True,
        )
    for name, reason in (unavailable_profilers(settings.profilers) if settings.profile and not untimed else {}).items():
        click.echo(f"pragma: profiler {name} cannot run here, the run goes on without it: {reason}", err=True)
    task = _load_one_task(task_path, assignments, fit_ms, threads) if task_path is not None else None
    if resume is None and provider_name(settings) == "offline" and not settings.provider:
        offline = get_registry().llm_provider("offline")
        if offline.prepare is not None and task is not None:
            try:
                offline.prepare(task)  # a task no recipe knows fails here, with its one line
                from .offline.coder import check_backend

                check_backend(task, settings.backend)
            except PragmaError as error:
                raise PragmaError(f"{error}: pass --model, or set PRAGMA_MODEL") from None
        click.echo(
            "pragma: no model configured (--model or PRAGMA_MODEL): the offline agents answer, a recipe "
            "Coder and a rule-based Conductor",
            err=True,
        )
    console = Console(stderr=True) if as_json else _stdout()
    status = Console(stderr=True).status("starting", spinner="dots")
    where: list[Path] = []

    def show_progress(progress: Progress) -> None:
        where[:] = [progress.run_dir]
        status.update(_phase_text(progress))

    def show_attempt(attempt: Any, best: Any) -> None:
        console.print(attempt_line(attempt, best), markup=False, highlight=False)

    try:
        with status:
            result = optimize(task, settings, resume=resume, on_attempt=show_attempt, on_progress=show_progress)
    except KeyboardInterrupt:
        again = f"pragma optimize --resume {where[0]}" if where else "the same command (no run folder was created)"
        click.echo(f"pragma: interrupted; completed attempts are saved. Continue with: {again}", err=True)
        raise SystemExit(130) from None
    run_dir = settings.runs_dir / result.run_id
    if as_json:
        summary = run_summary(
            result, run_dir=run_dir, model=configured_model(settings), provider=provider_name(settings)
        )
        click.echo(json.dumps(summary, indent=2))
        return
    console.print(run_table(result))
    console.print(f"run folder: {run_dir}")


_PHASE_TEXT = {
    "writing": "the Coder is writing",
    "building": "building the candidate",
    "verifying": "verifying correctness",
    "timing": "timing candidate and reference",
    "finishing": "re-checking after timing, recording for profiling",
    "profiling": "profiling with {detail}",
    "diagnosing": "diagnosing",
    "advising": "the Conductor is advising",
}


def _phase_text(progress: Any) -> str:
    """``attempt 3: profiling with valgrind``, for the live status line."""
    if progress.phase == "baseline":
        return "baseline: timing and profiling the reference"
    if progress.phase == "planning":
        return f"the planner is planning changes to attempt {progress.attempt}"
    return f"attempt {progress.attempt}: " + _PHASE_TEXT[progress.phase].format(detail=progress.detail)


@cli.command("trace")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the trace as JSON (fields in docs/loop.md).")
@click.option(
    "--tree",
    "as_tree",
    is_flag=True,
    help="Print the tree of attempts (each under the attempt it changed) and draw it to RUN_DIR/tree.png.",
)
def trace_command(run_dir: Path, as_json: bool, as_tree: bool) -> None:
    """Print the Conductor's reasoning attempt by attempt: historical best against current,
    diagnosis, analysis and actions; first the baseline and the profilers that could not watch,
    last the seconds each attempt spent per phase. With --tree, the search tree instead."""
    from .loop.run_directory import RunDirectory
    from .loop.run_summary import trace_document
    from .present.tables import trace_text

    run = RunDirectory.open(run_dir)
    task, attempts, baseline = run.task(), run.completed_attempts(), run.baseline()
    if as_tree:
        from .present.tree_view import plot_tree, tree_lines
        from .verifier.timing_statistics import best_of

        best = best_of(attempts)
        search = run.info()["settings"].get("search", "linear")
        console = _stdout()
        console.print(f"search tree of {task.key} ({search}): {len(attempts)} attempts", markup=False, highlight=False)
        console.print("\n".join(tree_lines(attempts, best)), markup=False, highlight=False)
        picture = plot_tree(attempts, best, run.root / "tree.png", title=f"{task.key}: {search} search")
        console.print(f"picture: {picture}", markup=False, highlight=False)
        return
    if as_json:
        click.echo(json.dumps(trace_document(run.root.name, task.key, baseline, attempts), indent=2))
        return
    _stdout().print(trace_text(task, attempts, baseline), markup=False, highlight=False)


@cli.group("knowledge")
def knowledge_group() -> None:
    """Ask the compendium of profiler metrics built from the profilers' own documentation.

    `show` looks a metric up by name and needs nothing more. `search` asks a semantic index that is
    built from the shipped compendium and its vectors on first use (seconds, once; cached in
    $PRAGMA_KNOWLEDGE_DIR, default <cache>/knowledge) and synced again when the compendium changes.
    """


@knowledge_group.command("search")
@click.argument("query")
@click.option("--profiler", "profilers", multiple=True, help="Only this profiler's entries (repeatable).")
@click.option(
    "--kind", type=click.Choice(["metric", "guide"]), default=None, help="Only metrics, or only guide passages."
)
@click.option("-k", "--top", "top", default=5, show_default=True, help="How many entries.")
@click.option(
    "--compendium",
    "folder",
    type=click.Path(path_type=Path),
    default=None,
    help="A folder of <profiler>.json files from `pragma-kb build` [default: the shipped one].",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def knowledge_search_command(
    query: str, profilers: tuple[str, ...], kind: str | None, top: int, folder: Path | None, as_json: bool
) -> None:
    """The entries nearest in meaning to QUERY, e.g. "kernel waits on DRAM bandwidth"."""
    from . import knowledge

    compendia = knowledge.load_compendia(folder)
    unknown = sorted(set(profilers) - set(compendia))
    if unknown:
        raise knowledge.KnowledgeError(
            f"--profiler {', '.join(unknown)}: no compendium for it; there are {', '.join(sorted(compendia))}"
        )
    hits = knowledge.search(query, profiler=list(profilers) or None, kind=kind, k=top, compendia=compendia)
    if as_json:
        click.echo(
            json.dumps(
                [{"score": round(hit.score, 4), "kind": hit.kind, **to_dict(hit.entry)} for hit in hits], indent=2
            )
        )
        return
    table = Table(title=f"{len(hits)} entries for {query!r}", title_justify="left")
    for column in ("score", "profiler", "entry", "meaning", "source"):
        table.add_column(column, overflow="fold")
    for hit in hits:
        text = hit.entry.meaning if isinstance(hit.entry, knowledge.MetricEntry) else hit.entry.text
        table.add_row(
            f"{hit.score:.2f}",
            hit.entry.profiler,
            hit.title if hit.kind == "metric" else f"[guide] {hit.title}",
            text,
            hit.entry.source,
        )
    _stdout().print(table)


@knowledge_group.command("show")
@click.argument("metric")
@click.option("--profiler", default=None, help="Only this profiler's compendium (names can differ by tool).")
@click.option(
    "--compendium",
    "folder",
    type=click.Path(path_type=Path),
    default=None,
    help="A folder of <profiler>.json files from `pragma-kb build` [default: the shipped one].",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def knowledge_show_command(metric: str, profiler: str | None, folder: Path | None, as_json: bool) -> None:
    """Everything the compendium says of METRIC (a name as the profiler spells it, or an alias).

    The lookup is exact (then ignoring case) and needs no index; a name that is not there is
    answered with the names spelled most like it.
    """
    from . import knowledge

    compendia = knowledge.load_compendia(folder)
    if profiler is not None and profiler not in compendia:
        raise knowledge.KnowledgeError(
            f"--profiler {profiler}: no compendium for it; there are {', '.join(sorted(compendia))}"
        )
    entries = [
        entry
        for name in sorted(compendia)
        if profiler in (None, name)
        for entry in knowledge.lookup([metric], profiler=name, compendia=compendia).values()
    ]
    if not entries:
        raise knowledge.KnowledgeError(_no_such_metric(metric, profiler, compendia))
    if as_json:
        click.echo(json.dumps([to_dict(entry) for entry in entries], indent=2))
        return
    console = _stdout()
    for entry in entries:
        console.print(f"[bold]{entry.name}[/bold] ({entry.profiler})")
        console.print(entry.meaning, markup=False)
        for label, value in (
            ("aliases", ", ".join(entry.aliases)),
            ("unit", entry.unit),
            ("measured", entry.measured),
            ("reveals", ", ".join(entry.bottleneck)),
            ("remedies", "; ".join(entry.remedies)),
            ("source", entry.source),
            ("built by", entry.built_by),
        ):
            if value:
                console.print(f"  {label}: {value}", markup=False, highlight=False)
        console.print()


def _no_such_metric(metric: str, profiler: str | None, compendia: Any) -> str:
    """One line for a name the compendium lacks: the names spelled like it, or where to look instead."""
    from . import knowledge

    where = f"{profiler}'s compendium" if profiler else "the compendium"
    near = knowledge.similar_names(metric, profiler=profiler, compendia=compendia)
    if near:
        return f"no metric named {metric!r} in {where}; did you mean " + ", ".join(
            f"{name!r} ({owner})" for name, owner in near
        )
    return f"no metric named {metric!r} in {where}; search by meaning with `pragma knowledge search {metric!r}`"


def _task_summary(task: Task) -> dict[str, Any]:
    summary = {key: value for key, value in to_dict(task).items() if key not in ("source", "analysis")}
    analysis = task.analysis
    assert analysis is not None  # load_task always analyzes
    summary.update(key=task.key, **to_dict(analysis), min_bytes=analysis.min_bytes)
    return summary


def _tasks_table(tasks: list[Task]) -> Table:
    table = Table(title=f"{len(tasks)} tasks", title_justify="left")
    table.add_column("task", no_wrap=True)
    table.add_column("category", no_wrap=True)
    table.add_column("inputs")
    table.add_column("output")
    table.add_column("FLOPs", justify="right")
    table.add_column("min bytes", justify="right")
    show_sizes = any(task.sizes for task in tasks)
    if show_sizes:
        table.add_column("sizes set")
    for task in tasks:
        analysis = task.analysis
        assert analysis is not None
        table.add_row(
            task.key,
            task.category.value,
            ", ".join(_tensor_text(spec) for spec in analysis.inputs),
            ", ".join(_tensor_text(spec) for spec in analysis.outputs),
            _si(analysis.flops, "FLOP") if analysis.flops else "-",
            _si(analysis.min_bytes, "B"),
            *([", ".join(f"{name}={value!r}" for name, value in task.sizes.items())] if show_sizes else []),
        )
    counts: dict[str, int] = {}
    for task in tasks:
        counts[task.category.value] = counts.get(task.category.value, 0) + 1
    table.caption = "categories: " + ", ".join(f"{name} {count}" for name, count in sorted(counts.items()))
    return table


def _tensor_text(spec: Any) -> str:
    """``1024x8192 float32``; a scalar is ``scalar float32``; a plain value is ``float 3.14``."""
    if spec.value is not None:
        return f"{spec.dtype} {spec.value}"
    shape = "x".join(str(d) for d in spec.shape) or "scalar"
    return f"{shape} {spec.dtype}"


def _stdout() -> Console:
    """Tables keep their columns when piped: a wide console unless a terminal says otherwise."""
    probe = Console()
    return probe if probe.is_terminal else Console(width=160)


def _si(value: float, unit: str) -> str:
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= factor:
            return f"{value / factor:.2f} {prefix}{unit}"
    return f"{value:.0f} {unit}"


from .bench.commands import register as _register_bench_commands  # noqa: E402 - the commands need the group

_register_bench_commands(
    cli, fit_option=_FIT_OPTION, search_options=_search_options, target_option=_TARGET_OPTION, stdout=_stdout
)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``pragma`` script."""
    try:
        cli.main(args=argv, prog_name="pragma", standalone_mode=False)
    except PragmaError as error:
        if _debug:
            raise
        click.echo(f"pragma: error: {error}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except click.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(1)
