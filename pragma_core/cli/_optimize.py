"""``pragma optimize`` runs the agent loop on one task (or resumes a run); ``pragma trace`` shows
what its Conductor thought, attempt by attempt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import click
from click.core import ParameterSource
from rich.console import Console

from ..errors import PragmaError, ProviderError
from ..files import check_output_folder
from ..plugin_api.registry import get_registry
from ..records import RunResult, Task
from ._inputs import checked_backend, load_one_task
from ._options import (
    IDLE_CPUS,
    SETTING_PARAMETERS,
    json_option,
    loop_options,
    loop_settings,
    precision_option,
    runs_dir_option,
    size_options,
    threads_option,
)
from ._output import stdout

if TYPE_CHECKING:
    from ..loop.progress import Progress
    from ..loop.settings import OptimizeSettings

__all__ = ["optimize_command", "trace_command"]


@click.command("optimize")
@click.argument("task_path", metavar="[TASK]", type=click.Path(path_type=Path), required=False)
@loop_options
@size_options
@precision_option
@threads_option(IDLE_CPUS)
@runs_dir_option
@click.option(
    "--resume",
    type=click.Path(path_type=Path),
    default=None,
    metavar="RUN_DIR",
    help="Continue the run in this folder (give no TASK: the run keeps its own).",
)
@json_option("Print the run summary as JSON at the end (fields in docs/loop.md); progress goes to stderr.")
@click.pass_context
def optimize_command(
    context: click.Context,
    task_path: Path | None,
    assignments: tuple[str, ...],
    fit_ms: float | None,
    resume: Path | None,
    as_json: bool,
    **options: Any,
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
    from ..loop.run_summary import run_summary
    from ..loop.settings import configured_model, provider_name
    from ..present.tables import run_table

    if resume is None and task_path is None:
        raise click.UsageError("give a TASK, or --resume RUN_DIR")
    if resume is not None and task_path is not None:
        raise click.UsageError("give either a TASK or --resume RUN_DIR, not both (a resumed run keeps its task)")
    settings = _settings(context, resume, options)
    # Everything that can be wrong with the settings fails here, before the task is traced.
    _check(settings)
    task = load_one_task(task_path, assignments, fit_ms, options["threads"]) if task_path is not None else None
    check_output_folder(settings.runs_dir, "--runs-dir")  # before the line on agents: the error comes alone
    if resume is None and provider_name(settings) == "offline" and not settings.provider:
        _offline_agents_answer(task, settings)
    console = Console(stderr=True) if as_json else stdout()
    if resume is not None:
        _say_resuming(resume, settings)
    result = _optimized(task, settings, resume, console)
    run_dir = settings.runs_dir / result.run_id
    if as_json:
        summary = run_summary(
            result, run_dir=run_dir, model=configured_model(settings), provider=provider_name(settings)
        )
        click.echo(json.dumps(summary, indent=2))
        return
    console.print(run_table(result))
    console.print(f"run folder: {run_dir}")


def _settings(context: click.Context, resume: Path | None, options: dict[str, Any]) -> OptimizeSettings:
    """The run's settings: from the options, or, with ``--resume``, the run's own with the options
    given on the command line (or in the environment) applied."""
    from ..loop.settings import OptimizeSettings, settings_of_run
    from ..verifier import VerifySettings

    given = {
        name
        for name in context.params
        if context.get_parameter_source(name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
    }
    loop = loop_settings(options)
    loop["backend"] = checked_backend(loop["backend"])
    verify = {name: options[name] for name in ("reps", "precision", "threads")}
    if resume is None:
        return OptimizeSettings(**loop, runs_dir=options["runs_dir"], verify=VerifySettings(**verify))
    settings = settings_of_run(
        resume, **{name: value for name, value in loop.items() if SETTING_PARAMETERS.get(name, name) in given}
    )
    changed = {name: value for name, value in verify.items() if name in given}
    return attrs.evolve(settings, verify=attrs.evolve(settings.verify, **changed))


def _check(settings: OptimizeSettings) -> None:
    """Fail now on agents that cannot answer (no model chosen, a missing key or a dead server: in
    seconds); say what a backend that cannot time, or a profiler that cannot run here, leaves out."""
    from ..loop.profiles import unavailable_profilers
    from ..loop.settings import check_agents

    check_agents(settings)
    untimed = get_registry().backend(settings.backend).timing_refusal()
    if untimed:
        click.echo(
            f"pragma: backend {settings.backend}: {untimed}; attempts are checked, not timed or profiled, and the "
            "run stops at the first correct one",
            err=True,
        )
    for name, reason in (unavailable_profilers(settings.profilers) if settings.profile and not untimed else {}).items():
        click.echo(f"pragma: profiler {name} cannot run here, the run goes on without it: {reason}", err=True)


def _offline_agents_answer(task: Task | None, settings: OptimizeSettings) -> None:
    """With no model chosen: a task no recipe of the offline agents knows fails now, with its one
    line; otherwise say who answers."""
    offline = get_registry().llm_provider("offline")
    if offline.prepare is not None and task is not None:
        try:
            offline.prepare(task)  # a task no recipe knows fails here, with its one line
            from ..offline.coder import check_backend

            check_backend(task, settings.backend)
        except PragmaError as error:
            raise PragmaError(f"{error}: pass --model, or set PRAGMA_MODEL") from None
    click.echo(
        "pragma: no model configured (--model or PRAGMA_MODEL): the offline agents answer, a recipe "
        "Coder and a rule-based Conductor",
        err=True,
    )


def _say_resuming(run_dir: Path, settings: OptimizeSettings) -> None:
    """One line on stderr before a resumed run goes on: after which attempt, and how many it may
    still make."""
    from ..loop.run_directory import RunDirectory

    done = RunDirectory.open(run_dir).completed_attempts()
    after = f"after attempt {done[-1].number}" if done else "before its first attempt"
    left = max(0, settings.max_attempts - len(done))
    click.echo(f"pragma: resuming {run_dir} {after} ({left} of {settings.max_attempts} attempts left)", err=True)


def _optimized(task: Task | None, settings: OptimizeSettings, resume: Path | None, console: Console) -> RunResult:
    """The loop's result, each attempt printed on ``console`` as it ends and the phase on a status
    line; Ctrl-C exits 130 with the command that continues."""
    from ..loop.optimizer import optimize
    from ..present.tables import attempt_line

    status = Console(stderr=True).status("starting", spinner="dots")
    where: list[Path] = []

    def show_progress(progress: Progress) -> None:
        where[:] = [progress.run_dir]
        status.update(_phase_text(progress))

    def show_attempt(attempt: Any, best: Any) -> None:
        console.print(attempt_line(attempt, best), markup=False, highlight=False)

    try:
        with status:
            return optimize(task, settings, resume=resume, on_attempt=show_attempt, on_progress=show_progress)
    except KeyboardInterrupt:
        again = f"pragma optimize --resume {where[0]}" if where else "the same command (no run folder was created)"
        click.echo(f"pragma: interrupted; completed attempts are saved. Continue with: {again}", err=True)
        raise SystemExit(130) from None
    except ProviderError as failure:
        again = f"pragma optimize --resume {where[0]}" if where else "the same command (no run folder was created)"
        raise PragmaError(
            f"{failure}; the run stopped, its completed attempts are saved: once the model answers, continue with: {again}"
        ) from None


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


@click.command("trace")
@click.argument("run_dir", type=click.Path(path_type=Path))
@json_option("Print the trace as JSON (fields in docs/loop.md).")
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
    from ..loop.run_directory import RunDirectory
    from ..loop.run_summary import trace_document
    from ..present.tables import trace_text

    run = RunDirectory.open(run_dir)
    task, attempts, baseline = run.task(), run.completed_attempts(), run.baseline()
    if as_tree:
        from ..loop.settings import settings_of_run
        from ..present.tree_view import plot_tree, tree_lines
        from ..verifier.timing_statistics import best_of

        best = best_of(attempts)
        search = settings_of_run(run.root).search
        console = stdout()
        console.print(f"search tree of {task.key} ({search}): {len(attempts)} attempts", markup=False, highlight=False)
        console.print("\n".join(tree_lines(attempts, best)), markup=False, highlight=False)
        picture = plot_tree(attempts, best, run.root / "tree.png", title=f"{task.key}: {search} search")
        console.print(f"picture: {picture}", markup=False, highlight=False)
        return
    if as_json:
        click.echo(json.dumps(trace_document(run.root.name, task.key, baseline, attempts), indent=2))
        return
    stdout().print(trace_text(task, attempts, baseline), markup=False, highlight=False)
