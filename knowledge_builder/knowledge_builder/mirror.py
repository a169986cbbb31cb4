"""Offline mode: pages from a local mirror of the profilers' documentation.

A mirror is a folder with one sub-folder per tool (``ncu/``, ``perf/``, ``cachegrind/`` ...). Each
sub-folder goes to the profiler plugin whose ``doc_sources`` name the most of its files (the
mirror's ``cg-manual.xml`` is valgrind's ``cg-manual.html``) or whose name it bears; ``folders``
overrides that. Each file's address, the ``source`` its entries cite, is in order: the doc source
of the same name, the page's own ``url:`` front matter, the origin the mirror's ``SOURCES.md``
records for it (``owner/repo : path`` becomes a GitHub address), else ``mirror:<path>``. Licence
files and the mirror's own notes are skipped, and so is any file no reader knows.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from .documents import Page
from .formats import format_of

__all__ = ["MirrorSelection", "read_mirror", "url_stem"]

_SKIPPED_NAMES = re.compile(r"^(LICENSE|COPYING|SOURCES\.md)", re.I)
_FRONT_MATTER_URL = re.compile(r"\A---\s*\n(?:.*\n)*?url:\s*(\S+)\s*\n(?:.*\n)*?---", re.M)
_SOURCES_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|[^|]*\|[^|]*\|\s*(.+?)\s*\|\s*$", re.M)
_GITHUB_ORIGIN = re.compile(r"^([\w.-]+/[\w.-]+)\s*:\s*(\S+)$")
_EMBEDDED_URL = re.compile(r"https?://[^\s,)]+")
_DEBIAN_LINUX = re.compile(r"^Debian package linux-source-[\d.]+ ([\d.]+)-\S+ : \S+ : linux-source-[\d.]+/(\S+)$")


@attrs.frozen(kw_only=True)
class MirrorSelection:
    """What a mirror gave: pages, which folder went to which profiler, and what was left out."""

    pages: tuple[Page, ...]
    folders: dict[str, str]
    skipped: dict[str, str]


def url_stem(url_or_name: str) -> str:
    """``perf-stat`` for ``.../perf-stat.1.html`` and ``perf-stat.txt``; ``cg-manual`` for both
    ``cg-manual.html#anchor`` and ``cg-manual.xml``."""
    name = url_or_name.split("#")[0].split("?")[0].rstrip("/").rsplit("/", 1)[-1]
    name = re.sub(r"\.(html?|txt|xml|rst|md|json|ya?ml|csv|section|man)$", "", name, flags=re.I)
    return re.sub(r"\.\d[a-z]{0,4}$", "", name).lower()


def _doc_urls(doc_sources: Mapping[str, Sequence[str]]) -> dict[str, dict[str, list[str]]]:
    """stem -> profiler -> URLs; stems shared by pages of one site (``index``) are useless."""
    stems: dict[str, dict[str, list[str]]] = {}
    for profiler, urls in doc_sources.items():
        for url in urls:
            stem = url_stem(url)
            if stem and stem != "index":
                stems.setdefault(stem, {}).setdefault(profiler, []).append(url.split("#")[0])
    return stems


def _recorded_origins(root: Path) -> dict[str, str]:
    sources = root / "SOURCES.md"
    if not sources.is_file():
        return {}
    origins = {}
    for path, origin in _SOURCES_ROW.findall(sources.read_text(encoding="utf-8", errors="replace")):
        github = _GITHUB_ORIGIN.match(origin)
        embedded = _EMBEDDED_URL.search(origin)
        debian_linux = _DEBIAN_LINUX.match(origin)
        if debian_linux:  # the same file at the same release, where the kernel publishes it
            origins[path] = (
                "https://git.kernel.org/pub/scm/linux/kernel/git/stable/linux.git/tree/"
                f"{debian_linux[2]}?h=v{debian_linux[1]}"
            )
        elif github:
            origins[path] = f"https://github.com/{github[1]}/blob/HEAD/{github[2]}"
        elif embedded:
            origins[path] = embedded[0]
    return origins


def _assign_folders(
    root: Path, stems: Mapping[str, Mapping[str, list[str]]], profilers: Sequence[str], overrides: Mapping[str, str]
) -> dict[str, str]:
    folders = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if folder.name in overrides:
            folders[folder.name] = overrides[folder.name]
            continue
        votes: Counter = Counter()
        for path in folder.rglob("*"):
            for profiler in stems.get(url_stem(path.name), {}) if path.is_file() else ():
                votes[profiler] += 1
        if folder.name in profilers:
            votes[folder.name] += 1_000
        if votes:
            folders[folder.name] = max(votes, key=lambda p: (votes[p], p))
    return folders


def read_mirror(
    root: Path, doc_sources: Mapping[str, Sequence[str]], *, folders: Mapping[str, str] | None = None
) -> MirrorSelection:
    """Every readable page of the mirror at ``root``, for the profilers of ``doc_sources``
    (profiler name -> its doc source URLs)."""
    root = Path(root)
    stems = _doc_urls(doc_sources)
    assigned = _assign_folders(root, stems, list(doc_sources), folders or {})
    origins = _recorded_origins(root)
    pages, skipped = [], {}
    for folder_name, profiler in assigned.items():
        for path in sorted(p for p in (root / folder_name).rglob("*") if p.is_file()):
            relative = path.relative_to(root).as_posix()
            fmt = format_of(path.name) or ("txt" if path.name.upper() == "README" else None)
            if _SKIPPED_NAMES.match(path.name):
                skipped[relative] = "licence or notes file"
                continue
            if fmt is None:
                skipped[relative] = "no reader for this kind of file"
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            pages.append(
                Page(
                    url=_address(relative, text, profiler, stems, origins, fmt),
                    profiler=profiler,
                    format=fmt,
                    text=text,
                    path=relative,
                )
            )
    for folder in sorted(p.name for p in root.iterdir() if p.is_dir() and p.name not in assigned):
        skipped[folder + "/"] = "no profiler plugin names a page of this folder"
    return MirrorSelection(pages=tuple(pages), folders=assigned, skipped=skipped)


def _address(
    relative: str,
    text: str,
    profiler: str,
    stems: Mapping[str, Mapping[str, list[str]]],
    origins: Mapping[str, str],
    fmt: str,
) -> str:
    urls = stems.get(url_stem(relative), {}).get(profiler, [])
    if urls:
        same_kind = [url for url in urls if format_of(url) == fmt]
        return (same_kind or urls)[0]
    front = _FRONT_MATTER_URL.match(text)
    if front:
        return front[1]
    return origins.get(relative, f"mirror:{relative}")
