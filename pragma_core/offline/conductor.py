"""The rule-based Conductor: from the verdict, the profiles, the roofline numbers and the best so far,
it names the bottleneck and picks the next move (a knob change of the recipe) with its reason, and
answers in the same JSON a model would.

The base of a move is the best attempt (the current one when it just became best, or when its
median is 1.5 times the best's and only timing noise keeps it from replacing it). A move never
repeats a knob setting already tried. Without profiles, moves follow a fixed order (parallelize,
vectorize, fast math, method, fusion, accumulators, unroll, block, tile order, layout, key tile, branchless,
vector width, chunk); every knob of every recipe is on it. With
profiles, the evidence reorders them: instructions per element spent outside the kernel (scalar libm
calls) ask for fast math with vectorization together; many kernel instructions per element ask for
vectorization; a high D1 miss rate asks for tiling, or for a smaller tile where the loop already
tiles with a tile sized for L1 (a larger one then goes late; a tile sized for L2 it leaves alone),
and for the packed implicit GEMM over direct loops (a convolution's method); mispredicted branches for selects. A move the evidence speaks against
(blocking with a D1 miss rate under 1%, branchless code with no mispredicts, fast math with no
library calls and a vectorized loop) goes last. A numeric knob (or the method) may also step back
one value (a smaller tile, fewer accumulators, direct loops): the family's starting shape is a
guess for a multicore CPU at large sizes, and a move only forward could never question it;
step-backs rank after the forward moves nothing speaks against. A level-2 chain starts with its
elementwise ops in the kernels' stores (``fusion=epilogue``); its step back, every chain a pass of
its own, undoes the fusion plan if a measurement says so.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ..records import Attempt, CompletionRequest, Profile, Task, Verdict, VerdictStatus
from ..verifier.timing_statistics import improves_on
from .coder import recognized
from .knobs import defaults, format_move, knobs_of
from .recipe import KNOB_MEANINGS, Knob

__all__ = ["Evidence", "read_evidence", "advise", "LADDER"]

LADDER = (
    "parallel",
    "simd",
    "fast_math",
    "method",
    "fusion",
    "accumulators",
    "unroll",
    "block",
    "order",
    "layout",
    "key_tile",
    "branchless",
    "vector_width",
    "chunk",
)
"""The order of moves when nothing else speaks for one."""

_LIBRARY_CALLS = 10.0  # instructions per element outside the kernel that mean a library call per element
_SCALAR = 3.0  # kernel instructions per element of a loop that is not vectorized
_VECTORIZED = 1.0
_D1_HIGH, _D1_LOW = 5.0, 1.0  # %
_MISPREDICT_HIGH, _MISPREDICT_LOW = 2.0, 0.5  # %
_STEP_BACK = 6  # a numeric knob's step back: after the neutral forward moves, before those the evidence is against
_IDLE = 10  # a forward move of a knob an earlier move of which built the same machine code: last
_TILE_KNOBS = frozenset({"block", "key_tile"})
"""Knobs whose value is a tile's edge: where the tile is sized for L1 (:attr:`Knob.cache`), the D1
miss rate says whether its data stays there."""
_PROMISING = 1.5  # median speedup over the best's that is worth building on while the intervals still overlap


@attrs.frozen(kw_only=True)
class Evidence:
    """What the profiles say, per element of the task's largest tensor; None where not measured."""

    kernel_instructions: float | None = None
    outside_instructions: float | None = None
    d1_miss_rate: float | None = None
    mispredict_rate: float | None = None
    ipc: float | None = None

    def lines(self) -> list[str]:
        facts = []
        if self.kernel_instructions is not None:
            facts.append(f"{self.kernel_instructions:.2f} kernel instructions per element")
        if self.outside_instructions is not None:
            facts.append(f"{self.outside_instructions:.1f} instructions per element outside the kernel (library calls)")
        if self.d1_miss_rate is not None:
            facts.append(f"D1 miss rate {self.d1_miss_rate:.2f}%")
        if self.mispredict_rate is not None:
            facts.append(f"branch mispredict rate {self.mispredict_rate:.2f}%")
        if self.ipc is not None:
            facts.append(f"IPC {self.ipc:.2f}")
        return facts


