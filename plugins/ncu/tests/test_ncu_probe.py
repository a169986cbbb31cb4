"""The probe's answers, with the machine's tools faked: nvidia-smi is a stand-in script."""

from __future__ import annotations

import importlib
import shlex
import time

import pytest

from pragma_ncu.probe import find_gpu, find_ncu, probe

# the package exports the function probe(), which hides the module of that name
probe_module = importlib.import_module("pragma_ncu.probe")


@pytest.fixture
def machine(monkeypatch, tmp_path):
    """A machine with nothing: no ncu, no nvidia-smi, no driver; tests add what they need."""
    tools: dict[str, str] = {}
    monkeypatch.setattr(probe_module.shutil, "which", lambda name: tools.get(name))
    monkeypatch.setattr(probe_module.glob, "glob", lambda pattern: [])
    monkeypatch.setattr(probe_module, "_PROC_GPUS", tmp_path / "proc-driver-nvidia-gpus")
    return tools


def fake_smi(machine, tmp_path, returncode: int = 0, stdout: str = "", stderr: str = "", body: str = ""):
    """An nvidia-smi that answers ``-L`` with this output and exit code (or runs ``body``)."""
    smi = tmp_path / "nvidia-smi"
    body = body or (
        f'[ "$*" = "-L" ] || exit 64\nprintf %s {shlex.quote(stdout)}\nprintf %s {shlex.quote(stderr)} >&2\n'
        f"exit {returncode}"
    )
    smi.write_text(f"#!/bin/sh\n{body}\n")
    smi.chmod(0o755)
    machine["nvidia-smi"] = str(smi)


def test_nothing_installed(machine):
    availability = probe()
    assert not availability.available
    assert availability.reason.startswith("ncu is not installed (not on PATH, nor in /usr/local/cuda*/bin")
    assert "; no NVIDIA GPU: " in availability.reason
    assert "nvidia-smi is not installed" in availability.reason
    assert "parsing saved ncu output" in availability.still_works


def test_ncu_without_gpu(machine, tmp_path):
    machine["ncu"] = "/usr/bin/ncu"
    fake_smi(
        machine,
        tmp_path,
        9,
        stderr="NVIDIA-SMI has failed because it couldn't communicate with the "
        "NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n",
    )
    availability = probe()
    assert not availability.available
    assert availability.reason.startswith("no NVIDIA GPU: nvidia-smi -L lists no GPU (NVIDIA-SMI has failed")
    assert "\n" not in availability.reason


def test_gpu_without_ncu(machine, tmp_path):
    fake_smi(machine, tmp_path, 0, stdout="GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-1234)\n")
    assert find_gpu() == (True, "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-1234)")
    availability = probe()
    assert not availability.available
    assert availability.reason.startswith("ncu is not installed")
    assert "no NVIDIA GPU" not in availability.reason


def test_ncu_in_a_cuda_toolkit_and_gpu_in_proc(machine, monkeypatch, tmp_path):
    gpus = tmp_path / "proc-driver-nvidia-gpus"
    (gpus / "0000:3b:00.0").mkdir(parents=True)
    toolkit = {"/usr/local/cuda*/bin/ncu": ["/usr/local/cuda-12.1/bin/ncu", "/usr/local/cuda-12.4/bin/ncu"]}
    monkeypatch.setattr(probe_module.glob, "glob", lambda pattern: toolkit.get(pattern, []))
    monkeypatch.setattr(probe_module.os, "access", lambda path, mode: True)
    assert find_ncu() == "/usr/local/cuda-12.4/bin/ncu"
    assert probe().available


def test_nvidia_smi_that_hangs_is_stopped(machine, tmp_path):
    fake_smi(machine, tmp_path, body="sleep 60")
    started = time.monotonic()
    has_gpu, detail = find_gpu()
    assert time.monotonic() - started < 5
    assert not has_gpu and detail == "nvidia-smi -L did not finish within 1.5 s and was stopped"


def test_nvidia_smi_that_cannot_be_started(machine, tmp_path):
    fake_smi(machine, tmp_path, stdout="GPU 0: never printed")
    (tmp_path / "nvidia-smi").chmod(0o644)
    has_gpu, detail = find_gpu()
    assert not has_gpu and detail.startswith("nvidia-smi -L failed (`nvidia-smi` cannot be started: Permission denied")


def test_the_answer_is_cached(machine):
    assert probe() is probe()
