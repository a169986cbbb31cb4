"""Render the agents' prompt templates (``templates/*.j2``, shipped as package data).

The wording of a prompt lives in its template; the code in :mod:`.prompts` only decides what goes
in. Templates are read with :mod:`importlib.resources`, so they load from an installed wheel as
from a checkout. A variable a template uses but the caller did not pass is an error
(``StrictUndefined``), not an empty string in a prompt nobody reads. Nothing is HTML-escaped: the
text is for a language model.
"""

from __future__ import annotations

import functools
import re
from importlib import resources

import jinja2

__all__ = ["render_parts", "environment", "fenced"]


def _load(name: str) -> str | None:
    path = resources.files(__package__) / "templates" / name
    return path.read_text(encoding="utf-8") if path.is_file() else None  # None: TemplateNotFound


@functools.cache
def environment() -> jinja2.Environment:
    """The one environment all agent templates are rendered in."""
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(_load),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    env.filters["fenced"] = fenced
    return env


def render_parts(template: str, /, **context: object) -> dict[str, str]:
    """Each top-level ``{% block %}`` of the template rendered with ``context``, by block name.

    A template holds the messages of one request as blocks (``system``, ``user``); each comes
    back without blank lines at either end.
    """
    loaded = environment().get_template(template)
    parts = {}
    for name, block in loaded.blocks.items():
        parts[name] = "".join(block(loaded.new_context(dict(context)))).strip("\n")
    return parts


def fenced(text: str, language: str = "") -> str:
    """``text`` in a Markdown code fence longer than any run of backticks inside it."""
    longest = max((len(run) for run in re.findall(r"`{3,}", text)), default=2)
    fence = "`" * max(3, longest + 1)
    body = text.strip("\n")
    return f"{fence}{language}\n{body}\n{fence}"
