"""probe() says precisely why rocprof cannot run; nothing here needs ROCm."""

from __future__ import annotations

import shlex
import time

import pytest

import pragma_rocprof.probe as probe_module
from pragma_rocprof.probe import find_rocprofv3, gpu_targets, probe


@pytest.fixture(autouse=True)
def fresh_probe(monkeypatch, tmp_path):
    """No real ROCm: no tool on PATH, an empty /opt, no KFD; each test adds what it needs."""
    monkeypatch.setattr(probe_module.shutil, "which", lambda name: None)
    monkeypatch.setattr(probe_module.glob, "glob", lambda pattern: [])
    monkeypatch.delenv("ROCM_PATH", raising=False)
    monkeypatch.setattr(probe_module, "KFD_DEVICE", str(tmp_path / "dev" / "kfd"))
    monkeypatch.setattr(probe_module, "KFD_TOPOLOGY", str(tmp_path / "topology" / "nodes"))
    monkeypatch.setattr(probe_module.Path, "is_file", _only_tmp_files(tmp_path))
    probe.cache_clear()
    yield
    probe.cache_clear()


def _only_tmp_files(tmp_path):
    real = probe_module.Path.is_file

    def is_file(path):
        return str(path).startswith(str(tmp_path)) and real(path)

    return is_file


def _tool(monkeypatch, path="/usr/bin/rocprofv3"):
    monkeypatch.setattr(probe_module.shutil, "which", lambda name: path if name == "rocprofv3" else None)


def _kfd(tmp_path):
    device = tmp_path / "dev" / "kfd"
    device.parent.mkdir(parents=True, exist_ok=True)
    device.write_text("")


def _node(tmp_path, number, simd_count, gfx_target_version=0):
    node = tmp_path / "topology" / "nodes" / str(number)
    node.mkdir(parents=True)
    (node / "properties").write_text(
        f"cpu_cores_count 16\nsimd_count {simd_count}\ngfx_target_version {gfx_target_version}\n"
    )


def test_nothing_installed_names_both_problems_on_one_line():
    availability = probe()
    assert not availability.available
    assert "rocprofv3 is not installed" in availability.reason
    assert "no AMD GPU" in availability.reason and "/dev/kfd" in availability.reason.replace(
        probe_module.KFD_DEVICE, "/dev/kfd"
    )
    assert "\n" not in availability.reason
    assert "pragma_rocprof.parse" in availability.still_works


def test_tool_without_gpu(monkeypatch):
    _tool(monkeypatch)
    availability = probe()
    assert not availability.available
    assert "not installed" not in availability.reason
    assert availability.reason.startswith("no AMD GPU")


def test_gpu_without_tool(monkeypatch, tmp_path):
    _kfd(tmp_path)
    _node(tmp_path, 0, 0)
    _node(tmp_path, 1, 304, 90402)
    availability = probe()
    assert not availability.available
    assert availability.reason.startswith("rocprofv3 is not installed")


def test_available_with_tool_and_gpu(monkeypatch, tmp_path):
    _tool(monkeypatch)
    _kfd(tmp_path)
    _node(tmp_path, 0, 0)
    _node(tmp_path, 1, 304, 90402)
    assert gpu_targets() == ["gfx942"]
    assert probe().available


def test_gfx_names_from_kfd_versions(tmp_path):
    _node(tmp_path, 1, 220, 90010)
    _node(tmp_path, 2, 96, 110000)
    assert gpu_targets() == ["gfx90a", "gfx1100"]


def test_kfd_without_permission(monkeypatch, tmp_path):
    _tool(monkeypatch)
    _kfd(tmp_path)
    monkeypatch.setattr(probe_module.os, "access", lambda path, mode: False)
    availability = probe()
    assert not availability.available
    assert "'render' and 'video' groups" in availability.reason


def test_driver_with_cpu_nodes_only(monkeypatch, tmp_path):
    _tool(monkeypatch)
    _kfd(tmp_path)
    _node(tmp_path, 0, 0)
    availability = probe()
    assert not availability.available and "lists no GPU agent" in availability.reason


def _rocminfo(monkeypatch, tmp_path, stdout="", body=""):
    """A stand-in rocminfo printing ``stdout`` (or running ``body``), found beside rocprofv3."""
    rocminfo = tmp_path / "bin" / "rocminfo"
    rocminfo.parent.mkdir(exist_ok=True)
    rocminfo.write_text(f"#!/bin/sh\n{body or 'printf %s ' + shlex.quote(stdout)}\n")
    rocminfo.chmod(0o755)
    tools = {"rocprofv3": "/usr/bin/rocprofv3", "rocminfo": str(rocminfo)}
    monkeypatch.setattr(probe_module.shutil, "which", tools.get)


def test_rocminfo_is_asked_when_the_topology_is_missing(monkeypatch, tmp_path):
    _kfd(tmp_path)
    _rocminfo(
        monkeypatch,
        tmp_path,
        stdout="Agent 1\n  Name:                    AMD EPYC 7V13\nAgent 2\n"
        "  Name:                    gfx90a\n  Marketing Name: AMD Instinct MI250X\n",
    )
    assert probe().available


def test_rocminfo_listing_only_cpus(monkeypatch, tmp_path):
    _kfd(tmp_path)
    _rocminfo(monkeypatch, tmp_path, stdout="Agent 1\n  Name:                    AMD EPYC 7V13\n")
    availability = probe()
    assert not availability.available and "lists no GPU agent" in availability.reason


def test_rocminfo_that_hangs_does_not_block_the_probe(monkeypatch, tmp_path):
    _kfd(tmp_path)
    _rocminfo(monkeypatch, tmp_path, body="sleep 60")
    started = time.monotonic()
    assert probe().available  # the device node is there; rocprofv3 will say more when it runs
    assert time.monotonic() - started < 5


def test_a_long_rocminfo_listing_is_read_whole(monkeypatch, tmp_path):
    _kfd(tmp_path)
    cpu = "Agent 1\n  Name:                    AMD EPYC 7V13\n" + "  ISA Info: x\n" * 2000
    gpus = "".join(f"Agent {n}\n  Name:                    gfx942\n" + "  Pool Info: y\n" * 500 for n in (2, 3))
    _rocminfo(monkeypatch, tmp_path, stdout=cpu + gpus + "Agent 4\n  Name:                    gfx90a\n")
    assert probe_module._rocminfo_targets() == ["gfx90a", "gfx942"]


def test_find_rocprofv3_under_rocm_path(monkeypatch, tmp_path):
    tool = tmp_path / "rocm-7.0.0" / "bin" / "rocprofv3"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "rocm-7.0.0"))
    assert find_rocprofv3() == str(tool)


def test_find_rocprofv3_prefers_path(monkeypatch):
    _tool(monkeypatch, "/usr/local/bin/rocprofv3")
    assert find_rocprofv3() == "/usr/local/bin/rocprofv3"


def test_probe_is_cached(monkeypatch):
    calls = []
    monkeypatch.setattr(probe_module, "find_rocprofv3", lambda: calls.append(1))
    probe()
    probe()
    assert len(calls) == 1
