"""The C++ of the pooling recipe: max or average pooling over 1, 2 or 3 trailing dims, every rank
written as 3-D (``D, H, W``, size-1 dims in front for lower ranks) with the window's constants baked in.

    cpp = pooling_kernel_source(match.facts, knobs)

writes ``pool(x, y, planes, D, H, W, OD, OH, OW)``. Output rows (one ``plane, od, oh``) are the
independent work. The plain version visits each output's window with bounds checks. The vectorized
version reduces a row's window in two steps: the window's valid input rows (over ``kd, kh``) are
combined into a buffer that covers a tile of outputs (padding filled with the identity, so no
bounds checks remain), then each output combines its ``KW`` taps of that buffer in a register, the
loop over outputs vectorized.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._tails import Tail, tail_call, tail_definition, tail_parameters

__all__ = ["pooling_kernel_source"]


def pooling_kernel_source(
    facts: Mapping[str, Any], knobs: Mapping[str, Any], *, prefix: str = "", tail: Tail | None = None
) -> str:
    """The whole C++ source for the match's facts at these knob values: the entry point
    ``{prefix}pool``; a ``tail`` (:mod:`._tails`) is applied to each stretch of an output row as it
    is written."""
    maximum = facts["op"] == "max"
    constants = _constants(facts)
    combine = (
        "static inline float combine(float a, float b) { return (b > a || b != b) ? b : a; }  // NaN wins, as torch"
        if maximum
        else "static inline float combine(float a, float b) { return a + b; }"
    )
    signature = (
        f'extern "C" void {prefix}pool(const float* __restrict__ x, float* __restrict__ y, int64_t planes, int64_t D, int64_t H,\n'
        f"                     int64_t W, int64_t OD, int64_t OH, int64_t OW{tail_parameters(tail)})"
    )
    body = (
        _tiled(facts, knobs, signature, tail)
        if knobs["simd"]
        else _direct(facts, bool(knobs["parallel"]), signature, tail)
    )
    return "\n".join(
        [
            "#include <algorithm>",
            "#include <cmath>",
            "#include <cstdint>",
            "#include <vector>",
            "",
            constants,
            f"constexpr float IDENTITY = {'-INFINITY' if maximum else '0.0f'};",
            combine,
            _divisor_helpers(facts),
            tail_definition(tail),
            body,
        ]
    )


def _constants(facts: Mapping[str, Any]) -> str:
    names = ("K", facts["kernel"]), ("S", facts["stride"]), ("P", facts["padding"]), ("L", facts["dilation"])
    lines = []
    for prefix, values in names:
        for axis, value in zip("DHW", values):
            lines.append(f"constexpr int64_t {prefix}{axis} = {int(value)};")
    lines.append(f"constexpr int64_t TILE = {int(facts.get('tile', 0))};")
    return "\n".join(lines)


def _divisor_helpers(facts: Mapping[str, Any]) -> str:
    """``extent``: how many window positions along one dim count toward an average's divisor (the
    padded extent clipped at ``size + pad``, or only the positions inside the input), as torch."""
    if facts["op"] == "max":
        return ""
    include_pad = "true" if facts["count_include_pad"] else "false"
    override = facts["divisor_override"]
    return f"""
constexpr bool INCLUDE_PAD = {include_pad};
constexpr int64_t DIVISOR_OVERRIDE = {int(override) if override else 0};

// Positions of the window starting at `start` (size k) counted by the divisor along a dim of `size`.
static inline int64_t extent(int64_t start, int64_t k, int64_t size, int64_t pad) {{
    const int64_t end = std::min(start + k, size + pad);
    if (INCLUDE_PAD) return end - start;
    return std::min(end, size) - std::max<int64_t>(start, 0);
}}
"""


def _row_divisor(facts: Mapping[str, Any]) -> str:
    """The statement giving ``rows_counted``: the divisor's factor from the D and H dims of a row."""
    if facts["op"] == "max":
        return ""
    return "const int64_t rows_counted = extent(od * SD - PD, KD, D, PD) * extent(oh * SH - PH, KH, H, PH);"


def _finish(facts: Mapping[str, Any], value: str, ow: str) -> str:
    """The output from the combined window ``value``: itself for max, the average for avg."""
    if facts["op"] == "max":
        return value
    if facts["divisor_override"]:
        return f"{value} / (float)DIVISOR_OVERRIDE"
    return f"{value} / (float)(rows_counted * extent({ow} * SW - PW, KW, W, PW))"


