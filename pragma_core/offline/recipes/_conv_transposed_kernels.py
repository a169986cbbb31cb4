"""The C++ of the transposed-convolution recipe: one N-d gather over the output, with every size,
stride, padding, dilation and group count passed at run time (one build serves every task).

    cpp = conv_transposed_kernel(parallel, simd, accumulators, block, vector_width, layout="plane")

writes ``extern "C" void conv_transpose(x, w, bias, out, has_bias, N, C_in, C_out, G, ID, IH, IW,
OD, OH, OW, KD, KH, KW, sd, sh, sw, pd, ph, pw, dd, dh, dw)``; 1-D and 2-D tasks pass size-1 leading
dims. The design is described in :mod:`~pragma_core.offline.recipes.conv_transposed`.
"""

from __future__ import annotations

from ._tails import Tail, tail_call, tail_definition, tail_parameters

__all__ = ["conv_transposed_kernel"]

_VECTORS_PER_TILE = 2
"""Output positions per register tile, in machine vectors: two loads of x feed every weight
broadcast, as the matmul micro-kernel's ``NR`` does."""


def _signature(prefix: str, tail: Tail | None) -> str:
    return f"""extern "C" void {prefix}conv_transpose(const float* __restrict__ x, const float* __restrict__ w,
                               const float* __restrict__ bias, float* __restrict__ out, int64_t has_bias,
                               int64_t N, int64_t C_in, int64_t C_out, int64_t G,
                               int64_t ID, int64_t IH, int64_t IW, int64_t OD, int64_t OH, int64_t OW,
                               int64_t KD, int64_t KH, int64_t KW, int64_t sd, int64_t sh, int64_t sw,
                               int64_t pd, int64_t ph, int64_t pw, int64_t dd, int64_t dh, int64_t dw{tail_parameters(tail)})"""


_HEADERS = """#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>"""


def conv_transposed_kernel(
    parallel: bool,
    simd: bool,
    accumulators: int,
    block: int,
    vector_width: int,
    *,
    layout: str = "rows",
    prefix: str = "",
    tail: Tail | None = None,
) -> str:
    """The C++ source for these knobs: the plain gather without ``simd``, the register-tiled one with
    it, whose work goes by output rows, or with ``layout="plane"`` by flattened output planes where
    rows and columns have stride 1 (:func:`_plane`); the entry point is ``{prefix}conv_transpose``,
    and a ``tail`` (:mod:`._tails`) is applied to a work item's outputs once it has written them."""
    signature = _signature(prefix, tail)
    if not simd:
        return _plain(parallel, signature, tail)
    return _tiled(parallel, accumulators, block, vector_width, layout == "plane", signature, tail)


def _plain(parallel: bool, signature: str, tail: Tail | None) -> str:
    """One output element at a time, every tap checked: simple, and what the loop falls back to."""
    omp = "#pragma omp parallel for collapse(2) schedule(static)" if parallel else ""
    return f"""{_HEADERS}
{tail_definition(tail)}
{signature} {{
    const int64_t cin_g = C_in / G, cout_g = C_out / G;
    {omp}
    for (int64_t n = 0; n < N; ++n)
        for (int64_t co = 0; co < C_out; ++co) {{
            const int64_t g = co / cout_g, col = co % cout_g;
            float* o = out + (n * C_out + co) * OD * OH * OW;
            for (int64_t od = 0; od < OD; ++od)
                for (int64_t oh = 0; oh < OH; ++oh)
                    for (int64_t ow = 0; ow < OW; ++ow) {{
                        float s = has_bias ? bias[co] : 0.0f;
                        for (int64_t ci = g * cin_g; ci < (g + 1) * cin_g; ++ci)
                            for (int64_t kd = 0; kd < KD; ++kd) {{
                                const int64_t td = od + pd - kd * dd;
                                if (td < 0 || td % sd != 0 || td / sd >= ID) continue;
                                for (int64_t kh = 0; kh < KH; ++kh) {{
                                    const int64_t th = oh + ph - kh * dh;
                                    if (th < 0 || th % sh != 0 || th / sh >= IH) continue;
                                    for (int64_t kw = 0; kw < KW; ++kw) {{
                                        const int64_t tw = ow + pw - kw * dw;
                                        if (tw < 0 || tw % sw != 0 || tw / sw >= IW) continue;
                                        const int64_t xi = (((n * C_in + ci) * ID + td / sd) * IH + th / sh) * IW + tw / sw;
                                        const int64_t wi = (((ci * cout_g + col) * KD + kd) * KH + kh) * KW + kw;
                                        s += x[xi] * w[wi];
                                    }}
                                }}
                            }}
                        o[(od * OH + oh) * OW + ow] = s;
                    }}
            {tail_call(tail, "o", "(n * C_out + co) * OD * OH * OW", "OD * OH * OW")}
        }}
}}
"""


