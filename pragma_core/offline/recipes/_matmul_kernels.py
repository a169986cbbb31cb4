"""The C++ kernels of the matmul recipe: a row-blocked dot-product kernel (matrix-vector products,
or ``block`` 0), and the blocked kernel of packed panels around a register-blocked micro-kernel (its
design is described in :mod:`~pragma_core.offline.recipes.matmul`).

    cpp = matmul_kernel(facts, parallel, simd, accumulators, block, extra_count)

writes ``extern "C" void matmul(...)`` reading its operands through ``load_a`` and ``load_b`` and
storing through ``epilogue``, which the recipe writes before it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["matmul_kernel"]

# block knob -> cache tiles (rows of A per tile, columns of B per tile, K panel depth).
_TILES = {32: (32, 128, 128), 64: (64, 256, 256), 128: (128, 256, 256), 256: (256, 512, 256)}
_VECTORS_PER_ROW = 2  # NR = 2 machine vectors in the vector micro-kernel
_SCALAR_COLUMNS = 4  # NR of the scalar micro-kernel


def matmul_kernel(
    facts: Mapping[str, Any], parallel: bool, simd: bool, accumulators: int, block: int, extra_count: int
) -> str:
    """The C++ ``matmul`` entry point for the product's facts and knobs, its epilogue taking
    ``extra_count`` tensors besides the value."""
    extra_parameters = "".join(f", const float* __restrict__ e{i}" for i in range(extra_count))
    extra_arguments = "".join(f", e{i}" for i in range(extra_count))
    b_stride = "K * N" if facts["b_batched"] else "0"
    header = (
        f'extern "C" void matmul(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c'
        f"{extra_parameters}, int64_t batch, int64_t M, int64_t N, int64_t K)"
    )
    if facts["n"] == 1 or block == 0:
        # A matrix-vector product is memory-bound: summing in double costs nothing there.
        partial = "double" if facts["n"] == 1 else "float"
        return _row_blocked_kernel(header, b_stride, parallel, simd, accumulators, extra_arguments, partial)
    return _blocked_kernel(
        facts, header, b_stride, parallel, simd, accumulators, block, extra_parameters, extra_arguments
    )


def _row_blocked_kernel(
    header: str, b_stride: str, parallel: bool, simd: bool, accumulators: int, extra_arguments: str, partial: str
) -> str:
    """Unblocked: each output is one dot product over K, summed in ``partial`` precision over
    panels of ``KP`` and in double across panels (long sums stay far inside the tolerance, which the reference's
    own rounding already uses much of); ``accumulators`` rows at a time share the loads of B."""
    r = accumulators
    totals = " ".join(f"double s{u} = 0.0;" for u in range(r))
    partials = " ".join(f"{partial} p{u} = 0;" for u in range(r))
    updates = "\n".join(f"                    p{u} += ({partial})load_a(ab, i + {u}, k, M, K) * bk;" for u in range(r))
    adds = " ".join(f"s{u} += p{u};" for u in range(r))
    stores = "\n".join(
        f"                cb[(i + {u}) * N + j] = epilogue(float(s{u}), j{extra_arguments});" for u in range(r)
    )
    reduction = f"#pragma omp simd reduction(+:{', '.join(f'p{u}' for u in range(r))})" if simd else ""
    tail_reduction = "#pragma omp simd reduction(+:p)" if simd else ""
    omp = "#pragma omp parallel for schedule(static)" if parallel else ""
    panel = 256 if simd else 32  # vector lanes split a panel 16 ways: each lane sums 16 values
    return f"""constexpr int64_t KP = {panel};  // K panel of one float partial sum

