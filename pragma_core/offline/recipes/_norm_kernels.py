"""The C++ of the norm recipe: per-row statistics (sums in float over blocks, in double across
them), the scale they give, and its application, for rows (``inner == 1``) or for tiles of columns.

    cpp = norm_kernel_source(match.facts, knobs)

writes ``norm_rows`` or ``norm_columns`` over the input viewed as ``(outer, reduced, inner)``
(``{prefix}norm_rows`` with a prefix); a ``tail`` (:mod:`._tails`) is applied to each stretch of
the output as it is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._tails import Tail, tail_call, tail_definition, tail_parameters
from .elementwise import c_float

__all__ = ["norm_kernel_source", "reduce_span_source"]

_LANES = 16  # floats per accumulator when vectorized: one AVX-512 register, two AVX2 ones
_SPLIT_ROW_ELEMENTS = 1 << 18  # rows longer than this (1 MiB) are shared by all threads


def norm_kernel_source(
    facts: Mapping[str, Any], knobs: Mapping[str, Any], *, prefix: str = "", tail: Tail | None = None
) -> str:
    """The whole C++ source for the match's facts at these knob values."""
    parallel, simd = bool(knobs["parallel"]), bool(knobs["simd"])
    lanes = _LANES if simd else 1
    helpers = reduce_span_source(facts["stat"], lanes * int(knobs["accumulators"]), simd)
    helpers += _scale_helper(facts)
    helpers += _apply_helper(facts, simd)
    helpers += tail_definition(tail)
    kernel = (
        _columns_kernel(facts, parallel, simd, int(knobs["chunk"]), prefix, tail)
        if facts["layout"] == "columns"
        else _rows_kernel(facts, parallel, int(knobs["chunk"]), prefix, tail)
    )
    return "\n".join(
        [
            "#include <algorithm>",
            "#include <cmath>",
            "#include <cstdint>",
            "#include <vector>",
            "#include <omp.h>",
            "",
            "constexpr int64_t BLOCK = 4096;  // elements summed in float before the sum goes into double",
            helpers,
            kernel,
        ]
    )


def _term(stat: str, value: str) -> str:
    return f"std::fabs({value})" if stat == "abs_sum" else f"{value} * {value}"


def reduce_span_source(stat: str, partials: int, simd: bool) -> str:
    """``reduce_span``: the double sum of |x| or x*x over a span, or ``moments_span``: the sums of
    (x - k) and (x - k)**2, from ``partials`` independent float accumulators per block."""
    pragma = "            #pragma omp simd\n" if simd else ""
    if stat == "moments":
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
    return f"""
// Sum of {"|x|" if stat == "abs_sum" else "x^2"} over x[0, n).
static inline double reduce_span(const float* __restrict__ x, int64_t n) {{
    constexpr int P = {partials};
    double total = 0.0;
    for (int64_t begin = 0; begin < n; begin += BLOCK) {{
        const int64_t end = std::min(n, begin + BLOCK);
        float partial[P] = {{}};
        int64_t i = begin;
        for (; i + P <= end; i += P) {{
{pragma}            for (int j = 0; j < P; ++j) partial[j] += {_term(stat, "x[i + j]")};
        }}
        float block = 0.0f;
        for (; i < end; ++i) block += {_term(stat, "x[i]")};
        for (int j = 0; j < P; ++j) block += partial[j];
        total += block;
    }}
    return total;
}}
"""


def _scale_helper(facts: Mapping[str, Any]) -> str:
    """``row_scale``: the multiplier of a row from its sum (the reference's ops after the reduction),
    or ``row_moments``: the scale and shift of a row from its shifted sums."""
    if facts["stat"] == "moments":
        return f"""
// Scale and shift that normalize a row from its sums about k: (x - mean) / sqrt(var + eps).
static inline void row_moments(double s1, double s2, float k, int64_t count, float& scale, float& shift) {{
    const double mean = s1 / (double)count;
    const double var = std::max(s2 / (double)count - mean * mean, 0.0);
    scale = 1.0f / std::sqrt((float)var + {c_float(facts["eps"])});
    shift = -(float)(k + mean) * scale;
}}
"""
    body = "\n".join("    " + line for line in facts["scale"])
    return f"""
// The row's multiplier from its sum s over count elements.
static inline float row_scale(double s, int64_t count) {{
    (void)count;
{body}
    return scale;
}}
"""


