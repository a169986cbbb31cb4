"""The tree of a run's attempts shown to people: as indented text (``pragma trace --tree``) and as a
picture (speedup over attempt number, each attempt joined to its parent)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..records import AgentRole, Attempt

__all__ = ["tree_lines", "plot_tree"]

_INSTRUCTION_CHARS = 100


def tree_lines(attempts: Sequence[Attempt], best: Attempt | None) -> list[str]:
    """One line per attempt under its parent, with status, speedup and the instruction it applied."""
    numbers = {a.number for a in attempts}
    children: dict[int | None, list[Attempt]] = {}
    for attempt in attempts:
        parent = attempt.parent if attempt.parent in numbers else None
        children.setdefault(parent, []).append(attempt)
    lines: list[str] = []

    def walk(parent: int | None, indent: str) -> None:
        kids = children.get(parent, [])
        for index, attempt in enumerate(kids):
            last = index == len(kids) - 1
            branch = "" if parent is None else ("└── " if last else "├── ")
            lines.append(indent + branch + _label(attempt, best))
            walk(attempt.number, indent + ("" if parent is None else ("    " if last else "│   ")))

    walk(None, "")
    return lines


def _label(attempt: Attempt, best: Attempt | None) -> str:
    verdict = attempt.verdict
    status = verdict.status.value if verdict else "no verdict"
    speed = f" {verdict.speedup.value:.2f}x" if verdict and verdict.speedup else ""
    mark = " [best]" if best is not None and best.number == attempt.number else ""
    what = " ".join((attempt.instruction or "").split())
    if attempt.writer is AgentRole.DEBUGGER:
        what = f"the debugger's fix of #{attempt.parent}"
    if len(what) > _INSTRUCTION_CHARS:
        what = what[: _INSTRUCTION_CHARS - 3] + "..."
    return f"#{attempt.number} {status}{speed}{mark}" + (f"  {what}" if what else "")


def plot_tree(attempts: Sequence[Attempt], best: Attempt | None, path: Path, *, title: str) -> Path:
    """A PNG of the tree: speedup (log scale) over attempt number, a line from each attempt to its
    parent; attempts that were not correct sit on the bottom edge as crosses, the best is ringed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    timed = {a.number: a.verdict.speedup.value for a in attempts if a.verdict and a.verdict.ok and a.verdict.speedup}
    floor = min([*timed.values(), 1.0]) / 1.5
    height = {a.number: timed.get(a.number, floor) for a in attempts}
    figure, axes = plt.subplots(figsize=(max(6.0, 0.45 * len(attempts) + 2), 4.2))
    for attempt in attempts:
        if attempt.parent in height:
            axes.plot(
                [attempt.parent, attempt.number], [height[attempt.parent], height[attempt.number]], color="0.6", lw=1
            )
    good = [n for n in height if n in timed]
    bad = [n for n in height if n not in timed]
    axes.scatter(good, [height[n] for n in good], color="tab:blue", zorder=3, label="correct")
    if bad:
        axes.scatter(bad, [height[n] for n in bad], color="tab:red", marker="x", zorder=3, label="not correct")
    if best is not None and best.number in timed:
        axes.scatter([best.number], [timed[best.number]], s=220, facecolors="none", edgecolors="tab:green", lw=2)
        axes.annotate(
            f"best #{best.number}",
            (best.number, timed[best.number]),
            textcoords="offset points",
            xytext=(-12, -14),
            ha="right",
        )
    axes.axhline(1.0, color="0.3", ls="--", lw=0.8)
    axes.set_yscale("log")
    axes.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    axes.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}x"))
    axes.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axes.set_xlabel("attempt")
    axes.set_ylabel("speedup over the reference (log)")
    axes.set_title(title)
    axes.legend(loc="lower right")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
