"""The citation check: metric names the Conductor cites that the profile did not measure.

A model that writes "l1tex__t_sector_hit_rate is low" when no such metric was collected is
reasoning from a number it never saw. :func:`unmeasured_citations` finds metric names in the
Conductor's analysis and actions (any name or alias the compendium knows, or an Nsight Compute
style ``unit__counter.rollup`` name in backticks) that are not among the profile's metrics; the loop shows
them to the Conductor on its next turn. Plain lower-case words that are also metric names
(``cycles``, ``instructions``) count only in backticks, where they are unmistakably names.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from .library import packaged_compendia

__all__ = ["unmeasured_citations"]

_TICKED = re.compile(r"`([^`\n]{2,120})`")
_IDENTIFIER = re.compile(r"(?<![\w.\-/])([A-Za-z][\w]*(?:[.\-/:][\w]+)*)")
_PLAIN_WORD = re.compile(r"[a-z]+")
_NCU_SHAPE = re.compile(r"[a-z][a-z0-9]*__[a-z0-9_]+(?:\.[a-z0-9_]+)*")


@functools.cache
def _known_names() -> tuple[frozenset[str], tuple[str, ...]]:
    names: set[str] = set()
    for compendium in packaged_compendia().values():
        names |= compendium.names()
    spaced = tuple(sorted((n for n in names if " " in n), key=len, reverse=True))
    return frozenset(names), spaced


def unmeasured_citations(
    texts: Iterable[str], measured: Iterable[str], *, requested: Iterable[str] = ()
) -> tuple[str, ...]:
    """Metric names cited in ``texts`` that are neither ``measured`` nor ``requested``, in order.

    ``requested`` are the names the Conductor asks to collect next: naming them is no claim.
    """
    known, spaced = _known_names()
    allowed = {name.casefold() for name in (*measured, *requested)}
    found: dict[str, None] = {}
    for text in texts:
        ticked = {match.strip() for match in _TICKED.findall(text)}
        for name in ticked:
            bare = name.split("[")[0].strip()
            if bare in known or _NCU_SHAPE.fullmatch(bare):
                found.setdefault(bare)
        for name in _IDENTIFIER.findall(text):
            if name in known and not _PLAIN_WORD.fullmatch(name):
                found.setdefault(name)
        for name in spaced:
            if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text):
                found.setdefault(name)
    return tuple(name for name in found if name.casefold() not in allowed)
