"""The implicit-GEMM C++ of the convolution recipe: per group, the output is the product of the
group's weights (``M`` = output channels of the group by ``K`` = ``Cg * KD * KH * KW``) and the
input's patches (``K`` by ``N`` = output positions flattened across batch, depth and rows), on the
register-blocked micro-kernel of the matmul recipe (:func:`._matmul_kernels.micro_kernel_source`).

    cpp = conv_gemm_source(parallel=True, simd=True, rows=6, columns=1024, order="channels", signature=..., unpack=...)

writes the namespace ``gemm`` and the entry point (``extern "C" void conv_gemm(...)``, with the
arguments of :mod:`._conv_kernels`' ``conv``, whose ``Conv`` struct and headers come before). The
weights are packed once per call into ``MR``-tall strips per ``K`` panel; each work item (a group,
a block of ``columns`` output positions and, when those are too few for the threads, a share of
the channel strips) packs, per ``K`` panel, the patches it needs into ``NR``-wide strips
``bp[k * NR + q]``, zero padded while packing (so the micro-kernel has no edge cases): each output
row's input run copied at once (a copy for a pointwise convolution), or, for rows shorter than
:data:`_RUN_COLUMNS`, element by element from each column's corner with a select for the padding.
The ``K`` panel depth is read at run time from the L1 size (a ``K x NR`` strip of patches fills
half of it), and a work item's columns are fewer than ``columns`` where its K panel of patches
would fill more than half of L2; the bias is added when a panel's tile is first stored.

Within a work item, ``order`` is the loop over register tiles: ``columns`` takes each strip of
``NR`` positions against every channel strip (the patch strip stays in L1, each tile's rows land
in ``MR`` channel planes of the output at once), ``channels`` takes each channel strip along all
the item's columns (the weight strip stays in L1, the patches stream from L2, and each output row
is written in one run of the item's positions). Measured side by side on a 2-core AVX-512 Xeon at
fitted sizes with 1024 columns per item: ``channels`` 13.9 ms and ``columns`` 30.5 ms on
``67_conv_standard_1D``, 7.8 and 22.3 ms on ``87_conv_pointwise_2D``, 23.7 and 25.6 ms on
``56_conv_standard_2D``: the output's many short runs at once, not the FMAs, bound the tiles.
"""

from __future__ import annotations

from ._matmul_kernels import micro_kernel_source, register_columns
from ._tails import Tail

__all__ = ["conv_gemm_source", "TILE_ORDERS"]

TILE_ORDERS = ("columns", "channels")
"""The loops over a work item's register tiles: column strips outer, or channel strips outer."""

_RUN_COLUMNS = 24
"""Output row length from which patches pack by runs (a row's input copied at once) rather than
element by element: measured side by side, element by element was 2.1x faster on rows of 6 and
1.17x on rows of 14, runs 1.1x faster on rows of 34 to 126."""


def conv_gemm_source(
    *,
    parallel: bool,
    simd: bool,
    rows: int,
    columns: int,
    order: str,
    signature: str,
    unpack: str,
    tail: Tail | None = None,
) -> str:
    """The ``gemm`` namespace and the entry point declared by ``signature`` (its arguments unpacked
    into ``Conv p`` by ``unpack``): ``rows`` output channels per register tile (MR), at most
    ``columns`` output positions per work item (rounded up to whole register tiles), its tiles
    in ``order`` (:data:`TILE_ORDERS`); a ``tail`` is applied to each of a work item's output runs,
    per channel, once its last K panel is stored."""
    if order not in TILE_ORDERS:
        raise ValueError(f"order {order!r} is not one of {TILE_ORDERS}")
    return _namespace(simd, rows, columns) + _entry(parallel, order, signature, unpack, tail)


