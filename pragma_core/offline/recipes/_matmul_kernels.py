"""The C++ kernels of the matmul recipe: the blocked kernel of packed panels around a
register-blocked micro-kernel (its design is described in :mod:`~pragma_core.offline.recipes.matmul`),
and the choice between it and the kernels that stream B unpacked
(:mod:`~pragma_core.offline.recipes._matmul_streamed`: matrix-vector products, ``block`` 0, a few rows).

    cpp = matmul_kernel(facts, parallel, simd, accumulators, block, extra_count)

writes ``extern "C" void matmul(...)`` reading its operands through ``load_a`` and ``load_b`` and
storing through ``epilogue``, which the recipe writes before it. With a ``triangle`` in the facts
(the product's ``triu``/``tril``), stores outside it write zero and (blocked kernel) tiles outside it
are skipped; when the factors are triangular the same way, finite, and nothing but the triangle
follows the product, the sums skip the K ranges where a factor is zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...machine.hardware import describe_cpu
from ._matmul_streamed import column_blocked_kernel, row_blocked_kernel, row_stream_kernel, skinny, sums_added

__all__ = ["register_columns", "register_rows_start", "matmul_kernel", "micro_kernel_source"]

# block knob -> cache tiles (rows of A per tile, columns of B per tile, K panel depth).
_TILES = {32: (32, 128, 128), 64: (64, 256, 256), 128: (128, 256, 256), 256: (256, 512, 256)}
_VECTORS_PER_ROW = 2
"""NR of the vector micro-kernel in machine vectors at most: an MR x 2 vector tile leaves registers
for the loads and the broadcast (fewer where MR rows of two would not fit the registers)."""
_SCALAR_COLUMNS = 4
"""NR of the scalar micro-kernel: four independent sums per row."""


def matmul_kernel(
    facts: Mapping[str, Any],
    parallel: bool,
    simd: bool,
    accumulators: int,
    block: int,
    extra_count: int,
    *,
    prefix: str = "",
) -> str:
    """The C++ ``{prefix}matmul`` entry point for the product's facts and knobs, its epilogue taking
    ``extra_count`` tensors besides the value."""
    extra_parameters = "".join(f", const float* __restrict__ e{i}" for i in range(extra_count))
    extra_arguments = "".join(f", e{i}" for i in range(extra_count))
    b_stride = "K * N" if facts["b_batched"] else "0"
    triangle = _triangle(facts, parallel)
    header = (
        f'extern "C" void {prefix}matmul(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c'
        f"{extra_parameters}, int64_t batch, int64_t M, int64_t N, int64_t K)"
    )
    if facts["n"] == 1 or block == 0:
        # A matrix-vector product is memory-bound: summing in double costs nothing there.
        partial = "double" if facts["n"] == 1 else "float"
        return triangle + row_blocked_kernel(header, b_stride, parallel, simd, accumulators, extra_arguments, partial)
    if skinny(facts):
        if facts["b"]["transposed"]:
            return triangle + column_blocked_kernel(
                header, b_stride, parallel, simd, facts["m"], accumulators, extra_arguments
            )
        return triangle + row_stream_kernel(header, b_stride, parallel, simd, extra_arguments)
    return triangle + _blocked_kernel(
        facts, header, b_stride, parallel, simd, accumulators, block, extra_parameters, extra_arguments
    )


def _skips_zero_factors(facts: Mapping[str, Any]) -> bool:
    """Whether the sums may skip where a triangular factor is zero: only the triangle follows the
    product (an epilogue of a zero sum need not be zero)."""
    return facts.get("triangle") is not None and not _has_epilogue(facts)


def _has_epilogue(facts: Mapping[str, Any]) -> bool:
    """Whether elementwise steps (a bias, a chain, extra operands) follow the product."""
    return bool(facts["steps"] or facts["bias"] or facts["extras"])


def _finishes(facts: Mapping[str, Any]) -> bool:
    """Whether a stored sum is changed before it is final: an epilogue or a kept triangle follows the
    product."""
    return facts.get("triangle") is not None or _has_epilogue(facts)


def _triangle(facts: Mapping[str, Any], parallel: bool) -> str:
    """The predicates of the kept triangle of C (all true without one) and, when the sums may skip
    zero factors, the run-time check of the factors and the K range an output block needs."""
    triangle = facts.get("triangle")
    if triangle is None:
        return """// No triangle: every element of C is kept.
