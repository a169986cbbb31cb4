"""A bench's figures (matplotlib, PNG): speedup per category, best speedup by attempt, and the
profiling ablation task by task; each drawn only when the bench holds what it shows."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from ..present.speedup_axis import speedup_scale
from .summary import VARIANTS, rows_of

__all__ = ["write_plots"]

_COLOURS = {"profiled": "tab:blue", "unprofiled": "tab:orange"}


def write_plots(folder: Path, document: dict[str, Any]) -> list[Path]:
    """Draw the figures the bench can show into ``folder``; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = [variant for variant in VARIANTS if rows_of(document, variant)]
    if not variants:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, draw in (
        ("speedup_by_category.png", _by_category),
        ("speedup_by_attempt.png", _by_attempt),
        ("profiled_vs_unprofiled.png", _ablation),
    ):
        figure = draw(plt, document, variants)
        if figure is None:
            continue
        figure.tight_layout()
        figure.savefig(folder / name, dpi=120)
        plt.close(figure)
        written.append(folder / name)
    return written


def _speedups(rows: dict[str, dict[str, Any]]) -> dict[str, float]:
    return {
        key: row["speedup"]["eager"]["value"]
        for key, row in rows.items()
        if row.get("correct") and (row.get("speedup") or {}).get("eager")
    }


def _by_category(plt: Any, document: dict[str, Any], variants: list[str]) -> Any:
    """The distribution of the correct tasks' speedups over eager, per category (the paper's figure 3)."""
    per_variant = {variant: rows_of(document, variant) for variant in variants}
    categories = sorted({row.get("category") or "other" for rows in per_variant.values() for row in rows.values()})
    if not any(_speedups(rows) for rows in per_variant.values()):
        return None
    figure, axis = plt.subplots(figsize=(max(6.0, 1.4 * len(categories)), 4.5))
    width = 0.8 / len(variants)
    for index, variant in enumerate(variants):
        rows = per_variant[variant]
        speedups = _speedups(rows)
        for position, category in enumerate(categories):
            values = [value for key, value in speedups.items() if (rows[key].get("category") or "other") == category]
            if not values:
                continue
            x = position - 0.4 + width * (index + 0.5)
            axis.boxplot(
                values,
                positions=[x],
                widths=width * 0.8,
                showfliers=False,
                patch_artist=True,
                boxprops={"facecolor": _COLOURS.get(variant, "grey"), "alpha": 0.35},
            )
            axis.scatter([x] * len(values), values, s=10, color=_COLOURS.get(variant, "grey"), zorder=3)
    axis.axhline(1.0, color="black", linewidth=0.8)
    speedup_scale(axis, "y", [value for rows in per_variant.values() for value in _speedups(rows).values()])
    axis.set_xticks(range(len(categories)), categories, rotation=20)
    axis.set_xlim(-0.6, len(categories) - 0.4)
    axis.set_ylabel("speedup over eager PyTorch (correct tasks)")
    axis.set_title("Speedup per category", fontsize=10)
    axis.legend(
        handles=[plt.Rectangle((0, 0), 1, 1, color=_COLOURS.get(v, "grey"), alpha=0.6) for v in variants],
        labels=variants,
        fontsize=8,
    )
    return figure


def _curve(rows: dict[str, dict[str, Any]]) -> tuple[list[int], list[float], list[float]]:
    """Per attempt number: the geometric mean of the best speedup so far, slowdowns included (a
    task with no correct candidate yet counts as 1x, as if PyTorch were kept), and the share of
    tasks beating eager."""
    curves = [row.get("best_by_attempt") or [] for row in rows.values() if row.get("status") == "finished"]
    longest = max((len(curve) for curve in curves), default=0)
    attempts, geomeans, fast_1 = [], [], []
    for number in range(1, longest + 1):
        values = []
        for curve in curves:
            reached = curve[min(number, len(curve)) - 1] if curve else None  # a run that stopped keeps its best
            values.append(reached if reached is not None else 1.0)
        attempts.append(number)
        geomeans.append(math.exp(statistics.fmean(math.log(value) for value in values)))
        fast_1.append(sum(value > 1.0 for value in values) / len(rows))
    return attempts, geomeans, fast_1


def _by_attempt(plt: Any, document: dict[str, Any], variants: list[str]) -> Any:
    """The best speedup so far against the attempt number (the paper's figure 4)."""
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    drawn = False
    for variant in variants:
        attempts, geomeans, fast_1 = _curve(rows_of(document, variant))
        if not attempts:
            continue
        drawn = True
        colour = _COLOURS.get(variant, "grey")
        left.plot(attempts, geomeans, marker="o", color=colour, label=variant)
        right.plot(attempts, fast_1, marker="o", color=colour, label=variant)
    if not drawn:
        plt.close(figure)
        return None
    from matplotlib.ticker import MaxNLocator

    left.axhline(1.0, color="black", linewidth=0.8)
    speedup_scale(left, "y", [float(value) for line in left.get_lines() for value in line.get_ydata()])
    left.set_xlabel("attempt")
    left.set_ylabel("geomean of the best speedup so far")
    right.set_xlabel("attempt")
    right.set_ylabel("fast_1 so far (share of all tasks)")
    right.set_ylim(0, 1)
    for axis in (left, right):
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.legend(fontsize=8)
        axis.grid(alpha=0.3)
    figure.suptitle("Best speedup over eager PyTorch by attempt (the loop's own timings)", fontsize=10)
    return figure


def _ablation(plt: Any, document: dict[str, Any], variants: list[str]) -> Any:
    """Each task both variants ran: its speedup with profiling against without (1x: not correct)."""
    if len(variants) < 2:
        return None
    profiled, unprofiled = rows_of(document, "profiled"), rows_of(document, "unprofiled")
    common = sorted(set(profiled) & set(unprofiled))
    if not common:
        return None
    with_profiles, without = _speedups(profiled), _speedups(unprofiled)
    xs = [without.get(key, 1.0) for key in common]
    ys = [with_profiles.get(key, 1.0) for key in common]
    figure, axis = plt.subplots(figsize=(5.5, 5))
    axis.scatter(xs, ys, s=18)
    axis.plot([1e-3, 1e3], [1e-3, 1e3], color="black", linewidth=0.8)  # the diagonal, cut by the limits below
    speedup_scale(axis, "x", xs + ys)
    speedup_scale(axis, "y", xs + ys)
    axis.set_xlabel("speedup without profiling (--no-profile)")
    axis.set_ylabel("speedup with profiling")
    above = sum(y > x for x, y in zip(xs, ys))
    axis.set_title(f"Profiling ablation: {above} of {len(common)} tasks above the diagonal", fontsize=10)
    return figure