def _tiled(
    parallel: bool, accumulators: int, block: int, vector_width: int, plane: bool, signature: str, tail: Tail | None
) -> str:
    """Register tiles of ``accumulators`` output channels x two vectors of output positions of one
    stride phase, summed over (tap, input channel) with packed weights; work items are output rows x
    blocks of ``block`` positions per phase (0: whole rows), all output channels inside an item."""
    omp_region = "#pragma omp parallel" if parallel else ""
    omp_for = "#pragma omp for collapse(3) schedule(static)" if parallel else ""
    omp_pack = "#pragma omp parallel for collapse(2) schedule(static)" if parallel else ""
    return f"""{_HEADERS}

// VW: floats per vector register of the compiling machine (-march=native), at most the vector_width knob.
#if defined(__AVX512F__)
constexpr int64_t MACHINE_VW = 16;
#elif defined(__AVX__)
constexpr int64_t MACHINE_VW = 8;
#else
constexpr int64_t MACHINE_VW = 4;
#endif
constexpr int64_t VW = MACHINE_VW < {vector_width // 32} ? MACHINE_VW : {vector_width // 32};
constexpr int64_t NV = {_VECTORS_PER_TILE};     // vectors of output positions per register tile
constexpr int64_t T = NV * VW;                  // output positions (of one stride phase) per tile
constexpr int64_t COB = {accumulators};          // output channels per register tile
constexpr int64_t JB = {block};                  // positions per phase per work item (0: whole row)
typedef float vfloat __attribute__((vector_size(4 * VW)));

// One kernel tap valid for an output row and stride phase: x of input channel 0 for phase position j
// at x + j in the packed slice, its packed weights at w.
struct Tap {{
    int64_t x, w;
}};

// One register tile: R output channels x V vectors of positions, summed over the taps and the group's
// input channels (xs rows of ``lrow`` floats apart, packed weights COB floats apart), from init.
template <int R, int V>
static inline void tile_kernel(const float* __restrict__ xs, const float* __restrict__ wb, const Tap* taps,
                               int64_t ntaps, int64_t lrow, int64_t cin_g, int64_t j0, const float* init,
                               float* __restrict__ tile) {{
    vfloat acc[R][V];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
        #pragma GCC unroll 4
        for (int v = 0; v < V; ++v) acc[r][v] = init[r] + (vfloat){{}};
    for (int64_t t = 0; t < ntaps; ++t) {{
        const float* __restrict__ xp = xs + taps[t].x + j0;
        const float* __restrict__ wp = wb + taps[t].w;
        #pragma GCC unroll 4  // as the matmul micro-kernel's k loop: 57 and 69 0.8-0.9x to 0.9-1.0x on AVX2
        for (int64_t ci = 0; ci < cin_g; ++ci, xp += lrow, wp += COB) {{
            vfloat xv[V];
            #pragma GCC unroll 4
            for (int v = 0; v < V; ++v) __builtin_memcpy(&xv[v], xp + v * VW, sizeof(vfloat));
            #pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {{
                const float wr = wp[r];
                #pragma GCC unroll 4
                for (int v = 0; v < V; ++v) acc[r][v] += wr * xv[v];
            }}
        }}
    }}
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
        #pragma GCC unroll 4
        for (int v = 0; v < V; ++v) __builtin_memcpy(tile + r * T + v * VW, &acc[r][v], sizeof(vfloat));
}}

static inline int64_t floor_div(int64_t a, int64_t b) {{ return a >= 0 ? a / b : -((-a + b - 1) / b); }}
{_run_tile(accumulators)}
{tail_definition(tail)}
{signature} {{
    const int64_t cin_g = C_in / G, cout_g = C_out / G;
    const int64_t ncb = (cout_g + COB - 1) / COB, kvol = KD * KH * KW;
    const int64_t ospatial = OD * OH * OW;
    // Packed weights: [g][channel block][tap][ci][COB], zero beyond the group's last channel.
    const int64_t block_size = kvol * cin_g * COB;
    std::vector<float> packed(G * ncb * block_size, 0.0f);
    {omp_pack}
    for (int64_t g = 0; g < G; ++g)
        for (int64_t cb = 0; cb < ncb; ++cb)
            for (int64_t k = 0; k < kvol; ++k)
                for (int64_t ci = 0; ci < cin_g; ++ci)
                    for (int64_t r = 0; r < COB && cb * COB + r < cout_g; ++r)
                        packed[(g * ncb + cb) * block_size + (k * cin_g + ci) * COB + r] =
                            w[((g * cin_g + ci) * cout_g + cb * COB + r) * kvol + k];
    const float* wpack = packed.data();
    const int64_t jmax = (OW + sw - 1) / sw;  // positions in the longest stride phase
    const int64_t jb = JB > 0 ? JB : jmax, nblocks = (jmax + jb - 1) / jb;
    // Width offsets a tap may read at (x at j + off for phase position j), over every phase and tap.
    const int64_t offlo = floor_div(pw - (KW - 1) * dw, sw), offhi = floor_div(sw - 1 + pw, sw);
    // Packed x slice: [input row][ci][lrow], zero outside the input; lrow an odd number of 64-byte
    // lines, so the input channels' rows do not all fall into the same cache sets.
    const int64_t span_max = (jb + T - 1) / T * T + offhi - offlo;
    int64_t lrow = (span_max + 15) / 16 * 16;
    if ((lrow / 16) % 2 == 0) lrow += 16;
{_plane(parallel, tail) if plane else ""}
    {omp_region}
    {{
        std::vector<Tap> taps(kvol);
        std::vector<int64_t> row_of(KD * KH), tap_of(KD * KH);
        std::vector<float> xs(KD * KH * cin_g * lrow);
        alignas(64) float tile[COB * T];
        float init[COB];
        {omp_for}
        for (int64_t n = 0; n < N; ++n)
            for (int64_t orow = 0; orow < OD * OH; ++orow)
                for (int64_t b = 0; b < nblocks; ++b) {{
                    const int64_t od = orow / OH, oh = orow % OH;
                    const int64_t jb0 = b * jb, jb1 = std::min(jmax, jb0 + jb);
                    const int64_t span = (jb1 - jb0 + T - 1) / T * T + offhi - offlo;
                    const int64_t first = jb0 + offlo;  // the input column at the slice's start
                    // The input rows (id, ih) this output row reads, with their (kd, kh).
                    int64_t nrows = 0;
                    for (int64_t kd = 0; kd < KD; ++kd) {{
                        const int64_t td = od + pd - kd * dd;
                        if (td < 0 || td % sd != 0 || td / sd >= ID) continue;
                        for (int64_t kh = 0; kh < KH; ++kh) {{
                            const int64_t th = oh + ph - kh * dh;
                            if (th < 0 || th % sh != 0 || th / sh >= IH) continue;
                            row_of[nrows] = (td / sd) * IH + th / sh;
                            tap_of[nrows++] = kd * KH + kh;
                        }}
                    }}
                    for (int64_t g = 0; g < G; ++g) {{
                        for (int64_t q = 0; q < nrows; ++q)
                            for (int64_t ci = 0; ci < cin_g; ++ci) {{
                                float* __restrict__ dst = xs.data() + (q * cin_g + ci) * lrow;
                                const float* __restrict__ src = x + ((n * C_in + g * cin_g + ci) * ID * IH + row_of[q]) * IW;
                                const int64_t lo = std::min(span, std::max<int64_t>(0, -first));
                                const int64_t hi = std::max(lo, std::min(span, IW - first));
                                std::fill(dst, dst + lo, 0.0f);
                                if (hi > lo) std::memcpy(dst + lo, src + first + lo, sizeof(float) * (hi - lo));
                                std::fill(dst + hi, dst + span, 0.0f);
                            }}
                        for (int64_t rw = 0; rw < sw && rw < OW; ++rw) {{
                            // This phase's output positions ow = rw + sw * j, j in [jb0, jend).
                            const int64_t jend = std::min((OW - rw + sw - 1) / sw, jb1);
                            if (jb0 >= jend) continue;
                            int64_t ntaps = 0;
                            for (int64_t q = 0; q < nrows; ++q)
                                for (int64_t kw = 0; kw < KW; ++kw) {{
                                    const int64_t tw = rw + pw - kw * dw;
                                    if (((tw % sw) + sw) % sw != 0) continue;
                                    const int64_t off = tw / sw;  // exact
                                    if (jb0 + off >= IW || jend + off <= 0) continue;  // reads only zeros
                                    taps[ntaps++] = {{q * cin_g * lrow + off - offlo - jb0, (tap_of[q] * KW + kw) * cin_g * COB}};
                                }}
                            for (int64_t cb = 0; cb < ncb; ++cb) {{
                                const int64_t co0 = g * cout_g + cb * COB, rows = std::min(COB, cout_g - cb * COB);
                                const float* wb = wpack + (g * ncb + cb) * block_size;
                                for (int64_t r = 0; r < COB; ++r) init[r] = has_bias && r < rows ? bias[co0 + r] : 0.0f;
                                for (int64_t j0 = jb0; j0 < jend; j0 += T) {{
                                    const int64_t count = std::min(T, jend - j0);
                                    run_tile(rows, count, xs.data(), wb, taps.data(), ntaps, lrow, cin_g, j0, init, tile);
                                    for (int64_t r = 0; r < rows; ++r) {{
                                        float* __restrict__ o = out + (n * C_out + co0 + r) * ospatial + (od * OH + oh) * OW + rw;
                                        const float* __restrict__ tr = tile + r * T;
                                        if (sw == 1) {{
                                            #pragma omp simd
                                            for (int64_t q = 0; q < count; ++q) o[j0 + q] = tr[q];
                                        }} else {{
                                            for (int64_t q = 0; q < count; ++q) o[(j0 + q) * sw] = tr[q];
                                        }}
                                    }}
                                }}
                            }}
                        }}
                    }}{_finish_item(tail, "oh * OW + jb0 * sw", "oh * OW + std::min(OW, jb1 * sw)")}
                }}
    }}
}}
"""


