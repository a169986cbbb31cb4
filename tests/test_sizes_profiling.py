"""The reduced profiling size: a task's outer dimensions shrink, its rules and its rates stay."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pragma_core import Availability, Candidate, Profile, Profiler, load_task
from pragma_core.errors import PragmaError
from pragma_core.profiling import profile, targets
from pragma_core.profiling.recordings import Recordings
from pragma_core.sizes.profiling import (
    machine_working_set_bytes,
    profiling_size,
    profiling_task,
    simulated_working_set_bytes,
    size_note,
)
from pragma_core.sizes.shrinking import MIN_INTENSITY_KEPT, MIN_VALUE, shape_constants, shrink_task

from .conftest import EXAMPLES

GELU = EXAMPLES / "level1" / "1_GELUTanh.py"
MATMUL = EXAMPLES / "level1" / "10_Matmul.py"
BATCHED_MATMUL = EXAMPLES / "level1" / "11_BatchedMatmul.py"
FAST_GELU = (EXAMPLES.parent / "candidates" / "1_GELUTanh_fast.py").read_text()
KiB = 1024

ROW_NORM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(features))

    def forward(self, x):
        return x / x.norm(dim=-1, keepdim=True).clamp_min(eps) * self.scale


rows = 256          # the batch: shrinks first
features = 512      # the row each output reads whole: kept
eps = 1e-6


def get_inputs():
    return [torch.randn(rows, features)]


def get_init_inputs():
    return [features]
"""


def _task(tmp_path: Path, source: str, name: str = "row_norm.py", sizes=None):
    path = tmp_path / name
    path.write_text(source)
    return load_task(path, sizes)


def test_the_batch_shrinks_and_the_row_a_kernel_reads_whole_is_kept(tmp_path):
    task = _task(tmp_path, ROW_NORM)  # 256 x 512 floats in and out, 512 floats of scale: 1 MiB + 2 KiB
    assert [(c.name, c.innermost) for c in shape_constants(task)] == [("rows", False), ("features", True)]
    shrunk = shrink_task(task, 256 * KiB)
    assert shrunk.sizes == {"rows": 64}  # the least multiple of 8 whose data is still >= 256 KiB
    assert shrunk.task.sizes == {"rows": 64}
    assert [spec.shape for spec in shrunk.task.analysis.inputs] == [(64, 512)]
    assert shrunk.bytes == shrunk.task.analysis.min_bytes >= 256 * KiB
    assert shrunk.full_bytes == task.analysis.min_bytes
    assert shrunk.note.startswith("rows=64 (of 256): inputs+outputs 258 KiB of 1 MiB")


def test_the_next_dimension_shrinks_only_when_the_batch_is_at_its_floor(tmp_path):
    task = load_task(EXAMPLES / "level1" / "7_SumReduction.py", {"batch_size": 16, "dim1": 64, "dim2": 128})
    assert [c.name for c in shape_constants(task)] == ["batch_size", "dim1", "dim2"]
    shrunk = shrink_task(task, 64 * KiB)  # 512 KiB at the overridden sizes; batch 8 alone leaves 256 KiB
    assert shrunk.sizes == {"batch_size": MIN_VALUE, "dim1": 16}
    assert shrunk.task.sizes == {"batch_size": MIN_VALUE, "dim1": 16, "dim2": 128}
    assert shrunk.task.analysis.inputs[0].shape == (8, 16, 128)


def test_a_task_small_enough_or_without_size_constants_runs_at_its_own_size(tmp_path):
    small = _task(tmp_path, ROW_NORM)
    assert shrink_task(small, 4 * 2**20).sizes == {}
    fixed = _task(tmp_path, ROW_NORM.replace("torch.randn(rows, features)", "torch.randn(256, 512)"), "fixed.py")
    unchanged = shrink_task(fixed, 256 * KiB)
    assert unchanged.task is fixed and unchanged.sizes == {}
    assert "no module-level int constant that sizes its inputs" in unchanged.note
    assert size_note(unchanged).startswith("profiled at the task's full size: the task has no")
    tiny_batch = _task(tmp_path, ROW_NORM.replace("rows = 256", "rows = 4"), "tiny.py", {"features": 65536})
    floor = shrink_task(tiny_batch, 256 * KiB)  # rows is below the floor already; features is the only row
    assert floor.sizes == {"features": 7288}  # 4 x 7288 x 8 B in and out + 4 x 7288 B of scale >= 256 KiB