def _namespace(simd: bool, rows: int, columns: int) -> str:
    width, micro = micro_kernel_source(simd)
    nr = register_columns(simd)
    return f"""
#include <unistd.h>

namespace gemm {{
{width}
constexpr int64_t MR = {rows}, NR = {nr};  // register tile: output channels x output positions
constexpr int64_t COLUMNS = ({columns} + NR - 1) / NR * NR;  // output positions per work item, at most
constexpr int64_t RUN_COLUMNS = {_RUN_COLUMNS};  // output rows this long or longer pack by runs

{micro}

// K panel depth: a K x NR strip of patches fills half of L1 (read at run time), so it stays there
// while every channel strip of the group passes over it.
static int64_t panel_depth() {{
    const long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE);
    const int64_t bytes = l1 > 0 ? l1 : 32768;
    return std::max<int64_t>(16, std::min<int64_t>(1024, bytes / 2 / (NR * int64_t(sizeof(float))) / 8 * 8));
}}

// Output positions per work item: COLUMNS, fewer where a K panel of ``kc`` rows of their patches
// would fill more than half of L2 (read at run time), so the panel stays there while it is reused.
static int64_t item_columns(int64_t kc) {{
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    const int64_t bytes = l2 > 0 ? l2 : 262144;
    return std::max(NR, std::min(COLUMNS, bytes / 2 / (kc * int64_t(sizeof(float))) / NR * NR));
}}

// A run of output positions within one output row: its first position, batch, depth, row, column.
struct Run {{ int64_t c, n, od, oh, ow, count; }};

// Writes ``len`` values to the patch strips from column ``c`` of row ``k``: ``src[u * step]``, or
// zeros when ``src`` is null.
__attribute__((optimize("no-tree-loop-distribute-patterns")))
static inline void put(float* __restrict__ bp, int64_t kc, int64_t k, int64_t c, int64_t len,
                       const float* __restrict__ src, int64_t step) {{
    while (len > 0) {{
        const int64_t q = c % NR, n = std::min(len, NR - q);
        float* __restrict__ dst = bp + (c / NR) * kc * NR + k * NR + q;
        if (!src) {{
            for (int64_t u = 0; u < n; ++u) dst[u] = 0.0f;
        }} else if (step == 1 && n == NR) {{
            std::memcpy(dst, src, sizeof(float) * NR);  // a whole strip row: a fixed-size copy
            src += NR;
        }} else if (step == 1) {{
            // Part of a strip row: eight floats at a time (GCC turned the plain loop into a memcpy
            // it inlined as 8-byte moves, a third of the packing's time on 3D convolutions).
            int64_t u = 0;
            for (; u + 8 <= n; u += 8) std::memcpy(dst + u, src + u, sizeof(float) * 8);
            for (; u < n; ++u) dst[u] = src[u];
            src += n;
        }} else {{
            for (int64_t u = 0; u < n; ++u) dst[u] = src[u * step];
            src += n * step;
        }}
        c += n;
        len -= n;
    }}
}}

// A row k of the patches: its input channel and taps, found once for a panel's first row and then
// stepped row by row (no divisions per row).
struct Tap {{
    int64_t ic, kd, kh, kw;
    Tap(const Conv& p, int64_t k)
        : ic(k / (p.KW * p.KH * p.KD)), kd(k / (p.KW * p.KH) % p.KD), kh(k / p.KW % p.KH), kw(k % p.KW) {{}}
    void next(const Conv& p) {{
        if (++kw < p.KW) return;
        kw = 0;
        if (++kh < p.KH) return;
        kh = 0;
        if (++kd < p.KD) return;
        kd = 0;
        ++ic;
    }}
}};

// Rows [k0, k0 + kc) of group g's patches for the runs of a work item, into NR-wide strips (the
// columns past ``width`` up to a whole strip are zero).
static void pack_patches(const Conv& p, const float* __restrict__ x, int64_t g, const Run* runs, int64_t nruns,
                         int64_t width, int64_t k0, int64_t kc, float* __restrict__ bp) {{
    const int64_t Cg = p.C / p.G;
    Tap t(p, k0);
    for (int64_t k = 0; k < kc; ++k) {{
        if (k > 0) t.next(p);
        const int64_t ic = t.ic, kd = t.kd, kh = t.kh, kw = t.kw;
        for (int64_t i = 0; i < nruns; ++i) {{
            const Run& run = runs[i];
            const int64_t id = run.od * p.SD - p.PD + kd * p.DD, ih = run.oh * p.SH - p.PH + kh * p.DH;
            if (id < 0 || id >= p.D || ih < 0 || ih >= p.H) {{
                put(bp, kc, k, run.c, run.count, nullptr, 0);
                continue;
            }}
            const float* xrow = x + (((run.n * p.C + g * Cg + ic) * p.D + id) * p.H + ih) * p.W;
            const int64_t iw0 = run.ow * p.SW - p.PW + kw * p.DW;  // input column of the run's first
            // The run's positions whose input column is inside [0, W): [lo, hi) (no division at stride 1).
            const int64_t first = iw0 >= 0 ? 0 : p.SW == 1 ? -iw0 : (-iw0 + p.SW - 1) / p.SW;
            const int64_t end = iw0 >= p.W ? 0 : p.SW == 1 ? p.W - iw0 : (p.W - 1 - iw0) / p.SW + 1;
            const int64_t lo = std::min(run.count, first), hi = std::max(lo, std::min(run.count, end));
            if (lo > 0) put(bp, kc, k, run.c, lo, nullptr, 0);
            put(bp, kc, k, run.c + lo, hi - lo, xrow + iw0 + lo * p.SW, p.SW);
            if (hi < run.count) put(bp, kc, k, run.c + hi, run.count - hi, nullptr, 0);
        }}
        const int64_t padded = (width + NR - 1) / NR * NR;
        put(bp, kc, k, width, padded - width, nullptr, 0);
    }}
}}

// Where each column's patch starts: its input element at tap 0 of channel 0 of the group (``at``,
// an offset into x) and that element's depth, row and column (outside the input where padded;
// far outside for the columns past the block, so they pack as zeros).
struct Corners {{ int64_t *at, *d, *h, *w; }};

// Rows [k0, k0 + kc) of the patches, one element at a time from the column's corner: for rows too
// short for runs (each run costs a few dozen cycles), a select per element costs a couple.
static void pack_gathered(const Conv& p, const float* __restrict__ x, const Corners& corner, int64_t padded,
                          int64_t k0, int64_t kc, float* __restrict__ bp) {{
    const int64_t plane = p.H * p.W, volume = p.D * plane;
    Tap t(p, k0);
    const int64_t* __restrict__ at = corner.at;
    const int64_t* __restrict__ cd = corner.d;
    const int64_t* __restrict__ ch = corner.h;
    const int64_t* __restrict__ cw = corner.w;
    for (int64_t k = 0; k < kc; ++k) {{
        if (k > 0) t.next(p);
        const int64_t ic = t.ic, kd = t.kd, kh = t.kh, kw = t.kw;
        const int64_t dd = kd * p.DD, dh = kh * p.DH, dw = kw * p.DW;
        const int64_t delta = ic * volume + dd * plane + dh * p.W + dw;
        for (int64_t s = 0; s < padded; s += NR) {{
            float* __restrict__ dst = bp + s * kc + k * NR;
            for (int64_t q = 0; q < NR; ++q) {{
                const int64_t c = s + q;
                const bool inside = (uint64_t(cd[c] + dd) < uint64_t(p.D)) & (uint64_t(ch[c] + dh) < uint64_t(p.H)) &
                                    (uint64_t(cw[c] + dw) < uint64_t(p.W));
                const float v = x[inside ? at[c] + delta : 0];
                dst[q] = inside ? v : 0.0f;
            }}
        }}
    }}
}}

// The corners of group g's patches for columns [0, width) of a block of runs, and far outside
// for the columns past it up to ``padded``.
static void find_corners(const Conv& p, int64_t g, const Run* runs, int64_t nruns, int64_t width, int64_t padded,
                         const Corners& corner) {{
    const int64_t Cg = p.C / p.G;
    for (int64_t i = 0; i < nruns; ++i) {{
        const Run& run = runs[i];
        const int64_t id = run.od * p.SD - p.PD, ih = run.oh * p.SH - p.PH;
        for (int64_t u = 0; u < run.count; ++u) {{
            const int64_t c = run.c + u, iw = (run.ow + u) * p.SW - p.PW;
            corner.at[c] = (((run.n * p.C + g * Cg) * p.D + id) * p.H + ih) * p.W + iw;
            corner.d[c] = id;
            corner.h[c] = ih;
            corner.w[c] = iw;
        }}
    }}
    for (int64_t c = width; c < padded; ++c) {{
        corner.at[c] = 0;
        corner.d[c] = corner.h[c] = corner.w[c] = -(int64_t(1) << 40);
    }}
}}

// The output positions [j0, j0 + width) as runs within output rows, and where each lands in
// ``out`` (batch offset plus position in the plane, channel 0).
static int64_t split_runs(const Conv& p, int64_t j0, int64_t width, Run* runs, int64_t* where) {{
    const int64_t plane = p.OD * p.OH * p.OW;
    int64_t count = 0;
    for (int64_t c = 0; c < width;) {{
        const int64_t j = j0 + c, n = j / plane, at = j % plane;
        const int64_t ow = at % p.OW, oh = at / p.OW % p.OH, od = at / (p.OW * p.OH);
        const int64_t len = std::min(p.OW - ow, width - c);
        runs[count++] = Run{{c, n, od, oh, ow, len}};
        for (int64_t u = 0; u < len; ++u) where[c + u] = n * p.O * plane + at + u;
        c += len;
    }}
    return count;
}}

// A register tile stored into ``out``: ``rows`` channels from ``oc`` x ``cols`` positions from
// column ``c``, set (plus the bias) on the first K panel, added to after.
static inline void store(const Conv& p, const float* __restrict__ acc, float* __restrict__ out,
                         const float* __restrict__ bias, int64_t oc, int64_t rows, const int64_t* where,
                         int64_t c, int64_t cols, bool first) {{
    const int64_t plane = p.OD * p.OH * p.OW;
    const bool contiguous = where[c + cols - 1] - where[c] == cols - 1;
    for (int64_t r = 0; r < rows; ++r) {{
        const float b = first && bias ? bias[oc + r] : 0.0f;
        float* __restrict__ base = out + (oc + r) * plane;
        const float* __restrict__ from = acc + r * NR;
        if (contiguous) {{
            float* __restrict__ dst = base + where[c];
            if (first)
                for (int64_t q = 0; q < cols; ++q) dst[q] = from[q] + b;
            else
                for (int64_t q = 0; q < cols; ++q) dst[q] += from[q];
        }} else {{
            for (int64_t q = 0; q < cols; ++q) {{
                float& dst = base[where[c + q]];
                dst = first ? from[q] + b : dst + from[q];
            }}
        }}
    }}
}}
}}  // namespace gemm
"""


