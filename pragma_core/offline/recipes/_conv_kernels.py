"""The C++ of the convolution recipe: one N-d direct convolution (1D and 2D are 3D with size-1 dims)
whose shapes, strides, paddings, dilations and groups are kernel arguments, so one build serves
every convolution at the same knob values.

    cpp = conv_kernel_source(parallel=True, simd=True, channels=6, block=128, order="channels", vector_bits=512)

writes ``extern "C" void conv(x, weight, bias, out, has_bias, N, C, D, H, W, O, OD, OH, OW, KD, KH,
KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, G)`` (``PD``/``PH``/``PW`` the padding before each dim; the
padding after it follows from the output size, so asymmetric ``'same'`` padding needs nothing more).

The plain version (``simd`` off) sums every output element over its taps with bounds checks. The
vector version packs the weights per call into ``[group][channel block][tap][OB]``. Work items are
(batch, output depth, output row, block of ``block`` columns), and with groups one group's run of
rows (about 4096 outputs of its channels, successive rows reading mostly the same input rows); each
row first copies the input rows its taps read into a slab, contiguously (no cache-set conflicts between channel planes of a
power-of-two size), zero padded (no edge cases after), and split into ``SW`` stride phases (column
``j`` at phase ``j % SW``), so every tap reads consecutive columns at any stride. A register tile
of ``OB`` output channels times ``NV`` vectors of columns then loads ``NV`` vectors per tap and
broadcasts ``OB`` weights: each input load feeds ``OB`` multiply-adds. Every channel block of the
item sweeps the same slab while it is in cache. Depthwise convolutions (one channel per group) get
``OB = 1`` with the widest column tile. A row's last columns take one tile of as many vectors as
they need, its last vector storing only its own columns (single vectors one after another each summed
their taps in one dependent chain: on a 2-core AVX2 EPYC, a depthwise 3x3 over 32 x 32 planes went
from 0.61x to 0.76x of eager, over 64 x 64 planes from 0.77x to 1.02x).
"""

from __future__ import annotations

from ._conv_gemm_kernels import conv_gemm_source
from ._tails import Tail, tail_call, tail_definition, tail_parameters

__all__ = ["conv_kernel_source", "CONV_ARGUMENTS"]

CONV_ARGUMENTS = tuple("N C D H W O OD OH OW KD KH KW SD SH SW PD PH PW DD DH DW G".split())
"""The integer arguments of ``conv`` after ``has_bias``, in order."""

_MAX_COLUMN_VECTORS = 4
"""Column vectors per register tile at most: more only lengthens the rows' partial tail."""

_HEADER = """#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <omp.h>

struct Conv {
    int64_t N, C, D, H, W, O, OD, OH, OW, KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, G;
};
"""


def _signature(name: str, tail: Tail | None) -> str:
    return (
        f'extern "C" void {name}(const float* __restrict__ x, const float* __restrict__ weight, '
        "const float* __restrict__ bias, float* __restrict__ out, int64_t has_bias, "
        + ", ".join(f"int64_t {name}" for name in CONV_ARGUMENTS)
        + tail_parameters(tail)
        + ")"
    )


_UNPACK = "    const Conv p{" + ", ".join(CONV_ARGUMENTS) + "};"