def _apply_helper(facts: Mapping[str, Any], simd: bool) -> str:
    """``apply_span``: y = x * scale + shift, then the learned weight and bias per reduced index."""
    weight = facts["weight"] and facts["weight_per"] == "reduced"
    bias = facts["bias"] and facts["weight_per"] == "reduced"
    value = "x[i] * scale" + (" + shift" if facts["stat"] == "moments" else "")
    if weight:
        value = f"({value}) * w[i]"
    if bias:
        value = f"{value} + b[i]"
    params = "".join(
        [", const float* __restrict__ w" if weight else "", ", const float* __restrict__ b" if bias else ""]
    )
    pragma = "    #pragma omp simd\n" if simd else ""
    return f"""
// y = normalized x over a span.
static inline void apply_span(const float* __restrict__ x{params}, float* __restrict__ y, int64_t n,
                              float scale, float shift) {{
    (void)shift;
{pragma}    for (int64_t i = 0; i < n; ++i) y[i] = {value};
}}
"""


def _schedule(chunk: int) -> str:
    return f"schedule(static, {chunk})" if chunk else "schedule(static)"


def _rows_kernel(facts: Mapping[str, Any], parallel: bool, chunk: int, prefix: str, tail: Tail | None) -> str:
    """``norm_rows``: rows of ``count`` contiguous elements; each row's statistics then its scaling."""
    moments = facts["stat"] == "moments"
    per_reduced = facts["weight_per"] == "reduced"
    params = "".join(f", const float* __restrict__ {p}" for p, key in (("w", "weight"), ("b", "bias")) if facts[key])
    span_params = "".join(f", {p} + lo" for p, key in (("w", "weight"), ("b", "bias")) if facts[key] and per_reduced)
    row_params = "".join(f", {p}" for p, key in (("w", "weight"), ("b", "bias")) if facts[key] and per_reduced)
    if moments:
        stats = [
            "double s1 = 0.0, s2 = 0.0;",
            "const float k = xr[0];",
            "moments_span(xr, count, k, s1, s2);",
            "float scale, shift;",
            "row_moments(s1, s2, k, count, scale, shift);",
        ]
    else:
        stats = ["const float scale = row_scale(reduce_span(xr, count), count);", "const float shift = 0.0f;"]
    stats += _channel_fold(facts)
    serial_rows = "\n".join("        " + line for line in stats)
    serial = f"""
    {"#pragma omp parallel for " + _schedule(chunk) if parallel else "// rows one after another"}
    for (int64_t row = 0; row < rows; ++row) {{
        const float* xr = x + row * count;
        float* yr = y + row * count;
{serial_rows}
        apply_span(xr{row_params}, yr, count, scale, shift);
        {tail_call(tail, "yr", "row * count", "count")}
    }}"""
    split = _split_rows(facts, span_params, tail) if parallel else ""
    return f"""
// Rows of count contiguous elements{"; channels for a per-channel affine map" if moments else ""}.
extern "C" void {prefix}norm_rows(const float* __restrict__ x{params}, float* __restrict__ y, int64_t rows, int64_t count,
                          int64_t channels{tail_parameters(tail)}) {{
    (void)channels;{split}{serial}
}}
"""


def _channel_fold(facts: Mapping[str, Any]) -> list[str]:
    """Instance norm's affine map is per channel: it folds into the row's scale and shift."""
    if facts["weight_per"] != "channel" or not (facts["weight"] or facts["bias"]):
        return []
    return [
        "const int64_t c = row % channels;",
        f"const float gain = {'w[c]' if facts['weight'] else '1.0f'};",
        f"shift = shift * gain{' + b[c]' if facts['bias'] else ''};",
        "scale *= gain;",
    ]