def _entry(parallel: bool, order: str, signature: str, unpack: str, tail: Tail | None) -> str:
    """The driver over groups, blocks of output positions and channel strips."""
    omp_for = "#pragma omp parallel for schedule(static)" if parallel else ""
    omp_region = "#pragma omp parallel" if parallel else ""
    omp_tasks = "#pragma omp for schedule(dynamic, 1)" if parallel else ""
    threads = "omp_get_max_threads()" if parallel else "1"
    return f"""
{signature} {{
{unpack}
    using namespace gemm;
    const int64_t Cg = C / G, Og = O / G, R = Cg * KD * KH * KW;
    const int64_t positions = N * OD * OH * OW;
    const int64_t KC = panel_depth();
    const int64_t strips = (Og + MR - 1) / MR, Mp = strips * MR;
    // Weights packed [group][K panel][strip][k][MR], zero padded past the group's last channel:
    // panel k0 of group g starts at g * Mp * R + k0 * Mp, its strip s at + s * MR * kc.
    float* packed = static_cast<float*>(std::aligned_alloc(64, ((G * Mp * R * 4 + 63) / 64) * 64));
    {omp_for}
    for (int64_t gs = 0; gs < G * strips; ++gs) {{
        const int64_t g = gs / strips, s = gs % strips;
        for (int64_t k0 = 0; k0 < R; k0 += KC) {{
            const int64_t kc = std::min(KC, R - k0);
            float* __restrict__ dst = packed + g * Mp * R + k0 * Mp + s * MR * kc;
            for (int64_t m = 0; m < MR; ++m) {{
                const int64_t oc = s * MR + m;
                const float* __restrict__ src = weight + (g * Og + oc) * R + k0;
                for (int64_t k = 0; k < kc; ++k) dst[k * MR + m] = oc < Og ? src[k] : 0.0f;
            }}
        }}
    }}
    const int64_t width = std::min(item_columns(std::min(KC, R)), (positions + NR - 1) / NR * NR);
    const int64_t blocks = (positions + width - 1) / width;
    // Too few blocks for the threads: each block's channel strips are shared out too.
    const int64_t threads = {threads};
    const int64_t parts = G * blocks >= 2 * threads ? 1 : std::min(strips, (2 * threads + G * blocks - 1) / (G * blocks));
    {omp_region}
    {{
    float* bp = static_cast<float*>(std::aligned_alloc(64, ((width * KC * 4 + 63) / 64) * 64));
    Run* runs = static_cast<Run*>(std::malloc(sizeof(Run) * (width + 1)));
    int64_t* where = static_cast<int64_t*>(std::malloc(sizeof(int64_t) * width));
    const bool by_runs = OW >= RUN_COLUMNS;
    int64_t* corners = static_cast<int64_t*>(std::malloc(sizeof(int64_t) * 4 * (by_runs ? 1 : width)));
    const Corners corner{{corners, corners + width, corners + 2 * width, corners + 3 * width}};
    alignas(64) float acc[MR * NR];
    {omp_tasks}
    for (int64_t t = 0; t < G * blocks * parts; ++t) {{
        const int64_t part = t % parts, block = t / parts % blocks, g = t / (parts * blocks);
        const int64_t s0 = part * strips / parts, s1 = (part + 1) * strips / parts;
        const int64_t j0 = block * width, cols = std::min(width, positions - j0);
        const int64_t nruns = split_runs(p, j0, cols, runs, where);
        const int64_t padded = (cols + NR - 1) / NR * NR;
        if (!by_runs) find_corners(p, g, runs, nruns, cols, padded, corner);
        for (int64_t k0 = 0; k0 < R; k0 += KC) {{
            const int64_t kc = std::min(KC, R - k0);
            if (by_runs)
                pack_patches(p, x, g, runs, nruns, cols, k0, kc, bp);
            else
                pack_gathered(p, x, corner, padded, k0, kc, bp);
            const float* __restrict__ panel = packed + g * Mp * R + k0 * Mp;
{_tile_loops(order)}
        }}{_finish_item(tail)}
    }}
    std::free(corners);
    std::free(where);
    std::free(runs);
    std::free(bp);
    }}
    std::free(packed);
}}
"""


