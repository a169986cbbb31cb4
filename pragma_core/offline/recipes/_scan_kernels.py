"""The C++ of the scan recipe: ``scan`` over a tensor viewed as (outer, n, inner), running in double
and rounding each output. Along the last dim each row is split into ``accumulators`` chunks that
advance together from their carries; along another dim the inner dim is walked contiguously,
``block`` columns at a time.

    cpp = scan_kernel(match.facts, knobs, rows_last=dim == rank - 1)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["scan_kernel"]


def scan_kernel(facts: dict[str, Any], knobs: Mapping[str, Any], *, rows_last: bool) -> str:
    """The C++ source: ``scan(x, [mask,] out, outer, n_in, n_out, inner)`` on contiguous tensors of
    shape (outer, n_in, inner) and (outer, n_out, inner)."""
    prod = facts["op"] == "prod"
    identity, combine = ("1.0", "*=") if prod else ("0.0", "+=")
    masked, reverse, exclusive = bool(facts["mask"]), facts["reverse"], facts["exclusive"]
    parameters = ", ".join(
        ["const float* __restrict__ x"]
        + (["const bool* __restrict__ mask"] if masked else [])
        + ["float* __restrict__ out", "int64_t outer", "int64_t n_in", "int64_t n_out", "int64_t inner"]
    )
    simd = "#pragma omp simd" if knobs["simd"] else ""
    parallel = "#pragma omp parallel for schedule(static)" if knobs["parallel"] else ""

    def load(values: str, flags: str, index: str) -> str:
        """The scanned value ``values[index]`` as a double; masked, ``x * mask`` in float as the
        reference computes it (0 where the flag is false, NaN for an infinite x), with no branch
        for a random mask to mispredict."""
        if masked:
            return f"(double)({values}[{index}] * (float){flags}[{index}])"
        return f"(double){values}[{index}]"

    if rows_last:
        body = _rows_body(knobs, identity, combine, load, masked, simd, parallel, reverse, exclusive, prod)
    else:
        body = _columns_body(knobs, identity, combine, load, masked, simd, reverse, exclusive)
    return f"""
#include <algorithm>
#include <cstdint>
#include <vector>

// {"Product" if prod else "Sum"} scan{" (reversed)" if reverse else ""}{" (exclusive)" if exclusive else ""} \
in double, like PyTorch; each output rounded to float.
extern "C" void scan({parameters}) {{
    if (n_out <= 0) return;
    const int64_t m = n_out{" - 1" if exclusive else ""};  // inputs scanned per row
{body}
}}
"""


def _rows_body(
    knobs: Mapping[str, Any],
    identity: str,
    combine: str,
    load: Callable[[str, str, str], str],
    masked: bool,
    simd: str,
    parallel: str,
    reverse: bool,
    exclusive: bool,
    prod: bool,
) -> str:
    """Rows scanned along the last dim (inner == 1): ``accumulators`` chunks per row advance together."""
    chains = int(knobs["accumulators"])
    at = (lambda p: f"m - 1 - {p}") if reverse else (lambda p: p)

    def value(index: str) -> str:
        return load("xr", "mr", at(index))

    row = [
        "const float* xr = x + r * n_in;",
        *(["const bool* mr = mask + r * n_in;"] if masked else []),
        "float* o = out + r * n_out;",
        *([f"o[0] = {identity}f;  // the exclusive scan starts at the identity", "++o;"] if exclusive else []),
    ]
    sequential = [
        f"double acc = {identity};",
        "for (int64_t j = 0; j < m; ++j) {",
        f"    acc {combine} {value('j')};",
        f"    o[{at('j')}] = (float)acc;",
        "}",
    ]
    if chains == 1:
        return _body([parallel, "for (int64_t r = 0; r < outer; ++r) {", *_nested(*row, *sequential), "}"])
    reduction = f"{simd} reduction({'*' if prod else '+'}:total)" if simd else ""
    chained = [
        "const int64_t len = m / A;  // chunk length; the last chunk also takes the remainder",
        "if (len == 0) {",
        *_nested(*sequential, "continue;"),
        "}",
        "// Carries: the total of the chunks before each one.",
        "double acc[A];",
        f"acc[0] = {identity};",
        "for (int c = 1; c < A; ++c) {",
        f"    double total = {identity};",
        f"    {reduction}",
        "    for (int64_t j = (c - 1) * len; j < c * len; ++j) {",
        f"        total {combine} {value('j')};",
        "    }",
        f"    acc[c] = acc[c - 1] {combine[0]} total;",
        "}",
        "// The chunks advance together: A independent dependency chains.",
        "for (int64_t j = 0; j < len; ++j) {",
        "    for (int c = 0; c < A; ++c) {",
        "        const int64_t p = c * len + j;",
        f"        acc[c] {combine} {value('p')};",
        f"        o[{at('p')}] = (float)acc[c];",
        "    }",
        "}",
        "for (int64_t p = A * len; p < m; ++p) {  // the last chunk's remainder",
        f"    acc[A - 1] {combine} {value('p')};",
        f"    o[{at('p')}] = (float)acc[A - 1];",
        "}",
    ]
    return _body(
        [
            f"constexpr int A = {chains};  // chunks per row, scanned as independent chains",
            parallel,
            "for (int64_t r = 0; r < outer; ++r) {",
            *_nested(*row, *chained),
            "}",
        ]
    )


def _nested(*lines: str) -> list[str]:
    """``lines`` one level (four spaces) deeper; blank ones (an absent pragma) dropped."""
    return ["    " + line for line in lines if line.strip()]


def _body(lines: list[str]) -> str:
    """The statements of the kernel's body, indented inside the function."""
    return "\n".join(_nested(*lines))


