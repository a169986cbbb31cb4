"""Reading Conductor replies into Guidance, and the one repair request when that fails."""

from __future__ import annotations

import json

import pytest

from pragma_core import ChatMessage, Guidance, PragmaError
from pragma_core.agents.replies import GuidanceParseError, parse_guidance, repair_messages

ANALYSIS = (
    "The kernel streams 64 MiB once and reaches 38% of the roofline; the D1 miss rate of 6.2% "
    "shows the loads are not the limit, the scalar tail loop is."
)


def test_clean_json():
    reply = json.dumps(
        {
            "analysis": ANALYSIS,
            "actions": ["vectorize the tail", "use a static schedule"],
            "extra_metrics": ["LLd miss rate"],
            "new_best": True,
        }
    )
    assert parse_guidance(reply) == Guidance(
        analysis=ANALYSIS,
        actions=("vectorize the tail", "use a static schedule"),
        extra_metrics=("LLd miss rate",),
        new_best=True,
    )


def test_json_in_a_fence_with_prose_around_it():
    reply = f"""Looking at the profile, the bottleneck is clear.

```json
{{
  "analysis": "{ANALYSIS}",
  "actions": [
    "Process 16 floats per iteration with _mm512 intrinsics",
    "Drop the separate remainder loop by masking"
  ],
  "extra_metrics": [],
  "new_best": false
}}
```

Let me know if you need more detail."""
    guidance = parse_guidance(reply)
    assert guidance.analysis == ANALYSIS
    assert guidance.actions[1] == "Drop the separate remainder loop by masking"
    assert guidance.new_best is False


def test_trailing_commas_and_comments():
    reply = """{
  "analysis": "memory bound",  // from the roofline
  "actions": ["fuse the two passes", "block rows by 64",],
  "new_best": false,
}"""
    guidance = parse_guidance(reply)
    assert guidance.actions == ("fuse the two passes", "block rows by 64")


def test_single_quotes_and_python_literals():
    reply = (
        "Here is my assessment: {'analysis': 'The loop isn\\'t vectorized: \"ymm\" registers unused', "
        "'actions': ['add #pragma omp simd'], 'extra_metrics': ['Ir'], 'new_best': True}"
    )
    guidance = parse_guidance(reply)
    assert guidance.analysis == 'The loop isn\'t vectorized: "ymm" registers unused'
    assert guidance.actions == ("add #pragma omp simd",)
    assert guidance.new_best is True


def test_bare_keys():
    guidance = parse_guidance('{analysis: "latency bound", actions: ["unroll by 4"]}')
    assert guidance.actions == ("unroll by 4",)


def test_missing_optional_fields_default():
    assert parse_guidance('{"analysis": "compile error: missing include <cmath>"}') == Guidance(
        analysis="compile error: missing include <cmath>"
    )
    assert parse_guidance('{"actions": ["add #include <cmath>"]}') == Guidance(
        analysis="", actions=("add #include <cmath>",)
    )


@pytest.mark.parametrize(
    "value, expected",
    [
        ('"true"', True),
        ('"yes"', True),
        ('"Yes"', True),
        ("1", True),
        ('"false"', False),
        ('"no"', False),
        ("0", False),
        ("null", False),
    ],
)
def test_new_best_as_text_or_number(value, expected):
    reply = f'{{"analysis": "a", "new_best": {value}}}'
    assert parse_guidance(reply).new_best is expected


def test_new_best_that_is_no_answer():
    with pytest.raises(GuidanceParseError, match="new_best must be true or false, not 'maybe'"):
        parse_guidance('{"analysis": "a", "new_best": "maybe"}')


def test_actions_as_one_bulleted_string_and_metrics_as_a_comma_list():
    reply = '{"analysis": "a", "actions": "1. tile by 64\\n2. hoist the bounds check", "extra_metrics": "D1mr, DLmr"}'
    guidance = parse_guidance(reply)
    assert guidance.actions == ("tile by 64", "hoist the bounds check")
    assert guidance.extra_metrics == ("D1mr", "DLmr")