def _direct(facts: Mapping[str, Any], parallel: bool, signature: str, tail: Tail | None) -> str:
    """Every output visits its window, checking each position against the input's bounds."""
    return f"""
{signature} {{
    const int64_t rows = planes * OD * OH;
    {"#pragma omp parallel for schedule(static)" if parallel else "// rows one after another"}
    for (int64_t row = 0; row < rows; ++row) {{
        const int64_t plane = row / (OD * OH), od = row / OH % OD, oh = row % OH;
        const float* xp = x + plane * D * H * W;
        float* yr = y + row * OW;
        {_row_divisor(facts)}
        for (int64_t ow = 0; ow < OW; ++ow) {{
            float acc = IDENTITY;
            for (int64_t kd = 0; kd < KD; ++kd) {{
                const int64_t id = od * SD - PD + kd * LD;
                if (id < 0 || id >= D) continue;
                for (int64_t kh = 0; kh < KH; ++kh) {{
                    const int64_t ih = oh * SH - PH + kh * LH;
                    if (ih < 0 || ih >= H) continue;
                    const float* xr = xp + (id * H + ih) * W;
                    for (int64_t kw = 0; kw < KW; ++kw) {{
                        const int64_t iw = ow * SW - PW + kw * LW;
                        if (iw >= 0 && iw < W) acc = combine(acc, xr[iw]);
                    }}
                }}
            }}
            yr[ow] = {_finish(facts, "acc", "ow")};
        }}
        {tail_call(tail, "yr", "row * OW", "OW")}
    }}
}}
"""


def _tiled(facts: Mapping[str, Any], knobs: Mapping[str, Any], signature: str, tail: Tail | None) -> str:
    """The window's rows combined into a padded buffer per tile of outputs, then the taps along W."""
    parallel = bool(knobs["parallel"])
    average = facts["op"] != "max"
    divide = (
        f"""
            #pragma omp simd
            for (int64_t i = 0; i < t; ++i) yt[i] = {_finish(facts, "yt[i]", "(t0 + i)")};"""
        if average
        else ""
    )
    return f"""
{signature} {{
    const int64_t rows = planes * OD * OH;
    const int64_t tile = TILE > 0 ? std::min<int64_t>(TILE, OW) : OW;
    const int64_t span = (tile - 1) * SW + (KW - 1) * LW + 1;  // buffer covering one tile's windows
    {"#pragma omp parallel" if parallel else "// one thread"}
    {{
        std::vector<float> buffer(span);
        std::vector<const float*> sources(KD * KH);
        float* __restrict__ buf = buffer.data();
        {"#pragma omp for schedule(static)" if parallel else "// rows one after another"}
        for (int64_t row = 0; row < rows; ++row) {{
            const int64_t plane = row / (OD * OH), od = row / OH % OD, oh = row % OH;
            const float* xp = x + plane * D * H * W;
            float* yr = y + row * OW;
            {_row_divisor(facts)}
            int64_t valid = 0;  // the window's input rows inside the input
            for (int64_t kd = 0; kd < KD; ++kd) {{
                const int64_t id = od * SD - PD + kd * LD;
                if (id < 0 || id >= D) continue;
                for (int64_t kh = 0; kh < KH; ++kh) {{
                    const int64_t ih = oh * SH - PH + kh * LH;
                    if (ih >= 0 && ih < H) sources[valid++] = xp + (id * H + ih) * W;
                }}
            }}
            for (int64_t t0 = 0; t0 < OW; t0 += tile) {{
                const int64_t t = std::min(tile, OW - t0);
                const int64_t w0 = t0 * SW - PW;  // input position of buf[0]
                const int64_t length = (t - 1) * SW + (KW - 1) * LW + 1;
                const int64_t lo = std::clamp<int64_t>(-w0, 0, length), hi = std::clamp<int64_t>(W - w0, lo, length);
                for (int64_t b = 0; b < lo; ++b) buf[b] = IDENTITY;
                for (int64_t b = hi; b < length; ++b) buf[b] = IDENTITY;
                if (valid == 0) {{
                    for (int64_t b = lo; b < hi; ++b) buf[b] = IDENTITY;
                }} else {{
                    const float* first = sources[0] + w0;
                    #pragma omp simd
                    for (int64_t b = lo; b < hi; ++b) buf[b] = first[b];
                    for (int64_t r = 1; r < valid; ++r) {{
                        const float* src = sources[r] + w0;
                        #pragma omp simd
                        for (int64_t b = lo; b < hi; ++b) buf[b] = combine(buf[b], src[b]);
                    }}
                }}
                // The taps are read from the buffer, in L1, even where one input row wholly inside the
                // input could be read in place: on a 2-core AVX-512 Xeon (2026-12-03), in place took
                // 21-22 ms for a 1-D max pool the buffer does in 15-17 ms (an average pool: 1.6 against
                // 1.7 ms).
                const float* __restrict__ taps = buf;
                float* __restrict__ yt = yr + t0;
                #pragma omp simd
                for (int64_t i = 0; i < t; ++i) {{  // the taps of a vector of outputs, in registers
                    float acc = taps[i * SW];
                    for (int64_t kw = 1; kw < KW; ++kw) acc = combine(acc, taps[i * SW + kw * LW]);
                    yt[i] = acc;
                }}{divide}
                {tail_call(tail, "yt", "row * OW + t0", "t")}
            }}
        }}
    }}
}}
"""
