"""``pragma knowledge search`` and ``show``: the compendium of profiler metrics, by meaning or by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from ..serialization import to_dict
from ._options import json_option
from ._output import stdout

__all__ = ["knowledge_group"]

_compendium_option = click.option(
    "--compendium",
    "folder",
    type=click.Path(path_type=Path),
    default=None,
    help="A folder of <profiler>.json files from `pragma-kb build` [default: the shipped one].",
)


@click.group("knowledge")
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
@_compendium_option
@json_option()
def knowledge_search_command(
    query: str, profilers: tuple[str, ...], kind: str | None, top: int, folder: Path | None, as_json: bool
) -> None:
    """The entries nearest in meaning to QUERY, e.g. "kernel waits on DRAM bandwidth"."""
    from .. import knowledge

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
    stdout().print(table)


@knowledge_group.command("show")
@click.argument("metric")
@click.option("--profiler", default=None, help="Only this profiler's compendium (names can differ by tool).")
@_compendium_option
@json_option("Print JSON.")
def knowledge_show_command(metric: str, profiler: str | None, folder: Path | None, as_json: bool) -> None:
    """Everything the compendium says of METRIC (a name as the profiler spells it, or an alias).

    The lookup is exact (then ignoring case) and needs no index; a name that is not there is
    answered with the names spelled most like it.
    """
    from .. import knowledge

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
    console = stdout()
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
    from .. import knowledge

    where = f"{profiler}'s compendium" if profiler else "the compendium"
    near = knowledge.similar_names(metric, profiler=profiler, compendia=compendia)
    if near:
        return f"no metric named {metric!r} in {where}; did you mean " + ", ".join(
            f"{name!r} ({owner})" for name, owner in near
        )
    return f"no metric named {metric!r} in {where}; search by meaning with `pragma knowledge search {metric!r}`"
