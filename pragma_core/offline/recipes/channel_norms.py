"""Norms whose statistics span several rows: batch norm (per channel, over the batch and the
spatial dims) and group norm (per sample and group of channels, over the group's channels and the
spatial dims).

Recognizes ``nn.BatchNorm1d/2d/3d`` (the module form; affine or not, with or without running
statistics) and ``nn.GroupNorm`` or ``F.group_norm``. A batch norm in training mode (as the verifier
builds the task's model) normalizes with the batch's mean and biased variance and updates the
running statistics as torch does (momentum, or the cumulative average when it is None); in eval
mode it uses the running statistics. The forward asks the module which mode it is in.

The input is viewed as ``(N, C, S)``. Both norms are one kernel (see :func:`channel_norm_source`):
sums of ``x - k`` and ``(x - k)**2`` over pieces of each ``(n, c)`` block of ``S`` contiguous
elements (``k`` the statistic's first element, so a large mean does not cancel the variance away;
float over blocks of 4096, double across them) in parallel, then each statistic's mean and variance,
a scale and shift per ``(n, c)``, and one vectorized pass ``y = x * scale + shift``. Group norm with
at least one group per thread takes a group's statistics and scaling one after the other in the same
thread, so the second pass reads the group from cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..graph import Node, OpGraph, Ref
from ..modules import candidate_module, forward_argument, param_expr
from ..recipe import GenerationContext, Knob, Match
from .elementwise import c_float

__all__ = ["ChannelNormRecipe", "channel_norm_source"]

_FLOAT32 = "torch.float32"
_PIECE = 1 << 15
"""Elements per work item of both passes (128 KiB of floats): few (n, c) blocks of a large input
still give every thread work, and a piece stays in L2 between its statistics and its scaling."""
_LANES = 16
"""Floats per accumulator when vectorized: one AVX-512 register, two AVX2 ones."""


class ChannelNormRecipe:
    """Batch norm and group norm: statistics over several rows, then one scale and shift per row."""

    family = "channel_norm"
    knobs: Mapping[str, Knob] = {
        "parallel": Knob(default=False, values=(False, True), start=True),
        "simd": Knob(default=False, values=(False, True), start=True),
        "accumulators": Knob(default=1, values=(1, 2, 4, 8), start=4),
    }

    def match(self, graph: OpGraph) -> Match | None:
        if len(graph.inputs) != 1 or len(graph.outputs) != 1:
            return None
        ops = graph.ops
        if len(ops) != 1 or graph.outputs[0] != Ref(ops[0].name):
            return None
        node, x = ops[0], graph.input_node(0)
        if x.shape is None or len(x.shape) < 2 or 0 in x.shape or str(x.dtype) != _FLOAT32:
            return None
        if node.args[:1] != (Ref(x.name),) or node.shape != x.shape or str(node.dtype) != _FLOAT32:
            return None
        if node.op == "batch_norm":
            return _match_batch_norm(graph, x, node)
        if node.op == "group_norm":
            return _match_group_norm(graph, x, node)
        return None

    def generate(self, match: Match, knobs: Mapping[str, Any], context: GenerationContext) -> str:
        facts = match.facts
        cpp = channel_norm_source(facts, knobs)
        name = forward_argument(context, 0)
        affine = [param_expr(facts[key]) for key in ("weight", "bias") if facts[key]]
        sizes = f"{name}.shape[0], {name}.shape[1], torch.Size({name}.shape[2:]).numel()"
        head = [f"{name} = {name}.contiguous()", f"out = torch.empty_like({name})"]
        if facts["kind"] == "group_norm":
            body = [f"lib.group_norm({', '.join([name, *affine])}, out, {sizes}, {facts['groups']})"]
        elif facts["running_mean"] is None:
            body = [f"lib.batch_norm({', '.join([name, *affine])}, out, {sizes})"]
        else:
            module = param_expr(facts["module"])
            running = [param_expr(facts[key]) for key in ("running_mean", "running_var", "tracked")]
            body = [
                f"if {module}.training:",
                f"    momentum = -1.0 if {module}.momentum is None else float({module}.momentum)",
                f"    lib.batch_norm({', '.join([name, *affine])}, out, {sizes}, {', '.join(running)}, momentum)",
                "else:",
                f"    lib.batch_norm_eval({', '.join([name, *affine, *running[:2]])}, out, {sizes})",
            ]
        forward = "\n".join([*head, *body, "return out"])
        flags = [] if knobs["simd"] else ["-fno-tree-vectorize"]
        return candidate_module(match=match, knobs=knobs, context=context, cpp=cpp, forward_body=forward, flags=flags)


# -- matching ---------------------------------------------------------------------------------------


def _match_batch_norm(graph: OpGraph, x: Node, node: Node) -> Match | None:
    """The module form only: ``batch_norm(x)`` with the module's parameters and buffers as kwargs."""
    if len(node.args) != 1 or "running_mean" not in node.kwargs:
        return None
    channels = x.shape[1] if x.shape is not None else 0
    eps = node.kwargs.get("eps", 1e-5)
    paths = _paths(graph, node, ("weight", "bias", "running_mean", "running_var"), channels)
    if paths is None or not isinstance(eps, (int, float)) or len(x.dims) > 5:
        return None
    weight, bias, mean, var = paths
    if (mean is None) != (var is None):
        return None
    module = next((path.rsplit(".", 1)[0] for path in paths if path and "." in path), None)
    if mean is not None and module is None:
        return None
    return Match(
        family="channel_norm",
        summary=f"batch norm over {channels} channels" + (", affine" if weight else ""),
        facts={
            "kind": "batch_norm",
            "eps": float(eps),
            "weight": weight,
            "bias": bias,
            "running_mean": mean,
            "running_var": var,
            "tracked": f"{module}.num_batches_tracked" if mean is not None else None,
            "module": module,
        },
    )


