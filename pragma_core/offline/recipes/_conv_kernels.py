"""The C++ of the convolution recipe: one N-d direct convolution (1D and 2D are 3D with size-1 dims)
whose shapes, strides, paddings, dilations and groups are kernel arguments, so one build serves
every convolution at the same knob values.

    cpp = conv_kernel_source(parallel=True, simd=True, channels=6, block=128, vector_bits=512)

writes ``extern "C" void conv(x, weight, bias, out, has_bias, N, C, D, H, W, O, OD, OH, OW, KD, KH,
KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, G)`` (``PD``/``PH``/``PW`` the padding before each dim; the
padding after it follows from the output size, so asymmetric ``'same'`` padding needs nothing more).

The plain version (``simd`` off) sums every output element over its taps with bounds checks. The
vector version packs the weights per call into ``[group][channel block][tap][OB]`` and keeps a
register tile of ``OB`` output channels times ``NV`` vectors of output columns: each tap loads
``NV`` input vectors (contiguous at stride 1, lane by lane at other strides) and broadcasts ``OB``
weights, so each input load feeds ``OB`` multiply-adds. Columns whose taps all fall inside the
input row take the branch-free path; the padded edges and a row's last partial vector load lane by
lane with checks. Work items are (batch, output depth, output row, block of ``block`` columns);
inside one, every channel block sweeps the same input slab, which stays in L1/L2. Depthwise
convolutions (one channel per group) get ``OB = 1`` with the widest column tile.
"""

from __future__ import annotations

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

_SIGNATURE = (
    'extern "C" void conv(const float* __restrict__ x, const float* __restrict__ weight, '
    "const float* __restrict__ bias, float* __restrict__ out, int64_t has_bias, "
    + ", ".join(f"int64_t {name}" for name in CONV_ARGUMENTS)
    + ")"
)
_UNPACK = "    const Conv p{" + ", ".join(CONV_ARGUMENTS) + "};"


def conv_kernel_source(*, parallel: bool, simd: bool, channels: int, block: int, vector_bits: int) -> str:
    """The whole C++ source at these knob values: ``channels`` output channels per register tile,
    ``block`` output columns per work item (0: a whole row), vectors of at most ``vector_bits``."""
    if not simd:
        return _HEADER + _plain_kernel(parallel)
    return _HEADER + _vector_kernel(parallel, channels, block, vector_bits)


def _plain_kernel(parallel: bool) -> str:
    omp = "#pragma omp parallel for schedule(static)" if parallel else ""
    return f"""
// Plain: every output element is the sum over its taps that fall inside the input.
{_SIGNATURE} {{
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
    }}
}}
"""


