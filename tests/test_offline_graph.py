"""Tracing a reference for the offline recipes: shapes come from the meta device, so a task at its
own (large) sizes costs no memory or time; code the meta device cannot run is traced on the CPU."""

from __future__ import annotations

from pragma_core import load_task
from pragma_core.offline.graph import trace_reference

_TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return {forward}


rows = {rows}
cols = {cols}


def get_inputs():
    return [torch.rand(rows, cols) + 1]


def get_init_inputs():
    return []
"""


def _task(tmp_path, name: str, forward: str, rows: int, cols: int):
    path = tmp_path / f"{name}.py"
    path.write_text(_TASK.format(forward=forward, rows=rows, cols=cols))
    return load_task(path)


def test_a_task_too_large_to_allocate_is_traced_without_its_data(tmp_path):
    rows = cols = 1 << 22  # 64 TiB of float32: no machine allocates it
    graph = trace_reference(_task(tmp_path, "huge_softmax", "torch.softmax(x, dim=1)", rows, cols))
    softmax = next(node for node in graph.nodes if node.op == "softmax")
    assert softmax.shape == (rows, cols) and str(softmax.dtype) == "torch.float32"


def test_a_forward_whose_shapes_depend_on_its_data_is_traced_on_the_cpu(tmp_path):
    graph = trace_reference(_task(tmp_path, "nonzero", "torch.nonzero(x)", 4, 8))
    found = next(node for node in graph.nodes if node.op == "nonzero")
    assert found.shape == (32, 2)  # every input is at least 1: all 4 x 8 positions