static inline bool keep(int64_t, int64_t) { return true; }
static inline bool block_kept(int64_t, int64_t, int64_t, int64_t) { return true; }
"""
    d, upper = int(triangle["diagonal"]), bool(triangle["upper"])
    keep = f"j - i >= {d}" if upper else f"j - i <= {d}"
    block = f"(j1 - 1) - i0 >= {d}" if upper else f"j0 - (i1 - 1) <= {d}"
    text = f"""// The kept {"upper" if upper else "lower"} triangle of C (diagonal {d}): element (i, j), and whether any element of
// rows [i0, i1) x columns [j0, j1) is kept.
static inline bool keep(int64_t i, int64_t j) {{ return {keep}; }}
static inline bool block_kept(int64_t i0, int64_t i1, int64_t j0, int64_t j1) {{ return {block}; }}
"""
    if not _skips_zero_factors(facts):
        return text
    a_zero, b_zero = ("k < i", "k > j") if upper else ("k > i", "k < j")
    k_first, k_stop = ("i0", "j1") if upper else ("j0", "i1")
    omp = "#pragma omp parallel for reduction(+:bad) schedule(static)" if parallel else ""
    b_batches = "batch" if facts["b_batched"] else "1"
    return (
        text
        + f"""
// Factors {"upper" if upper else "lower"} triangular and finite (zero times inf would be NaN): the sum of
// output rows [i0, i1) x columns [j0, j1) needs only K in [k_first, k_stop).
static inline int64_t k_first(int64_t i0, int64_t j0) {{ return {k_first}; }}
static inline int64_t k_stop(int64_t i1, int64_t j1) {{ return {k_stop}; }}
static inline bool finite(float v) {{
    uint32_t bits;
    __builtin_memcpy(&bits, &v, sizeof bits);
    return (bits & 0x7f800000u) != 0x7f800000u;  // a bit test: -ffast-math may drop std::isfinite
}}
static bool triangular_factors(const float* __restrict__ a, const float* __restrict__ b, int64_t batch, int64_t M,
                               int64_t N, int64_t K) {{
    int64_t bad = 0;
    {omp}
    for (int64_t r = 0; r < batch * M; ++r) {{
        const int64_t i = r % M;
        for (int64_t k = 0; k < K; ++k) {{
            const float v = load_a(a + r / M * M * K, i, k, M, K);
            bad += !finite(v) || ({a_zero} && v != 0.0f);
        }}
    }}
    {omp}
    for (int64_t r = 0; r < {b_batches} * K; ++r) {{
        const int64_t k = r % K;
        for (int64_t j = 0; j < N; ++j) {{
            const float v = load_b(b + r / K * K * N, k, j, N, K);
            bad += !finite(v) || ({b_zero} && v != 0.0f);
        }}
    }}
    return bad == 0;
}}
"""
    )


def _blocked_kernel(
    facts: Mapping[str, Any],
    header: str,
    b_stride: str,
    parallel: bool,
    simd: bool,
    accumulators: int,
    block: int,
    extra_parameters: str,
    extra_arguments: str,
) -> str:
    """Cache tiles with packed panels and an ``MR x NR`` register-blocked micro-kernel."""
    mb, nb, kc = _TILES[block]
    mr = accumulators
    nr = register_columns(simd)
    width, micro = micro_kernel_source(simd)
    return f"""{width}
constexpr int64_t MR = {mr}, NR = {nr};              // register tile
constexpr int64_t MB = {mb}, NB = {nb}, KC = {kc};  // cache tile: rows, columns, K panel depth

{micro}

{_packing(facts)}

{_tile_function(simd, extra_parameters, extra_arguments, _skips_zero_factors(facts), _finishes(facts))}

{_driver(header, b_stride, parallel, extra_arguments, _skips_zero_factors(facts))}
"""


def register_rows_start() -> dict[str, Any]:
    """The register tile's starting rows (the ``accumulators`` knob of the products, convolutions and
    attention) on this machine, where it differs from the families' 6: 8 rows of two vectors with
    AVX-512's 32 registers (16 accumulators). Measured in process at fitted sizes on a 2-core Xeon
    with AVX-512 (2026-12-02), against 6 rows: level-1 products 1.02x-1.15x faster (five files),
    forward convolutions 1.0x-1.24x (nine), transposed ones 0.90x-1.16x (seven, 1.06x over them),
    attention 1.12x. AVX2's 16 registers keep 6 rows (8 would leave one vector per row)."""
    return {"accumulators": 8} if "avx512f" in describe_cpu().features else {}