def test_actions_as_objects_and_unusual_key_spelling():
    reply = '{"Analysis": "a", "Actions": [{"change": "tile by 64", "why": "L1 reuse"}], "Extra-Metrics": ["Bcm"]}'
    guidance = parse_guidance(reply)
    assert guidance.actions == ("change: tile by 64; why: L1 reuse",)
    assert guidance.extra_metrics == ("Bcm",)


def test_braces_in_prose_before_the_object():
    reply = (
        "The loop over {i, j} is in the wrong order.\n"
        '{"analysis": "strided access in the inner loop", "actions": ["swap the loops"]}'
    )
    assert parse_guidance(reply).actions == ("swap the loops",)


def test_reasoning_section_is_skipped():
    reply = '<think>Maybe {"analysis": "draft"}... no.</think>\n{"analysis": "final", "actions": ["unroll"]}'
    assert parse_guidance(reply).analysis == "final"


def test_multiline_strings_inside_json():
    reply = '{"analysis": "line one\nline two", "actions": []}'
    assert parse_guidance(reply).analysis == "line one\nline two"


@pytest.mark.parametrize(
    "reply, reason",
    [
        ("", "the reply is empty"),
        ("The kernel is memory bound; vectorize the inner loop.", "the reply holds no JSON object; it begins"),
        ('```json\n{"analysis": "The kernel is memory bound because', "not closed; the reply may have been cut off"),
        ('{"analysis": "a" "actions": []}', "the JSON object does not parse: Expecting ',' delimiter"),
        ('{"bottleneck": "memory", "fix": "tile"}', "none of the fields analysis, actions"),
        ('{"analysis": "", "actions": []}', "neither an analysis nor any actions"),
    ],
)
def test_unreadable_replies_say_why_in_one_line(reply, reason):
    with pytest.raises(GuidanceParseError) as caught:
        parse_guidance(reply)
    message = str(caught.value)
    assert reason in message
    assert "\n" not in message
    assert isinstance(caught.value, PragmaError)


def test_the_reason_comes_from_the_object_that_names_a_field():
    reply = 'With {x} as the index:\n{"analysis": "a", actions: ["b"] "new_best": false}'
    with pytest.raises(GuidanceParseError, match="does not parse"):
        parse_guidance(reply)


ORIGINAL = (
    ChatMessage(role="system", content="You are the Conductor in pragma."),
    ChatMessage(role="user", content="## 1. Current code ..."),
)


def test_repair_messages_keep_the_conversation_and_name_the_error():
    bad = "The kernel is memory bound. I would vectorize the inner loop."
    with pytest.raises(GuidanceParseError) as caught:
        parse_guidance(bad)
    messages = repair_messages(ORIGINAL, bad, caught.value)
    assert messages[:2] == ORIGINAL
    assert messages[2] == ChatMessage(role="assistant", content=bad)
    repair = messages[3]
    assert repair.role == "user"
    assert str(caught.value) in repair.content
    for field in ('"analysis"', '"actions"', '"extra_metrics"', '"new_best"'):
        assert field in repair.content


def test_repair_flow_with_a_model_that_answers_in_prose_first():
    replies = iter(
        [
            "Analysis: the scalar tail dominates.\nActions: vectorize it.",
            'Sorry about that.\n```json\n{"analysis": "the scalar tail dominates", "actions": ["vectorize it"], '
            '"extra_metrics": [], "new_best": false}\n```',
        ]
    )
    sent = []

    def complete(messages):
        sent.append(messages)
        return next(replies)

    reply = complete(ORIGINAL)
    try:
        guidance = parse_guidance(reply)
    except GuidanceParseError as error:
        guidance = parse_guidance(complete(repair_messages(ORIGINAL, reply, error)))
    assert guidance == Guidance(analysis="the scalar tail dominates", actions=("vectorize it",))
    assert [m.role for m in sent[1]] == ["system", "user", "assistant", "user"]


def test_repair_bounds_a_huge_bad_reply_and_an_empty_one():
    huge = "blah " * 50_000
    messages = repair_messages(ORIGINAL, huge, "no JSON")
    assert len(messages[2].content) < 10_000
    assert "left out" in messages[2].content
    assert repair_messages(ORIGINAL, "", "the reply is empty")[2].content == "(empty)"