def _vector_kernel(parallel: bool, channels: int, block: int, vector_bits: int) -> str:
    omp_for = "#pragma omp parallel for schedule(static)" if parallel else ""
    omp_region = "#pragma omp parallel" if parallel else ""
    omp_tasks = "#pragma omp for schedule(dynamic, 1)" if parallel else ""
    blocks = sorted({channels, 1}, reverse=True)  # built register tiles: the knob's, and one channel
    dispatch = "\n".join(
        f"            {'if' if i == 0 else 'else if'} (ob == {b}) row_tiles<{b}>(p, xg, wg + blk * R * {b}, "
        f"og, valid, has_bias ? bias + oc0 : nullptr, od, oh, c0, c1, span, seg);"
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
constexpr int64_t BLOCK = {block};  // output columns per work item (0: the whole row)

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

// MODE 0: every lane inside the row, stride 1 (contiguous loads); 1: inside, strided; 2: an edge:
// each input row's segment is first copied into ``seg`` with zeros where it is outside the row.
template <int OB, int NV, int MODE>
static inline void tile(const Conv& p, const float* __restrict__ xg, const float* __restrict__ wp,
                        float* __restrict__ orow, int64_t valid, const float* __restrict__ bias,
                        const Span& span, int64_t od, int64_t oh, int64_t ow0, int64_t limit,
                        float* __restrict__ seg) {{
    const int64_t Cg = p.C / p.G, taps = p.KD * p.KH * p.KW, plane = p.OD * p.OH * p.OW;
    const int64_t start = ow0 * p.SW - p.PW, length = (NV * VW - 1) * p.SW + (p.KW - 1) * p.DW + 1;
    const bool contiguous = MODE == 0 || (MODE == 2 && p.SW == 1);
    vfloat acc[OB][NV];
    #pragma GCC unroll 8
    for (int o = 0; o < OB; ++o)
        #pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[o][v] = (vfloat){{}};
    for (int64_t ic = 0; ic < Cg; ++ic)
        for (int64_t kd = span.kd0; kd < span.kd1; ++kd) {{
            const int64_t id = od * p.SD - p.PD + kd * p.DD;
            for (int64_t kh = span.kh0; kh < span.kh1; ++kh) {{
                const int64_t ih = oh * p.SH - p.PH + kh * p.DH;
                const float* __restrict__ xrow = xg + ((ic * p.D + id) * p.H + ih) * p.W;
                const float* __restrict__ wt = wp + (ic * taps + (kd * p.KH + kh) * p.KW) * OB;
                const float* __restrict__ src = xrow + start;
                if (MODE == 2) {{
                    for (int64_t j = 0; j < length; ++j)
                        seg[j] = start + j >= 0 && start + j < p.W ? xrow[start + j] : 0.0f;
                    src = seg;
                }}
                for (int64_t kw = 0; kw < p.KW; ++kw) {{
                    const float* __restrict__ at = src + kw * p.DW;
                    vfloat xv[NV];
                    #pragma GCC unroll 4
                    for (int v = 0; v < NV; ++v) {{
                        if (contiguous) {{
                            __builtin_memcpy(&xv[v], at + v * VW, sizeof(vfloat));
                        }} else {{
                            for (int64_t l = 0; l < VW; ++l) xv[v][l] = at[(v * VW + l) * p.SW];
                        }}
                    }}
                    #pragma GCC unroll 8
                    for (int o = 0; o < OB; ++o) {{
                        const float w = wt[kw * OB + o];  // broadcast to every lane
                        #pragma GCC unroll 4
                        for (int v = 0; v < NV; ++v) acc[o][v] += w * xv[v];
                    }}
                }}
            }}
        }}
    for (int o = 0; o < valid; ++o) {{
        const float b = bias ? bias[o] : 0.0f;
        float* __restrict__ dst = orow + o * plane + ow0;
        for (int v = 0; v < NV; ++v) {{
            vfloat r = acc[o][v] + b;
            if (MODE != 2) {{
                __builtin_memcpy(dst + v * VW, &r, sizeof(vfloat));
            }} else {{
                for (int64_t l = 0; l < VW && ow0 + v * VW + l < limit; ++l) dst[v * VW + l] = r[l];
            }}
        }}
    }}
}}

// Columns [c0, c1) of one output row for OB channels: wide tiles where every tap is inside the
// row, single vectors near the padded edges and at the end, checked where they cross them.
template <int OB>
static void row_tiles(const Conv& p, const float* __restrict__ xg, const float* __restrict__ wp,
                      float* __restrict__ orow, int64_t valid, const float* __restrict__ bias, int64_t od,
                      int64_t oh, int64_t c0, int64_t c1, const Span& span, float* __restrict__ seg) {{
    constexpr int NV = nv_for(OB);
    // Columns whose every tap lies inside the input row: [lo, hi).
    const int64_t lo = p.PW > 0 ? (p.PW + p.SW - 1) / p.SW : 0;
    const int64_t reach = p.W - 1 + p.PW - (p.KW - 1) * p.DW;
    const int64_t hi = reach < 0 ? 0 : std::min(p.OW, reach / p.SW + 1);
    int64_t ow = c0;
    while (ow < c1) {{
        const int64_t wide = NV * VW;
        if (NV > 1 && ow + wide <= c1 && ow >= lo && ow + wide <= hi) {{
            if (p.SW == 1) tile<OB, NV, 0>(p, xg, wp, orow, valid, bias, span, od, oh, ow, c1, seg);
            else tile<OB, NV, 1>(p, xg, wp, orow, valid, bias, span, od, oh, ow, c1, seg);
            ow += wide;
        }} else if (ow + VW <= c1 && ow >= lo && ow + VW <= hi) {{
            if (p.SW == 1) tile<OB, 1, 0>(p, xg, wp, orow, valid, bias, span, od, oh, ow, c1, seg);
            else tile<OB, 1, 1>(p, xg, wp, orow, valid, bias, span, od, oh, ow, c1, seg);
            ow += VW;
        }} else {{
            tile<OB, 1, 2>(p, xg, wp, orow, valid, bias, span, od, oh, ow, c1, seg);
            ow += VW;
        }}
    }}
}}

{_SIGNATURE} {{
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
    const int64_t width = BLOCK > 0 ? std::min<int64_t>(BLOCK, OW) : OW;
    const int64_t column_blocks = (OW + width - 1) / width;
    {omp_region}
    {{
    // An edge tile's input segment: one vector of columns and the dilated kernel's reach.
    float* seg = static_cast<float*>(std::malloc(sizeof(float) * ((VW - 1) * SW + (KW - 1) * DW + 1)));
    {omp_tasks}
    for (int64_t t = 0; t < N * OD * OH * column_blocks; ++t) {{
        const int64_t cb = t % column_blocks, oh = t / column_blocks % OH, od = t / (column_blocks * OH) % OD;
        const int64_t n = t / (column_blocks * OH * OD);
        const int64_t c0 = cb * width, c1 = std::min(OW, c0 + width);
        const Span span{{first_tap(od, SD, PD, DD), end_tap(od, SD, PD, DD, KD, D),
                         first_tap(oh, SH, PH, DH), end_tap(oh, SH, PH, DH, KH, H)}};
        for (int64_t g = 0; g < G; ++g) {{
            const float* __restrict__ xg = x + (n * C + g * Cg) * D * H * W;
            const float* __restrict__ wg = packed + g * blocks * R * ob;
            for (int64_t blk = 0; blk < blocks; ++blk) {{
            const int64_t oc0 = g * Og + blk * ob, valid = std::min(ob, Og - blk * ob);
            float* __restrict__ og = out + (((n * O + oc0) * OD + od) * OH + oh) * OW;
{dispatch}
            }}
        }}
    }}
    std::free(seg);
    }}
    std::free(packed);
}}
"""
