"""A backend written outside pragma-core, installed with pip, passes the backend conformance suite.

``examples/plugins/pragma-backend-c`` is a separate distribution (the ``cpu-c`` backend: C99
kernels). It is installed, not edited in place, into a fresh environment that sees this one's
packages, and its own tests (pragma's :class:`~pragma_core.testing.BackendPluginTests`) run there.
CI (`make test`) runs the suite's checks that build nothing: the installed distribution registers
the backend, its record is complete, its probe answers, it recognizes its candidate, and a forward
running PyTorch instead is rejected. The whole suite, which also builds the C kernels and verifies
them (some 35 s more), runs before a release (`make test-release`).
"""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
import venv
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "plugins" / "pragma-backend-c"

BUILDING = "correct_candidate_is_correct or evidence_counts_the_kernels or broken_kernel_is_a_compile_error"
"""The suite's tests that build the candidate's C kernels and run them (``-k``): three quarters of its time."""


def _installed(tmp_path: Path) -> tuple[Path, Path]:
    """The example installed with pip into a fresh environment; its Python and its copied folder."""
    plugin = shutil.copytree(EXAMPLE, tmp_path / "pragma-backend-c")  # the build writes beside its source
    environment = tmp_path / "env"
    venv.EnvBuilder(with_pip=False).create(environment)
    python = environment / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # The new environment sees this one's packages (pragma-core, torch, pytest, pip, setuptools).
    here = sysconfig.get_paths()["purelib"]
    (Path(purelib) / "outer.pth").write_text(f"import site; site.addsitedir({here!r})\n")
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", str(plugin)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert install.returncode == 0, install.stderr[-2000:]
    listed = subprocess.run([str(python), "-m", "pragma_core", "plugins", "--json"], capture_output=True, text=True)
    assert '"cpu-c"' in listed.stdout, listed.stderr[-2000:]
    return python, plugin


def _suite(python: Path, plugin: Path, *selection: str) -> str:
    suite = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", *selection],
        capture_output=True,
        text=True,
        cwd=plugin,
    )
    assert suite.returncode == 0, suite.stdout[-4000:]
    return suite.stdout


@pytest.mark.slow
def test_the_example_backend_installs_with_pip_and_passes_the_checks_that_build_nothing(tmp_path):
    python, plugin = _installed(tmp_path)
    shown = _suite(python, plugin, "-k", f"not ({BUILDING})")
    assert "5 passed, 3 deselected" in shown, shown[-2000:]


@pytest.mark.release
def test_the_example_backend_installs_with_pip_and_passes_the_conformance_suite(tmp_path):
    python, plugin = _installed(tmp_path)
    shown = _suite(python, plugin)
    assert "8 passed" in shown, shown[-2000:]
