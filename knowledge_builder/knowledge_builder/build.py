"""A whole build: pages, chunks, the two stages, compendium files, the index.

::

    result = build(BuildSettings(out_dir=Path("kb"), offline_mirror=Path("../shared/docs-mirror")))
    result.coverage["perf"].share        # of the plugin's default metrics that got a meaning

Pages come from the crawl of every installed profiler plugin's ``doc_sources`` (plus configured
URLs), or from a local mirror (``offline_mirror``). Without a model both stages are structural
(:mod:`.structural`, :mod:`.merge`); with one, stage 1 and stage 2 go through the model
(:mod:`.summarize`) on top of the structural merge. Outputs in ``out_dir``: ``compendium/<profiler>.json``
and ``.md``, ``build-report.json``, and the Chroma index in ``index/``, synced by content hash so a
rebuild embeds only entries that changed (vectors pragma-core ships are reused), with every entry's
vector in ``compendium/vectors.npz``.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import attrs

from pragma_core.errors import PragmaError
from pragma_core.files import atomic_write_text
from pragma_core.knowledge.entries import Compendium, render_markdown, write_compendium
from pragma_core.knowledge.index import KnowledgeIndex, SyncStats
from pragma_core.knowledge.library import lookup, packaged_vectors
from pragma_core.knowledge.vectors import VECTORS_FILE, write_vectors
from pragma_core.plugin_api.components import LLMProvider, Profiler

from .documents import Chunk, Page
from .formats import read_page
from .merge import MergeReport, merge_stage1
from .notes import Stage1
from .structural import structural_stage1

__all__ = ["BuildSettings", "Coverage", "BuildResult", "build", "coverage_of", "Progress"]

Progress = Callable[[str, int, int], None]
"""``progress(step, done, total)``: called as each step advances."""


def _texts(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(items)


@attrs.frozen(kw_only=True)
class BuildSettings:
    """What to build from and where. ``urls`` are extra ``profiler=URL`` pages to crawl;
    ``profilers`` keeps the build to those plugins (default: every installed profiler)."""

    out_dir: Path = attrs.field(converter=Path)
    offline_mirror: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path))
    model: str | None = None
    urls: tuple[str, ...] = attrs.field(default=(), converter=_texts)
    profilers: tuple[str, ...] = attrs.field(default=(), converter=_texts)
    folders: dict[str, str] = attrs.field(factory=dict)
    max_depth: int = 1
    max_pages: int = 200
    rate_limit_s: float = 1.0
    index: bool = True


@attrs.frozen(kw_only=True)
class Coverage:
    """Which of a plugin's default metrics the compendium gives a meaning for."""

    profiler: str
    covered: tuple[str, ...]
    missing: tuple[str, ...]

    @property
    def share(self) -> float:
        total = len(self.covered) + len(self.missing)
        return len(self.covered) / total if total else 1.0


@attrs.frozen(kw_only=True)
class BuildResult:
    """What a build made and measured."""

    compendia: dict[str, Compendium]
    coverage: dict[str, Coverage]
    pages: int
    chunks: int
    skipped: dict[str, str]
    undocumented: dict[str, list[str]]
    model_failures: int = 0
    sync: SyncStats | None = None


def coverage_of(compendium: Compendium, default_metrics: Sequence[str]) -> Coverage:
    """The default metrics that resolve in the compendium (name or alias, as lookup resolves)."""
    found = lookup(default_metrics, compendia={compendium.profiler: compendium})
    return Coverage(
        profiler=compendium.profiler,
        covered=tuple(m for m in default_metrics if m in found),
        missing=tuple(m for m in default_metrics if m not in found),
    )


def _sources(profilers: Mapping[str, Profiler], urls: Sequence[str]) -> dict[str, list[str]]:
    sources = {name: list(profiler.doc_sources) for name, profiler in profilers.items()}
    for item in urls:
        name, sep, url = item.partition("=")
        if not sep or name not in sources or not url.startswith(("http://", "https://")):
            raise PragmaError(
                f"--url {item!r}: expected PROFILER=URL with one of "
                f"{', '.join(sorted(sources))}, e.g. perf=https://perfwiki.github.io/main/"
            )
        sources[name].append(url)
    return sources


def _pages(
    settings: BuildSettings, sources: Mapping[str, Sequence[str]], progress: Progress
) -> tuple[list[Page], dict]:
    if settings.offline_mirror is not None:
        from .mirror import read_mirror

        if not settings.offline_mirror.is_dir():
            raise PragmaError(
                f"--offline-mirror {settings.offline_mirror}: no such folder; give the folder "
                "holding one sub-folder of documentation per tool"
            )
        selection = read_mirror(settings.offline_mirror, sources, folders=settings.folders)
        if not selection.pages:
            raise PragmaError(
                f"--offline-mirror {settings.offline_mirror}: no page there belongs to a profiler "
                f"plugin ({', '.join(sorted(sources))}); name the folders with --folder DIR=PROFILER"
            )
        return list(selection.pages), dict(selection.skipped)
    from .crawl import CrawlSettings, crawl

    starts = {url: profiler for profiler, urls in sources.items() for url in urls}
    done = itertools.count(1)
    result = crawl(
        list(starts),
        starts,
        cache_dir=settings.out_dir / "http-cache",
        settings=CrawlSettings(
            max_depth=settings.max_depth, max_pages=settings.max_pages, rate_limit_s=settings.rate_limit_s
        ),
        on_page=lambda page: progress("crawl", next(done), settings.max_pages),
    )
    return list(result.pages), {issue.url: issue.reason for issue in (*result.errors, *result.skipped)}


