"""Format readers: each cuts a :class:`~knowledge_builder.documents.Page` into chunks.

``read_page(page)`` picks the reader by the page's format; XML goes to the DocBook reader or the
counter-definition reader by its root element. Every reader is a pure function of the page text.
A file named like a manual page in roff (``perf_event_open.2``, ``perf-stat.1``, ``ioctl.3p``) is
read as one, unless an HTTP content type says it is HTML or Markdown.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable

from ..documents import Chunk, Page

__all__ = ["read_page", "format_of"]

Reader = Callable[[Page], list[Chunk]]

_EXTENSIONS = {
    ".html": "html",
    ".htm": "html",
    ".md": "md",
    ".markdown": "md",
    ".rst": "rst",
    ".txt": "txt",
    ".xml": "xml",
    ".json": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".csv": "csv",
    ".section": "section",
    ".man": "man",
}
# The section number ends a manual page's file name: 1 to 9, then a few letters (``3p``, ``1perf``).
_MAN_PAGE = re.compile(r"[^/]\.[1-9][a-z]{0,4}$")


def format_of(name: str, content_type: str = "") -> str | None:
    """The format of a file name or URL path (or an HTTP content type); None when no reader fits."""
    lowered = name.lower().split("?")[0].split("#")[0]
    for extension, fmt in _EXTENSIONS.items():
        if lowered.endswith(extension):
            return fmt
    if "html" in content_type:
        return "html"
    if "markdown" in content_type:
        return "md"
    if _MAN_PAGE.search(lowered):
        return "man"
    if content_type.startswith("text/plain"):
        return "txt"
    return None


def _xml_reader(page: Page) -> Reader:
    head = re.sub(r"<\?xml[^>]*\?>|<!--.*?-->|<!DOCTYPE[^>]*(\[.*?\])?>", "", page.text[:20000], flags=re.S)
    root = re.search(r"<([A-Za-z_][\w.-]*)", head)
    tag = root.group(1) if root else ""
    if tag in ("chapter", "article", "book", "section", "refentry", "sect1", "para"):
        from .docbook import read

        return read
    from .counters_xml import read

    return read


def read_page(page: Page) -> list[Chunk]:
    """The page's chunks, by its format's reader."""
    if page.format == "xml":
        return _xml_reader(page)(page)
    module = {
        "html": "html",
        "md": "markdown",
        "rst": "rst",
        "txt": "asciidoc",
        "json": "json_metrics",
        "yaml": "yaml_counters",
        "csv": "csv_table",
        "section": "section",
        "man": "man",
    }[page.format]
    return importlib.import_module(f"{__name__}.{module}").read(page)