def read_evidence(profiles: Sequence[Profile], task: Task) -> Evidence:
    """Per-element instruction counts from cachegrind (kernel and whole program, over the forwards
    it replayed), miss and mispredict rates of the kernel, IPC where perf counted it."""
    values: dict[str, Any] = {}
    for profile in profiles:
        elements = _elements(task, profile.sizes)  # counts are per forward at the size profiled
        kernel = {m.name: m.value for m in profile.metrics if m.kernel}
        overall = {m.name: m.value for m in profile.metrics if not m.kernel}
        if profile.profiler == "valgrind" and "Ir" in kernel and elements:
            forwards = _note_number(profile, r"totals over (\d+) replayed forward") or 1
            values["kernel_instructions"] = kernel["Ir"] / forwards / elements
            whole = _note_number(profile, r"whole program[^:]*: Ir=(\d+)")
            if whole is not None:
                values["outside_instructions"] = max(0.0, whole - kernel["Ir"]) / forwards / elements
        for name in ("D1 miss rate",):
            if name in kernel:
                values["d1_miss_rate"] = kernel[name]
        for name in ("Mispred rate", "branch-miss-rate"):
            if name in kernel or name in overall:
                values.setdefault("mispredict_rate", kernel.get(name, overall.get(name)))
        if "ipc" in kernel or "ipc" in overall:
            values["ipc"] = kernel.get("ipc", overall.get("ipc"))
    return Evidence(**values)


def advise(request: CompletionRequest) -> str:
    """The Conductor's reply: JSON with analysis, actions, extra_metrics and new_best."""
    task, verdict = request.task, request.verdict
    assert task is not None and verdict is not None
    recipe, match, _ = recognized(task)
    knobs = recipe.knobs
    history = list(request.history)
    current = Attempt(
        number=(history[-1].number + 1) if history else 1,
        candidate=request.candidate,
        verdict=verdict,
        profiles=request.profiles,
    )
    best = request.best
    new_best = improves_on(verdict, best)
    promising = not new_best and _promising(verdict, best)
    base = current if new_best or promising else best
    base_knobs = knobs_of(base, recipe.family, knobs) or defaults(knobs)
    tried = [k for k in (knobs_of(a, recipe.family, knobs) for a in [*history, current]) if k is not None]
    evidence = read_evidence(request.profiles, task)
    diagnosis = request.diagnosis
    attainment = verdict.attainment if verdict.ok else None
    idle = _idle_knobs(current, history, recipe.family, knobs)
    moves = rank_moves(
        knobs, base_knobs, tried, evidence, attainment=attainment, profiled=bool(request.profiles), idle=idle
    )

    analysis = [_judgement(current, verdict, best, new_best, promising)]
    if diagnosis is not None and verdict.ok:
        bound = diagnosis.bound.value.replace("_", " ")
        share = f" at {attainment:.0%} of the roofline floor" if attainment is not None else ""
        analysis.append(f"Bottleneck: {bound}{share}.")
    if evidence.lines():
        analysis.append("Profile: " + "; ".join(evidence.lines()) + ".")
    elif verdict.ok:
        analysis.append("No profile: moves go in the fixed order.")
    base_number = base.number if base is not None and base.candidate is not None else None
    if moves:
        changes, reason = moves[0]
        actions = [format_move(changes, base_number, reason)]
        analysis.append(f"Next: {reason}")
    else:
        actions = [
            f"keep attempt {base_number}: every move from it has been tried" if base_number else "no move left to try"
        ]
        analysis.append("Every move from the best has been tried; the best stays.")
    extra = list(
        dict.fromkeys(
            [*(diagnosis.request_metrics if diagnosis else ()), *_metrics_moves_need(knobs, request.profiles)]
        )
    )
    reply = {
        "analysis": " ".join(analysis),
        "actions": actions,
        "extra_metrics": extra,
        "new_best": new_best,
        "done": not moves,
    }
    return "```json\n" + json.dumps(reply, indent=2) + "\n```\n"