def _tile_loops(order: str) -> str:
    """The loops over a work item's register tiles for one K panel, in ``order``."""
    columns = "for (int64_t c = 0; c < cols; c += NR)"
    channels = "for (int64_t s = s0; s < s1; ++s)"
    outer, inner = (columns, channels) if order == "columns" else (channels, columns)
    return f"""            {outer}
                {inner} {{
                    micro_kernel(panel + s * MR * kc, bp + c * kc, kc, acc);
                    store(p, acc, out, has_bias ? bias : nullptr, g * Og + s * MR, std::min(MR, Og - s * MR), where,
                          c, std::min(NR, cols - c), k0 == 0);
                }}"""


def _finish_item(tail: Tail | None) -> str:
    """The tail applied to a work item's output runs of each of its channels, once all are stored."""
    if tail is None:
        return ""
    return f"""
        const int64_t plane = OD * OH * OW;
        for (int64_t oc = g * Og + s0 * MR; oc < g * Og + std::min(Og, s1 * MR); ++oc)
            for (int64_t r = 0; r < nruns; ++r) {{
                const Run& run = runs[r];
                const int64_t x0 = (run.n * O + oc) * plane + (run.od * OH + run.oh) * OW + run.ow;
                {tail.call("out + x0", "x0", "run.count")}
            }}"""
