"""A speedup axis a reader takes in at a glance: log scale, ticks at powers of two labelled 0.5x,
1x, 2x..., no minor ticks. Shared by the bench's figures and the benchmarks' plots."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

__all__ = ["speedup_scale"]


def speedup_scale(axes: Any, which: str, values: Iterable[float]) -> None:
    """A log scale for speedups on ``axes``' ``which`` axis ("x" or "y"): ticks at powers of two
    from below the smallest value to above the largest (and 1x), all in view."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    positive = [value for value in values if value > 0] + [1.0]
    low = math.floor(math.log2(min(positive)))
    high = math.ceil(math.log2(max(positive)))
    (axes.set_xscale if which == "x" else axes.set_yscale)("log")
    axis = axes.xaxis if which == "x" else axes.yaxis
    axis.set_major_locator(FixedLocator([2.0**power for power in range(low, high + 1)]))
    axis.set_major_formatter(FuncFormatter(lambda value, _position: f"{value:g}x"))
    axis.set_minor_locator(NullLocator())
    (axes.set_xlim if which == "x" else axes.set_ylim)(2.0**low / 1.15, 2.0**high * 1.15)  # every tick in view