def register_columns(simd: bool) -> str:
    """The C++ expression of the register tile's width NR (after ``MR`` in the same declaration):
    two machine vectors where ``MR`` rows of them, their loads and a broadcast fit the vector
    registers (``MR * NV + NV + 1 <= NREG``), else one, so a tall tile (8 rows on AVX2's 16
    registers) never spills; four columns in the scalar kernel."""
    if not simd:
        return str(_SCALAR_COLUMNS)
    return f"std::min<int64_t>({_VECTORS_PER_ROW}, (NREG - 1) / (MR + 1)) * VW"


def micro_kernel_source(simd: bool) -> tuple[str, str]:
    """The register tile's width definitions (VW, with ``simd``) and its micro-kernel, vector or scalar:
    ``micro_kernel(ap, bp, kc, tile)`` sets the ``MR x NR`` tile (the caller defines ``MR`` and ``NR``)
    to an A strip packed ``ap[k * MR + r]`` times a B strip packed ``bp[k * NR + q]``, k in [0, kc);
    ``micro_kernel_into(ap, bp, kc, c, ldc, add)`` writes (or with ``add`` adds) that product into
    rows ``ldc`` floats apart, such as a whole register tile of C in place."""
    if simd:
        width = """// VW: floats in one vector register of the machine compiling this (-march=native).
#if defined(__AVX512F__)
constexpr int64_t VW = 16, NREG = 32;  // and the vector registers
#elif defined(__AVX__)
constexpr int64_t VW = 8, NREG = 16;
#else
constexpr int64_t VW = 4, NREG = 16;
#endif"""
        micro = """typedef float vfloat __attribute__((vector_size(4 * VW)));
constexpr int64_t NV = NR / VW;  // vectors per row of the register tile

// Rows of ldt floats at tile (MR x NR) set to (add: increased by) an A strip (kc x MR, packed) times
// a B strip (kc x NR, packed), summed in registers.
static inline void micro_kernel_into(const float* __restrict__ ap, const float* __restrict__ bp, int64_t kc,
                                     float* __restrict__ tile, int64_t ldt, bool add) {
    vfloat acc[MR][NV];
    #pragma GCC unroll 16
    for (int64_t r = 0; r < MR; ++r)
        #pragma GCC unroll 4
        for (int64_t v = 0; v < NV; ++v) acc[r][v] = (vfloat){};
    // Four steps of k per iteration: rolled, GCC read the first B vector from memory again for
    // every row's FMA and the loop ran at 77% of the FMA peak (6 x 16 on a 2-core AVX2 EPYC, 1
    // thread, operands in L1: 71.5 GFLOP/s of 93.2); unrolled, 90 (97%), 4 rows 55 to 84, 8 rows 64 to 77.
    #pragma GCC unroll 4
    for (int64_t k = 0; k < kc; ++k) {
        vfloat bv[NV];
        #pragma GCC unroll 4
        for (int64_t v = 0; v < NV; ++v) __builtin_memcpy(&bv[v], bp + k * NR + v * VW, sizeof(vfloat));
        #pragma GCC unroll 16
        for (int64_t r = 0; r < MR; ++r) {
            const float x = ap[k * MR + r];  // broadcast to every lane
            #pragma GCC unroll 4
            for (int64_t v = 0; v < NV; ++v) acc[r][v] += x * bv[v];
        }
    }
    #pragma GCC unroll 16
    for (int64_t r = 0; r < MR; ++r)
        #pragma GCC unroll 4
        for (int64_t v = 0; v < NV; ++v) {
            float* __restrict__ out = tile + r * ldt + v * VW;
            if (add) {
                vfloat was;
                __builtin_memcpy(&was, out, sizeof(vfloat));
                acc[r][v] += was;
            }
            __builtin_memcpy(out, &acc[r][v], sizeof(vfloat));
        }
}"""
    else:
        width = ""
        micro = """// Rows of ldt floats at tile (MR x NR) set to (add: increased by) an A strip (kc x MR, packed) times
// a B strip (kc x NR, packed), summed in registers.
static inline void micro_kernel_into(const float* __restrict__ ap, const float* __restrict__ bp, int64_t kc,
                                     float* __restrict__ tile, int64_t ldt, bool add) {
    float acc[MR][NR] = {};
    for (int64_t k = 0; k < kc; ++k)
        #pragma GCC unroll 16
        for (int64_t r = 0; r < MR; ++r)
            #pragma GCC unroll 8
            for (int64_t q = 0; q < NR; ++q) acc[r][q] += ap[k * MR + r] * bp[k * NR + q];
    for (int64_t r = 0; r < MR; ++r)
        for (int64_t q = 0; q < NR; ++q) tile[r * ldt + q] = add ? tile[r * ldt + q] + acc[r][q] : acc[r][q];
}"""
    micro += """

// tile (MR x NR, packed rows) = A strip (kc x MR, packed) times B strip (kc x NR, packed).
static inline void micro_kernel(const float* __restrict__ ap, const float* __restrict__ bp, int64_t kc,
                                float* __restrict__ tile) {
    micro_kernel_into(ap, bp, kc, tile, NR, false);
}"""
    return width, micro


