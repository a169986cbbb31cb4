"""The matmul recipe's kernels that stream B instead of packing it: dot products (a matrix-vector
product, the plain ``block`` 0 version, a few rows against a transposed B) and a few rows against B
stored by rows; and the adding of the threads' partial sums of C, which the blocked kernel's K split
shares. Each writes the body of ``matmul(...)`` as :func:`~pragma_core.offline.recipes._matmul_kernels.matmul_kernel`
describes, through ``load_a``, ``load_b``, ``keep`` and ``epilogue``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

__all__ = [
    "SKINNY_ROWS",
    "SKINNY_TRANSPOSED_ROWS",
    "skinny",
    "column_blocked_kernel",
    "row_blocked_kernel",
    "row_stream_kernel",
    "sums_added",
]

SKINNY_ROWS = 8
"""Rows of A up to which a product with B stored by rows streams B instead of packing its panels:
packing costs more than the few rows that would reuse them. Whole rows of B are streamed into
per-thread sums over ranges of K (:func:`row_stream_kernel`). Measured on a Zen 5 (2 cores,
AVX-512), 4096 x 4096 B, packed against streamed (eager): 1 row 5.3 against 1.2 ms (2.6), 2 rows
1.3 (5.8), 4 rows 5.6 against 1.6 (5.7), 8 rows 6.7 against 2.6 (6.6); blocks of 512 of C's
columns shared among the threads were no faster than packing (4 rows: 5.6 ms)."""

SKINNY_TRANSPOSED_ROWS = 16
"""The same for B stored transposed (``nn.Linear``'s weight): up to this many rows the dot products
of :func:`column_blocked_kernel` run instead of the packed kernel. Measured in process on a 2-core
Xeon with AVX-512 (2026-12-03), ``nn.Linear(4096, 4096)``, against eager: 1 row 1.24 against
1.21 ms, 4 rows 1.28 against 2.43, 8 rows 2.10 against 3.68, 12 rows 2.88 against 4.89, 16 rows
3.61 against 4.32 (packed: 5.4 to 7.6), 24 rows 5.26 against 4.79. The earlier kernel, one dot
product at a time, took 3.45 ms at 4 rows and 6.22 at 8: a single vector sum waits on the FMA's
latency."""


def skinny(facts: Mapping[str, Any]) -> bool:
    """Whether the product has few rows for its layout of B (:data:`SKINNY_ROWS`,
    :data:`SKINNY_TRANSPOSED_ROWS`), N above one (a matrix-vector product has its own kernel) and
    no triangle."""
    most = SKINNY_TRANSPOSED_ROWS if facts["b"]["transposed"] else SKINNY_ROWS
    return facts["m"] <= most and facts["n"] > 1 and facts.get("triangle") is None


def row_stream_kernel(header: str, b_stride: str, parallel: bool, simd: bool, extra_arguments: str) -> str:
    """A few rows of A against B stored by rows: each thread takes a range of K and adds rows of B,
    four at a time, scaled by A's columns, into its own sums of all of C (B is read once, in whole
    contiguous rows); the threads' sums are then added in a fixed order and finished."""
    region = "#pragma omp parallel" if parallel else ""
    share = "#pragma omp for schedule(static)" if parallel else ""
    reduce = "#pragma omp parallel for schedule(static)" if parallel else ""
    threads = "omp_get_max_threads()" if parallel else "1"
    vector = "#pragma omp simd" if simd else ""
    return f"""{header} {{
    const int64_t parts = std::max<int64_t>(1, std::min<int64_t>({threads}, K / 64));
    float* sums = static_cast<float*>(std::calloc(parts * batch * M * N, sizeof(float)));
    {region}
    {{
        {share}
        for (int64_t part = 0; part < parts; ++part) {{
            const int64_t k_begin = part * K / parts, k_end = (part + 1) * K / parts;
            for (int64_t bi = 0; bi < batch; ++bi) {{
                const float* __restrict__ ab = a + bi * M * K;
                const float* __restrict__ bb = b + bi * {b_stride};
                float* __restrict__ own = sums + (part * batch + bi) * M * N;
                int64_t k = k_begin;
                for (; k + 4 <= k_end; k += 4) {{
                    const float* __restrict__ b0 = bb + k * N;
                    const float* __restrict__ b1 = b0 + N;
                    const float* __restrict__ b2 = b1 + N;
                    const float* __restrict__ b3 = b2 + N;
                    for (int64_t i = 0; i < M; ++i) {{
                        const float a0 = load_a(ab, i, k, M, K), a1 = load_a(ab, i, k + 1, M, K);
                        const float a2 = load_a(ab, i, k + 2, M, K), a3 = load_a(ab, i, k + 3, M, K);
                        float* __restrict__ row = own + i * N;
                        {vector}
                        for (int64_t j = 0; j < N; ++j) row[j] += a0 * b0[j] + a1 * b1[j] + a2 * b2[j] + a3 * b3[j];
                    }}
                }}
                for (; k < k_end; ++k)
                    for (int64_t i = 0; i < M; ++i) {{
                        const float ak = load_a(ab, i, k, M, K);
                        const float* __restrict__ bk = bb + k * N;
                        float* __restrict__ row = own + i * N;
                        {vector}
                        for (int64_t j = 0; j < N; ++j) row[j] += ak * bk[j];
                    }}
            }}
        }}
    }}
{sums_added("sums", "parts", reduce, extra_arguments, "    ")}
    std::free(sums);
}}
"""