def test_a_size_the_task_rejects_counts_as_too_small(tmp_path):
    # Valid only for rows >= 100: the search must not settle below that.
    source = ROW_NORM.replace("def get_inputs():\n", "def get_inputs():\n    assert rows >= 100, 'too few rows'\n")
    task = _task(tmp_path, source, "strict.py")
    shrunk = shrink_task(task, 1)
    assert shrunk.sizes == {"rows": 104}  # the least multiple of 8 the task accepts


def test_gpu_tasks_are_profiled_at_their_own_size(tmp_path):
    task = _task(tmp_path, ROW_NORM)
    assert profiling_size(task, device="cuda", working_set_bytes=1).task is task
    assert profiling_size(task, working_set_bytes=256 * KiB).sizes == {"rows": 64}


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_cachegrind_at_the_reduced_size_keeps_the_rates_and_says_the_size(tmp_path):
    task = load_task(GELU, {"batch_size": 64, "dim": 1024})  # 512 KiB in and out
    reduced = profile(
        task, FAST_GELU, profiler="valgrind", out_dir=tmp_path / "r", threads=1, working_set_bytes=128 * KiB
    )
    full = profile(task, FAST_GELU, profiler="valgrind", out_dir=tmp_path / "f", threads=1, full_size=True)
    assert reduced.sizes == {"batch_size": 16} and full.sizes == {}
    assert reduced.notes[0].startswith("profiled at a reduced size, batch_size=16 (of 64): inputs+outputs 128 KiB")
    assert "counts are per forward at this size" in reduced.notes[0]
    assert not any(note.startswith("profiled at") for note in full.notes)
    (run,) = [r for r in reduced.metrics if r.name == "Ir" and "+" not in r.kernel]
    (whole,) = [f for f in full.metrics if f.name == "Ir" and "+" not in f.kernel]
    assert run.value == pytest.approx(whole.value / 4, rel=0.01)  # a quarter of the rows, a quarter of the work
    assert reduced.get("D1 miss rate").value == pytest.approx(full.get("D1 miss rate").value, rel=0.02)


def test_a_second_profiler_of_the_same_candidate_reuses_its_recording(tmp_path, monkeypatch):
    task = load_task(GELU, {"batch_size": 8, "dim": 512})
    recordings = Recordings()  # a run's, kept for its duration
    recorded = []
    original = targets._record
    monkeypatch.setattr(targets, "_record", lambda *args: recorded.append(args) or original(*args))
    first = targets.prepare_target(
        task, Candidate(source=FAST_GELU, backend="cpu-cpp"), tmp_path / "a", threads=1, recordings=recordings
    )
    second = targets.prepare_target(
        task, Candidate(source=FAST_GELU, backend="cpu-cpp"), tmp_path / "b", threads=1, recordings=recordings
    )
    assert len(recorded) == 1
    assert second.replay_argv[2] == str(tmp_path / "b" / "job" / "recording")  # its own copy, kept with its output
    assert second.replay_argv[0] == first.replay_argv[0]  # the same driver: built once
    assert second.kernel_functions == first.kernel_functions
    other_size = load_task(GELU, {"batch_size": 16, "dim": 512})
    targets.prepare_target(
        other_size, Candidate(source=FAST_GELU, backend="cpu-cpp"), tmp_path / "c", threads=1, recordings=recordings
    )
    assert len(recorded) == 2  # other inputs: recorded again
    shutil.rmtree(tmp_path / "c")
    targets.prepare_target(
        other_size, Candidate(source=FAST_GELU, backend="cpu-cpp"), tmp_path / "d", threads=1, recordings=recordings
    )
    assert len(recorded) == 3  # the earlier recording is gone: recorded again


# -- a task whose FLOPs per byte fall when it shrinks ------------------------------------------------


def _intensity(task) -> float:
    return task.analysis.flops / task.analysis.min_bytes


def test_a_matrix_product_keeps_its_flops_per_byte(tmp_path):
    task = load_task(MATMUL, {"M": 256, "K": 256, "N": 256})  # 768 KiB, 42.7 FLOPs per byte
    shrunk = shrink_task(task, 64 * KiB)
    # Fewer rows of A would read each tile of B for fewer rows: what a blocked kernel's misses show.
    assert shrunk.sizes == {"M": 192}  # the least multiple of 8 that keeps 90% of the FLOPs per byte
    assert _intensity(shrunk.task) >= MIN_INTENSITY_KEPT * _intensity(task)
    assert _intensity(load_task(MATMUL, {"M": 184, "K": 256, "N": 256})) < MIN_INTENSITY_KEPT * _intensity(task)
    assert shrunk.note.endswith(
        "M, K, N not smaller: FLOPs per byte would fall below 90% of the full size's, and a kernel that reuses "
        "data (tiles of a matrix product) would show other miss rates"
    )


