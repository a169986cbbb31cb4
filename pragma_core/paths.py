"""Where pragma keeps what it can rebuild: build artifacts, measured peaks, preflight answers.

``PRAGMA_CACHE_DIR`` wins; otherwise ``$XDG_CACHE_HOME/pragma`` or ``~/.cache/pragma``. Everything
below it may be deleted at any time.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir"]


def cache_dir(*parts: str) -> Path:
    """The cache folder, or a sub-folder of it (not created: callers make what they write)."""
    root = os.environ.get("PRAGMA_CACHE_DIR")
    if root:
        base = Path(root).expanduser()
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "pragma"
    return base.joinpath(*parts)
