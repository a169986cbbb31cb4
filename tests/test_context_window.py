"""Prompts fitted to a model's context window: the parts that give way first, the window read from
the user, litellm or the server's own error, the reply's token budget, and a reply cut at it.
Model replies are litellm's ``mock_response``; nothing else is faked."""

from __future__ import annotations

import pytest

from pragma_core.agents.budget import FULL_BUDGET, fit_prompt
from pragma_core.agents.prompts import coder_messages
from pragma_core.errors import PragmaError, PromptTooLong
from pragma_core.plugin_api.components import PromptRoom
from pragma_core.providers import litellm_provider as lp
from pragma_core.providers._window_discovery import WINDOW_VARIABLE, WindowMemory, reply_tokens, window_in_error
from pragma_core.providers.litellm_import import imported_litellm
from pragma_core.records import ChatMessage, CompletionRequest
from pragma_core.tasks.loading import load_task

from .conftest import EXAMPLES

LOCAL = "openai/smollm2"  # a model litellm's list does not know, as on a local server


@pytest.fixture(scope="module")
def litellm():
    return imported_litellm()


@pytest.fixture(scope="module")
def task():
    return load_task(EXAMPLES / "level1" / "1_GELUTanh.py")


class Script:
    """Stands in for ``litellm.completion``: real litellm, answering each call with the next reply."""

    def __init__(self, litellm, *replies):
        self.litellm, self.replies, self.calls = litellm, list(replies), []

    def __call__(self, **arguments):
        self.calls.append(arguments)
        reply = self.replies[len(self.calls) - 1]
        if isinstance(reply, Exception):
            raise reply
        return self.litellm.completion(**arguments, mock_response=reply)


