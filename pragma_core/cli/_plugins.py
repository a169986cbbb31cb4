"""``pragma plugins``: what each plugin registers, what failed to load, and what can run here."""

from __future__ import annotations

import json
from typing import Any

import attrs
import click
from rich.table import Table

from ..plugin_api.components import Probe
from ..plugin_api.registry import PluginRegistry, get_registry
from ._options import json_option
from ._output import stdout

__all__ = ["plugins_command"]


@click.command("plugins")
@json_option()
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
    console = stdout()
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
