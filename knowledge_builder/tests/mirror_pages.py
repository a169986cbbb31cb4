"""Helpers the reader tests share: a file of the docs mirror as a page, and what chunks define."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from knowledge_builder.documents import Chunk, Definition, Page


def mirror_page(mirror: Path, path: str, *, profiler: str, fmt: str) -> Page:
    """The mirror's file at ``path`` as a page of ``profiler`` in format ``fmt``, at an address
    that cannot resolve (``https://mirror.invalid/<path>``)."""
    return Page(
        url=f"https://mirror.invalid/{path}",
        profiler=profiler,
        format=fmt,
        text=(mirror / path).read_text(encoding="utf-8"),
        path=path,
    )


def definitions_by_term(chunks: Iterable[Chunk]) -> dict[str, tuple[Chunk, Definition]]:
    """Each term the chunks define, with its chunk and definition (the last, for a repeated term)."""
    return {d.term: (chunk, d) for chunk in chunks for d in chunk.definitions}