def rank_moves(
    knobs: Mapping[str, Knob],
    base: Mapping[str, Any],
    tried: Sequence[Mapping[str, Any]],
    evidence: Evidence,
    *,
    attainment: float | None,
    profiled: bool,
    idle: frozenset[str] = frozenset(),
) -> list[tuple[dict[str, Any], str]]:
    """Untried moves from ``base``, best first, each with its reason; a knob in ``idle`` (one whose
    move built the same machine code: it does nothing here) moves only after every other."""
    moves: list[tuple[int, int, dict[str, Any], str]] = []
    seen = [dict(t) for t in tried]
    for order, name in enumerate(LADDER):
        knob = knobs.get(name)
        if knob is None:
            continue
        l1_tile = name in _TILE_KNOBS and knob.cache == "L1"
        value = knob.after(base[name])
        if value is not None:
            priority, reason = _judge(name, value, base, evidence, attainment, profiled, l1_tile=l1_tile)
            if name in idle:
                priority, reason = _IDLE, f"{reason}; an earlier move of {name} built the same machine code"
            options = [{name: value}]
            if name == "fast_math" and priority == 1 and "simd" in knobs and not base["simd"]:
                options.insert(0, {"fast_math": value, "simd": True})  # library calls vectorize only with both
            untried = [changes for changes in options if {**base, **changes} not in seen]
            if untried:
                moves.append((priority, order, untried[0], reason))
        back = knob.before(base[name])
        if back is not None and not isinstance(back, bool) and {**base, name: back} not in seen:
            if l1_tile and _smaller_tile_fits(back, evidence, profiled):
                moves.append((1, order, {name: back}, _smaller_tile_reason(name, back, base[name], evidence)))
            else:
                moves.append((_STEP_BACK, order, {name: back}, _step_back_reason(name, back, base[name])))
    moves.sort(key=lambda move: (move[0], move[1]))
    return [(changes, reason) for _, _, changes, reason in moves]


def _smaller_tile_fits(back: Any, evidence: Evidence, profiled: bool) -> bool:
    """An L1 tile already tiling whose data misses D1 often: one step smaller is the first move."""
    return profiled and back != 0 and evidence.d1_miss_rate is not None and evidence.d1_miss_rate > _D1_HIGH


def _smaller_tile_reason(name: str, value: Any, current: Any, evidence: Evidence) -> str:
    meaning = KNOB_MEANINGS.get(name, name)
    return (
        f"{name}={value}: {meaning}; D1 miss rate {evidence.d1_miss_rate:.1f}% with tiles of {current}: "
        "a smaller tile keeps what it reuses in L1"
    )


def _step_back_reason(name: str, value: Any, current: Any) -> str:
    meaning = KNOB_MEANINGS.get(name, name)
    return (
        f"{name}={value}: {meaning}; one step back from {current}, since the starting shape is a guess "
        "for this machine and size"
    )


def _judge(
    name: str,
    value: Any,
    base: Mapping[str, Any],
    evidence: Evidence,
    attainment: float | None,
    profiled: bool,
    *,
    l1_tile: bool,
) -> tuple[int, str]:
    """(priority, reason) of setting knob ``name`` to ``value``: lower goes first; 5 is neutral.
    ``l1_tile``: the knob is a tile's edge sized for L1, which the D1 miss rate speaks to."""
    meaning = KNOB_MEANINGS.get(name, name)
    plain = f"{name}={value}: {meaning}"
    if name == "parallel":
        share = f"{attainment:.0%} of the roofline" if attainment is not None else "far from the roofline"
        return 0, f"{plain}; one thread reaches {share}, so spread the outer loop over the cores"
    if not profiled:
        return 5, f"{plain} (next in the fixed order; no profile to choose by)"
    kernel, outside = evidence.kernel_instructions, evidence.outside_instructions
    if name == "fast_math":
        if outside is not None and outside > _LIBRARY_CALLS:
            return 1, (
                f"{plain}; {outside:.0f} instructions per element run outside the kernel in scalar "
                "library calls (exp, tanh, erf): fast math with vectorization calls the vector versions"
            )
        if outside is not None and outside < 2 and kernel is not None and kernel < _VECTORIZED:
            return 9, f"{plain}; no library calls and the loop is already vectorized, little to gain"
    if name == "simd":
        if kernel is not None and kernel > _SCALAR:
            return 2, f"{plain}; {kernel:.1f} instructions per element in the kernel: the inner loop is scalar"
        if kernel is not None and kernel < _VECTORIZED:
            return 9, f"{plain}; {kernel:.2f} instructions per element: already vectorized"
    if name == "method" and value == "gemm" and evidence.d1_miss_rate is not None and evidence.d1_miss_rate > _D1_HIGH:
        return 1, (
            f"{plain}; D1 miss rate {evidence.d1_miss_rate:.1f}% in the direct loops: packed patches and weights "
            "in K panels keep each register tile's operands in L1"
        )
    d1 = evidence.d1_miss_rate
    if name in _TILE_KNOBS and d1 is not None:
        if d1 > _D1_HIGH and base[name] == 0:
            return 1, f"{plain}; D1 miss rate {d1:.1f}%: tiles reuse what they load"
        if l1_tile and d1 > _D1_HIGH:
            return 7, f"{plain}; D1 miss rate {d1:.1f}% already: a larger tile would miss more"
        if l1_tile and d1 < _D1_LOW:
            return 9, f"{plain}; D1 miss rate only {d1:.2f}%, blocking has little to fix"
    if name == "branchless":
        if evidence.mispredict_rate is not None and evidence.mispredict_rate > _MISPREDICT_HIGH:
            return 1, f"{plain}; {evidence.mispredict_rate:.1f}% of branches mispredict: use selects"
        if evidence.mispredict_rate is not None and evidence.mispredict_rate < _MISPREDICT_LOW:
            return 9, f"{plain}; branches predict well ({evidence.mispredict_rate:.2f}% mispredicted)"
    if name in ("accumulators", "unroll") and evidence.ipc is not None and evidence.ipc < 1.5:
        return 2, f"{plain}; IPC {evidence.ipc:.2f}: a dependency chain, more independent work per iteration"
    return 5, plain


