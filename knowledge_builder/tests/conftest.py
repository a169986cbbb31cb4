"""Test set-up for the knowledge builder: where the profiler documentation mirror is.

The mirror (``shared/docs-mirror`` beside the clone, or ``$PRAGMA_DOCS_MIRROR``) holds the real
pages the readers are tested on; it is not copied into the repository, since several of its pages
carry no open licence.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def _mirror() -> Path:
    configured = os.environ.get("PRAGMA_DOCS_MIRROR")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[3] / "shared" / "docs-mirror"


@pytest.fixture(scope="session")
def docs_mirror() -> Path:
    path = _mirror()
    if not (path / "SOURCES.md").is_file():
        pytest.skip(f"the profiler docs mirror is not at {path}; set PRAGMA_DOCS_MIRROR")
    return path
