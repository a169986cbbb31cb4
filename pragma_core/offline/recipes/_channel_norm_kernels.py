"""The C++ of the channel_norm recipe: batch norm and group norm over an input viewed as
``(N, C, S)``.

    cpp = channel_norm_source(match.facts, knobs)

writes ``group_norm`` or ``batch_norm`` (and ``batch_norm_eval`` when the module keeps running
statistics): shifted sums over pieces of every ``(n, c)`` block in parallel, each statistic's mean
and variance, a scale and shift per block, and one vectorized pass ``y = x * scale + shift``. A
batch norm of rows (``S == 1``, ``BatchNorm1d`` on ``(N, C)``) sums blocks of columns down the rows
instead, so every read is contiguous. With a ``prefix`` the entry points are ``{prefix}group_norm``
and so on; a ``tail`` (:mod:`._tails`) is applied to each stretch of the output as it is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._norm_kernels import reduce_span_source
from ._tails import Tail, tail_call, tail_definition, tail_parameters
from .elementwise import c_float

__all__ = ["channel_norm_source"]

_PIECE = 1 << 15
"""Elements per work item of both passes (128 KiB of floats): a batch norm over few channels, or a
group norm over fewer groups than threads, still gives every thread work."""
_LANES = 16
"""Floats per accumulator when vectorized: one AVX-512 register, two AVX2 ones."""


_COLUMNS = 64
"""Columns per work item of a batch norm of rows: the block's sums stay in registers and L1."""


def channel_norm_source(
    facts: Mapping[str, Any], knobs: Mapping[str, Any], *, prefix: str = "", tail: Tail | None = None
) -> str:
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
                      int64_t groups, std::vector<double>& mean, std::vector<double>& var{tail_parameters(tail)}) {{
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
        {tail_call(tail, "ys + lo", "block * S + lo", "hi - lo")}
    }}
}}
"""
    affine_args = "".join(f", {p}" for p, on in (("w", weight), ("b", bias)) if on)
    if group:
        entry = f"""
extern "C" void {prefix}group_norm(const float* __restrict__ x{affine}, float* __restrict__ y, int64_t N, int64_t C,
                           int64_t S, int64_t groups{tail_parameters(tail)}) {{
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
                {tail_call(tail, "ys", "row * count + j * S", "S")}
            }}
        }}
        return;
    }}
    std::vector<double> mean, var;  // few groups: every thread takes pieces of them
    normalize(x{affine_args}, y, N, C, S, groups, mean, var{tail.arguments if tail else ""});
}}
"""
    else:
        entry = f"""
extern "C" void {prefix}batch_norm(const float* __restrict__ x{affine}, float* __restrict__ y, int64_t N, int64_t C,
                           int64_t S{extra}{tail_parameters(tail)}) {{
    constexpr bool running = {"true" if running else "false"};
    std::vector<double> mean, var;
    if (S == 1)
        normalize_rows(x{affine_args}, y, N, C, mean, var{tail.arguments if tail else ""});
    else
        normalize(x{affine_args}, y, N, C, S, 0, mean, var{tail.arguments if tail else ""});{update}
}}
"""
        if running:
            entry += f"""
// Eval mode: the running statistics normalize every element.
extern "C" void {prefix}batch_norm_eval(const float* __restrict__ x{affine}, const float* running_mean,
                                const float* running_var, float* __restrict__ y, int64_t N, int64_t C, int64_t S{tail_parameters(tail)}) {{
    {omp_for}
    for (int64_t block = 0; block < N * C; ++block) {{
        const int64_t c = block % C;
        const float scale = (float)(1.0 / std::sqrt((double)running_var[c] + {c_float(facts["eps"])})) * {gain};
        const float shift = {offset} - running_mean[c] * scale;
        const float* __restrict__ xs = x + block * S;
        float* __restrict__ ys = y + block * S;
        {pragma}
        for (int64_t i = 0; i < S; ++i) ys[i] = xs[i] * scale + shift;
        {tail_call(tail, "ys", "block * S", "S")}
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
            tail_definition(tail),
            stats_and_apply,
            "" if group else _rows_source(facts, affine, affine_args, omp_for, pragma, tail),
            entry,
        ]
    )


def _rows_source(
    facts: Mapping[str, Any], affine: str, affine_args: str, omp_for: str, pragma: str, tail: Tail | None
) -> str:
    """``normalize_rows``: a batch norm of ``N`` rows of ``C`` channels: each block of columns summed
    down the rows in double (shifted by its first row), then every row scaled, in parallel."""
    gain = "w[c]" if facts["weight"] else "1.0f"
    offset = "b[c]" if facts["bias"] else "0.0f"
    block = _COLUMNS
    return f"""
// Statistics of x as N rows of C channels, by blocks of columns down the rows; then y = x * scale + shift.
static void normalize_rows(const float* __restrict__ x{affine}, float* __restrict__ y, int64_t N, int64_t C,
                           std::vector<double>& mean, std::vector<double>& var{tail_parameters(tail)}) {{
    mean.assign(C, 0.0);
    var.assign(C, 0.0);
    std::vector<float> scale(C), shift(C);
    {omp_for}
    for (int64_t c0 = 0; c0 < C; c0 += {block}) {{
        const int64_t width = std::min<int64_t>({block}, C - c0);
        double s1[{block}] = {{0.0}}, s2[{block}] = {{0.0}};
        for (int64_t r = 0; r < N; ++r) {{
            const float* __restrict__ xr = x + r * C + c0;
            {pragma}
            for (int64_t t = 0; t < width; ++t) {{
                const double d = (double)xr[t] - (double)x[c0 + t];
                s1[t] += d;
                s2[t] += d * d;
            }}
        }}
        for (int64_t t = 0; t < width; ++t) {{
            const int64_t c = c0 + t;
            const double m = s1[t] / (double)N;
            mean[c] = (double)x[c] + m;
            var[c] = std::max(s2[t] / (double)N - m * m, 0.0);
            const float rstd = (float)(1.0 / std::sqrt(var[c] + {c_float(facts["eps"])}));
            scale[c] = rstd * {gain};
            shift[c] = {offset} - (float)mean[c] * scale[c];
        }}
    }}
    {omp_for}
    for (int64_t r = 0; r < N; ++r) {{
        const float* __restrict__ xr = x + r * C;
        float* __restrict__ yr = y + r * C;
        {pragma}
        for (int64_t c = 0; c < C; ++c) yr[c] = xr[c] * scale[c] + shift[c];
        {tail_call(tail, "yr", "r * C", "C")}
    }}
}}
"""
