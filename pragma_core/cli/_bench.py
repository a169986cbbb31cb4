"""``pragma bench`` runs the loop on every task of a tree; ``pragma report`` writes a bench's report
again; ``pragma compare`` sets two benches side by side. What they run is imported when they run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console

from ..bench.confirmations import RETIME_AFTER_S
from ..errors import PragmaError
from ..files import check_output_folder
from ..tasks.loading import parse_size_assignments
from ._inputs import checked_backend
from ._options import (
    ALL_CPUS,
    comma_separated,
    json_option,
    loop_options,
    loop_settings,
    option_group,
    size_options,
    threads_option,
)
from ._output import stdout

if TYPE_CHECKING:
    from ..bench.plan import BenchSettings
    from ..bench.runner import Executor

__all__ = ["bench_command", "compare_command", "report_command"]


def _levels(text: str | None) -> tuple[int, ...]:
    levels = []
    for part in comma_separated(text):
        if not part.isdigit():
            raise PragmaError(f"--levels {text}: give level numbers separated by commas, such as --levels 1,2")
        levels.append(int(part))
    return tuple(levels)


_executor_options = option_group(
    click.option(
        "--executor",
        type=click.Choice(["local", "ray"]),
        default="local",
        show_default=True,
        help="local: worker processes here; ray: Ray tasks on a cluster (pip install 'pragma-core[ray]').",
    ),
    click.option(
        "--workers",
        type=click.IntRange(min=1),
        default=None,
        help="Tasks at once [default: 1 local; Ray: as scheduled].",
    ),
    click.option(
        "--address",
        default=None,
        help="Ray: auto (a running cluster) or HOST:PORT [default: a Ray instance started here].",
    ),
    click.option(
        "--ray-cpus", type=click.FloatRange(min=0), default=1.0, show_default=True, help="Ray: CPUs each task asks for."
    ),
    click.option(
        "--ray-gpus",
        type=click.FloatRange(min=0),
        default=None,
        help="Ray: GPUs each task asks for [default: 1 for cuda and hip, else 0].",
    ),
)
"""Where the tasks run (:func:`_executor` reads them)."""


@click.command("bench")
@click.argument("tree", type=click.Path(path_type=Path))
@click.option("--levels", default=None, metavar="1,2", help="Only these levels (folders level1, level2...).")
@click.option(
    "--categories",
    default=None,
    metavar="NAMES",
    help="Only tasks of these categories, comma-separated: matmul, activation, normalization, "
    "pooling_reduction, conv, other.",
)
@click.option("--only", multiple=True, metavar="TEXT", help="Only tasks whose path contains TEXT (repeatable).")
@loop_options
@click.option(
    "--baseline",
    "baselines",
    default="eager",
    show_default=True,
    help="What each task's best is timed against at the end, comma-separated: eager, compile (torch.compile).",
)
@size_options
@threads_option(ALL_CPUS)
@_executor_options
@click.option(
    "--retime-after",
    "retime_after_s",
    type=click.FloatRange(min=0),
    default=RETIME_AFTER_S,
    show_default=True,
    metavar="SECONDS",
    help="A best whose confirmation disagreed with the loop's or was disturbed is timed again, this long after "
    "its last confirmation at the earliest.",
)
@click.option(
    "--out", type=click.Path(path_type=Path), default=Path("bench"), show_default=True, help="The bench directory."
)
def bench_command(
    tree: Path,
    levels: str | None,
    categories: str | None,
    only: tuple[str, ...],
    baselines: str,
    assignments: tuple[str, ...],
    fit_ms: float | None,
    threads: int | None,
    retime_after_s: float,
    out: Path,
    **options: Any,
) -> None:
    """Run `optimize` on every task of TREE (a KernelBench-format tree) and report the metrics.

    \b
      pragma bench ../shared/kernelbench --levels 1 --fit-ms 20 --max-attempts 6 --out bench-l1
      pragma bench TREE --no-profile --out bench-l1          # the ablation, beside it
      pragma bench TREE --executor ray --address auto        # on a Ray cluster

    Each task gets its run folder under OUT/runs; OUT/bench.json records every finished task
    as it ends, and OUT/report.md and OUT/plots/ are written at the end (`pragma report OUT`
    writes them again). Run the same command again to resume: finished tasks are skipped, a
    task cut short continues after its last complete attempt. On one machine only one
    verification times at a time, while other tasks' model calls, builds and profiling go on.
    """
    from ..bench.plan import BenchSettings
    from ..bench.runner import run_bench
    from ..loop.settings import OptimizeSettings
    from ..verifier import VerifySettings

    if not tree.is_dir():
        raise PragmaError(f"{tree}: no such directory; give a KernelBench-format tree (folders level1, level2...)")
    loop = loop_settings(options)
    checked_backend(loop["backend"])
    settings = BenchSettings(
        levels=_levels(levels),
        categories=comma_separated(categories),
        only=only,
        baselines=comma_separated(baselines),
        sizes=parse_size_assignments(assignments),
        fit_ms=fit_ms,
        retime_after_s=retime_after_s,
        loop=OptimizeSettings(**loop, verify=VerifySettings(reps=options.pop("reps"), threads=threads)),
    )
    check_output_folder(out, "--out")  # before the lines on agents and profilers: the error comes alone
    _check_agents_and_profilers(settings)
    executor = _executor(settings, **options)
    try:
        document = run_bench(tree, out, settings, executor)
    except KeyboardInterrupt:
        click.echo(f"pragma: interrupted; finished tasks are saved in {out}. Continue with the same command.", err=True)
        raise SystemExit(130) from None
    _print_summary(stdout(), document)
    click.echo(f"bench: {out / 'bench.json'}, report: {out / 'report.md'}, plots: {out / 'plots'}")


def _executor(
    settings: BenchSettings,
    executor: str,
    workers: int | None,
    address: str | None,
    ray_cpus: float,
    ray_gpus: float | None,
) -> Executor:
    """Where the tasks run: worker processes here, or Ray tasks (Ray is imported now, so a missing
    Ray says how to install it before anything is traced)."""
    from ..bench.executors import LocalExecutor, RayExecutor, import_ray

    if executor != "ray":
        return LocalExecutor(workers=workers or 1)
    import_ray()
    gpus = ray_gpus if ray_gpus is not None else (1.0 if settings.loop.backend in ("cuda", "hip") else 0.0)
    return RayExecutor(address=address, workers=workers, cpus=ray_cpus, gpus=gpus)


@click.command("report")
@click.argument("bench_dir", metavar="DIR", type=click.Path(path_type=Path))
def report_command(bench_dir: Path) -> None:
    """Write DIR/report.md and DIR/plots again from DIR/bench.json, and print the tables."""
    from ..bench.report import write_report
    from ..bench.store import BenchStore

    store = BenchStore(bench_dir)
    if not store.path.is_file():
        raise PragmaError(f"{bench_dir}: no bench.json; give the --out folder of a `pragma bench`")
    document = store.load()
    document["metrics"] = write_report(store.root, document)
    store.save(document)
    _print_summary(stdout(), document)
    click.echo(f"report: {bench_dir / 'report.md'}, plots: {bench_dir / 'plots'}")


@click.command("compare")
@click.argument("first", metavar="A", type=click.Path(path_type=Path))
@click.argument("second", metavar="B", type=click.Path(path_type=Path))
@json_option("Print the comparison as JSON.")
def compare_command(first: Path, second: Path, as_json: bool) -> None:
    """Compare two benches (their --out folders) task by task, and over the tasks both ran."""
    from ..bench.compare import compare_benches, comparison_tables
    from ..serialization import to_dict

    for folder in (first, second):
        if not (folder / "bench.json").is_file():
            raise PragmaError(f"{folder}: no bench.json; give the --out folder of a `pragma bench`")
    comparison = compare_benches(first, second)
    if not comparison["variants"]:
        raise PragmaError(f"{first} and {second} have no variant in common (profiled or unprofiled) to compare")
    if as_json:
        for part in comparison["variants"].values():
            part["metrics"] = {side: to_dict(metrics) for side, metrics in part["metrics"].items()}
        click.echo(json.dumps(comparison, indent=2, default=str))
        return
    console = stdout()
    for table in comparison_tables(comparison):
        console.print(table)


def _check_agents_and_profilers(settings: BenchSettings) -> None:
    """Fail now, not in every task: no model where one is needed, a missing key or a dead server,
    an unknown profiler; profilers that cannot run here are said once."""
    from ..loop.profiles import unavailable_profilers
    from ..loop.settings import check_agents, provider_name

    check_agents(settings.loop)
    if provider_name(settings.loop) == "offline":
        click.echo(
            "pragma: no model configured (--model or PRAGMA_MODEL): the offline agents answer; tasks no recipe "
            "knows are rows that could not run",
            err=True,
        )
    profile = settings.loop.profile
    for name, reason in (unavailable_profilers(settings.loop.profilers) if profile else {}).items():
        click.echo(f"pragma: profiler {name} cannot run here, the tasks go on without it: {reason}", err=True)


def _print_summary(console: Console, document: dict[str, Any]) -> None:
    """Every task (the loop's best beside its confirmation), then the overall row of each variant
    and baseline, on the terminal."""
    from rich.table import Table

    from ..bench.report import tasks_table
    from ..bench.summary import bench_summary

    console.print(tasks_table(document))

    table = Table(title="bench: all tasks", title_justify="left")
    for column in ("variant", "baseline", "tasks", "correct", "fast_1", "fast_1.5", "fast_2", "geomean speedup"):
        table.add_column(column, justify="left" if column in ("variant", "baseline") else "right")
    for variant, baselines in bench_summary(document).items():
        for baseline, categories in baselines.items():
            metrics = categories["all"]
            geomean = metrics.geomean_speedup
            table.add_row(
                variant,
                baseline,
                str(metrics.tasks),
                f"{metrics.correct}",
                f"{metrics.fast_p[1.0]:.0%}",
                f"{metrics.fast_p[1.5]:.0%}",
                f"{metrics.fast_p[2.0]:.0%}",
                f"{geomean.value:.2f}x [{geomean.low:.2f}-{geomean.high:.2f}]" if geomean else "-",
            )
    console.print(table)