def build(
    settings: BuildSettings,
    profilers: Mapping[str, Profiler],
    *,
    provider: LLMProvider | None = None,
    progress: Progress = lambda step, done, total: None,
) -> BuildResult:
    """Build the compendium of ``profilers`` (name -> record) into ``settings.out_dir``."""
    chosen = {name: p for name, p in profilers.items() if not settings.profilers or name in settings.profilers}
    unknown = sorted(set(settings.profilers) - set(profilers))
    if unknown or not chosen:
        raise PragmaError(
            f"no installed profiler plugin named {', '.join(unknown) or 'any'}; installed: "
            f"{', '.join(sorted(profilers)) or 'none'} (see `pragma plugins`)"
        )
    if settings.model and provider is None:
        raise PragmaError("a model was given but no LLM provider to call it; use the litellm provider")
    pages, skipped = _pages(settings, _sources(chosen, settings.urls), progress)
    chunks: list[Chunk] = []
    for done, page in enumerate(pages, 1):
        chunks.extend(read_page(page))
        progress("read", done, len(pages))

    stages = None
    if settings.model:
        from .summarize import ModelStages

        assert provider is not None  # a model with no provider was refused above
        stages = ModelStages(provider=provider, model=settings.model, cache_dir=settings.out_dir / "model-cache")
        counter = itertools.count(1)
        stage1 = stages.stage1(chunks, on_chunk=lambda: progress("stage 1", next(counter), len(chunks)))
    else:
        stage1 = structural_stage1(chunks)
        progress("stage 1", len(chunks), len(chunks))

    report, compendia = MergeReport(), {}
    for name, profiler in chosen.items():
        compendium = merge_stage1(
            name, _of(stage1, name), formulas=profiler.formulas, preferred=profiler.default_metrics, report=report
        )
        if stages is not None:
            step, batches, batches_done = f"stage 2 {name}", stages.batches(compendium), itertools.count(1)
            compendium = stages.stage2(
                compendium,
                _of(stage1, name),
                on_batch=functools.partial(_advance, progress, step, batches_done, batches),
            )
        if compendium.metrics or compendium.guides:
            compendia[name] = compendium
        progress("stage 2", len(compendia), len(chosen))

    out = settings.out_dir / "compendium"
    for name, compendium in compendia.items():
        write_compendium(out / f"{name}.json", compendium)
        atomic_write_text(out / f"{name}.md", render_markdown(compendium))
    coverage = {
        name: coverage_of(compendia[name], chosen[name].default_metrics)
        if name in compendia
        else Coverage(profiler=name, covered=(), missing=chosen[name].default_metrics)
        for name in chosen
    }
    sync = None
    if settings.index:
        index = KnowledgeIndex(settings.out_dir / "index")
        sync = index.sync(
            compendia.values(),
            on_progress=lambda done, total: progress("embed", done, total),
            known=packaged_vectors(),
        )
        write_vectors(out / VECTORS_FILE, *index.vectors())
    result = BuildResult(
        compendia=compendia,
        coverage=coverage,
        pages=len(pages),
        chunks=len(chunks),
        skipped=skipped,
        undocumented=report.undocumented,
        model_failures=len(stages.failures) if stages else 0,
        sync=sync,
    )
    atomic_write_text(settings.out_dir / "build-report.json", json.dumps(_report(result, settings), indent=1) + "\n")
    return result


def _advance(progress: Progress, step: str, counter: Iterator[int], total: int) -> None:
    """One more of ``total`` done in ``step``."""
    progress(step, next(counter), total)


def _of(stage1: Stage1, profiler: str) -> Stage1:
    return Stage1(
        notes=[n for n in stage1.notes if n.profiler == profiler],
        guides=[g for g in stage1.guides if g.profiler == profiler],
    )


def _report(result: BuildResult, settings: BuildSettings) -> dict:
    return {
        "built_from": str(settings.offline_mirror) if settings.offline_mirror else "crawl",
        "model": settings.model,
        "pages": result.pages,
        "chunks": result.chunks,
        "profilers": {
            name: {
                "metrics": len(compendium.metrics),
                "guides": len(compendium.guides),
                "default_coverage": round(result.coverage[name].share, 4),
                "default_missing": list(result.coverage[name].missing),
                "undocumented": result.undocumented.get(name, [])[:200],
            }
            for name, compendium in result.compendia.items()
        },
        "model_failures": result.model_failures,
        "embedded": result.sync.embedded if result.sync else None,
        "skipped": result.skipped,
    }
