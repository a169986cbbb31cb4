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

__all__ = ["SKINNY_ROWS", "skinny", "row_blocked_kernel", "row_stream_kernel", "sums_added"]

SKINNY_ROWS = 8
"""Rows of A up to which a product streams B instead of packing its panels: packing costs more than
the few rows that would reuse them. With B stored transposed (``nn.Linear``'s weight), dot products
over its contiguous rows, one row of A at a time, the threads sharing C's columns; with B stored
by rows, whole rows of B streamed into per-thread sums over ranges of K (:func:`row_stream_kernel`).
Measured on a Zen 5 (2 cores, AVX-512), 4096 x 4096 B, packed against streamed (eager):
transposed, 1 row 5.4 against 1.2 ms (3.1), 2 rows 5.9 and 1.9, 4 rows 5.4 and 2.5, 8 rows 7.3 and
4.4, 16 rows 8.5 and 6.9 (6.8); by rows, 1 row 5.3 against 1.2 ms (2.6), 2 rows 1.3 (5.8), 4 rows
5.6 against 1.6 (5.7), 8 rows 6.7 against 2.6 (6.6). In the dot products, sharing B's loads among
several rows of A was slower than one row at a time (4 rows: 6.2 ms); by rows, blocks of 512 of
C's columns shared among the threads were no faster than packing (4 rows: 5.6 ms)."""


def skinny(facts: Mapping[str, Any]) -> bool:
    """Whether the product has :data:`SKINNY_ROWS` rows or fewer (and N above one: a matrix-vector
    product has its own kernel) and no triangle."""
    return facts["m"] <= SKINNY_ROWS and facts["n"] > 1 and facts.get("triangle") is None


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
    *,
    columns_outer: bool = False,
) -> str:
    """Unblocked: each output is one dot product over K, summed in ``partial`` precision over
    panels of ``KP`` and in double across panels (long sums stay far inside the tolerance, which the reference's
    own rounding already uses much of); ``accumulators`` rows at a time share the loads of B. The
    threads share blocks of rows, or with ``columns_outer`` the columns of C, each column's dot
    products done one row of A at a time while its column of B is in cache (few rows:
    :data:`SKINNY_ROWS`; ``accumulators`` is not used there)."""
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
    if columns_outer:
        loops = f"""    {omp}
    for (int64_t task = 0; task < batch * N; ++task) {{
        const int64_t bi = task / N, j = task % N;
        const float* __restrict__ ab = a + bi * M * K;
        const float* __restrict__ bb = b + bi * {b_stride};
        float* __restrict__ cb = c + bi * M * N;
        for (int64_t row = 0; row < M; ++row) {single}
    }}"""
    else:
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
