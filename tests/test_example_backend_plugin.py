"""A backend written outside pragma-core, installed with pip, passes the backend conformance suite.

``examples/plugins/pragma-backend-c`` is a separate distribution (the ``cpu-c`` backend: C99
kernels). It is installed, not edited in place, into a fresh environment that sees this one's
packages, and its own tests (pragma's :class:`~pragma_core.testing.BackendPluginTests`) run there.
"""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
import venv
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "plugins" / "pragma-backend-c"


@pytest.mark.slow
def test_the_example_backend_installs_with_pip_and_passes_the_conformance_suite(tmp_path):
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
    suite = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        capture_output=True,
        text=True,
        cwd=plugin,
    )
    assert suite.returncode == 0, suite.stdout[-4000:]
    assert "8 passed" in suite.stdout, suite.stdout[-2000:]
