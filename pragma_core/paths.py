"""Where pragma keeps what it can rebuild: build artifacts, measured peaks, the knowledge index.

``PRAGMA_CACHE_DIR`` wins; otherwise the platform's user cache folder as platformdirs gives it
(``$XDG_CACHE_HOME/pragma`` or ``~/.cache/pragma`` on Linux, ``~/Library/Caches/pragma`` on macOS).
Everything below it may be deleted at any time.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

__all__ = ["cache_dir"]


def cache_dir(*parts: str) -> Path:
    """The cache folder, or a sub-folder of it (not created: callers make what they write)."""
    root = os.environ.get("PRAGMA_CACHE_DIR")
    base = Path(root).expanduser() if root else Path(platformdirs.user_cache_dir("pragma", appauthor=False))
    return base.joinpath(*parts)
