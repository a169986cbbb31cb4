"""Files pragma writes and reads back: written so a crash never leaves half of one behind, logs
read back by their tail, and the folders a user names for output made or refused in one line."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import IO

from .errors import PragmaError

__all__ = ["atomic_write_text", "check_output_folder", "output_folder", "read_tail"]


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_tail(handle: IO[bytes], limit: int) -> str:
    """The last ``limit`` characters of an output file (a child's log, a tool's output), with a
    marker line when it was longer: enough for a message, not a flood."""
    handle.flush()
    size = handle.seek(0, os.SEEK_END)
    handle.seek(max(0, size - limit * 4))
    text = handle.read().decode("utf-8", errors="replace")
    if len(text) > limit or size > limit * 4:
        return f"[... {size} bytes, last {limit} characters kept]\n" + text[-limit:]
    return text


def check_output_folder(path: Path, option: str) -> Path:
    """Refuse, before anything runs, a ``path`` for ``option`` that cannot be a folder: it, or a
    folder above it, is a file (a :class:`~pragma_core.errors.PragmaError` naming it)."""
    path = Path(path)
    for place in (path, *path.parents):
        if place.exists():
            if not place.is_dir():
                raise PragmaError(
                    f"{place}: a file, not a folder; give {option} a folder (a new one, or the one used before)"
                )
            break
    return path


def output_folder(path: Path, option: str) -> Path:
    """Make the folder ``path`` that ``option`` (``--out``, ``--runs-dir``) names for pragma's
    output, if it is not there; a path that is a file, or that cannot be made, is a
    :class:`~pragma_core.errors.PragmaError` naming it and what to do (nothing is written)."""
    path = check_output_folder(path, option)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        reason = error.strerror or str(error)
        raise PragmaError(f"{path}: cannot make this folder ({reason}); give {option} a folder you can write") from None
    return path
