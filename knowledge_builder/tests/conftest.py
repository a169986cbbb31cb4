"""Test set-up for the knowledge builder: import the package from the source tree and find the docs mirror."""
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _mirror() -> Path:
    env = os.environ.get("PRAGMA_DOCS_MIRROR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "shared" / "docs-mirror"   # /work/shared/docs-mirror beside the clone


@pytest.fixture(scope="session")
def docs_mirror() -> Path:
    path = _mirror()
    if not (path / "SOURCES.md").is_file():
        pytest.skip(f"the profiler docs mirror is not at {path}; set PRAGMA_DOCS_MIRROR")
    return path