def _match_group_norm(graph: OpGraph, x: Node, node: Node) -> Match | None:
    channels = x.dims[1]
    groups, eps = node.arg(1, "num_groups"), node.arg(4, "eps", 1e-5)
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1 or channels % groups:
        return None
    if not isinstance(eps, (int, float)) or len(node.args) > 5:
        return None
    refs = {"weight": node.arg(2, "weight"), "bias": node.arg(3, "bias")}
    paths = []
    for ref in refs.values():
        param = graph.node(ref)
        if ref is not None and (param is None or not _is_param(param, channels)):
            return None
        paths.append(graph.params[param.name] if param is not None else None)
    return Match(
        family="channel_norm",
        summary=f"group norm, {groups} groups of {channels // groups} channels",
        facts={"kind": "group_norm", "groups": groups, "eps": float(eps), "weight": paths[0], "bias": paths[1]},
    )


def _paths(graph: OpGraph, node: Node, keys: tuple[str, ...], channels: int) -> list[str | None] | None:
    paths: list[str | None] = []
    for key in keys:
        ref = node.kwargs.get(key)
        param = graph.node(ref)
        if ref is not None and (param is None or not _is_param(param, channels)):
            return None
        paths.append(graph.params[param.name] if param is not None else None)
    return paths


def _is_param(node: Node, channels: int) -> bool:
    return node.op == "param" and node.shape == (channels,) and str(node.dtype) == _FLOAT32


# -- the kernel -------------------------------------------------------------------------------------


