"""The recorded ncu outputs in ``data/`` (provenance in ``data/SOURCES.md``)."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).parent / "data"
FIXTURES = sorted(path for path in DATA.iterdir() if path.name.startswith("ncu-"))


def fixture_text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8", errors="replace")