def conv_kernel_source(
    *,
    parallel: bool,
    simd: bool,
    channels: int,
    block: int,
    order: str,
    vector_bits: int,
    gemm: bool = False,
    prefix: str = "",
    tail: Tail | None = None,
) -> str:
    """The whole C++ source at these knob values: ``channels`` output channels per register tile,
    ``block`` output columns (or, with ``gemm``, flattened output positions) per work item, vectors
    of at most ``vector_bits``; with ``gemm`` also ``conv_gemm``, the implicit GEMM
    (:mod:`._conv_gemm_kernels`, its register tiles in ``order``), with the same arguments. The entry points are named
    ``{prefix}conv`` and ``{prefix}conv_gemm``; a ``tail`` (a fused level-2 chain's, :mod:`._tails`)
    is applied to each output row's columns as a work item finishes them."""
    signature = _signature(f"{prefix}conv", tail)
    direct = (
        _vector_kernel(parallel, channels, block, vector_bits, signature, tail)
        if simd
        else _plain_kernel(parallel, signature, tail)
    )
    head = _HEADER + tail_definition(tail)
    if not gemm:
        return head + direct
    return (
        head
        + direct
        + conv_gemm_source(
            parallel=parallel,
            simd=simd,
            rows=channels,
            columns=block,
            order=order,
            signature=_signature(f"{prefix}conv_gemm", tail),
            unpack=_UNPACK,
            tail=tail,
        )
    )


def _plain_kernel(parallel: bool, signature: str, tail: Tail | None) -> str:
    omp = "#pragma omp parallel for schedule(static)" if parallel else ""
    return f"""
// Plain: every output element is the sum over its taps that fall inside the input.
{signature} {{
{_UNPACK}
    const int64_t Cg = C / G, Og = O / G;
    {omp}
    for (int64_t row = 0; row < N * O * OD * OH; ++row) {{
        const int64_t oh = row % OH, od = row / OH % OD, oc = row / (OH * OD) % O, n = row / (OH * OD * O);
        const int64_t g = oc / Og;
        float* __restrict__ orow = out + row * OW;
        for (int64_t ow = 0; ow < OW; ++ow) {{
            float s = 0.0f;
            for (int64_t ic = 0; ic < Cg; ++ic)
                for (int64_t kd = 0; kd < KD; ++kd) {{
                    const int64_t id = od * SD - PD + kd * DD;
                    if (id < 0 || id >= D) continue;
                    for (int64_t kh = 0; kh < KH; ++kh) {{
                        const int64_t ih = oh * SH - PH + kh * DH;
                        if (ih < 0 || ih >= H) continue;
                        const float* xrow = x + (((n * C + g * Cg + ic) * D + id) * H + ih) * W;
                        const float* wrow = weight + ((oc * Cg + ic) * KD + kd) * KH * KW + kh * KW;
                        for (int64_t kw = 0; kw < KW; ++kw) {{
                            const int64_t iw = ow * SW - PW + kw * DW;
                            if (iw >= 0 && iw < W) s += wrow[kw] * xrow[iw];
                        }}
                    }}
                }}
            orow[ow] = has_bias ? s + bias[oc] : s;
        }}
        {tail_call(tail, "orow", "row * OW", "OW")}
    }}
}}
"""


