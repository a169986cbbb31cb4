"""The availability probe: valgrind missing, broken, or working."""

from __future__ import annotations

import shutil
import stat

import pytest

from pragma_valgrind.probe import probe, valgrind_version


@pytest.fixture(autouse=True)
def _fresh_version_cache():
    valgrind_version.cache_clear()
    yield
    valgrind_version.cache_clear()


def _script(tmp_path, body: str) -> str:
    path = tmp_path / "valgrind"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_not_installed(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    availability = probe()
    assert not availability.available
    assert "not installed" in availability.reason and "apt-get install valgrind" in availability.reason
    assert "parsing" in availability.still_works and "perf" in availability.still_works


def test_a_valgrind_that_does_not_answer(monkeypatch, tmp_path):
    broken = _script(tmp_path, "echo 'valgrind: failed to start tool' >&2; exit 1")
    monkeypatch.setattr(shutil, "which", lambda name: broken)
    availability = probe()
    assert not availability.available
    assert "exit code 1: valgrind: failed to start tool" in availability.reason
    assert "\n" not in availability.reason


def test_a_working_valgrind_and_its_version_is_asked_once(monkeypatch, tmp_path):
    counter = tmp_path / "calls"
    fake = _script(tmp_path, f"echo x >> {counter}; echo valgrind-3.19.0")
    monkeypatch.setattr(shutil, "which", lambda name: fake)
    assert probe().available and probe().available
    assert valgrind_version(fake) == (True, "valgrind-3.19.0")
    assert counter.read_text().count("x") == 1


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_the_installed_valgrind():
    assert probe().available
    answered, version = valgrind_version(shutil.which("valgrind"))
    assert answered and version.startswith("valgrind-")