def _packing(facts: Mapping[str, Any]) -> str:
    """The functions packing a block of A into MR-tall strips and a panel of B into NR-wide strips."""
    # Pack in the order that reads the stored operand contiguously.
    if facts["a"]["transposed"]:
        pack_a = """for (int64_t s = 0; s < mb; s += MR)
        for (int64_t k = 0; k < kc; ++k)
            for (int64_t r = 0; r < MR; ++r)
                ap[s * kc + k * MR + r] = s + r < mb ? load_a(a, i0 + s + r, k0 + k, M, K) : 0.0f;"""
    else:
        pack_a = """for (int64_t s = 0; s < mb; s += MR)
        for (int64_t k1 = 0; k1 < kc; k1 += 8)  // 8-deep chunks keep the transposing writes in L1
            for (int64_t r = 0; r < MR; ++r)
                for (int64_t k = k1; k < std::min(k1 + 8, kc); ++k)
                    ap[s * kc + k * MR + r] = s + r < mb ? load_a(a, i0 + s + r, k0 + k, M, K) : 0.0f;"""
    if facts["b"]["transposed"]:
        pack_b = """for (int64_t s = 0; s < nb; s += NR)
        for (int64_t k1 = 0; k1 < kc; k1 += 8)  // 8-deep chunks keep the transposing writes in L1
            for (int64_t q = 0; q < NR; ++q)
                for (int64_t k = k1; k < std::min(k1 + 8, kc); ++k)
                    bp[s * kc + k * NR + q] = s + q < nb ? load_b(b, k0 + k, j0 + s + q, N, K) : 0.0f;"""
    else:
        pack_b = """for (int64_t s = 0; s < nb; s += NR) {
        if (s + NR <= nb) {  // a whole strip: rows of NR contiguous floats, copied as they are
            for (int64_t k = 0; k < kc; ++k)
                std::memcpy(bp + s * kc + k * NR, b + (k0 + k) * N + j0 + s, sizeof(float) * NR);
            continue;
        }
        for (int64_t k = 0; k < kc; ++k)
            for (int64_t q = 0; q < NR; ++q)
                bp[s * kc + k * NR + q] = s + q < nb ? load_b(b, k0 + k, j0 + s + q, N, K) : 0.0f;
    }"""
    return f"""// Pack rows [i0, i0 + mb) x K panel [k0, k0 + kc) of A into MR-tall strips (zero padded).
static void pack_a(const float* __restrict__ a, int64_t M, int64_t K, int64_t i0, int64_t mb, int64_t k0,
                   int64_t kc, float* __restrict__ ap) {{
    {pack_a}
}}

// Pack K panel [k0, k0 + kc) x columns [j0, j0 + nb) of B into NR-wide strips (zero padded).
static void pack_b(const float* __restrict__ b, int64_t N, int64_t K, int64_t j0, int64_t nb, int64_t k0,
                   int64_t kc, float* __restrict__ bp) {{
    {pack_b}
}}"""