def _columns_body(
    knobs: Mapping[str, Any],
    identity: str,
    combine: str,
    load: Callable[[str, str, str], str],
    masked: bool,
    simd: str,
    reverse: bool,
    exclusive: bool,
) -> str:
    """A middle dim scanned: each step adds a contiguous run of ``block`` inner columns (all of them
    at block 0) to a row of running values."""
    block = int(knobs["block"])
    at = "m - 1 - j" if reverse else "j"
    tile = f"{block}" if block else "inner"
    value = load("xj", "mj", "i")
    parallel = bool(knobs["parallel"])
    step = [
        f"const float* xj = xb + ({at}) * inner;",
        *([f"const bool* mj = mb + ({at}) * inner;"] if masked else []),
        f"float* oj = ob + ({at}) * inner;",
        simd,
        "for (int64_t i = 0; i < w; ++i) {",
        f"    acc[i] {combine} {value};",
        "    oj[i] = (float)acc[i];",
        "}",
    ]
    column_run = [
        "const int64_t b = t / tiles, i0 = (t % tiles) * tile;",
        "const int64_t w = std::min(tile, inner - i0);",
        "const float* xb = x + b * n_in * inner + i0;",
        *(["const bool* mb = mask + b * n_in * inner + i0;"] if masked else []),
        "float* ob = out + b * n_out * inner + i0;",
        *(
            [
                f"for (int64_t i = 0; i < w; ++i) ob[i] = {identity}f;  // the exclusive scan starts at the identity",
                "ob += inner;",
            ]
            if exclusive
            else []
        ),
        f"for (int64_t i = 0; i < w; ++i) acc[i] = {identity};",
        "for (int64_t j = 0; j < m; ++j) {",
        *_nested(*step),
        "}",
    ]
    return _body(
        [
            f"const int64_t tile = std::min<int64_t>({tile}, inner);  // inner columns per work item",
            "if (tile <= 0) return;",
            "const int64_t tiles = (inner + tile - 1) / tile;",
            "#pragma omp parallel" if parallel else "",
            "{",
            "    std::vector<double> running(tile);  // the running values of one run of columns",
            "    double* __restrict__ acc = running.data();",
            "    #pragma omp for schedule(static)" if parallel else "",
            "    for (int64_t t = 0; t < outer * tiles; ++t) {",
            *_nested(*_nested(*column_run)),
            "    }",
            "}",
        ]
    )
