"""The C++ of the channel_norm recipe: batch norm and group norm over an input viewed as
``(N, C, S)``.

    cpp = channel_norm_source(match.facts, knobs)

writes ``group_norm`` or ``batch_norm`` (and ``batch_norm_eval`` when the module keeps running
statistics): shifted sums over pieces of every ``(n, c)`` block in parallel, each statistic's mean
and variance, a scale and shift per block, and one vectorized pass ``y = x * scale + shift``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._norm_kernels import reduce_span_source
from .elementwise import c_float

__all__ = ["channel_norm_source"]

_PIECE = 1 << 15
"""Elements per work item of both passes (128 KiB of floats): a batch norm over few channels, or a
group norm over fewer groups than threads, still gives every thread work."""
_LANES = 16
"""Floats per accumulator when vectorized: one AVX-512 register, two AVX2 ones."""


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
            reduce_span_source("moments", partials, simd),
            stats_and_apply,
            entry,
        ]
    )
