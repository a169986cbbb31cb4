"""The ``pragma-kb`` command: build the metric compendium and its index, and report on it.

Bad input prints one line on standard error and exits with code 2; nothing already written is
lost (files are replaced atomically, the index is synced, not wiped).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console
from rich.progress import TaskID
from rich.table import Table

from pragma_core.errors import PragmaError
from pragma_core.knowledge.library import load_compendia, packaged_compendia
from pragma_core.plugin_api.registry import get_registry
from pragma_core.progress import progress_bar

from . import __version__
from .build import BuildSettings, build, coverage_of

EXIT_BAD_INPUT = 2


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="pragma-kb")
def cli() -> None:
    """Build pragma's compendium of profiler metrics from the profilers' own documentation."""


@cli.command("build")
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(path_type=Path),
    help="Folder for compendium/<profiler>.json and .md, build-report.json and index/.",
)
@click.option(
    "--offline-mirror",
    type=click.Path(path_type=Path),
    default=None,
    help="Read a local mirror of the docs instead of crawling (one sub-folder per tool).",
)
@click.option(
    "--model",
    envvar="PRAGMA_MODEL",
    default=None,
    help="A litellm model for the two summary stages [default: none, the structural path].",
)
@click.option("--profiler", "profilers", multiple=True, help="Only this profiler plugin (repeatable).")
@click.option("--url", "urls", multiple=True, metavar="PROFILER=URL", help="Another page to crawl for a profiler.")
@click.option(
    "--folder",
    "folders",
    multiple=True,
    metavar="DIR=PROFILER",
    help="Which profiler a mirror folder documents, where its file names do not tell.",
)
@click.option("--max-depth", default=1, show_default=True, help="Links followed from each doc source.")
@click.option("--max-pages", default=200, show_default=True, help="Pages fetched in all, at most.")
@click.option(
    "--rate-limit", "rate_limit_s", default=1.0, show_default=True, help="Seconds between requests to a host."
)
@click.option("--no-index", is_flag=True, help="Write the compendium only, no Chroma index.")
def build_command(
    out_dir: Path,
    offline_mirror: Path | None,
    model: str | None,
    profilers: tuple[str, ...],
    urls: tuple[str, ...],
    folders: tuple[str, ...],
    max_depth: int,
    max_pages: int,
    rate_limit_s: float,
    no_index: bool,
) -> None:
    """Crawl (or read a mirror of) every profiler plugin's documentation and build the compendium.

    With no model, entries come from the pages' metric tables and definitions alone, and the build
    needs no network with --offline-mirror. A second build re-embeds only entries that changed.
    """
    try:
        folder_map = dict(_pair(item, "--folder", "DIR=PROFILER") for item in folders)
        settings = BuildSettings(
            out_dir=out_dir,
            offline_mirror=offline_mirror,
            model=model,
            urls=urls,
            profilers=profilers,
            folders=folder_map,
            max_depth=max_depth,
            max_pages=max_pages,
            rate_limit_s=rate_limit_s,
            index=not no_index,
        )
        registry = get_registry()
        provider = registry.llm_provider("litellm") if model else None
        profiler_records = {name: registry.profiler(name) for name in registry.profilers()}
        with progress_bar() as bar:
            tasks: dict[str, TaskID] = {}

            def progress(step: str, done: int, total: int) -> None:
                if step not in tasks:
                    tasks[step] = bar.add_task(step, total=total)
                bar.update(tasks[step], completed=done, total=total)

            result = build(settings, profiler_records, provider=provider, progress=progress)
    except PragmaError as error:
        _fail(str(error))
    console = Console()
    table = Table(title=f"Compendium in {out_dir / 'compendium'}")
    for column in ("profiler", "metrics", "guides", "default metrics with a meaning", "missing"):
        table.add_column(column)
    for name, compendium in result.compendia.items():
        cover = result.coverage[name]
        table.add_row(
            name,
            str(len(compendium.metrics)),
            str(len(compendium.guides)),
            f"{len(cover.covered)}/{len(cover.covered) + len(cover.missing)} ({cover.share:.0%})",
            ", ".join(cover.missing) or "-",
        )
    console.print(table)
    embedded = (
        f"; embedded {result.sync.embedded}, unchanged {result.sync.unchanged}, removed {result.sync.removed}"
        if result.sync
        else ""
    )
    console.print(
        f"{result.pages} pages, {result.chunks} chunks{embedded}."
        + (
            f" {result.model_failures} model replies were not the schema; read structurally."
            if result.model_failures
            else ""
        )
    )


@cli.command("stats")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="A build's folder [default: the compendium shipped with pragma-core].",
)
def stats_command(out_dir: Path | None) -> None:
    """Entries per profiler, how each was built, and the share of default metrics documented."""
    try:
        compendia = (
            load_compendia(out_dir / "compendium" if out_dir and (out_dir / "compendium").is_dir() else out_dir)
            if out_dir
            else packaged_compendia()
        )
    except PragmaError as error:
        _fail(str(error))
    registry = get_registry()
    installed = set(registry.profilers())
    table = Table(title="Compendium" + (f" in {out_dir}" if out_dir else " shipped with pragma-core"))
    for column in ("profiler", "metrics", "guides", "built by", "default metrics with a meaning"):
        table.add_column(column)
    for name, compendium in sorted(compendia.items()):
        built: dict[str, int] = {}
        for entry in compendium.entries:
            built[entry.built_by] = built.get(entry.built_by, 0) + 1
        cover = "plugin not installed"
        if name in installed:
            coverage = coverage_of(compendium, registry.profiler(name).default_metrics)
            cover = f"{len(coverage.covered)}/{len(coverage.covered) + len(coverage.missing)} ({coverage.share:.0%})"
            if coverage.missing:
                cover += "; missing " + ", ".join(coverage.missing)
        table.add_row(
            name,
            str(len(compendium.metrics)),
            str(len(compendium.guides)),
            ", ".join(f"{kind} {count}" for kind, count in sorted(built.items())),
            cover,
        )
    Console().print(table)


def _pair(item: str, option: str, form: str) -> tuple[str, str]:
    left, sep, right = item.partition("=")
    if not sep or not left or not right:
        raise PragmaError(f"{option} {item!r}: expected {form}")
    return left, right


def _fail(message: str) -> None:
    click.echo(f"pragma-kb: {message}", err=True)
    sys.exit(EXIT_BAD_INPUT)


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="pragma-kb")