def _vector_kernel(
    parallel: bool, channels: int, block: int, vector_bits: int, signature: str, tail: Tail | None
) -> str:
    omp_for = "#pragma omp parallel for schedule(static)" if parallel else ""
    omp_region = "#pragma omp parallel" if parallel else ""
    omp_tasks = "#pragma omp for schedule(dynamic, 1)" if parallel else ""
    blocks = sorted({channels, 1}, reverse=True)  # built register tiles: the knob's, and one channel
    dispatch = "\n".join(
        f"            {'if' if i == 0 else 'else if'} (ob == {b}) row_tiles<{b}>(p, slab, phase, offsets, span, wg + blk * R * {b}, og, "
        f"valid, has_bias ? bias + oc0 : nullptr, c0, c1);"
        for i, b in enumerate(blocks)
    )
    return f"""
// VW: floats per vector, the machine's widest (-march=native) up to the vector_width knob.
#if defined(__AVX512F__) && {vector_bits} >= 512
constexpr int64_t VW = 16, NREG = 32;
#elif defined(__AVX__)
constexpr int64_t VW = 8, NREG = 16;
#else
constexpr int64_t VW = 4, NREG = 16;
#endif
typedef float vfloat __attribute__((vector_size(4 * VW)));
constexpr int64_t BLOCK = {block};  // output columns per work item

// Column vectors of a register tile of OB channels: OB * NV accumulators, NV inputs and one
// broadcast weight fit in the vector registers.
constexpr int nv_for(int ob) {{
    return std::min<int>({_MAX_COLUMN_VECTORS}, std::max<int>(1, (NREG - 2) / (ob + 1)));
}}

// Taps of one output row that fall inside the input: kd in [kd0, kd1), kh in [kh0, kh1).
struct Span {{ int64_t kd0, kd1, kh0, kh1; }};

static inline int64_t first_tap(int64_t o, int64_t s, int64_t pad, int64_t dil) {{
    const int64_t start = o * s - pad;  // first tap k with start + k * dil >= 0
    return start >= 0 ? 0 : (-start + dil - 1) / dil;
}}
static inline int64_t end_tap(int64_t o, int64_t s, int64_t pad, int64_t dil, int64_t k, int64_t size) {{
    const int64_t start = o * s - pad;  // one past the last tap k with start + k * dil < size
    if (start >= size) return 0;
    return std::min(k, (size - 1 - start) / dil + 1);
}}

// A register tile: OB output channels x NV vectors of columns from ow0, summed over the group's
// input channels and the taps inside the input, read from the work item's slab: its input rows
// copied zero padded from column c0 * SW - PW, each split into SW phases of ``phase`` columns
// (column j at phase j % SW, index j / SW), so every tap reads consecutive columns at any stride.
template <int OB, int NV>
static inline void tile(const Conv& p, const float* __restrict__ slab, int64_t phase,
                        const int64_t* __restrict__ offsets, const Span& span,
                        const float* __restrict__ wp, float* __restrict__ orow, int64_t valid,
                        const float* __restrict__ bias, int64_t ow0, int64_t c0, int64_t c1) {{
    const int64_t Cg = p.C / p.G, taps = p.KD * p.KH * p.KW, plane = p.OD * p.OH * p.OW;
    const int64_t rows_d = span.kd1 - span.kd0, rows_h = span.kh1 - span.kh0;
    vfloat acc[OB][NV];
    #pragma GCC unroll 8
    for (int o = 0; o < OB; ++o)
        #pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[o][v] = (vfloat){{}};
    for (int64_t ic = 0; ic < Cg; ++ic)
        for (int64_t kd = span.kd0; kd < span.kd1; ++kd)
            for (int64_t kh = span.kh0; kh < span.kh1; ++kh) {{
                const float* __restrict__ xrow =
                    slab + ((ic * rows_d + kd - span.kd0) * rows_h + kh - span.kh0) * p.SW * phase + (ow0 - c0);
                const float* __restrict__ wt = wp + (ic * taps + (kd * p.KH + kh) * p.KW) * OB;
                for (int64_t kw = 0; kw < p.KW; ++kw) {{
                    const float* __restrict__ at = xrow + offsets[kw];
                    vfloat xv[NV];
                    #pragma GCC unroll 4
                    for (int v = 0; v < NV; ++v) __builtin_memcpy(&xv[v], at + v * VW, sizeof(vfloat));
                    #pragma GCC unroll 8
                    for (int o = 0; o < OB; ++o) {{
                        const float w = wt[kw * OB + o];  // broadcast to every lane
                        #pragma GCC unroll 4
                        for (int v = 0; v < NV; ++v) acc[o][v] += w * xv[v];
                    }}
                }}
            }}
    for (int o = 0; o < valid; ++o) {{
        const float b = bias ? bias[o] : 0.0f;
        float* __restrict__ dst = orow + o * plane + ow0;
        #pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) {{
            vfloat r = acc[o][v] + b;
            const int64_t left = c1 - ow0 - v * VW;  // columns of the row from this vector on
            if (left >= VW) __builtin_memcpy(dst + v * VW, &r, sizeof(vfloat));
            else if (left > 0) std::memcpy(dst + v * VW, &r, sizeof(float) * left);
        }}
    }}
}}

// The row's last columns from ow0: one tile of ``rest`` vectors (at most NV; the last one stores
// only its columns before c1). Single vectors one after the other would each sum its taps in one
// dependent chain, several times the cost of the wide tiles per column.
template <int OB, int NV>
static inline void rest_tile(int64_t rest, const Conv& p, const float* __restrict__ slab, int64_t phase,
                             const int64_t* __restrict__ offsets, const Span& span,
                             const float* __restrict__ wp, float* __restrict__ orow, int64_t valid,
                             const float* __restrict__ bias, int64_t ow0, int64_t c0, int64_t c1) {{
    if constexpr (NV > 1) {{
        if (rest < NV) {{
            rest_tile<OB, NV - 1>(rest, p, slab, phase, offsets, span, wp, orow, valid, bias, ow0, c0, c1);
            return;
        }}
    }}
    tile<OB, NV>(p, slab, phase, offsets, span, wp, orow, valid, bias, ow0, c0, c1);
}}

// Columns [c0, c1) of one output row for OB channels: wide tiles, then one narrower tile.
template <int OB>
static void row_tiles(const Conv& p, const float* __restrict__ slab, int64_t phase,
                      const int64_t* __restrict__ offsets, const Span& span,
                      const float* __restrict__ wp, float* __restrict__ orow, int64_t valid,
                      const float* __restrict__ bias, int64_t c0, int64_t c1) {{
    constexpr int NV = nv_for(OB);
    int64_t ow = c0;
    for (; ow + NV * VW <= c1; ow += NV * VW) tile<OB, NV>(p, slab, phase, offsets, span, wp, orow, valid, bias, ow, c0, c1);
    if (ow < c1)
        rest_tile<OB, NV>((c1 - ow + VW - 1) / VW, p, slab, phase, offsets, span, wp, orow, valid, bias, ow, c0, c1);
}}

{signature} {{
{_UNPACK}
    const int64_t Cg = C / G, Og = O / G, R = Cg * KD * KH * KW;
    // Output channels per register tile: a group smaller than the tile (depthwise) takes one.
    const int64_t ob = Og > 1 ? {channels} : 1;
    const int64_t blocks = (Og + ob - 1) / ob;
    // Weights packed [group][channel block][tap][ob], zero padded past the group's last channel.
    float* packed = static_cast<float*>(std::aligned_alloc(64, ((G * blocks * R * ob * 4 + 63) / 64) * 64));
    {omp_for}
    for (int64_t gb = 0; gb < G * blocks; ++gb) {{
        const int64_t g = gb / blocks, blk = gb % blocks;
        for (int64_t r = 0; r < R; ++r)
            for (int64_t o = 0; o < ob; ++o) {{
                const int64_t oc = blk * ob + o;
                packed[(gb * R + r) * ob + o] = oc < Og ? weight[(g * Og + oc) * R + r] : 0.0f;
            }}
    }}
    const int64_t width = std::min<int64_t>(BLOCK, OW);
    const int64_t column_blocks = (OW + width - 1) / width;
    // A slab row: the input columns a block of output columns (rounded up to whole vectors) reads,
    // in SW phases of ``phase`` columns.
    const int64_t length = ((width + VW - 1) / VW * VW - 1) * SW + (KW - 1) * DW + 1;
    const int64_t phase = (length + SW - 1) / SW;
    // Where tap kw's columns start in a slab row: its phase, then its whole strides.
    int64_t* offsets = static_cast<int64_t*>(std::malloc(sizeof(int64_t) * KW));
    for (int64_t kw = 0; kw < KW; ++kw) offsets[kw] = kw * DW % SW * phase + kw * DW / SW;
    {omp_region}
    {{
    float* slab = static_cast<float*>(std::malloc(sizeof(float) * Cg * KD * KH * SW * phase));
    // Work items: (batch, group, output depth, block of output rows, column block). With groups, an
    // item is one group's run of rows, about ROW_WORK outputs of its channels: successive rows read
    // mostly the same input rows while they are in cache. (An item of one row of every group read a
    // few rows of each channel plane, planes a power of two apart that share cache sets; an item of
    // one row of one group was too small for its overhead.) Without groups, one row.
    constexpr int64_t ROW_WORK = 4096;
    const int64_t rows_per = G > 1 ? std::max<int64_t>(1, std::min<int64_t>(OH, ROW_WORK / std::max<int64_t>(1, Og * width))) : 1;
    const int64_t row_blocks = (OH + rows_per - 1) / rows_per;
    {omp_tasks}
    for (int64_t t = 0; t < N * G * OD * row_blocks * column_blocks; ++t) {{
        const int64_t cb = t % column_blocks, rb = t / column_blocks % row_blocks;
        const int64_t od = t / (column_blocks * row_blocks) % OD, g = t / (column_blocks * row_blocks * OD) % G;
        const int64_t n = t / (column_blocks * row_blocks * OD * G);
        const int64_t c0 = cb * width, c1 = std::min(OW, c0 + width);
        const int64_t start = c0 * SW - PW;  // the input column of slab column 0
        const int64_t inside0 = std::max<int64_t>(0, -start), inside1 = std::max<int64_t>(inside0, std::min(length, W - start));
        for (int64_t oh = rb * rows_per; oh < std::min(OH, (rb + 1) * rows_per); ++oh) {{
            const Span span{{first_tap(od, SD, PD, DD), end_tap(od, SD, PD, DD, KD, D),
                             first_tap(oh, SH, PH, DH), end_tap(oh, SH, PH, DH, KH, H)}};
            // The group's input rows of the taps inside, zero padded left and right.
            float* __restrict__ row = slab;
            for (int64_t ic = 0; ic < Cg; ++ic)
                for (int64_t kd = span.kd0; kd < span.kd1; ++kd)
                    for (int64_t kh = span.kh0; kh < span.kh1; ++kh, row += SW * phase) {{
                        const int64_t id = od * SD - PD + kd * DD, ih = oh * SH - PH + kh * DH;
                        const float* __restrict__ xrow = x + (((n * C + g * Cg + ic) * D + id) * H + ih) * W + start;
                        if (SW == 1) {{
                            std::memset(row, 0, sizeof(float) * inside0);
                            std::memcpy(row + inside0, xrow + inside0, sizeof(float) * (inside1 - inside0));
                            std::memset(row + inside1, 0, sizeof(float) * (length - inside1));
                        }} else {{
                            for (int64_t f = 0; f < SW; ++f)
                                for (int64_t m = 0; m < phase; ++m) {{
                                    const int64_t j = m * SW + f;
                                    row[f * phase + m] = j >= inside0 && j < inside1 ? xrow[j] : 0.0f;
                                }}
                        }}
                    }}
            const float* __restrict__ wg = packed + g * blocks * R * ob;
            for (int64_t blk = 0; blk < blocks; ++blk) {{
            const int64_t oc0 = g * Og + blk * ob, valid = std::min(ob, Og - blk * ob);
            float* __restrict__ og = out + (((n * O + oc0) * OD + od) * OH + oh) * OW;
{dispatch}
            }}{_finish_item(tail)}
        }}
    }}
    std::free(slab);
    }}
    std::free(offsets);
    std::free(packed);
}}
"""


def _finish_item(tail: Tail | None) -> str:
    """The tail applied to one output row's columns of the item's group's channels, once all are written."""
    if tail is None:
        return ""
    return f"""
            for (int64_t oc = g * Og; oc < (g + 1) * Og; ++oc) {{
                const int64_t x0 = (((n * O + oc) * OD + od) * OH + oh) * OW + c0;
                {tail.call("out + x0", "x0", "c1 - c0")}
            }}"""
