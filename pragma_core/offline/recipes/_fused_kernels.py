"""The C++ stage kernels of the fused recipe: one pass over a ``rows x n`` value (the GEMM's output,
rows contiguous) per stage, parallel over rows (columns for batch norm), with the stage's tail
applied as it stores.

    stage_source(index, stage, finish, extra_parameters, parallel, simd)

``finish`` is the C expression of the stored value given ``v`` (the stage's result at the element),
``u`` (its input there), ``j`` (the output column) and ``x`` (the flat output index): the tail's
call, or ``v`` when the tail runs as its own pass (:func:`pointwise_source`). Sums run in double so a
long row stays within the verifier's tolerance of PyTorch's.
"""

from __future__ import annotations

from typing import Any

from .fusion import Stage

__all__ = ["stage_source", "pointwise_source"]


def _loop(parallel: bool) -> str:
    return "#pragma omp parallel for schedule(static)" if parallel else ""


def _simd(simd: bool, reduction: str = "") -> str:
    return f"#pragma omp simd{' reduction(' + reduction + ')' if reduction else ''}" if simd else ""


def pointwise_source(name: str, finish: str, extra_parameters: str, parallel: bool, simd: bool) -> str:
    """``name(in, before, out, count, N, extras...)``: ``out[x] = finish`` with ``v = in[x]`` and
    ``u = before[x]``, the tail of a stage as its own pass."""
    return f"""extern "C" void {name}(const float* __restrict__ in, const float* __restrict__ before, float* __restrict__ out,
        int64_t count, int64_t N{extra_parameters}) {{
    {_loop(parallel)}
    for (int64_t x = 0; x < count; ++x) {{
        const float v = in[x], u = before[x];
        const int64_t j = x % N;
        out[x] = {finish};
    }}
}}
"""


def stage_source(index: int, stage: Stage, finish: str, extra_parameters: str, parallel: bool, simd: bool) -> str:
    """``stage{index}(in, out, R, N, ...)``: the stage's pass; the parameters after ``N`` are the
    stage's own (norm weights, running stats, as :mod:`.fused` passes them), then the tail's extras."""
    name = f"stage{index}"
    if stage.kind == "row_reduce":
        return _row_reduce(name, stage, finish, extra_parameters, parallel, simd)
    if stage.kind == "row_norm":
        return _row_norm(name, stage, finish, extra_parameters, parallel, simd)
    if stage.kind == "column_norm":
        return _column_norm(name, stage, finish, extra_parameters, parallel, simd)
    return _row_pool(name, stage, finish, extra_parameters, parallel)


_REDUCE = {
    "sum": ("double s = 0.0;", "+:s", "s += row[t];", "float v = float(s);"),
    "mean": ("double s = 0.0;", "+:s", "s += row[t];", "float v = float(s / double(N));"),
    "max": ("float m = -INFINITY;", "max:m", "m = std::fmax(m, row[t]);", "float v = m;"),
    "amax": ("float m = -INFINITY;", "max:m", "m = std::fmax(m, row[t]);", "float v = m;"),
    "min": ("float m = INFINITY;", "min:m", "m = std::fmin(m, row[t]);", "float v = m;"),
    "amin": ("float m = INFINITY;", "min:m", "m = std::fmin(m, row[t]);", "float v = m;"),
}


def _row_max(simd: bool) -> str:
    return f"""float m = -INFINITY;
        {_simd(simd, "max:m")}
        for (int64_t t = 0; t < N; ++t) m = std::fmax(m, row[t]);"""


def _row_reduce(name: str, stage: Stage, finish: str, extras: str, parallel: bool, simd: bool) -> str:
    if stage.op == "logsumexp":
        body = f"""{_row_max(simd)}
        float v = m;
        if (std::isfinite(m)) {{
            double s = 0.0;
            {_simd(simd, "+:s")}
            for (int64_t t = 0; t < N; ++t) s += std::exp(row[t] - m);
            v = m + float(std::log(s));
        }}"""
    else:
        start, reduction, step, result = _REDUCE[stage.op]
        body = f"""{start}
        {_simd(simd, reduction)}
        for (int64_t t = 0; t < N; ++t) {step}
        {result}"""
    return f"""extern "C" void {name}(const float* __restrict__ in, float* __restrict__ out, int64_t R, int64_t N{extras}) {{
    {_loop(parallel)}
    for (int64_t r = 0; r < R; ++r) {{
        const float* row = in + r * N;
        {body}
        const int64_t j = 0, x = r;
        const float u = in[x];
        out[x] = {finish};
    }}
}}
"""


def _affine_parameters(options: dict[str, Any]) -> str:
    return "".join(f", const float* __restrict__ {name[0]}" for name in ("weight", "bias") if options.get(name))


def _affine(options: dict[str, Any], value: str) -> str:
    if options.get("weight"):
        value = f"{value} * w[j]"
    if options.get("bias"):
        value = f"{value} + b[j]"
    return value