def _plane(parallel: bool, tail: Tail | None) -> str:
    """The work of a task with stride 1 along rows and columns: each depth's output plane flattened
    at a row pitch ``P`` of ``OW`` plus the kernel's width span, so one tap reads the packed input at
    one offset for every position of the plane and a register tile runs on across row ends instead of
    stopping at each row's last few columns (a 34-wide row took two full tiles' time, a 32-wide one
    one); the ``P - OW`` columns past each row end are computed and not stored. Work items are
    (batch, output depth, ``block`` flattened positions rounded to whole tiles; 0: one row). The
    other tasks (a stride along rows or columns, a single row) go on to the row layout."""
    omp_region = "#pragma omp parallel" if parallel else ""
    omp_for = "#pragma omp for collapse(3) schedule(static)" if parallel else ""
    return f"""    if (sh == 1 && sw == 1 && OH > 1) {{
        const int64_t P = OW + (KW - 1) * dw;  // row pitch: a row and the columns its taps reach past it
        const int64_t plane = (OH - 1) * P + OW;    // flattened positions up to the last one stored
        const int64_t pb = ((JB > 0 ? JB : P) + T - 1) / T * T, nblk = (plane + pb - 1) / pb;
        const int64_t rows_max = (pb + P - 1) / P + 1 + (KH - 1) * dh;
        int64_t plen = rows_max * P + (KW - 1) * dw + T;  // one input channel's packed rows, with slack
        plen = (plen + 15) / 16 * 16;
        if ((plen / 16) % 2 == 0) plen += 16;  // an odd number of cache lines, as lrow
        // Packed input: [depth][ci][row][column], column c holding iw = c + first; [lo, hi) in the input.
        const int64_t first = pw - (KW - 1) * dw;
        const int64_t lo = std::min(P, std::max<int64_t>(0, -first)), hi = std::max(lo, std::min(P, IW - first));
        {omp_region}
        {{
            std::vector<Tap> taps(kvol);
            std::vector<int64_t> plane_of(KD), kd_of(KD);
            std::vector<float> xs(KD * cin_g * plen);
            alignas(64) float tile[COB * T];
            float init[COB];
            {omp_for}
            for (int64_t n = 0; n < N; ++n)
                for (int64_t od = 0; od < OD; ++od)
                    for (int64_t b = 0; b < nblk; ++b) {{
                        const int64_t p0 = b * pb, p1 = std::min(plane, p0 + pb);
                        const int64_t oh0 = p0 / P, oh1 = (p1 - 1) / P;  // the item's first and last rows
                        const int64_t rows = oh1 - oh0 + 1 + (KH - 1) * dh;
                        const int64_t ih0 = oh0 + ph - (KH - 1) * dh;  // the input row of packed row 0
                        int64_t nplanes = 0;
                        for (int64_t kd = 0; kd < KD; ++kd) {{
                            const int64_t td = od + pd - kd * dd;
                            if (td < 0 || td % sd != 0 || td / sd >= ID) continue;
                            plane_of[nplanes] = td / sd;
                            kd_of[nplanes++] = kd;
                        }}
                        for (int64_t g = 0; g < G; ++g) {{
                            for (int64_t q = 0; q < nplanes; ++q)
                                for (int64_t ci = 0; ci < cin_g; ++ci) {{
                                    float* __restrict__ dst = xs.data() + (q * cin_g + ci) * plen;
                                    const float* __restrict__ src = x + ((n * C_in + g * cin_g + ci) * ID + plane_of[q]) * IH * IW;
                                    for (int64_t r = 0; r < rows; ++r, dst += P) {{
                                        const int64_t ih = ih0 + r;
                                        if (ih < 0 || ih >= IH) {{
                                            std::memset(dst, 0, sizeof(float) * P);
                                            continue;
                                        }}
                                        std::memset(dst, 0, sizeof(float) * lo);
                                        if (hi > lo) std::memcpy(dst + lo, src + ih * IW + first + lo, sizeof(float) * (hi - lo));
                                        std::memset(dst + hi, 0, sizeof(float) * (P - hi));
                                    }}
                                    std::memset(dst, 0, sizeof(float) * (plen - rows * P));  // the slack
                                }}
                            // Taps: (kh, kw) reads packed row lr + (KH-1-kh)*dh, column ow + (KW-1-kw)*dw.
                            int64_t ntaps = 0;
                            for (int64_t q = 0; q < nplanes; ++q)
                                for (int64_t kh = 0; kh < KH; ++kh) {{
                                    const int64_t top = oh0 + ph - kh * dh, bottom = oh1 + ph - kh * dh;
                                    if (bottom < 0 || top >= IH) continue;  // reads only zero rows
                                    for (int64_t kw = 0; kw < KW; ++kw) {{
                                        const int64_t left = pw - kw * dw;
                                        if (left + OW <= 0 || left >= IW) continue;  // reads only zeros
                                        taps[ntaps++] = {{q * cin_g * plen + (KH - 1 - kh) * dh * P + (KW - 1 - kw) * dw,
                                                          ((kd_of[q] * KH + kh) * KW + kw) * cin_g * COB}};
                                    }}
                                }}
                            const int64_t jl0 = p0 - oh0 * P, jl1 = p1 - oh0 * P;  // the item's positions, packed
                            for (int64_t cb = 0; cb < ncb; ++cb) {{
                                const int64_t co0 = g * cout_g + cb * COB, rows_c = std::min(COB, cout_g - cb * COB);
                                const float* wb = wpack + (g * ncb + cb) * block_size;
                                for (int64_t r = 0; r < COB; ++r) init[r] = has_bias && r < rows_c ? bias[co0 + r] : 0.0f;
                                for (int64_t j0 = jl0; j0 < jl1; j0 += T) {{
                                    const int64_t count = std::min(T, jl1 - j0);
                                    run_tile(rows_c, count, xs.data(), wb, taps.data(), ntaps, plen, cin_g, j0, init, tile);
                                    // Store the tile's positions row by row, leaving the columns past OW.
                                    for (int64_t r = 0; r < rows_c; ++r) {{
                                        float* __restrict__ o = out + (n * C_out + co0 + r) * ospatial + od * OH * OW;
                                        const float* __restrict__ tr = tile + r * T;
                                        for (int64_t q = 0; q < count;) {{
                                            const int64_t pos = oh0 * P + j0 + q, oh = pos / P, ow = pos % P;
                                            const int64_t run = std::min(count - q, P - ow);
                                            if (ow < OW) std::memcpy(o + oh * OW + ow, tr + q, sizeof(float) * std::min(run, OW - ow));
                                            q += run;
                                        }}
                                    }}
                                }}
                            }}
                        }}{_finish_item(tail, "oh0 * OW + std::min(p0 - oh0 * P, OW)", "oh1 * OW + std::min(p1 - oh1 * P, OW)")}
                    }}
        }}
        return;
    }}"""


