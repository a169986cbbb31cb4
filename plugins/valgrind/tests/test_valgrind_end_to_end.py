"""pragma profile with cachegrind, end to end: a candidate recorded in the sandbox, replayed natively
under cachegrind, twice with the same counts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pragma_core import load_task
from pragma_core.profiling import profile

TASK = Path(__file__).resolve().parents[3] / "examples" / "tasks" / "level1" / "2_LeakyReLU.py"

CANDIDATE = '''
import torch
import torch.nn as nn
from pragma_core.native import load_library

lib = load_library(r"""
#include <cstdint>
extern "C" void leaky_relu(const float* x, float* out, int64_t n, float slope) {
    #pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : x[i] * slope;
}
""")


class ModelNew(nn.Module):
    def __init__(self, negative_slope):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        out = torch.empty_like(x)
        lib.leaky_relu(x, out, x.numel(), self.negative_slope)
        return out
'''

pytestmark = pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")


def test_profile_gives_kernel_miss_rates_and_the_same_counts_twice(tmp_path, monkeypatch):
    monkeypatch.setenv("PRAGMA_CACHE_DIR", str(tmp_path / "cache"))
    task = load_task(TASK, {"batch_size": 64, "dim": 1024})
    first = profile(task, CANDIDATE, profiler="valgrind", out_dir=tmp_path / "one", threads=1)
    second = profile(task, CANDIDATE, profiler="valgrind", out_dir=tmp_path / "two", threads=1)
    rates = {m.name: m for m in first.metrics if m.kernel == "leaky_relu"}
    assert {"D1 miss rate", "LL miss rate", "Mispred rate"} <= set(rates)
    assert rates["D1 miss rate"].unit == "%" and rates["D1 miss rate"].meaning
    assert [(m.name, m.kernel, m.value) for m in first.metrics] == [(m.name, m.kernel, m.value) for m in second.metrics]
    writes = next(m for m in first.metrics if m.name == "Dw" and m.kernel == "leaky_relu")
    assert writes.value >= 64 * 1024 * 3 / 16  # at least one vector store per 16 floats, 3 replays
    assert (tmp_path / "one" / "cachegrind.out").exists()


def test_the_reference_is_refused_with_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PRAGMA_CACHE_DIR", str(tmp_path / "cache"))
    from pragma_core.errors import ProfilerUnavailable

    task = load_task(TASK, {"batch_size": 64, "dim": 1024})
    with pytest.raises(ProfilerUnavailable, match="cachegrind needs the native fast path"):
        profile(task, None, profiler="valgrind", out_dir=tmp_path / "ref")