{header} {{
    const int64_t row_blocks = (M + {r} - 1) / {r};
    {omp}
    for (int64_t task = 0; task < batch * row_blocks; ++task) {{
        const int64_t bi = task / row_blocks, i = (task % row_blocks) * {r};
        const float* __restrict__ ab = a + bi * M * K;
        const float* __restrict__ bb = b + bi * {b_stride};
        float* __restrict__ cb = c + bi * M * N;
        if (i + {r} <= M) {{
            for (int64_t j = 0; j < N; ++j) {{
                {totals}
                for (int64_t k0 = 0; k0 < K; k0 += KP) {{
                    const int64_t k1 = std::min(k0 + KP, K);
                    {partials}
                    {reduction}
                    for (int64_t k = k0; k < k1; ++k) {{
                        const {partial} bk = load_b(bb, k, j, N, K);
{updates}
                    }}
                    {adds}
                }}
{stores}
            }}
        }} else {{
            // The last, partial block of rows: one dot product at a time.
            for (int64_t row = i; row < M; ++row)
                for (int64_t j = 0; j < N; ++j) {{
                    double s = 0.0;
                    for (int64_t k0 = 0; k0 < K; k0 += KP) {{
                        const int64_t k1 = std::min(k0 + KP, K);
                        {partial} p = 0;
                        {tail_reduction}
                        for (int64_t k = k0; k < k1; ++k) p += ({partial})load_a(ab, row, k, M, K) * load_b(bb, k, j, N, K);
                        s += p;
                    }}
                    cb[row * N + j] = epilogue(float(s), j{extra_arguments});
                }}
        }}
    }}
}}
"""


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
    nr = f"{_VECTORS_PER_ROW} * VW" if simd else str(_SCALAR_COLUMNS)
    width, micro = _micro_kernel(simd)
    return f"""{width}
constexpr int64_t MR = {mr}, NR = {nr};              // register tile
constexpr int64_t MB = {mb}, NB = {nb}, KC = {kc};  // cache tile: rows, columns, K panel depth

{micro}

{_packing(facts)}

{_tile_function(simd, extra_parameters, extra_arguments)}

{_driver(header, b_stride, parallel, extra_arguments)}
"""


def _micro_kernel(simd: bool) -> tuple[str, str]:
    """The register tile's width definitions (VW, with ``simd``) and its micro-kernel, vector or scalar."""
    if simd:
        width = """// VW: floats in one vector register of the machine compiling this (-march=native).
#if defined(__AVX512F__)
constexpr int64_t VW = 16;
#elif defined(__AVX__)
constexpr int64_t VW = 8;
#else
constexpr int64_t VW = 4;
#endif"""
        micro = """typedef float vfloat __attribute__((vector_size(4 * VW)));
constexpr int64_t NV = NR / VW;  // vectors per row of the register tile

// tile (MR x NR) = A strip (kc x MR, packed) times B strip (kc x NR, packed), in registers.
static inline void micro_kernel(const float* __restrict__ ap, const float* __restrict__ bp, int64_t kc,
                                float* __restrict__ tile) {
    vfloat acc[MR][NV];
    #pragma GCC unroll 16
    for (int64_t r = 0; r < MR; ++r)
        #pragma GCC unroll 4
        for (int64_t v = 0; v < NV; ++v) acc[r][v] = (vfloat){};
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
        for (int64_t v = 0; v < NV; ++v) __builtin_memcpy(tile + r * NR + v * VW, &acc[r][v], sizeof(vfloat));
}"""
    else:
        width = ""
        micro = """// tile (MR x NR) = A strip (kc x MR, packed) times B strip (kc x NR, packed), in registers.
static inline void micro_kernel(const float* __restrict__ ap, const float* __restrict__ bp, int64_t kc,
                                float* __restrict__ tile) {
    float acc[MR][NR] = {};
    for (int64_t k = 0; k < kc; ++k)
        #pragma GCC unroll 16
        for (int64_t r = 0; r < MR; ++r)
            #pragma GCC unroll 8
            for (int64_t q = 0; q < NR; ++q) acc[r][q] += ap[k * MR + r] * bp[k * NR + q];
    for (int64_t r = 0; r < MR; ++r)
        for (int64_t q = 0; q < NR; ++q) tile[r * NR + q] = acc[r][q];
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
        pack_b = """for (int64_t s = 0; s < nb; s += NR)
        for (int64_t k = 0; k < kc; ++k)
            for (int64_t q = 0; q < NR; ++q)
                bp[s * kc + k * NR + q] = s + q < nb ? load_b(b, k0 + k, j0 + s + q, N, K) : 0.0f;"""
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


def _tile_function(simd: bool, extra_parameters: str, extra_arguments: str) -> str:
    """The function computing one cache tile of C from packed strips, the epilogue on its last panel."""
    store_simd = "#pragma omp simd" if simd else ""
    return f"""// One cache tile of C: rows [i0, i0 + MB) x columns [j0, j0 + NB), the products over K in