def _run_tile(accumulators: int) -> str:
    """``run_tile``: the register tile for ``rows`` channels (1 to ``accumulators``) and ``count``
    positions, the packed x ``pitch`` floats apart per input channel."""
    cases = {
        vectors: "\n".join(
            f"            case {rows}: tile_kernel<{rows}, {vectors}>(xs, wb, taps, ntaps, pitch, cin_g, j0, init, tile); break;"
            for rows in range(1, accumulators + 1)
        )
        for vectors in ("NV", "1")
    }
    return f"""static inline void run_tile(int64_t rows, int64_t count, const float* __restrict__ xs, const float* __restrict__ wb,
                            const Tap* taps, int64_t ntaps, int64_t pitch, int64_t cin_g, int64_t j0, const float* init,
                            float* __restrict__ tile) {{
    if (count > VW) {{
        switch (rows) {{
{cases["NV"]}
        }}
    }} else {{  // a tail of one vector or less: half the tile
        switch (rows) {{
{cases["1"]}
        }}
    }}
}}"""


def _finish_item(tail: Tail | None, first: str, last: str) -> str:
    """The tail applied to a work item's outputs of every output channel, once all are written: the
    run ``[first, last)`` of the depth's output plane (row-major), which holds them all (a row item:
    every stride phase of its block, ``[jb0 * sw, jb1 * sw)`` of the row)."""
    if tail is None:
        return ""
    return f"""
                    const int64_t run_lo = {first}, run_hi = {last};
                    for (int64_t co = 0; co < C_out; ++co) {{
                        const int64_t x0 = (n * C_out + co) * ospatial + od * OH * OW + run_lo;
                        {tail.call("out + x0", "x0", "run_hi - run_lo")}
                    }}"""
