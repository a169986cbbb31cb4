"""Time to build and load a small C++ kernel, cold and cached, along each native path.

The kernel is a ~30-line fused bias + GELU + residual over column tiles, written for each path:
``extern "C"`` through :func:`pragma_core.native.load_library` (the fast path), pybind11 through
:func:`pragma_core.native.load_extension` (numpy buffers, and ``torch=True`` with tensors), and
KernelBench's ``torch.utils.cpp_extension.load_inline``. Every run happens in a fresh Python
process that imports torch and the loader first and times only the build-and-load call, so no
in-process cache hides a cost. A cold run starts from an empty cache folder (``PRAGMA_CACHE_DIR``,
or ``TORCH_EXTENSIONS_DIR`` for ``load_inline``); a cached run reuses the folder of the cold runs.
Each run also checks the kernel's output against PyTorch. Prints a table of medians and how the
fast path compares with its targets: under 1 s cold and under 20 ms cached.

    python benchmarks/compile_latency.py [--skip-torch]

``--skip-torch`` leaves out the two paths that compile torch's headers (about 40 s per cold run).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from rich.console import Console
from rich.table import Table

COLD_TARGET_S, CACHED_TARGET_MS = 1.0, 20.0

KERNEL = r"""
#include <cmath>
#include <cstdint>

// out[r, c] = scale * (gelu(x[r, c] + bias[c]) + residual[r, c]), over tiles of columns
static inline float gelu(float v) {
    const float k = 0.7978845608f;
    return 0.5f * v * (1.f + std::tanh(k * (v + 0.044715f * v * v * v)));
}

static void fused_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                         const float* __restrict__ residual, float* __restrict__ out,
                         int64_t rows, int64_t cols, float scale) {
    constexpr int64_t TILE = 256;
    const int64_t tiles = (cols + TILE - 1) / TILE;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t t = 0; t < tiles; ++t) {
            const int64_t begin = t * TILE;
            const int64_t end = begin + TILE < cols ? begin + TILE : cols;
            const float* xr = x + r * cols;
            const float* rr = residual + r * cols;
            float* orow = out + r * cols;
            #pragma omp simd
            for (int64_t c = begin; c < end; ++c)
                orow[c] = scale * (gelu(xr[c] + bias[c]) + rr[c]);
        }
    }
}
"""

FAST_PATH = (
    KERNEL
    + r"""
extern "C" void fused(const float* x, const float* bias, const float* residual, float* out,
                      int64_t rows, int64_t cols, float scale) {
    fused_kernel(x, bias, residual, out, rows, cols, scale);
}
"""
)

PYBIND11 = (
    KERNEL
    + r"""
#include <pybind11/pybind11.h>
#include <pybind11/numpy.h>
namespace py = pybind11;
using Array = py::array_t<float, py::array::c_style>;

void fused(Array x, Array bias, Array residual, Array out, float scale) {
    fused_kernel(x.data(), bias.data(), residual.data(), out.mutable_data(), x.shape(0), x.shape(1), scale);
}
PYBIND11_MODULE(fused_ext, m) { m.def("fused", &fused); }
"""
)

TORCH_SOURCE = (
    KERNEL
    + r"""
