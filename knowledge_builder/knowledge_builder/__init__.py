"""pragma's knowledge builder: profiler documentation in, a metric compendium and its index out.

Pages come from crawling every installed profiler plugin's ``doc_sources`` (:mod:`.crawl`) or from
a local mirror (:mod:`.mirror`); format readers (:mod:`.formats`) cut them into chunks that follow
headings, metric tables and definition lists; stage 1 turns chunks into metric notes and guide
passages, stage 2 merges the notes of each metric into one entry in one vocabulary, with a model
(:mod:`.summarize`) or without (:mod:`.structural`, :mod:`.merge`); :mod:`.build` writes
``compendium/<profiler>.json`` and its markdown, and syncs the Chroma index. The CLI is ``pragma-kb``.
"""

from __future__ import annotations

from .build import BuildResult, BuildSettings, Coverage, build, coverage_of

__version__ = "0.1.0"

__all__ = ["__version__", "BuildSettings", "BuildResult", "Coverage", "build", "coverage_of"]