def channel_norm_source(facts: Mapping[str, Any], knobs: Mapping[str, Any]) -> str:
    """The C++: ``group_norm`` or ``batch_norm`` (and ``batch_norm_eval`` with running statistics)."""
    parallel, simd = bool(knobs["parallel"]), bool(knobs["simd"])
    partials = (_LANES if simd else 1) * int(knobs["accumulators"])
    weight, bias = bool(facts["weight"]), bool(facts["bias"])
    affine = "".join(f", const float* __restrict__ {p}" for p, on in (("w", weight), ("b", bias)) if on)
    group = facts["kind"] == "group_norm"
    running = not group and facts["running_mean"] is not None
    extra = (
        ", int64_t groups"
        if group
        else (", float* running_mean, float* running_var, int64_t* tracked, double momentum" if running else "")
    )
    # Statistic s of block (n, c), and the first block of every statistic for the shift k.
    if group:
        stat_setup = "const int64_t per = C / groups, stats = N * groups;"
        stat_of = "(n * C + c) / per"  # blocks of one sample's group are consecutive
        first_block = "s * per"
    else:
        stat_setup = "const int64_t stats = C;"
        stat_of = "c"
        first_block = "s"
    update = (
        """
    if (running) {
        *tracked += 1;
        const double factor = momentum < 0.0 ? 1.0 / (double)*tracked : momentum;
        const double count = (double)(N * S);
        for (int64_t c = 0; c < C; ++c) {
            const double unbiased = count > 1.0 ? var[c] * count / (count - 1.0) : var[c];
            running_mean[c] = (float)((1.0 - factor) * running_mean[c] + factor * mean[c]);
            running_var[c] = (float)((1.0 - factor) * running_var[c] + factor * unbiased);
        }
    }"""
        if running
        else ""
    )
    omp_for = "#pragma omp parallel for schedule(static)" if parallel else "// one after another"
    pragma = "#pragma omp simd" if simd else "// scalar loop"
    gain = "w[c]" if weight else "1.0f"
    offset = "b[c]" if bias else "0.0f"
    stats_and_apply = f"""
// Statistics of x viewed as (N, C, S), then y = x * scale + shift per (n, c) block.
static void normalize(const float* __restrict__ x{affine}, float* __restrict__ y, int64_t N, int64_t C, int64_t S,
                      int64_t groups, std::vector<double>& mean, std::vector<double>& var) {{
    (void)groups;
    {stat_setup}
    const int64_t pieces = (S + PIECE - 1) / PIECE, items = N * C * pieces;
    std::vector<float> shift_of(stats);
    for (int64_t s = 0; s < stats; ++s) {{
        const int64_t first = {first_block};  // the statistic's first (n, c) block
        const int64_t n = {"first / C" if group else "0"}, c = {"first % C" if group else "s"};
        shift_of[s] = x[(n * C + c) * S];
    }}
    std::vector<double> s1(items), s2(items);
    {omp_for}
    for (int64_t item = 0; item < items; ++item) {{
        const int64_t block = item / pieces, lo = item % pieces * PIECE, hi = std::min(S, lo + PIECE);
        const int64_t n = block / C, c = block % C;
        (void)n;
        double a = 0.0, q = 0.0;
        moments_span(x + block * S + lo, hi - lo, shift_of[{stat_of}], a, q);
        s1[item] = a;
        s2[item] = q;
    }}
    std::vector<double> t1(stats, 0.0), t2(stats, 0.0);
    std::vector<int64_t> counts(stats, 0);
    for (int64_t item = 0; item < items; ++item) {{
        const int64_t block = item / pieces, lo = item % pieces * PIECE, hi = std::min(S, lo + PIECE);
        const int64_t n = block / C, c = block % C;
        (void)n;
        const int64_t s = {stat_of};
        t1[s] += s1[item];
        t2[s] += s2[item];
        counts[s] += hi - lo;
    }}
    mean.assign(stats, 0.0);
    var.assign(stats, 0.0);
    std::vector<float> rstd(stats);
    for (int64_t s = 0; s < stats; ++s) {{
        const double count = (double)counts[s], m = t1[s] / count;
        mean[s] = shift_of[s] + m;
        var[s] = std::max(t2[s] / count - m * m, 0.0);
        rstd[s] = (float)(1.0 / std::sqrt(var[s] + {c_float(facts["eps"])}));
    }}
    std::vector<float> scale(N * C), shift(N * C);
    for (int64_t block = 0; block < N * C; ++block) {{
        const int64_t n = block / C, c = block % C;
        (void)n;
        const int64_t s = {stat_of};
        scale[block] = rstd[s] * {gain};
        shift[block] = {offset} - (float)mean[s] * scale[block];
    }}
    {omp_for}
    for (int64_t item = 0; item < items; ++item) {{
        const int64_t block = item / pieces, lo = item % pieces * PIECE, hi = std::min(S, lo + PIECE);
        const float* __restrict__ xs = x + block * S;
        float* __restrict__ ys = y + block * S;
        const float a = scale[block], b = shift[block];
        {pragma}
        for (int64_t i = lo; i < hi; ++i) ys[i] = xs[i] * a + b;
    }}
}}
"""
    affine_args = "".join(f", {p}" for p, on in (("w", weight), ("b", bias)) if on)
    if group:
        entry = f"""
extern "C" void group_norm(const float* __restrict__ x{affine}, float* __restrict__ y, int64_t N, int64_t C,
                           int64_t S, int64_t groups) {{
    const int64_t rows = N * groups, per = C / groups, count = per * S;
    if (rows >= {"omp_get_max_threads()" if parallel else "1"}) {{
        // A group's statistics then its scaling by the same thread, while the group is still in cache.
        {omp_for}
        for (int64_t row = 0; row < rows; ++row) {{
            const float* __restrict__ xr = x + row * count;
            float* __restrict__ yr = y + row * count;
            double a = 0.0, q = 0.0;
            moments_span(xr, count, xr[0], a, q);
            const double m = a / (double)count, var = std::max(q / (double)count - m * m, 0.0);
            const float mean = (float)(xr[0] + m), rstd = (float)(1.0 / std::sqrt(var + {c_float(facts["eps"])}));
            for (int64_t j = 0; j < per; ++j) {{
                const int64_t c = row % groups * per + j;
                (void)c;
                const float scale = rstd * {gain}, shift = {offset} - mean * scale;
                const float* __restrict__ xs = xr + j * S;
                float* __restrict__ ys = yr + j * S;
                {pragma}
                for (int64_t i = 0; i < S; ++i) ys[i] = xs[i] * scale + shift;
            }}
        }}
        return;
    }}
    std::vector<double> mean, var;  // few groups: every thread takes pieces of them
    normalize(x{affine_args}, y, N, C, S, groups, mean, var);
}}
"""
    else:
        entry = f"""
extern "C" void batch_norm(const float* __restrict__ x{affine}, float* __restrict__ y, int64_t N, int64_t C,
                           int64_t S{extra}) {{
    constexpr bool running = {"true" if running else "false"};
    std::vector<double> mean, var;
    normalize(x{affine_args}, y, N, C, S, 0, mean, var);{update}
}}
"""
        if running:
            entry += f"""
// Eval mode: the running statistics normalize every element.
extern "C" void batch_norm_eval(const float* __restrict__ x{affine}, const float* running_mean,
                                const float* running_var, float* __restrict__ y, int64_t N, int64_t C, int64_t S) {{
    {omp_for}
    for (int64_t block = 0; block < N * C; ++block) {{
        const int64_t c = block % C;
        const float scale = (float)(1.0 / std::sqrt((double)running_var[c] + {c_float(facts["eps"])})) * {gain};
        const float shift = {offset} - running_mean[c] * scale;
        const float* __restrict__ xs = x + block * S;
        float* __restrict__ ys = y + block * S;
        {pragma}
        for (int64_t i = 0; i < S; ++i) ys[i] = xs[i] * scale + shift;
    }}
}}
"""
    return "\n".join(
        [
            "#include <algorithm>",
            "#include <cmath>",
            "#include <cstdint>",
            "#include <vector>",
            "#include <omp.h>",
            "",
            f"constexpr int64_t PIECE = {_PIECE};",
            "constexpr int64_t BLOCK = 4096;  // elements summed in float before the sum goes into double",
            _moments_helper(partials, simd),
            stats_and_apply,
            entry,
        ]
    )


def _moments_helper(partials: int, simd: bool) -> str:
    pragma = "            #pragma omp simd\n" if simd else ""
    return f"""
// Sums of (x - k) and (x - k)^2 over x[0, n), added to s1 and s2.
static inline void moments_span(const float* __restrict__ x, int64_t n, float k, double& s1, double& s2) {{
    constexpr int P = {partials};
    for (int64_t begin = 0; begin < n; begin += BLOCK) {{
        const int64_t end = std::min(n, begin + BLOCK);
        float p1[P] = {{}}, p2[P] = {{}};
        int64_t i = begin;
        for (; i + P <= end; i += P) {{
{pragma}            for (int j = 0; j < P; ++j) {{
                const float d = x[i + j] - k;
                p1[j] += d;
                p2[j] += d * d;
            }}
        }}
        float b1 = 0.0f, b2 = 0.0f;
        for (; i < end; ++i) {{
            const float d = x[i] - k;
            b1 += d;
            b2 += d * d;
        }}
        for (int j = 0; j < P; ++j) {{
            b1 += p1[j];
            b2 += p2[j];
        }}
        s1 += b1;
        s2 += b2;
    }}
}}
"""