def _metrics_moves_need(knobs: Mapping[str, Knob], profiles: Sequence[Profile]) -> list[str]:
    """Metrics a knob of this recipe is judged by that no profile carries yet."""
    if not profiles:
        return []
    have = {metric.name for profile in profiles for metric in profile.metrics}
    if any(p.profiler == "valgrind" for p in profiles) and "block" in knobs and "D1 miss rate" not in have:
        return ["D1 miss rate"]
    return []


def _idle_knobs(current: Attempt, history: Sequence[Attempt], family: str, knobs: Mapping[str, Knob]) -> frozenset[str]:
    """The knobs an ``unchanged`` attempt moved: where its knobs differ from those of the attempt
    whose machine code it repeats (the latest earlier one with the same fingerprint), here and
    in the history, so "this knob did nothing here" is remembered."""
    idle: set[str] = set()
    seen: list[Attempt] = []
    for attempt in [*history, current]:
        verdict = attempt.verdict
        if verdict is not None and verdict.status is VerdictStatus.UNCHANGED and verdict.machine_code:
            twin = next(
                (a for a in reversed(seen) if a.verdict is not None and a.verdict.machine_code == verdict.machine_code),
                None,
            )
            mine, theirs = knobs_of(attempt, family, knobs), knobs_of(twin, family, knobs) if twin else None
            if mine is not None and theirs is not None:
                idle |= {name for name in mine if mine[name] != theirs.get(name)}
        seen.append(attempt)
    return frozenset(idle)


def _judgement(current: Attempt, verdict: Verdict, best: Attempt | None, new_best: bool, promising: bool) -> str:
    if verdict.status is VerdictStatus.UNCHANGED:
        return (
            f"Attempt {current.number} built the same machine code as the attempt it changed: its move did "
            "nothing here, so another knob moves next."
        )
    if not verdict.ok:
        back = f"back to attempt {best.number}" if best else "back to the plain version"
        return f"Attempt {current.number} is {verdict.status.value}: {verdict.message.splitlines()[0]}; {back}."
    speed = f"{verdict.speedup.value:.2f}x" if verdict.speedup else "untimed"
    if new_best:
        return f"Attempt {current.number} is correct at {speed}, the new best."
    best_speed = f"{best.verdict.speedup.value:.2f}x" if best and best.verdict and best.verdict.speedup else "?"
    versus = f"the best (attempt {best.number if best else '?'}, {best_speed})"
    if promising:
        return (
            f"Attempt {current.number} is correct at {speed}, {_PROMISING:g} times or more {versus} but within "
            "its timing noise: the next move builds on it, and the best changes only when the noise allows."
        )
    return f"Attempt {current.number} is correct at {speed}, not beyond {versus}; its move is undone."


def _promising(verdict: Verdict, best: Attempt | None) -> bool:
    """Faster than the best by :data:`_PROMISING` in the median, though the intervals overlap."""
    if (
        not verdict.ok
        or verdict.speedup is None
        or best is None
        or best.verdict is None
        or best.verdict.speedup is None
    ):
        return False
    return verdict.speedup.value >= _PROMISING * best.verdict.speedup.value


def _elements(task: Task, sizes: Mapping[str, int | float]) -> int:
    """Elements of the task's largest tensor at ``sizes`` (a profile's reduced sizes, if any)."""
    from ..sizes.shrinking import at_sizes

    profiled = at_sizes(task, sizes)
    analysis = profiled.analysis if profiled is not None else None
    if analysis is None:
        return 0
    return max([1] + [math.prod(spec.shape) for spec in (*analysis.inputs, *analysis.outputs)])


def _note_number(profile: Profile, pattern: str) -> int | None:
    for note in profile.notes:
        found = re.search(pattern, note)
        if found:
            return int(found.group(1))
    return None