def _tile_function(simd: bool, extra_parameters: str, extra_arguments: str, skips: bool, finishes: bool) -> str:
    """The function computing a column of cache tiles of C from packed strips, each K panel of B
    packed once for all of them, the epilogue on each tile's last panel; tiles outside the kept
    triangle are written as zeros, and with ``skips`` (triangular factors) each tile's sums cover
    only the K range it needs. ``finishes``: the product has an epilogue or a triangle, applied to a
    register tile summed in place once its last panel is in."""
    store_simd = "#pragma omp simd" if simd else ""
    finish_in_place = (
        f"""
                        if (last)
                            for (int64_t r = 0; r < MR; ++r) {{
                                const int64_t i = i0 + is + r;
                                float* __restrict__ crow = ctile + r * N;
                                {store_simd}
                                for (int64_t q = 0; q < NR; ++q)
                                    crow[q] = keep(i, j0 + js + q) ? epilogue(crow[q], j0 + js + q{extra_arguments}) : 0.0f;
                            }}"""
        if finishes
        else ""
    )
    tile_range = (
        """if (structured) {
                k_low = std::max(k_low, k_first(i0, j0));
                k_high = std::min(k_high, k_stop(i0 + mb, j0 + nb));
            }"""
        if skips
        else ""
    )
    micro_range = (
        """if (structured) {
                        const int64_t low = std::max(k0, k_first(i0 + is, j0 + js));
                        const int64_t high = std::min(k0 + kc, k_stop(i0 + is + rows, j0 + js + cols));
                        k_offset = std::min(kc, std::max<int64_t>(0, low - k0));
                        k_count = std::max<int64_t>(0, high - k0 - k_offset);
                    }"""
        if skips
        else ""
    )
    return f"""// Rows [i0, i0 + mb) x columns [j0, j0 + nb) of C set to zero.
static void zero_block(float* __restrict__ c, int64_t N, int64_t i0, int64_t mb, int64_t j0, int64_t nb) {{
    for (int64_t r = 0; r < mb; ++r) std::fill(c + (i0 + r) * N + j0, c + (i0 + r) * N + j0 + nb, 0.0f);
}}

// The cache tiles of C in rows [i_begin, i_end) x columns [j0, j0 + width), MB rows each, the products
// over K in [k_begin, k_end): per K panel, B's panel is packed once and every tile passes over it
// (a tile's A block packed for it); the epilogue is applied after a tile's last panel when ``finish``.
static void tile_column(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c{extra_parameters},
                        int64_t M, int64_t N, int64_t K, int64_t i_begin, int64_t i_end, int64_t j0, int64_t width,
                        int64_t k_begin, int64_t k_end, bool finish, bool structured, float* __restrict__ ap,
                        float* __restrict__ bp) {{
    const int64_t nb = std::min(width, N - j0);
    for (int64_t i0 = i_begin; i0 < i_end; i0 += MB) {{  // tiles whose sums are all zero: written once
        const int64_t mb = std::min(MB, i_end - i0);
        int64_t k_low = k_begin, k_high = k_end;
        {tile_range}
        if (!block_kept(i0, i0 + mb, j0, j0 + nb) || k_low >= k_high) zero_block(c, N, i0, mb, j0, nb);
    }}
    for (int64_t k0 = k_begin; k0 < k_end; k0 += KC) {{
        const int64_t kc = std::min(KC, k_end - k0);
        bool packed = false;
        for (int64_t i0 = i_begin; i0 < i_end; i0 += MB) {{
            const int64_t mb = std::min(MB, i_end - i0);
            int64_t k_low = k_begin, k_high = k_end;
            {tile_range}
            if (!block_kept(i0, i0 + mb, j0, j0 + nb) || k_low >= k_high || k0 + kc <= k_low || k0 >= k_high)
                continue;  // zero (written above), or no K in this panel
            const bool first = k0 <= k_low, last = finish && k0 + kc >= k_high;
            if (!packed) pack_b(b, N, K, j0, nb, k0, kc, bp);
            packed = true;
            pack_a(a, M, K, i0, mb, k0, kc, ap);
            for (int64_t js = 0; js < nb; js += NR)
                for (int64_t is = 0; is < mb; is += MR) {{
                    const int64_t rows = std::min(MR, mb - is), cols = std::min(NR, nb - js);
                    if (!block_kept(i0 + is, i0 + is + rows, j0 + js, j0 + js + cols)) {{
                        if (last) zero_block(c, N, i0 + is, rows, j0 + js, cols);
                        continue;
                    }}
                    int64_t k_offset = 0, k_count = kc;
                    {micro_range}
                    if (rows == MR && cols == NR) {{  // a whole register tile: summed into C in place
                        float* __restrict__ ctile = c + (i0 + is) * N + j0 + js;
                        micro_kernel_into(ap + is * kc + k_offset * MR, bp + js * kc + k_offset * NR, k_count, ctile,
                                          N, !first);{finish_in_place}
                        continue;
                    }}
                    alignas(64) float acc[MR * NR];
                    micro_kernel(ap + is * kc + k_offset * MR, bp + js * kc + k_offset * NR, k_count, acc);
                    for (int64_t r = 0; r < rows; ++r) {{
                        const int64_t i = i0 + is + r;
                        float* __restrict__ crow = c + i * N + j0 + js;
                        const float* __restrict__ arow = acc + r * NR;
                        {store_simd}
                        for (int64_t q = 0; q < cols; ++q) {{
                            float v = first ? arow[q] : crow[q] + arow[q];
                            crow[q] = last ? (keep(i, j0 + js + q) ? epilogue(v, j0 + js + q{extra_arguments}) : 0.0f) : v;
                        }}
                    }}
                }}
        }}
    }}
}}"""