def test_a_batch_of_independent_products_shrinks_its_batch_freely():
    task = load_task(BATCHED_MATMUL, {"batch_size": 64, "M": 32, "K": 32, "N": 32})  # 768 KiB
    shrunk = shrink_task(task, 96 * KiB)
    assert shrunk.sizes == {"batch_size": 8}  # the batch keeps the FLOPs per byte
    assert _intensity(shrunk.task) == pytest.approx(_intensity(task))
    assert "not smaller" not in shrunk.note


def test_tasks_without_counted_flops_are_not_held_by_the_ratio():
    task = load_task(GELU, {"batch_size": 64, "dim": 1024})
    assert task.analysis.flops == 0  # torch counts FLOPs of matrix products and convolutions only
    assert shrink_task(task, 128 * KiB).sizes == {"batch_size": 16}


# -- the size each profiler sees ----------------------------------------------------------------


def _profiler(name: str, deterministic: bool) -> Profiler:
    return Profiler(
        name=name,
        devices=("cpu",),
        probe=lambda: Availability(available=True),
        default_metrics=(),
        collect=lambda target, metrics: Profile(profiler=name),
        parse=lambda raw: [],
        deterministic=deterministic,
    )


def test_a_simulator_is_profiled_at_twice_its_simulated_last_level_a_counter_at_twice_this_machines():
    simulated, machine = simulated_working_set_bytes(), machine_working_set_bytes()
    if not simulated < machine:
        pytest.skip("on this machine the simulated last level is not the smaller one")
    dim = 1024
    rows = 8 * (machine // (8 * 8 * dim) // 8)  # data (in and out) about half the machine's target
    task = load_task(GELU, {"batch_size": rows, "dim": dim})
    assert simulated < task.analysis.min_bytes <= machine
    by_simulator = profiling_task(task, _profiler("simulator", deterministic=True))
    assert by_simulator.reduced and simulated <= by_simulator.bytes < 2 * simulated
    assert profiling_task(task, _profiler("counter", deterministic=False)).task is task
    assert profiling_task(task, _profiler("simulator", deterministic=True), full_size=True).task is task
    # the same task and profiler give the same sizes (a run derives them once: ProfilingSession)
    assert profiling_task(task, _profiler("simulator", deterministic=True)) == by_simulator


def test_a_simulator_past_its_flops_budget_shrinks_to_the_bytes_target_alone():
    task = load_task(MATMUL, {"M": 256, "K": 256, "N": 256})  # 768 KiB, 33.6 MFLOP
    simulator, counter = _profiler("simulator", deterministic=True), _profiler("counter", deterministic=False)
    keeping = profiling_task(task, simulator, working_set_bytes=64 * KiB)
    assert keeping.sizes == {"M": 192}  # 25 MFLOP: within the default budget, the ratio is kept
    light = profiling_task(task, simulator, working_set_bytes=64 * KiB, flops_budget=10_000_000)
    assert light.task.analysis.flops < 10_000_000 and light.bytes >= 64 * KiB
    assert light.note.endswith(
        "FLOPs per byte not kept: the size keeping them would replay 0.025 GFLOP in the simulator (minutes)"
    )
    # a profiler counting real events runs at native speed: its size keeps the ratio
    assert profiling_task(task, counter, working_set_bytes=64 * KiB, flops_budget=10_000_000).sizes == {"M": 192}


# -- a candidate that is right only at the task's own sizes ------------------------------------------


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_a_candidate_wrong_at_the_profiling_size_is_not_profiled_there(tmp_path):
    task = load_task(GELU, {"batch_size": 64, "dim": 1024})
    # Right at 64 x 1024, where the verifier checks it; at 16 rows it returns 64 rows all the same.
    assumes_the_size = FAST_GELU.replace("out = torch.empty_like(x)", "out = torch.empty(64, 1024)")
    with pytest.raises(PragmaError) as raised:
        profile(
            task, assumes_the_size, profiler="valgrind", out_dir=tmp_path / "r", threads=1, working_set_bytes=128 * KiB
        )
    message = str(raised.value)
    assert message.startswith("the candidate cannot be profiled at these sizes: at the sizes profiled, the candidate's")
    assert "shape (64, 1024) where the reference's is (16, 1024)" in message and "--full-size" in message