def sums_added(sums: str, parts: str, omp: str, extra_arguments: str, indent: str) -> str:
    """C++: ``parts`` copies of C's sums in ``sums`` (the threads' shares of K) added in a fixed order,
    each finished (the kept triangle, the epilogue) into C."""
    loop = f"""{omp}
for (int64_t x = 0; x < batch * M * N; ++x) {{
    float v = {sums}[x];
    for (int64_t part = 1; part < {parts}; ++part) v += {sums}[part * batch * M * N + x];
    c[x] = keep(x / N % M, x % N) ? epilogue(v, x % N{extra_arguments}) : 0.0f;
}}"""
    return textwrap.indent(loop, indent)


def row_blocked_kernel(
    header: str,
    b_stride: str,
    parallel: bool,
    simd: bool,
    accumulators: int,
    extra_arguments: str,
    partial: str,
) -> str:
    """Unblocked: each output is one dot product over K, summed in ``partial`` precision over
    panels of ``KP`` and in double across panels (long sums stay far inside the tolerance, which the reference's
    own rounding already uses much of); ``accumulators`` rows at a time share the loads of B. The
    threads share blocks of rows."""
    r = accumulators
    totals = " ".join(f"double s{u} = 0.0;" for u in range(r))
    partials = " ".join(f"{partial} p{u} = 0;" for u in range(r))
    updates = "\n".join(f"                    p{u} += ({partial})load_a(ab, i + {u}, k, M, K) * bk;" for u in range(r))
    adds = " ".join(f"s{u} += p{u};" for u in range(r))
    stores = "\n".join(
        f"                cb[(i + {u}) * N + j] = keep(i + {u}, j) ? epilogue(float(s{u}), j{extra_arguments}) : 0.0f;"
        for u in range(r)
    )
    reduction = f"#pragma omp simd reduction(+:{', '.join(f'p{u}' for u in range(r))})" if simd else ""
    tail_reduction = "#pragma omp simd reduction(+:p)" if simd else ""
    omp = "#pragma omp parallel for schedule(static)" if parallel else ""
    panel = 256 if simd else 32  # vector lanes split a panel 16 ways: each lane sums 16 values
    block = f"""{{
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
            }}"""
    single = f"""{{
                    double s = 0.0;
                    for (int64_t k0 = 0; k0 < K; k0 += KP) {{
                        const int64_t k1 = std::min(k0 + KP, K);
                        {partial} p = 0;
                        {tail_reduction}
                        for (int64_t k = k0; k < k1; ++k) p += ({partial})load_a(ab, row, k, M, K) * load_b(bb, k, j, N, K);
                        s += p;
                    }}
                    cb[row * N + j] = keep(row, j) ? epilogue(float(s), j{extra_arguments}) : 0.0f;
                }}"""
    loops = f"""    const int64_t row_blocks = (M + {r} - 1) / {r};
    {omp}
    for (int64_t task = 0; task < batch * row_blocks; ++task) {{
        const int64_t bi = task / row_blocks, i = (task % row_blocks) * {r};
        const float* __restrict__ ab = a + bi * M * K;
        const float* __restrict__ bb = b + bi * {b_stride};
        float* __restrict__ cb = c + bi * M * N;
        if (i + {r} <= M) {{
            for (int64_t j = 0; j < N; ++j) {block}
        }} else {{
            // The last, partial block of rows: one dot product at a time.
            for (int64_t row = i; row < M; ++row)
                for (int64_t j = 0; j < N; ++j) {single}
        }}
    }}"""
    return f"""constexpr int64_t KP = {panel};  // K panel of one float partial sum

{header} {{
{loops}
}}
"""


