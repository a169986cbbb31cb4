"""Docs stay true: they build strictly, and every hook is documented with its exact signature and
tested (the meta-tests datasette keeps for its plugin hooks)."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys

import pytest

from pragma_core.plugin_api import hookspecs

from .conftest import REPO

HOOKS = sorted(name for name in dir(hookspecs) if name.startswith("pragma_register_"))


def signature_text(name: str) -> str:
    """``pragma_register_backends(register: Callable[[Backend], None]) -> None``, as in the docs."""
    signature = inspect.signature(getattr(hookspecs, name))
    params = ", ".join(f"{p.name}: {p.annotation}" for p in signature.parameters.values())
    return f"{name}({params}) -> {signature.return_annotation}"


def test_there_are_four_hooks():
    assert HOOKS == [
        "pragma_register_backends",
        "pragma_register_llm_providers",
        "pragma_register_metric_selectors",
        "pragma_register_profilers",
    ]


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_is_documented_with_its_exact_signature(hook):
    assert signature_text(hook) in (REPO / "docs" / "plugins.md").read_text()


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_has_a_test(hook):
    assert f'"{hook}"' in (REPO / "tests" / "test_plugin_registry.py").read_text()


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_docstring_documents_register_with_an_example(hook):
    doc = getattr(hookspecs, hook).__doc__
    assert ":param register:" in doc and "for example" in doc


def test_mkdocs_builds_strictly(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ | {"NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "plugins" / "index.html").exists()


def test_every_integrity_check_is_documented():
    from pragma_core.verifier import CHECKS

    text = (REPO / "docs" / "verifier.md").read_text()
    for name, (number, _meaning) in CHECKS.items():
        assert f"| `{name}` | {number} |" in text, name


def test_every_verdict_status_is_documented():
    from pragma_core import VerdictStatus

    text = (REPO / "docs" / "verifier.md").read_text()
    for status in VerdictStatus:
        assert f"| `{status.value}` |" in text, status


CATALOGUE_ENTRIES = 32
"""The entries of the project's integrity catalogue (its shared INTEGRITY.md), 1 to 32."""


def test_every_catalogue_entry_has_a_row_with_its_status_and_audit_candidates():
    from pragma_core.audit import CASES

    text = (REPO / "docs" / "integrity.md").read_text()
    rows = re.findall(r"^\| (\d+) \|.*\| ([^|]+) \| ([^|]+) \|$", text, flags=re.MULTILINE)
    assert [int(number) for number, _, _ in rows] == list(range(1, CATALOGUE_ENTRIES + 1))
    for number, status, audit in rows:
        assert status.split()[0].rstrip(":") in ("caught", "partly", "open"), (number, status)
        listed = re.findall(r"`(\w+)`", audit)
        assert listed == [case.candidate for case in CASES if case.entry == int(number)], number