// [k_begin, k_end); the epilogue is applied after the last panel when ``finish``.
static void tile(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c{extra_parameters},
                 int64_t M, int64_t N, int64_t K, int64_t i0, int64_t j0, int64_t k_begin, int64_t k_end,
                 bool finish, float* __restrict__ ap, float* __restrict__ bp) {{
    const int64_t mb = std::min(MB, M - i0), nb = std::min(NB, N - j0);
    for (int64_t k0 = k_begin; k0 < k_end; k0 += KC) {{
        const int64_t kc = std::min(KC, k_end - k0);
        const bool first = k0 == k_begin, last = finish && k0 + kc >= k_end;
        pack_b(b, N, K, j0, nb, k0, kc, bp);
        pack_a(a, M, K, i0, mb, k0, kc, ap);
        for (int64_t js = 0; js < nb; js += NR)
            for (int64_t is = 0; is < mb; is += MR) {{
                alignas(64) float acc[MR * NR];
                micro_kernel(ap + is * kc, bp + js * kc, kc, acc);
                const int64_t rows = std::min(MR, mb - is), cols = std::min(NR, nb - js);
                for (int64_t r = 0; r < rows; ++r) {{
                    float* __restrict__ crow = c + (i0 + is + r) * N + j0 + js;
                    const float* __restrict__ arow = acc + r * NR;
                    {store_simd}
                    for (int64_t q = 0; q < cols; ++q) {{
                        float v = first ? arow[q] : crow[q] + arow[q];
                        crow[q] = last ? epilogue(v, j0 + js + q{extra_arguments}) : v;
                    }}
                }}
            }}
    }}
}}"""


def _driver(header: str, b_stride: str, parallel: bool, extra_arguments: str) -> str:
    """The kernel's entry: tiles (and, when too few, splits of K) shared among the threads."""
    omp_region = "#pragma omp parallel" if parallel else ""
    omp_for = "#pragma omp for schedule(dynamic, 1)" if parallel else ""
    splits = (
        "tiles < 2 * omp_get_max_threads() && K >= 2 * KC ? std::min<int64_t>(omp_get_max_threads(), K / KC) : 1"
        if parallel
        else "1"
    )
    omp_for_reduce = "#pragma omp parallel for schedule(static)" if parallel else ""
    return f"""{header} {{
    const int64_t row_tiles = (M + MB - 1) / MB, column_tiles = (N + NB - 1) / NB;
    const int64_t tiles = batch * row_tiles * column_tiles;
    // Too few tiles to keep the threads busy (a small C with a long K): the threads also split K into
    // whole panels, sum into private copies of C, and add the copies in a fixed order.
    const int64_t splits = {splits};
    const int64_t k_chunk = ((K + splits - 1) / splits + KC - 1) / KC * KC;
    float* partial = splits > 1 ? static_cast<float*>(std::malloc(sizeof(float) * splits * batch * M * N)) : nullptr;
    {omp_region}
    {{
        // Per-thread packing buffers, padded to whole strips.
        float* ap = static_cast<float*>(std::aligned_alloc(64, sizeof(float) * (MB + MR) * KC + 64));
        float* bp = static_cast<float*>(std::aligned_alloc(64, sizeof(float) * (NB + NR) * KC + 64));
        {omp_for}
        for (int64_t t = 0; t < tiles * splits; ++t) {{
            const int64_t split = t / tiles, bi = t % tiles / (row_tiles * column_tiles);
            const int64_t rest = t % (row_tiles * column_tiles);
            const int64_t i0 = (rest / column_tiles) * MB, j0 = (rest % column_tiles) * NB;
            const int64_t k_begin = std::min(K, split * k_chunk), k_end = std::min(K, k_begin + k_chunk);
            float* out = splits > 1 ? partial + split * batch * M * N : c;
            if (k_begin < k_end)
                tile(a + bi * M * K, b + bi * {b_stride}, out + bi * M * N{extra_arguments}, M, N, K, i0, j0,
                     k_begin, k_end, splits == 1, ap, bp);
        }}
        std::free(ap);
        std::free(bp);
    }}
    if (splits > 1) {{
        const int64_t used = (K + k_chunk - 1) / k_chunk;  // splits with a non-empty K range
        {omp_for_reduce}
        for (int64_t x = 0; x < batch * M * N; ++x) {{
            float v = partial[x];
            for (int64_t split = 1; split < used; ++split) v += partial[split * batch * M * N + x];
            c[x] = epilogue(v, x % N{extra_arguments});
        }}
        std::free(partial);
    }}
}}"""
