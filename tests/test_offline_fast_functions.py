"""The inline ``exp`` and ``erf`` that fast math puts in generated kernels: compiled as a kernel
is, vectorized, and within the verifier's tolerance over every float a kernel may meet."""

from __future__ import annotations

import torch

from pragma_core.native import load_library
from pragma_core.offline.fast_functions import with_fast_functions

KERNELS = """
#include <cstdint>
extern "C" void exps(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
    #pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = std::exp(x[i]);
}
extern "C" void mishes(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
    #pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = fast_mish(x[i]);
}
extern "C" void erfs(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
    #pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = std::erf(x[i]);
}
"""


def fast_library():
    return load_library(with_fast_functions(KERNELS), flags=["-ffast-math"])


def test_exp_is_within_a_float_rounding_of_the_exact_value_where_floats_hold_it():
    lib = fast_library()
    x = torch.linspace(-87.3, 88.3, 1_000_003)
    out = torch.empty_like(x)
    lib.exps(x, out, x.numel())
    exact = torch.exp(x.double())
    assert ((out.double() - exact).abs() / exact).max() < 4e-7
    top = torch.linspace(88.3, 88.72, 1001)
    lib.exps(top, out[:1001], top.numel())
    assert ((out[:1001].double() - torch.exp(top.double())).abs() / torch.exp(top.double())).max() < 1e-4


def test_exp_stays_finite_and_ordered_past_the_float_range():
    lib = fast_library()
    x = torch.tensor([-1e30, -200.0, -88.0, 89.0, 200.0, 1e30])
    out = torch.empty_like(x)
    lib.exps(x, out, x.numel())
    assert out[:3].abs().max() < 2e-38 and torch.isfinite(out).all() and (out[3:] > 3e38).all()


def test_erf_is_within_the_tolerance_everywhere_and_odd():
    lib = fast_library()
    x = torch.linspace(-12.0, 12.0, 1_000_003)
    out = torch.empty_like(x)
    lib.erfs(x, out, x.numel())
    assert (out.double() - torch.erf(x.double())).abs().max() < 1e-6
    mirrored = torch.empty_like(x)
    lib.erfs(-x, mirrored, x.numel())
    assert torch.equal(mirrored, -out)


def test_mish_in_one_exp_is_within_the_tolerance_everywhere():
    lib = fast_library()
    x = torch.linspace(-100.0, 100.0, 1_000_003)
    out = torch.empty_like(x)
    lib.mishes(x, out, x.numel())
    exact = torch.nn.functional.mish(x.double())
    assert ((out.double() - exact).abs() / (1.0 + exact.abs())).max() < 1e-6


def test_only_the_calls_it_replaces_change():
    source = "float a = std::exp(x) + std::expm1(y) + std::erf(z) + std::exp2(w) + std::tanh(v);"
    fast = with_fast_functions(source)
    assert fast.endswith("float a = fast_exp(x) + std::expm1(y) + fast_erf(z) + std::exp2(w) + std::tanh(v);")
    assert with_fast_functions("float a = std::tanh(v);") == "float a = std::tanh(v);"