def _row_norm(name: str, stage: Stage, finish: str, extras: str, parallel: bool, simd: bool) -> str:
    options = stage.options
    if stage.op in ("softmax", "log_softmax"):
        result = "(row[j] - m) - float(std::log(s))" if stage.op == "log_softmax" else "float(std::exp(row[j] - m) / s)"
        body = f"""{_row_max(simd)}
        double s = 0.0;
        {_simd(simd, "+:s")}
        for (int64_t t = 0; t < N; ++t) s += std::exp(row[t] - m);
        for (int64_t j = 0; j < N; ++j) {{
            const int64_t x = r * N + j;
            const float v = {result}, u = in[x];
            out[x] = {finish};
        }}"""
        parameters = ""
    else:
        groups = int(options["groups"])
        body = f"""const int64_t C = N / {groups};
        for (int64_t g = 0; g < {groups}; ++g) {{
            const float* span = row + g * C;
            double s = 0.0;
            {_simd(simd, "+:s")}
            for (int64_t t = 0; t < C; ++t) s += span[t];
            const double mean = s / double(C);
            double q = 0.0;
            {_simd(simd, "+:q")}
            for (int64_t t = 0; t < C; ++t) q += (span[t] - mean) * (span[t] - mean);
            const float mu = float(mean), inv = float(1.0 / std::sqrt(q / double(C) + {float(options["eps"])!r}));
            for (int64_t j = g * C; j < (g + 1) * C; ++j) {{
                const int64_t x = r * N + j;
                const float v = {_affine(options, "(row[j] - mu) * inv")}, u = in[x];
                out[x] = {finish};
            }}
        }}"""
        parameters = _affine_parameters(options)
    return f"""extern "C" void {name}(const float* __restrict__ in, float* __restrict__ out, int64_t R, int64_t N{parameters}{extras}) {{
    {_loop(parallel)}
    for (int64_t r = 0; r < R; ++r) {{
        const float* row = in + r * N;
        {body}
    }}
}}
"""


_COLUMN_BLOCK = 64
"""Columns per work item of batch norm's statistics: rows are read contiguously a block at a time."""


def _column_norm(name: str, stage: Stage, finish: str, extras: str, parallel: bool, simd: bool) -> str:
    options = stage.options
    parameters = _affine_parameters(options)
    block = _COLUMN_BLOCK
    return f"""// Batch norm over the rows of each column: batch statistics (updating the running ones like torch)
// in training mode, the running statistics in evaluation mode. momentum < 0 is torch's None (a
// cumulative average).
extern "C" void {name}(const float* __restrict__ in, float* __restrict__ out, int64_t R, int64_t N{parameters},
        float* __restrict__ running_mean, float* __restrict__ running_var, int64_t* __restrict__ tracked,
        bool training, double momentum{extras}) {{
    if (training) tracked[0] += 1;
    const double factor = momentum < 0.0 ? 1.0 / double(tracked[0]) : momentum;
    {_loop(parallel)}
    for (int64_t j0 = 0; j0 < N; j0 += {block}) {{
        const int64_t width = std::min<int64_t>({block}, N - j0);
        float mu[{block}], inv[{block}];
        if (training) {{
            double s[{block}] = {{0.0}}, q[{block}] = {{0.0}};
            for (int64_t r = 0; r < R; ++r) {{
                {_simd(simd)}
                for (int64_t t = 0; t < width; ++t) s[t] += in[r * N + j0 + t];
            }}
            for (int64_t t = 0; t < width; ++t) s[t] /= double(R);
            for (int64_t r = 0; r < R; ++r) {{
                {_simd(simd)}
                for (int64_t t = 0; t < width; ++t) {{
                    const double d = in[r * N + j0 + t] - s[t];
                    q[t] += d * d;
                }}
            }}
            for (int64_t t = 0; t < width; ++t) {{
                const double var = q[t] / double(R);
                mu[t] = float(s[t]);
                inv[t] = float(1.0 / std::sqrt(var + {float(options["eps"])!r}));
                const double unbiased = R > 1 ? q[t] / double(R - 1) : var;
                running_mean[j0 + t] = float((1.0 - factor) * running_mean[j0 + t] + factor * s[t]);
                running_var[j0 + t] = float((1.0 - factor) * running_var[j0 + t] + factor * unbiased);
            }}
        }} else {{
            for (int64_t t = 0; t < width; ++t) {{
                mu[t] = running_mean[j0 + t];
                inv[t] = float(1.0 / std::sqrt(double(running_var[j0 + t]) + {float(options["eps"])!r}));
            }}
        }}
        for (int64_t r = 0; r < R; ++r) {{
            for (int64_t t = 0; t < width; ++t) {{
                const int64_t j = j0 + t, x = r * N + j;
                const float v = {_affine(options, "(in[x] - mu[t]) * inv[t]")}, u = in[x];
                out[x] = {finish};
            }}
        }}
    }}
}}
"""


def _row_pool(name: str, stage: Stage, finish: str, extras: str, parallel: bool) -> str:
    kernel, stride = int(stage.options["kernel"]), int(stage.options["stride"])
    if stage.op == "max_pool1d":
        start, step, result = "float m = -INFINITY;", "m = std::fmax(m, window[t]);", "m"
    else:
        start, step, result = "float m = 0.0f;", "m += window[t];", f"m / {float(kernel)!r}f"
    return f"""extern "C" void {name}(const float* __restrict__ in, float* __restrict__ out, int64_t R, int64_t N,
        int64_t NO{extras}) {{
    {_loop(parallel)}
    for (int64_t r = 0; r < R; ++r) {{
        for (int64_t j = 0; j < NO; ++j) {{
            const float* window = in + r * N + j * {stride};
            {start}
            for (int64_t t = 0; t < {kernel}; ++t) {step}
            const int64_t x = r * NO + j;
            const float v = {result}, u = in[x];
            out[x] = {finish};
        }}
    }}
}}
"""