def column_blocked_kernel(
    header: str, b_stride: str, parallel: bool, simd: bool, rows: int, accumulators: int, extra_arguments: str
) -> str:
    """A few rows of A against B stored transposed (``nn.Linear``'s weight): the threads share
    blocks of C's columns, and each block's dot products run up to four of the product's ``rows``
    rows of A by as many columns as make one and a half ``accumulators`` sums (the packed
    kernel's register rows: 8 on AVX-512 give 4 x 3, 6 on AVX2 4 x 2), each sum a vector
    register. So one load of B serves several rows and one of A several columns, the sums hide the
    FMA's latency, and B is read once in all. Sums are float over panels of ``KP`` per vector lane
    and double across them."""
    r = max(1, min(rows, 4))
    columns = max(1, accumulators * 3 // 2 // r)
    omp = "#pragma omp parallel for schedule(static)" if parallel else ""

    def block(height: int, width: int) -> str:
        pairs = [(u, v) for u in range(height) for v in range(width)]
        totals = " ".join(f"double s{u}_{v} = 0.0;" for u, v in pairs)
        partials = " ".join(f"float p{u}_{v} = 0;" for u, v in pairs)
        loads_b = " ".join(f"const float b{v} = load_b(bb, k, j + {v}, N, K);" for v in range(width))
        loads_a = " ".join(f"const float a{u} = load_a(ab, i + {u}, k, M, K);" for u in range(height))
        updates = " ".join(f"p{u}_{v} += a{u} * b{v};" for u, v in pairs)
        reduction = f"#pragma omp simd reduction(+:{', '.join(f'p{u}_{v}' for u, v in pairs)})" if simd else ""
        adds = " ".join(f"s{u}_{v} += p{u}_{v};" for u, v in pairs)
        stores = "\n".join(
            f"            cb[(i + {u}) * N + j + {v}] = keep(i + {u}, j + {v}) ? "
            f"epilogue(float(s{u}_{v}), j + {v}{extra_arguments}) : 0.0f;"
            for u, v in pairs
        )
        return f"""{{
            {totals}
            for (int64_t k0 = 0; k0 < K; k0 += KP) {{
                const int64_t k1 = std::min(k0 + KP, K);
                {partials}
                {reduction}
                for (int64_t k = k0; k < k1; ++k) {{
                    {loads_b}
                    {loads_a}
                    {updates}
                }}
                {adds}
            }}
{stores}
        }}"""

    cases = "".join(f"            case {h}: {block(h, columns)} break;\n" for h in range(1, r))
    remainder = f"            switch (M - i) {{\n{cases}            default: break;\n            }}" if r > 1 else ""
    return f"""constexpr int64_t KP = 1024;  // K panel of one float partial sum per vector lane

{header} {{
    constexpr int64_t R = {r}, JB = {columns};
    const int64_t column_blocks = (N + JB - 1) / JB;
    {omp}
    for (int64_t task = 0; task < batch * column_blocks; ++task) {{
        const int64_t bi = task / column_blocks, j0 = (task % column_blocks) * JB;
        const float* __restrict__ ab = a + bi * M * K;
        const float* __restrict__ bb = b + bi * {b_stride};
        float* __restrict__ cb = c + bi * M * N;
        if (j0 + JB <= N) {{
            const int64_t j = j0;
            int64_t i = 0;
            for (; i + R <= M; i += R) {block(r, columns)}
{remainder}
        }} else {{
            // The last, partial block of columns: one column at a time.
            for (int64_t j = j0; j < N; ++j)
                for (int64_t i = 0; i < M; ++i) {block(1, 1)}
        }}
    }}
}}
"""