#include <torch/extension.h>
torch::Tensor fused(torch::Tensor x, torch::Tensor bias, torch::Tensor residual, double scale) {
    auto out = torch::empty_like(x);
    fused_kernel(x.data_ptr<float>(), bias.data_ptr<float>(), residual.data_ptr<float>(),
                 out.data_ptr<float>(), x.size(0), x.size(1), static_cast<float>(scale));
    return out;
}
"""
)

PYBIND11_TORCH = TORCH_SOURCE + 'PYBIND11_MODULE(fused_torch_ext, m) { m.def("fused", &fused); }\n'

INLINE_DECLARATION = "torch::Tensor fused(torch::Tensor x, torch::Tensor bias, torch::Tensor residual, double scale);"

# path -> (label, cold runs, cached runs, needs torch's headers)
PATHS = {
    "fast": ('fast path: load_library (extern "C" + ctypes)', 5, 5, False),
    "pybind11": ("pybind11: load_extension (numpy buffers)", 3, 3, False),
    "pybind11-torch": ("pybind11: load_extension(torch=True)", 1, 2, True),
    "load_inline": ("torch.utils.cpp_extension.load_inline", 1, 2, True),
}


def child(path: str) -> None:
    """Runs in a fresh process: import, time one build-and-load, check the output, print JSON."""
    import torch

    from pragma_core.native import load_extension, load_library

    if path == "load_inline":
        from torch.utils.cpp_extension import load_inline

    rows, cols, scale = 64, 1000, 0.5
    x, bias, residual = torch.randn(rows, cols), torch.randn(cols), torch.randn(rows, cols)
    start = time.perf_counter()
    if path == "fast":
        lib = load_library(FAST_PATH)
    elif path == "pybind11":
        ext = load_extension(PYBIND11, name="fused_ext")
    elif path == "pybind11-torch":
        ext = load_extension(PYBIND11_TORCH, name="fused_torch_ext", torch=True)
    else:
        ext = load_inline(
            name="fused_inline",
            cpp_sources=[INLINE_DECLARATION, TORCH_SOURCE],
            functions=["fused"],
            extra_cflags=["-O3", "-march=native", "-fopenmp"],
            extra_ldflags=["-fopenmp"],
        )
    elapsed = time.perf_counter() - start

    if path == "fast":
        out = torch.empty_like(x)
        lib.fused(x, bias, residual, out, rows, cols, scale)
    elif path == "pybind11":
        out = torch.empty_like(x)
        ext.fused(x.numpy(), bias.numpy(), residual.numpy(), out.numpy(), scale)
    else:
        out = ext.fused(x, bias, residual, scale)
    expected = scale * (torch.nn.functional.gelu(x + bias, approximate="tanh") + residual)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
    print(json.dumps({"seconds": elapsed}))


def run_child(path: str, cache: str) -> float:
    variable = "TORCH_EXTENSIONS_DIR" if path == "load_inline" else "PRAGMA_CACHE_DIR"
    env = os.environ | {variable: cache}
    result = subprocess.run(
        [sys.executable, __file__, "--child", path], env=env, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise SystemExit(f"{path} run failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])["seconds"]


def measure(path: str, cold_runs: int, cached_runs: int, console: Console) -> tuple[list[float], list[float]]:
    cold, cached = [], []
    with tempfile.TemporaryDirectory(prefix="pragma-compile-latency-") as root:
        for run in range(cold_runs):
            cache = os.path.join(root, f"cold-{run}")  # a fresh, empty cache each cold run
            cold.append(run_child(path, cache))
            console.log(f"{path}: cold run {run + 1}/{cold_runs}: {cold[-1]:.3f} s")
        warm = os.path.join(root, "cold-0")
        for run in range(cached_runs):
            cached.append(run_child(path, warm))
            console.log(f"{path}: cached run {run + 1}/{cached_runs}: {cached[-1] * 1e3:.1f} ms")
    return cold, cached


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-torch", action="store_true", help="leave out the paths that compile torch's headers")
    parser.add_argument("--child", choices=sorted(PATHS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return

    console = Console(width=120)
    table = Table(title=f"build and load of a ~30-line kernel, median over fresh processes ({os.cpu_count()} cores)")
    for column in ("path", "cold median s", "cached median ms", "runs"):
        table.add_column(column, justify="left" if column == "path" else "right", no_wrap=True)
    results = {}
    for path, (label, cold_runs, cached_runs, needs_torch) in PATHS.items():
        if needs_torch and args.skip_torch:
            continue
        cold, cached = measure(path, cold_runs, cached_runs, console)
        results[path] = (statistics.median(cold), statistics.median(cached) * 1e3)
        table.add_row(
            label, f"{results[path][0]:.2f}", f"{results[path][1]:.1f}", f"{cold_runs} cold + {cached_runs} cached"
        )
    console.print(table)

    cold_s, cached_ms = results["fast"]
    verdict = "meets" if cold_s < COLD_TARGET_S and cached_ms < CACHED_TARGET_MS else "MISSES"
    line = (
        f"fast path {verdict} its targets: cold {cold_s:.2f} s (target < {COLD_TARGET_S:.0f} s), "
        f"cached {cached_ms:.1f} ms (target < {CACHED_TARGET_MS:.0f} ms)"
    )
    if "load_inline" in results:
        inline_s, inline_ms = results["load_inline"]
        line += (
            f"; {inline_s / cold_s:.0f}x faster cold and {inline_ms / cached_ms:.0f}x faster cached than load_inline"
        )
    console.print(line)


if __name__ == "__main__":
    main()