def _driver(header: str, b_stride: str, parallel: bool, extra_arguments: str, skips: bool) -> str:
    """The kernel's entry: columns of tiles (and, when too few, splits of K) shared among the threads."""
    omp_region = "#pragma omp parallel" if parallel else ""
    omp_for = "#pragma omp for schedule(static)" if parallel else ""
    splits = (
        "tiles < 2 * omp_get_max_threads() && K >= 2 * KC ? std::min<int64_t>(omp_get_max_threads(), K / KC) : 1"
        if parallel
        else "1"
    )
    omp_for_reduce = "#pragma omp parallel for schedule(static)" if parallel else ""
    threads = "omp_get_max_threads()" if parallel else "1"
    return f"""{header} {{
    const int64_t row_tiles = (M + MB - 1) / MB, column_tiles = (N + NB - 1) / NB;
    const int64_t tiles = batch * row_tiles * column_tiles;
    // Column tiles of (nearly) one width: a ragged last one would leave its thread idle.
    const int64_t column_width = std::min(NB, ((N + column_tiles - 1) / column_tiles + NR - 1) / NR * NR);
    // Too few tiles to keep the threads busy (a small C with a long K): the threads also split K into
    // whole panels, sum into private copies of C, and add the copies in a fixed order.
    const int64_t splits = {splits};
    const int64_t k_chunk = ((K + splits - 1) / splits + KC - 1) / KC * KC;
    // A work item is a column of row tiles sharing each packed panel of B: all of M when the items
    // (batch entries x column tiles, or the splits of K) deal evenly to the threads, else the rows
    // cut in one share per thread (whole register strips), so every thread gets the same work.
    const int64_t strips = (M + MR - 1) / MR, threads = {threads};
    const bool even = splits > 1 || batch * column_tiles % threads == 0;
    const int64_t row_groups = std::min<int64_t>(strips, even ? 1 : threads);
    const int64_t group_rows = (strips + row_groups - 1) / row_groups * MR;
    const int64_t groups_used = (M + group_rows - 1) / group_rows;
    const int64_t items = batch * groups_used * column_tiles;
    const bool structured = {"triangular_factors(a, b, batch, M, N, K)" if skips else "false"};
    float* partial = splits > 1 ? static_cast<float*>(std::malloc(sizeof(float) * splits * batch * M * N)) : nullptr;
    {omp_region}
    {{
        // Per-thread packing buffers, padded to whole strips.
        float* ap = static_cast<float*>(std::aligned_alloc(64, sizeof(float) * (MB + MR) * KC + 64));
        float* bp = static_cast<float*>(std::aligned_alloc(64, sizeof(float) * (NB + NR) * KC + 64));
        {omp_for}
        for (int64_t t = 0; t < items * splits; ++t) {{
            const int64_t split = t / items, bi = t % items / (groups_used * column_tiles);
            const int64_t rest = t % (groups_used * column_tiles);
            const int64_t i0 = (rest / column_tiles) * group_rows, j0 = (rest % column_tiles) * column_width;
            const int64_t k_begin = std::min(K, split * k_chunk), k_end = std::min(K, k_begin + k_chunk);
            float* out = splits > 1 ? partial + split * batch * M * N : c;
            if (k_begin < k_end)
                tile_column(a + bi * M * K, b + bi * {b_stride}, out + bi * M * N{extra_arguments}, M, N, K, i0,
                            std::min(M, i0 + group_rows), j0, column_width, k_begin, k_end, splits == 1, structured, ap,
                            bp);
        }}
        std::free(ap);
        std::free(bp);
    }}
    if (splits > 1) {{
        const int64_t used = (K + k_chunk - 1) / k_chunk;  // splits with a non-empty K range
{sums_added("partial", "used", omp_for_reduce, extra_arguments, "        ")}
        std::free(partial);
    }}
}}"""