def chars_room(limit_chars: int):
    """A room counting four characters a token, with ``limit_chars`` characters of prompt allowed."""

    def room(messages):
        tokens = sum(len(message.content) for message in messages) // 4
        return PromptRoom(tokens=tokens, window=limit_chars // 4 + 100, reply_tokens=100, window_from="a test")

    return room


GUIDE = "Write C++ with OpenMP. " * 400  # 9,200 characters: a long backend guide


def test_a_prompt_that_fits_is_left_whole(task):
    fitted = fit_prompt(lambda budget: coder_messages(task, GUIDE, budget=budget), chars_room(10**6))
    assert fitted.budget is FULL_BUDGET and fitted.gave_way == () and fitted.note() == ""
    assert GUIDE.strip() in fitted.messages[1].content


def test_parts_give_way_in_order_until_the_prompt_fits(task):
    whole = coder_messages(task, GUIDE)
    size = sum(len(message.content) for message in whole)
    fitted = fit_prompt(lambda budget: coder_messages(task, GUIDE, budget=budget), chars_room(size - 5_000))
    assert fitted.gave_way[:3] == (
        "the profilers' documentation",
        "earlier attempts but the last 3",
        "the best attempt's code and profile",
    )
    assert "the backend's guide beyond 1,500 characters" in fitted.gave_way
    assert fitted.room is not None and fitted.room.fits
    assert sum(len(message.content) for message in fitted.messages) <= size - 5_000
    assert task.source.strip()[:200] in fitted.messages[1].content  # the task stays
    note = fitted.note()
    assert note.startswith("fitted to ") and "the backend's guide beyond 1,500 characters" in note
    assert "context window from a test" in note


def test_a_prompt_that_cannot_fit_says_how_many_tokens_it_needs(task):
    with pytest.raises(PromptTooLong) as raised:
        fit_prompt(lambda budget: coder_messages(task, GUIDE, budget=budget), chars_room(400), who="the Coder's prompt")
    message = str(raised.value)
    assert message.startswith("the Coder's prompt needs ")
    assert "but the model takes 100" in message and "choose a model with a larger context window" in message
    assert "code beyond 1,000 and the reference beyond 1,000 characters" in message  # everything gave way
    assert message.count("code beyond") == 1  # the last cut of a part is said, not each halving


@pytest.mark.parametrize(
    ("text", "window"),
    [
        ("Requested tokens (5000) exceed context window of 2048", 2048),  # llama-cpp-python's server
        ("This model's maximum context length is 4096 tokens. However, you requested 5000 tokens", 4096),
        ("the request exceeds the available context size (8192 tokens), try increasing it", 8192),
        ("Invalid API key", None),
    ],
)
def test_the_window_a_server_names_in_its_error_is_read(text, window):
    assert window_in_error(text) == window


def test_the_reply_keeps_a_quarter_of_the_window_within_bounds():
    assert reply_tokens(2048, None, None) == 512
    assert reply_tokens(512, None, None) == 256
    assert reply_tokens(128_000, None, 16_384) == 8_192
    assert reply_tokens(128_000, None, 4_096) == 4_096  # the model's own output limit
    assert reply_tokens(2048, 300, None) == 300  # max_tokens in the settings


def test_the_users_window_sets_the_room_and_the_replys_max_tokens(litellm, monkeypatch):
    monkeypatch.setenv(WINDOW_VARIABLE, "2048")
    script = Script(litellm, "ok")
    provider = lp.LiteLLMProvider(lp.LiteLLMSettings(api_base="http://127.0.0.1:9/v1"), completion=script)
    messages = (ChatMessage(role="system", content="You write kernels."), ChatMessage(role="user", content="x " * 50))
    room = provider.room(LOCAL, messages)
    assert room is not None
    assert (room.window, room.reply_tokens, room.limit, room.window_from) == (2048, 512, 1536, WINDOW_VARIABLE)
    assert room.fits and room.tokens > 50
    provider.complete(CompletionRequest(role="coder", messages=messages, model=LOCAL))
    assert script.calls[0]["max_tokens"] == 512


def test_a_bad_window_setting_is_one_clear_error(litellm, monkeypatch):
    monkeypatch.setenv(WINDOW_VARIABLE, "big")
    provider = lp.LiteLLMProvider(lp.LiteLLMSettings(), completion=Script(litellm, "ok"))
    with pytest.raises(PragmaError, match="PRAGMA_CONTEXT_WINDOW='big': not a number of tokens"):
        provider.room(LOCAL, (ChatMessage(role="user", content="x"),))


def test_an_unknown_window_is_learned_from_the_servers_error(litellm, monkeypatch):
    monkeypatch.delenv(WINDOW_VARIABLE, raising=False)
    refusal = litellm.BadRequestError(
        message="Requested tokens (9000) exceed context window of 2048", model="smollm2", llm_provider="openai"
    )
    script = Script(litellm, refusal, "fits now")
    provider = lp.LiteLLMProvider(lp.LiteLLMSettings(api_base="http://127.0.0.1:9/v1"), completion=script)
    long = (ChatMessage(role="system", content="You write kernels."), ChatMessage(role="user", content="word " * 6000))
    assert provider.room(LOCAL, long) is None  # nothing says the window yet
    completion = provider.complete(CompletionRequest(role="coder", messages=long, model=LOCAL))
    assert completion.text == "fits now"
    sent = script.calls[1]["messages"][1]["content"]
    assert "characters cut to fit the context window" in sent and len(sent) < 6000 * 5 / 2
    assert script.calls[1]["max_tokens"] == 512
    room = provider.room(LOCAL, long)
    assert room is not None and room.window == 2048 and room.window_from == "the server's error"
    assert not room.fits  # the loop now fits its prompts before they are sent


def test_the_servers_token_count_scales_the_next_estimates(litellm):
    memory = WindowMemory()
    messages = [{"role": "user", "content": "def forward(self, x):\n    return x * 2\n" * 20}]
    before = memory.prompt_tokens(litellm, LOCAL, messages)
    counted = litellm.token_counter(model=LOCAL, messages=messages)
    memory.calibrate(litellm, LOCAL, messages, reported=2 * counted)  # a tokenizer that splits finer
    after = memory.prompt_tokens(litellm, LOCAL, messages)
    assert after >= 2 * counted and after > before


def test_a_reply_cut_at_the_token_limit_says_so(litellm, monkeypatch):
    monkeypatch.setenv(WINDOW_VARIABLE, "2048")
    cut = {
        "choices": [
            {"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": "```python\nimport"}}
        ],
        "usage": {"prompt_tokens": 40, "completion_tokens": 512, "total_tokens": 552},
        "model": "smollm2",
    }
    provider = lp.LiteLLMProvider(lp.LiteLLMSettings(), completion=Script(litellm, cut, "whole"))
    request = CompletionRequest(role="coder", messages=(ChatMessage(role="user", content="a kernel"),), model=LOCAL)
    first = provider.complete(request)
    assert first.cut_at_token_limit and first.finish_reason == "length" and first.usage.completion == 512
    assert not provider.complete(request).cut_at_token_limit
