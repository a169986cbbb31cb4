"""Stages 1 and 2 with a language model, through pragma's LLM providers.

Stage 1 asks the model to turn one chunk into metric notes and at most two guide passages, in a
fixed JSON schema; stage 2 asks it to merge the notes of a batch of metrics into one entry each,
in the one vocabulary of :data:`pragma_core.knowledge.TERMS`. Requests go to an
:class:`~pragma_core.LLMProvider` (``litellm`` for ``--model``) with the role ``summarizer``.
Replies are cached on disk by a hash of model and prompt, so a rebuild asks again only for what
changed. A reply that is not the schema leaves that chunk or batch to the structural path and is
counted, never fatal. Entries the model wrote carry ``built_by="model:<model>"``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import attrs

from pragma_core.files import atomic_write_text
from pragma_core.knowledge.entries import Compendium, GuideEntry, MetricEntry
from pragma_core.knowledge.vocabulary import TERMS, standard_term, terms_in
from pragma_core.plugin_api.components import LLMProvider
from pragma_core.records import AgentRole, ChatMessage, CompletionRequest

from .documents import Chunk
from .notes import MetricNote, Stage1
from .structural import GUIDE_CHARS, MEANING_CHARS, opening, structural_stage1

__all__ = ["ModelStages", "STAGE2_BATCH", "MAX_MODEL_DEFINITIONS"]

STAGE2_BATCH = 12
"""Metrics merged per stage-2 request."""

MAX_MODEL_DEFINITIONS = 40
"""A chunk defining more metrics than this (a generated counter table) is read structurally."""

_CHUNK_CHARS = 6_000
_VOCABULARY = ", ".join(TERMS)

_SCHEMA = """{"metrics": [{"name": "...", "aliases": ["..."], "meaning": "...", "measured": "...",
  "bottleneck": ["..."], "remedies": ["..."], "unit": "..."}],
 "guides": [{"topic": "...", "text": "..."}]}"""

_STAGE1_SYSTEM = f"""You build a compendium of profiler metrics for kernel performance engineers.
From one chunk of a profiler's documentation, extract every metric the chunk documents and at most
two guide passages, as JSON of exactly this shape:
{_SCHEMA}
Rules: name metrics exactly as the tool spells them (case, dots, underscores); aliases are other
names the chunk gives (labels, legacy names); meaning is one or two sentences (under {MEANING_CHARS}
characters) in your own words; measured says how the tool measures or computes it; bottleneck
uses only these terms: {_VOCABULARY}; remedies are concrete code changes that improve the metric;
unit as the tool reports it. Guides are short passages (under {GUIDE_CHARS} characters) on methods
or caveats that help optimize a kernel. Use empty lists when the chunk documents nothing. Reply
with the JSON only."""

_STAGE2_SYSTEM = f"""You merge notes about profiler metrics into one compendium entry per metric.
Each metric below has notes from several pages or architectures. For each, write one entry as JSON
of the shape {{"metrics": [...]}} with the fields of: {_SCHEMA}
Rules: keep each metric's name exactly; meaning is one coherent statement (under {MEANING_CHARS}
characters); bottleneck uses only these terms, the same vocabulary for every profiler:
{_VOCABULARY}; keep aliases and units from the notes; remedies are concrete code changes. Reply
with the JSON only."""


@attrs.define(kw_only=True)
class ModelStages:
    """Both model stages for one model: ``provider`` answers, ``cache_dir`` keeps the replies."""

    provider: LLMProvider
    model: str
    cache_dir: Path
    failures: list[str] = attrs.field(factory=list)

    @property
    def built_by(self) -> str:
        return f"model:{self.model}"

    # -- stage 1 ------------------------------------------------------------------------------

    def stage1(self, chunks: Sequence[Chunk], on_chunk: Callable[[], None] = lambda: None) -> Stage1:
        """Notes and guides of every chunk; big definition tables and failed replies structurally."""
        result = Stage1()
        for chunk in chunks:
            result = result + self._chunk(chunk)
            on_chunk()
        return result

    def _chunk(self, chunk: Chunk) -> Stage1:
        if len(chunk.definitions) > MAX_MODEL_DEFINITIONS:
            return structural_stage1([chunk])
        prompt = (
            f"Profiler: {chunk.profiler}\nSource: {chunk.source}\nSection: {chunk.topic}\n\n{chunk.text[:_CHUNK_CHARS]}"
        )
        reply = self._ask(_STAGE1_SYSTEM, prompt)
        if reply is None:
            return structural_stage1([chunk])
        notes = [note for item in reply.get("metrics", []) if (note := self._note(item, chunk)) is not None]
        guides = [
            GuideEntry(
                profiler=chunk.profiler,
                topic=str(item.get("topic") or chunk.topic).strip(),
                text=opening(str(item.get("text", "")), GUIDE_CHARS),
                source=chunk.source,
                built_by=self.built_by,
            )
            for item in reply.get("guides", [])[:2]
            if isinstance(item, dict) and str(item.get("text", "")).strip()
        ]
        # the model reads tables too, but a definition it left out is still a documented metric
        named = {note.name for note in notes}
        kept = structural_stage1(
            [attrs.evolve(chunk, kind="definitions", definitions=[d for d in chunk.definitions if d.term not in named])]
        ).notes
        return Stage1(notes=[*notes, *kept], guides=guides)

    def _note(self, item: object, chunk: Chunk) -> MetricNote | None:
        if not isinstance(item, dict) or not str(item.get("name", "")).strip():
            return None
        return MetricNote(
            profiler=chunk.profiler,
            name=str(item["name"]).strip(),
            aliases=_strings(item.get("aliases")),
            meaning=opening(str(item.get("meaning", "")), MEANING_CHARS),
            measured=str(item.get("measured", "")),
            bottleneck=_vocabulary(_strings(item.get("bottleneck"))),
            remedies=_strings(item.get("remedies"))[:4],
            unit=str(item.get("unit", "")),
            context=chunk.topic,
            source=chunk.source,
            built_by=self.built_by,
        )

    # -- stage 2 ------------------------------------------------------------------------------

    def stage2(self, merged: Compendium, stage1: Stage1, on_batch: Callable[[], None] = lambda: None) -> Compendium:
        """The structurally merged compendium refined by the model, batch by batch of metrics."""
        notes_of: dict[str, list[MetricNote]] = {}
        for note in stage1.notes:
            notes_of.setdefault(note.name, []).append(note)
        refined: dict[str, MetricEntry] = {}
        entries = list(merged.metrics)
        for start in range(0, len(entries), STAGE2_BATCH):
            batch = entries[start : start + STAGE2_BATCH]
            refined.update(self._batch(batch, notes_of))
            on_batch()
        return attrs.evolve(merged, metrics=[refined.get(entry.name, entry) for entry in merged.metrics])

    def batches(self, merged: Compendium) -> int:
        return -(-len(merged.metrics) // STAGE2_BATCH)

    def _batch(self, batch: Sequence[MetricEntry], notes_of: Mapping[str, list[MetricNote]]) -> dict[str, MetricEntry]:
        payload = []
        for entry in batch:
            notes = [n for name in entry.names for n in notes_of.get(name, [])][:6]
            payload.append(
                {
                    "name": entry.name,
                    "aliases": list(entry.aliases),
                    "unit": entry.unit,
                    "notes": [
                        {
                            "meaning": n.meaning,
                            "measured": n.measured,
                            "source": n.source,
                            "bottleneck": list(n.bottleneck),
                            "remedies": list(n.remedies),
                        }
                        for n in notes
                    ]
                    or [{"meaning": entry.meaning, "measured": entry.measured}],
                }
            )
        reply = self._ask(_STAGE2_SYSTEM, json.dumps({"profiler": batch[0].profiler, "metrics": payload}, indent=1))
        if reply is None:
            return {}
        by_name = {entry.name: entry for entry in batch}
        refined = {}
        for item in reply.get("metrics", []):
            if not isinstance(item, dict) or item.get("name") not in by_name:
                continue
            entry = by_name[item["name"]]
            meaning = opening(str(item.get("meaning", "")), MEANING_CHARS)
            if not meaning:
                continue
            bottleneck = _vocabulary(_strings(item.get("bottleneck"))) or terms_in(f"{entry.name} {meaning}")
            refined[entry.name] = attrs.evolve(
                entry,
                meaning=meaning,
                measured=str(item.get("measured") or entry.measured),
                aliases=sorted(set(entry.aliases) | set(_strings(item.get("aliases"))) - {entry.name}),
                bottleneck=bottleneck,
                remedies=_strings(item.get("remedies"))[:4] or entry.remedies,
                unit=str(item.get("unit") or entry.unit),
                built_by=self.built_by,
            )
        return refined

    # -- the model ----------------------------------------------------------------------------

    def _ask(self, system: str, prompt: str) -> dict | None:
        key = hashlib.sha256(json.dumps([self.model, system, prompt]).encode()).hexdigest()[:32]
        cached = self.cache_dir / f"{key}.json"
        if cached.is_file():
            text = json.loads(cached.read_text(encoding="utf-8"))["reply"]
        else:
            messages = (ChatMessage(role="system", content=system), ChatMessage(role="user", content=prompt))
            request = CompletionRequest(
                role=AgentRole.SUMMARIZER,
                model=self.model,
                messages=messages,
            )
            text = self.provider.complete(request).text
        parsed = _json_object(text)
        if parsed is None:
            self.failures.append(text[:200])
            return None
        if not cached.is_file():
            atomic_write_text(cached, json.dumps({"model": self.model, "reply": text}) + "\n")
        return parsed


def _json_object(text: str) -> dict | None:
    """The first JSON object in a reply, fenced or not; None when there is none."""
    fenced = re.search(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.S)
    candidates = [fenced.group(1)] if fenced else []
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _strings(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Iterable):
        return ()
    return tuple(str(item).strip() for item in value if str(item).strip())


def _vocabulary(terms: Iterable[str]) -> tuple[str, ...]:
    """Each term mapped to the standard vocabulary; terms outside it dropped."""
    return tuple(dict.fromkeys(t for t in (standard_term(term) for term in terms) if t))