def _split_rows(facts: Mapping[str, Any], span_params: str, tail: Tail | None) -> str:
    """Few or long rows: every thread sums its slice of the row, then scales that same slice."""
    moments = facts["stat"] == "moments"
    partial = (
        "double s1 = 0.0, s2 = 0.0;\n                moments_span(xr + lo, hi - lo, k, s1, s2);\n"
        "                partials[2 * t] = s1;\n                partials[2 * t + 1] = s2;"
        if moments
        else "partials[2 * t] = reduce_span(xr + lo, hi - lo);"
    )
    total = (
        "double t1 = 0.0, t2 = 0.0;\n                for (int u = 0; u < threads; ++u) {\n"
        "                    t1 += partials[2 * u];\n                    t2 += partials[2 * u + 1];\n"
        "                }\n                float scale, shift;\n"
        "                row_moments(t1, t2, k, count, scale, shift);"
        if moments
        else "double s = 0.0;\n                for (int u = 0; u < threads; ++u) s += partials[2 * u];\n"
        "                const float scale = row_scale(s, count);\n                const float shift = 0.0f;"
    )
    channel = "".join("\n                " + line for line in _channel_fold(facts))
    return f"""
    const int threads = omp_get_max_threads();
    if (threads > 1 && (rows < 2 * threads || count > {_SPLIT_ROW_ELEMENTS})) {{
        std::vector<double> partials(2 * threads);
        #pragma omp parallel num_threads(threads)
        {{
            const int t = omp_get_thread_num();
            const int64_t lo = count * t / threads, hi = count * (t + 1) / threads;
            for (int64_t row = 0; row < rows; ++row) {{
                const float* xr = x + row * count;
                float* yr = y + row * count;{chr(10) + "                const float k = xr[0];" if moments else ""}
                {partial}
                #pragma omp barrier
                {total}{channel}
                apply_span(xr + lo{span_params}, yr + lo, hi - lo, scale, shift);
                {tail_call(tail, "yr + lo", "row * count + lo", "hi - lo")}
                #pragma omp barrier
            }}
        }}
        return;
    }}"""


def _columns_kernel(
    facts: Mapping[str, Any], parallel: bool, simd: bool, chunk: int, prefix: str, tail: Tail | None
) -> str:
    """``norm_columns``: (outer, count, inner) with the statistics per inner position, walked in
    tiles of the inner dims so every access is contiguous and a tile's rows stay in cache."""
    weight, bias = bool(facts["weight"]), bool(facts["bias"])
    params = "".join(f", const float* __restrict__ {p}" for p, on in (("w", weight), ("b", bias)) if on)
    per_row = "".join(
        f"\n            const float {v} = {p}[r];" for v, p, on in (("g", "w", weight), ("h", "b", bias)) if on
    )
    value = "xr[i] * scale[i]" + (" * g" if weight else "") + (" + h" if bias else "")
    pragma = "#pragma omp simd" if simd else "// scalar loop"
    term = _term(facts["stat"], "v")
    return f"""
constexpr int64_t MAX_TILE = 2048;

// x as (outer, count, inner): each (outer, inner) fibre of count elements is normalized.
extern "C" void {prefix}norm_columns(const float* __restrict__ x{params},
                             float* __restrict__ y, int64_t outer, int64_t count, int64_t inner{tail_parameters(tail)}) {{
    // Tile width: about 64K floats of x per tile, so the second pass reads it from cache.
    const int64_t tile = std::min<int64_t>(std::min<int64_t>(MAX_TILE, inner),
                                           std::max<int64_t>(16, (65536 / count) / 16 * 16));
    const int64_t tiles = (inner + tile - 1) / tile;
    {"#pragma omp parallel for " + _schedule(chunk) if parallel else "// tiles one after another"}
    for (int64_t item = 0; item < outer * tiles; ++item) {{
        const int64_t o = item / tiles, first = (item % tiles) * tile;
        const int64_t n = std::min(tile, inner - first);
        const float* xo = x + o * count * inner + first;
        float* yo = y + o * count * inner + first;
        double sums[MAX_TILE];
        float scale[MAX_TILE];
        for (int64_t i = 0; i < n; ++i) sums[i] = 0.0;
        for (int64_t r = 0; r < count; ++r) {{
            const float* xr = xo + r * inner;
            {pragma}
            for (int64_t i = 0; i < n; ++i) {{
                const float v = xr[i];
                sums[i] += {term};
            }}
        }}
        for (int64_t i = 0; i < n; ++i) scale[i] = row_scale(sums[i], count);
        for (int64_t r = 0; r < count; ++r) {{
            const float* xr = xo + r * inner;
            float* yr = yo + r * inner;{per_row}
            {pragma}
            for (int64_t i = 0; i < n; ++i) yr[i] = {value};
            {tail_call(tail, "yr", "(o * count + r) * inner + first", "n")}
        }}
    }}
}}
"""
