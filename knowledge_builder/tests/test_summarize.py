"""Both stages through a model: the real litellm provider, with only the model's replies scripted
(litellm's ``mock_response``), on chunks of the real Cachegrind manual."""

from __future__ import annotations

import json
from typing import Any

import pytest

from knowledge_builder.build import BuildSettings, build
from knowledge_builder.documents import Page
from knowledge_builder.formats import read_page
from knowledge_builder.merge import merge_stage1
from knowledge_builder.summarize import ModelStages
from pragma_core import LLMProvider
from pragma_core.plugin_api.registry import get_registry
from pragma_core.providers.litellm_calls import LiteLLMProvider, LiteLLMSettings

MODEL = "openai/gpt-4o-mini"


class ScriptedModel:
    """Answers each request with ``reply(system, user)``; counts the calls that reached litellm."""

    def __init__(self, reply):
        self.reply, self.calls = reply, 0

    def provider(self) -> LLMProvider:
        def completion(**arguments: Any) -> Any:
            import litellm

            self.calls += 1
            system, user = (m["content"] for m in arguments["messages"])
            return litellm.completion(mock_response=self.reply(system, user), **arguments)

        real = LiteLLMProvider(LiteLLMSettings(max_retries=0), completion=completion)
        return LLMProvider(name="scripted", complete=real.complete)


def stage1_reply(system: str, user: str) -> str:
    if "merge notes" in system:
        metrics = json.loads(user)["metrics"]
        return json.dumps(
            {
                "metrics": [
                    {
                        "name": m["name"],
                        "meaning": f"Merged: {m['notes'][0]['meaning'] or m['name']}",
                        "bottleneck": ["Cache-miss heavy"],
                        "remedies": ["tile the loops so data stays in D1"],
                    }
                    for m in metrics
                ]
            }
        )
    if "Ir" in user and "I cache reads" in user:
        return (
            "```json\n"
            + json.dumps(
                {
                    "metrics": [
                        {
                            "name": "Ir",
                            "aliases": ["I refs"],
                            "meaning": "Instructions executed by the program.",
                            "measured": "counted per instruction by the simulator",
                            "bottleneck": ["Front-end bound", "nonsense"],
                            "remedies": ["do less work per element"],
                            "unit": "instructions",
                        }
                    ],
                    "guides": [{"topic": "Reading Ir", "text": "Compare Ir between versions; it is deterministic."}],
                }
            )
            + "\n```"
        )
    return "I could not find any metric here."  # not the schema: the structural path takes over


@pytest.fixture
def manual(docs_mirror) -> list:
    page = Page(
        url="https://valgrind.org/docs/manual/cg-manual.html",
        profiler="valgrind",
        format="xml",
        text=(docs_mirror / "cachegrind" / "cg-manual.xml").read_text(encoding="utf-8"),
    )
    return read_page(page)


def test_stage1_takes_the_models_entries_in_the_vocabulary_and_keeps_what_it_left_out(manual, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = ScriptedModel(stage1_reply)
    stages = ModelStages(provider=model.provider(), model=MODEL, cache_dir=tmp_path / "cache")
    stage1 = stages.stage1(manual)
    ir = [n for n in stage1.notes if n.name == "Ir" and n.built_by == f"model:{MODEL}"]
    assert ir and ir[0].meaning == "Instructions executed by the program."
    assert ir[0].bottleneck == ("front-end bound",)  # standardized; "nonsense" dropped
    # the table's other events the model did not name stay, read structurally
    assert {"I1mr", "D1mr", "Bcm"} <= {n.name for n in stage1.notes if n.built_by == "structural"}
    assert any(g.topic == "Reading Ir" and g.built_by == f"model:{MODEL}" for g in stage1.guides)
    assert stages.failures  # the chunks answered with prose
    assert model.calls == len([c for c in manual if len(c.definitions) <= 40])


def test_replies_are_cached_so_a_rebuild_asks_only_for_what_changed(manual, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    first = ScriptedModel(stage1_reply)
    stages = ModelStages(provider=first.provider(), model=MODEL, cache_dir=tmp_path / "cache")
    stages.stage1(manual)
    again = ScriptedModel(stage1_reply)
    ModelStages(provider=again.provider(), model=MODEL, cache_dir=tmp_path / "cache").stage1(manual)
    # replies in the schema were kept; a reply that was not is asked again next time
    assert 0 < again.calls == len(stages.failures) < first.calls


def test_stage2_merges_each_metric_in_one_vocabulary(manual, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = ScriptedModel(stage1_reply)
    stages = ModelStages(provider=model.provider(), model=MODEL, cache_dir=tmp_path / "cache")
    stage1 = stages.stage1(manual)
    valgrind = get_registry().profiler("valgrind")
    merged = merge_stage1("valgrind", stage1, formulas=valgrind.formulas, preferred=valgrind.default_metrics)
    refined = stages.stage2(merged, stage1)
    d1mr = refined.find("D1mr")
    assert d1mr.built_by == f"model:{MODEL}" and d1mr.meaning.startswith("Merged: ")
    assert d1mr.bottleneck == ("cache misses",) and d1mr.remedies == ("tile the loops so data stays in D1",)
    assert len(refined.metrics) == len(merged.metrics)


def test_a_model_build_records_which_path_built_each_entry(docs_mirror, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = ScriptedModel(stage1_reply)
    registry = get_registry()
    result = build(
        BuildSettings(
            out_dir=tmp_path / "kb", offline_mirror=docs_mirror, model=MODEL, profilers=("valgrind",), index=False
        ),
        {"valgrind": registry.profiler("valgrind")},
        provider=model.provider(),
    )
    compendium = result.compendia["valgrind"]
    kinds = {entry.built_by for entry in (*compendium.metrics, *compendium.guides)}
    assert f"model:{MODEL}" in kinds and "structural" in kinds
    assert result.coverage["valgrind"].share == 1.0
    report = json.loads((tmp_path / "kb" / "build-report.json").read_text())
    assert report["model"] == MODEL and report["model_failures"] == result.model_failures > 0
