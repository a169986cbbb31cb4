"""The built-in ``litellm`` provider, driven through litellm's own ``mock_response``, and against
real servers on 127.0.0.1 (a closed port, a listener that never accepts, an HTTP server answering
503): no network beyond this machine."""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pragma_core.errors import PragmaError
from pragma_core.loop.optimizer import optimize
from pragma_core.loop.settings import OptimizeSettings
from pragma_core.plugin_api.registry import PluginRegistry
from pragma_core.providers import litellm_provider as lp
from pragma_core.providers.litellm_import import imported_litellm
from pragma_core.records import ChatMessage, CompletionRequest
from pragma_core.tasks.loading import load_task

from .conftest import EXAMPLES

MODEL = "openai/gpt-4o-mini"  # litellm knows its price and context window


@pytest.fixture(scope="module")
def litellm():
    return imported_litellm()


@pytest.fixture(autouse=True)
def _no_model_or_keys(monkeypatch):
    for variable in (
        "PRAGMA_MODEL",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "DEEPSEEK_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "AZURE_API_KEY",
        "AZURE_API_BASE",
        "AZURE_API_VERSION",
        "OLLAMA_API_BASE",
        "HOSTED_VLLM_API_BASE",
    ):
        monkeypatch.delenv(variable, raising=False)


def ask(content="Write a ReLU kernel.", model=MODEL, system="You write C++ kernels."):
    return CompletionRequest(
        role="coder",
        messages=[ChatMessage(role="system", content=system), ChatMessage(role="user", content=content)],
        model=model,
    )


class Script:
    """Stands in for ``litellm.completion``: real litellm, answering each call with the next reply."""

    def __init__(self, litellm, *replies):
        self.litellm = litellm
        self.replies = list(replies)
        self.calls: list[dict] = []

    def __call__(self, **arguments):
        self.calls.append(arguments)
        return self.litellm.completion(**arguments, mock_response=self.replies[len(self.calls) - 1])


class Clock:
    """A clock that only the provider's waits move, so latency is exact."""

    def __init__(self):
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def provider(script, clock=None, **settings):
    clock = clock or Clock()
    return lp.LiteLLMProvider(
        lp.LiteLLMSettings(**settings), completion=script, sleep=clock.sleep, jitter=lambda: 1.0, clock=clock
    )


# -- answers -------------------------------------------------------------------------------------


def test_a_reply_carries_text_usage_cost_and_latency(litellm):
    script = Script(litellm, 'extern "C" void relu() {}')
    completion = provider(script).complete(ask())

    assert completion.text == 'extern "C" void relu() {}'
    assert completion.model == MODEL
    assert (completion.usage.prompt, completion.usage.completion) == (10, 20)  # litellm's mock usage
    price = litellm.model_cost["gpt-4o-mini"]
    expected = 10 * price["input_cost_per_token"] + 20 * price["output_cost_per_token"]
    assert completion.cost_usd == pytest.approx(expected)
    assert completion.latency_s == 0.0  # the fake clock did not move
    sent = script.calls[0]["messages"]
    assert sent == [
        {"role": "system", "content": "You write C++ kernels."},
        {"role": "user", "content": "Write a ReLU kernel."},
    ]


def test_a_model_litellm_has_no_price_for_costs_none(litellm):
    completion = provider(Script(litellm, "ok")).complete(ask(model="openai/pragma-unpriced-model"))
    assert completion.text == "ok"
    assert completion.cost_usd is None


def test_a_request_without_a_model_is_refused_before_any_call(litellm, monkeypatch):
    monkeypatch.setenv("PRAGMA_MODEL", "deepseek/deepseek-chat")  # the loop reads it, not the provider
    script = Script(litellm, "ok")
    with pytest.raises(PragmaError, match=r"^no language model named: give a litellm model string") as caught:
        provider(script).complete(ask(model=None))
    assert "\n" not in str(caught.value) and "--" not in str(caught.value)
    assert script.calls == []


def test_the_timeout_is_explicit_and_litellm_retries_are_off(litellm):
    script = Script(litellm, "ok", "ok")
    provider(script).complete(ask())
    provider(script, timeout_s=42).complete(ask())
    assert [call["timeout"] for call in script.calls] == [lp.DEFAULT_TIMEOUT_S, 42]
    assert lp.DEFAULT_TIMEOUT_S == 600
    assert all(call["num_retries"] == 0 for call in script.calls)


def test_extra_arguments_and_api_base_reach_litellm(litellm):
    script = Script(litellm, "ok")
    provider(script, api_base="http://localhost:11434", extra={"temperature": 0.2}).complete(ask(model="ollama/llama3"))
    assert script.calls[0]["api_base"] == "http://localhost:11434"
    assert script.calls[0]["temperature"] == 0.2


def test_settings_refuse_arguments_the_provider_owns():
    with pytest.raises(ValueError, match="timeout"):
        lp.LiteLLMSettings(extra={"timeout": 5})
    with pytest.raises(ValueError, match="num_retries"):
        lp.LiteLLMSettings(extra={"num_retries": 3})


def test_mock_response_in_settings_answers_with_the_real_completion():
    settings = lp.LiteLLMSettings(extra={"mock_response": "from settings"})
    assert lp.LiteLLMProvider(settings).complete(ask()).text == "from settings"


# -- retries -------------------------------------------------------------------------------------


def test_transient_errors_are_retried_with_growing_waits(litellm):
    script = Script(
        litellm,
        "litellm.RateLimitError",
        litellm.Timeout(message="timed out", model="gpt-4o-mini", llm_provider="openai"),
        "litellm.InternalServerError",
        "finally",
    )
    clock = Clock()
    completion = provider(script, clock).complete(ask())
    assert completion.text == "finally"
    assert len(script.calls) == 4
    assert clock.sleeps == [1.0, 2.0, 4.0]
    assert completion.latency_s == pytest.approx(7.0)  # the waits count: latency is the whole call


def test_connection_errors_and_5xx_are_transient(litellm):
    script = Script(
        litellm,
        litellm.APIConnectionError(message="connection reset by peer", llm_provider="openai", model="gpt-4o-mini"),
        litellm.ServiceUnavailableError(message="503", llm_provider="openai", model="gpt-4o-mini"),
        litellm.BadGatewayError(message="502", llm_provider="openai", model="gpt-4o-mini"),
        "ok",
    )
    assert provider(script).complete(ask()).text == "ok"
    assert len(script.calls) == 4


def test_waits_are_jittered_and_bounded(litellm):
    script = Script(litellm, *["litellm.RateLimitError"] * 6, "ok")
    clock = Clock()
    settings = lp.LiteLLMSettings(max_retries=6, backoff_s=1.0, max_backoff_s=4.0)
    lp.LiteLLMProvider(settings, completion=script, sleep=clock.sleep, clock=clock).complete(ask())
    ceilings = [1, 2, 4, 4, 4, 4]
    assert len(clock.sleeps) == 6
    assert all(ceiling / 2 <= wait <= ceiling for wait, ceiling in zip(clock.sleeps, ceilings))


def test_retries_stop_at_the_budget_with_advice(litellm):
    script = Script(litellm, *["litellm.RateLimitError"] * 3)
    clock = Clock()
    with pytest.raises(PragmaError, match=r"failed 3 times .*RateLimitError.*limiting the rate") as caught:
        provider(script, clock, max_retries=2).complete(ask())
    assert len(script.calls) == 3
    assert clock.sleeps == [1.0, 2.0]
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("model", "variable"),
    [
        (MODEL, "OPENAI_API_KEY"),
        ("anthropic/claude-3-5-sonnet-20240620", "ANTHROPIC_API_KEY"),
        ("deepseek/deepseek-chat", "DEEPSEEK_API_KEY"),
    ],
)
def test_bad_credentials_fail_at_once_naming_the_variable(litellm, monkeypatch, model, variable):
    refusal = litellm.AuthenticationError(message="invalid x-api-key", llm_provider="openai", model=model)
    script = Script(litellm, refusal, "never")
    clock = Clock()
    with pytest.raises(PragmaError, match=rf"refused the credentials .*set {variable} \(not set now\)"):
        provider(script, clock).complete(ask(model=model))
    assert len(script.calls) == 1
    assert clock.sleeps == []

    monkeypatch.setenv(variable, "wrong-but-present")
    script = Script(litellm, refusal)
    with pytest.raises(PragmaError, match=rf"set {variable} to a valid key"):
        provider(script).complete(ask(model=model))


def test_a_bad_request_fails_at_once(litellm):
    script = Script(
        litellm,
        litellm.BadRequestError(message="unknown parameter", model="gpt-4o-mini", llm_provider="openai"),
        "never",
    )
    with pytest.raises(PragmaError, match=r"rejected the request \(BadRequestError: unknown parameter\)"):
        provider(script).complete(ask())
    assert len(script.calls) == 1


@pytest.mark.parametrize(
    ("model", "variable"), [("ollama/llama3", "OLLAMA_API_BASE"), ("hosted_vllm/my/model", "HOSTED_VLLM_API_BASE")]
)
def test_server_providers_are_told_to_set_the_address(litellm, model, variable):
    script = Script(litellm, litellm.BadRequestError(message="no api base", model=model, llm_provider="x"))
    with pytest.raises(PragmaError, match=rf"set {variable} \(e\.g\. http://localhost:\d+.*\) or api_base"):
        provider(script).complete(ask(model=model))


def test_an_unreachable_server_is_named_after_the_retries(litellm):
    lost = litellm.APIConnectionError(message="server disconnected", llm_provider="ollama", model="llama3")
    script = Script(litellm, lost, lost)
    with pytest.raises(PragmaError, match=r"failed 2 times .*server at OLLAMA_API_BASE .* is running"):
        provider(script, max_retries=1).complete(ask(model="ollama/llama3"))


def test_errors_that_are_not_litellms_are_bugs_and_pass_through():
    def broken(**_arguments):
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        lp.LiteLLMProvider(completion=broken).complete(ask())


# -- servers on this machine ---------------------------------------------------------------------


@pytest.fixture
def closed_port():
    """A port on 127.0.0.1 that nothing listens on: bound, then closed."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def silent_port():
    """A port on 127.0.0.1 whose listener never accepts: its backlog is full, so the kernel drops
    further connection requests, as a hung or firewalled server does."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    waiting = []
    for _ in range(8):
        client = socket.socket()
        client.settimeout(0.3)
        waiting.append(client)
        try:
            client.connect(("127.0.0.1", port))
        except TimeoutError:
            break
    else:
        pytest.fail("the listener's backlog never filled")
    yield port
    for client in waiting:
        client.close()
    listener.close()


def _chat_reply(text):
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }


@pytest.fixture
def model_server():
    """An OpenAI-compatible server on 127.0.0.1 answering each request with the next (status, body)."""
    answers: list[tuple[int, dict]] = []
    requests: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length", 0)))
            requests.append(self.path)
            status, body = answers[min(len(requests), len(answers)) - 1]
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_arguments):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.answers, server.requests = answers, requests
    server.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def _listening(port):
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


# -- before a run --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "variable"),
    [
        (MODEL, "OPENAI_API_KEY"),
        ("anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("deepseek/deepseek-chat", "DEEPSEEK_API_KEY"),
    ],
)
def test_a_missing_key_is_named_before_the_run(litellm, monkeypatch, model, variable):
    started = time.monotonic()
    with pytest.raises(PragmaError) as caught:
        lp.check_model(model)
    assert time.monotonic() - started < 1.0  # litellm is imported already: the check itself is instant
    assert (
        str(caught.value)
        == f"{model} needs the environment variable {variable}, which is not set: set it and run again"
    )

    def no_network(*_arguments, **_options):
        raise AssertionError("the check connected somewhere")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setenv(variable, "sk-present")
    lp.check_model(model)  # a hosted provider with its key: nothing more to check without a paid call


@pytest.mark.parametrize(
    ("model", "variables"),
    [
        ("gemini/gemini-1.5-pro", "GOOGLE_API_KEY, GEMINI_API_KEY"),
        ("azure/my-deployment", "AZURE_API_BASE, AZURE_API_VERSION, AZURE_API_KEY"),
    ],
)
def test_other_providers_are_checked_by_litellms_own_list(litellm, model, variables):
    with pytest.raises(PragmaError, match=rf"^{model} needs the environment variables {variables}, which are not set"):
        lp.check_model(model)


@pytest.mark.parametrize("model", ["nosuch/model", "gpt4"])
def test_a_model_string_litellm_cannot_place_is_refused(litellm, model):
    with pytest.raises(PragmaError, match=rf"litellm cannot tell which provider serves the model '{model}'"):
        lp.check_model(model)


def test_the_optimizer_checks_the_model_pragma_model_names(litellm, monkeypatch, tmp_path):
    monkeypatch.setenv("PRAGMA_MODEL", "deepseek/deepseek-chat")
    task = load_task(EXAMPLES / "level1" / "1_GELUTanh.py", {"batch_size": 4})
    with pytest.raises(PragmaError, match="^deepseek/deepseek-chat needs the environment variable DEEPSEEK_API_KEY"):
        optimize(task, OptimizeSettings(runs_dir=tmp_path / "runs"))
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("model", "variable", "path"),
    [
        ("ollama/qwen2.5-coder", "OLLAMA_API_BASE", ""),
        ("ollama_chat/qwen2.5-coder", "OLLAMA_API_BASE", ""),
        ("hosted_vllm/Qwen/Qwen2.5-Coder-32B-Instruct", "HOSTED_VLLM_API_BASE", "/v1"),
    ],
)
def test_a_dead_server_is_reported_within_seconds(litellm, monkeypatch, closed_port, model, variable, path):
    address = f"http://127.0.0.1:{closed_port}{path}"
    monkeypatch.setenv(variable, address)
    started = time.monotonic()
    with pytest.raises(PragmaError) as caught:
        lp.check_model(model)
    assert time.monotonic() - started < lp.CONNECT_TIMEOUT_S  # refused at once, not timed out
    assert str(caught.value).startswith(
        f"{model}: nothing answers at {address} (connection refused); "
        f"start the server, or set {variable} to its address (e.g. http://localhost:"
    )


def test_a_server_that_never_accepts_is_given_the_connect_timeout(litellm, monkeypatch, silent_port):
    monkeypatch.setenv("OLLAMA_API_BASE", f"http://127.0.0.1:{silent_port}")
    started = time.monotonic()
    with pytest.raises(PragmaError, match=r"nothing answers at .* \(no connection within 0\.5 s\)"):
        lp.check_model("ollama/qwen2.5-coder", connect_timeout_s=0.5)
    assert 0.5 <= time.monotonic() - started < 2.0


def test_a_running_server_passes_and_is_not_asked_anything(litellm, monkeypatch, model_server):
    monkeypatch.setenv("HOSTED_VLLM_API_BASE", model_server.url)
    lp.check_model("hosted_vllm/m")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-present")
    lp.check_model(MODEL, api_base=model_server.url)
    assert model_server.requests == []  # a TCP connection only: no request, so no cost and no load


def test_a_dead_api_base_is_named_as_such(litellm, monkeypatch, closed_port):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-present")
    with pytest.raises(
        PragmaError, match=r"nothing answers at http://127\.0\.0\.1:\d+/v1 .*; start the server, or correct api_base$"
    ):
        lp.check_model(MODEL, api_base=f"http://127.0.0.1:{closed_port}/v1")


def test_ollama_without_an_address_is_looked_for_where_litellm_looks(litellm):
    if _listening(11434):
        pytest.skip("an ollama server is running here")
    with pytest.raises(PragmaError, match=r"nothing answers at http://localhost:11434 \(connection refused\)"):
        lp.check_model("ollama/qwen2.5-coder")


def test_hosted_vllm_without_an_address_says_to_set_it(litellm):
    with pytest.raises(PragmaError, match=r"whose address is not set: set HOSTED_VLLM_API_BASE \(e\.g\. http://"):
        lp.check_model("hosted_vllm/my/model")


def test_an_address_without_a_port_number_is_refused(litellm, monkeypatch):
    monkeypatch.setenv("OLLAMA_API_BASE", "http://localhost:ollama")
    with pytest.raises(PragmaError, match=r"nothing answers at http://localhost:ollama \(not an address"):
        lp.check_model("ollama/qwen2.5-coder")


def test_the_messages_quoted_in_the_docs_are_the_real_ones(litellm):
    docs = (EXAMPLES.parents[1] / "docs" / "models.md").read_text()
    faults = [MODEL] + ([] if _listening(11434) else ["ollama/qwen2.5-coder"])
    for model in faults:
        with pytest.raises(PragmaError) as caught:
            lp.check_model(model)
        assert f"`{caught.value}`" in docs


@pytest.mark.parametrize("fault", ["no key", "dead server"])
def test_optimize_checks_the_model_before_the_reference_is_timed(litellm, monkeypatch, tmp_path, closed_port, fault):
    if fault == "no key":
        model, expected = MODEL, "needs the environment variable OPENAI_API_KEY"
    else:
        monkeypatch.setenv("OLLAMA_API_BASE", f"http://127.0.0.1:{closed_port}")
        model, expected = "ollama/qwen2.5-coder", "(connection refused)"
    task = load_task(EXAMPLES / "level1" / "1_GELUTanh.py", {"batch_size": 16})
    with pytest.raises(PragmaError, match=re.escape(expected)):
        optimize(task, OptimizeSettings(model=model, runs_dir=tmp_path / "runs"))
    assert not (tmp_path / "runs").exists()  # no run folder, so no baseline was timed


# -- a server during the run: the real litellm.completion ------------------------------------------


def real(clock, **settings):
    return lp.LiteLLMProvider(lp.LiteLLMSettings(**settings), sleep=clock.sleep, jitter=lambda: 1.0, clock=clock)


def test_a_refused_connection_fails_the_call_at_once(litellm, monkeypatch, closed_port):
    address = f"http://127.0.0.1:{closed_port}"
    monkeypatch.setenv("OLLAMA_API_BASE", address)
    clock = Clock()
    started = time.monotonic()
    with pytest.raises(PragmaError) as caught:
        real(clock).complete(ask(model="ollama/llama3"))
    assert time.monotonic() - started < 3.0
    assert clock.sleeps == []  # no backing off: a retry would not start the server
    assert str(caught.value).startswith(f"ollama/llama3: the connection to {address} was refused (APIConnectionError: ")
    assert str(caught.value).endswith(
        "start the server, or set OLLAMA_API_BASE to its address (e.g. http://localhost:11434)"
    )


def test_a_refused_connection_through_api_base_fails_at_once(litellm, closed_port):
    # litellm reports this one as an InternalServerError; the refusal underneath decides
    address = f"http://127.0.0.1:{closed_port}/v1"
    clock = Clock()
    with pytest.raises(PragmaError, match=rf"the connection to {re.escape(address)} was refused .*correct api_base$"):
        real(clock, api_base=address).complete(ask(model="hosted_vllm/my/model"))
    assert clock.sleeps == []


def test_a_client_without_its_key_fails_at_once(litellm, monkeypatch):
    # litellm reports the OpenAI SDK's "Missing credentials" as a 500; no request was sent
    def no_network(*_arguments, **_options):
        raise AssertionError("the call connected somewhere")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    clock = Clock()
    with pytest.raises(PragmaError, match=r"Missing credentials.*; set OPENAI_API_KEY \(not set now\)$"):
        real(clock).complete(ask())
    assert clock.sleeps == []


def test_a_server_answering_503_is_retried_until_it_answers(litellm, model_server):
    overloaded = (503, {"error": {"message": "overloaded"}})
    model_server.answers[:] = [overloaded, overloaded, (200, _chat_reply("hello"))]
    clock = Clock()
    completion = real(clock, api_base=model_server.url).complete(ask(model="hosted_vllm/m"))
    assert completion.text == "hello"
    assert model_server.requests == ["/v1/chat/completions"] * 3  # litellm itself did not retry
    assert clock.sleeps == [1.0, 2.0]


def test_a_server_that_keeps_answering_503_is_given_up_on(litellm, model_server):
    model_server.answers[:] = [(503, {"error": {"message": "overloaded"}})]
    clock = Clock()
    with pytest.raises(
        PragmaError, match=r"failed 3 times \(ServiceUnavailableError: .*overloaded.*failing on its side"
    ):
        real(clock, api_base=model_server.url, max_retries=2).complete(ask(model="hosted_vllm/m"))
    assert len(model_server.requests) == 3
    assert clock.sleeps == [1.0, 2.0]


# -- context window ------------------------------------------------------------------------------


def _too_long(litellm):
    return litellm.ContextWindowExceededError(
        message="maximum context length is 128000 tokens", model="gpt-4o-mini", llm_provider="openai"
    )


def test_a_prompt_too_long_is_cut_in_the_middle_and_sent_once_more(litellm):
    long_prompt = "HEAD " + "x" * 20_000 + " TAIL"
    script = Script(litellm, _too_long(litellm), "fits now")
    completion = provider(script).complete(ask(content=long_prompt))

    assert completion.text == "fits now"
    assert len(script.calls) == 2
    first, second = (call["messages"] for call in script.calls)
    assert second[0] == first[0]  # the system message is left alone
    cut_prompt = second[1]["content"]
    marker = re.search(r"\[\.\.\. (\d+) characters cut to fit the context window \.\.\.\]", cut_prompt)
    assert marker
    cut = int(marker.group(1))
    assert cut > 0
    assert cut_prompt.startswith("HEAD ") and cut_prompt.endswith(" TAIL")
    assert len(cut_prompt) == len(long_prompt) - cut + len(marker.group(0)) + 2  # two newlines round it


def test_a_prompt_still_too_long_after_one_cut_fails(litellm):
    script = Script(litellm, _too_long(litellm), _too_long(litellm), "never")
    with pytest.raises(PragmaError, match=r"does not fit the context window of .* even with \d+ characters cut"):
        provider(script).complete(ask(content="y" * 20_000))
    assert len(script.calls) == 2


def test_a_short_prompt_that_overflows_has_nothing_to_cut(litellm):
    script = Script(litellm, _too_long(litellm), "never")
    with pytest.raises(PragmaError, match="no long user message to cut"):
        provider(script).complete(ask(content="short"))
    assert len(script.calls) == 1


# -- keys ----------------------------------------------------------------------------------------

SK_KEY = "sk-proj-Abc123Def456Ghi789Jkl012"
ENV_KEY = "ds-7f3a9c-secret"  # no key pattern matches it: only its variable gives it away
LONG_TOKEN = "AKIAxY7q3ZpL0vWm9NbR2sTu8KcEeHgJ4fD6"


def test_keys_in_litellm_messages_never_reach_errors_or_logs(litellm, monkeypatch, caplog):
    monkeypatch.setenv("DEEPSEEK_API_KEY", ENV_KEY)
    echoing = f"Incorrect API key provided: {SK_KEY}; also {ENV_KEY} and {LONG_TOKEN}"
    script = Script(
        litellm,
        litellm.RateLimitError(message=echoing, llm_provider="openai", model="gpt-4o-mini"),
        litellm.AuthenticationError(message=echoing, llm_provider="openai", model="gpt-4o-mini"),
    )
    caplog.set_level(logging.DEBUG, logger=lp.__name__)
    with pytest.raises(PragmaError) as caught:
        provider(script).complete(ask())

    error = caught.value
    assert "Incorrect API key provided: [redacted]" in str(error)
    for secret in (SK_KEY, ENV_KEY, LONG_TOKEN):
        assert secret not in str(error)
        assert secret not in caplog.text
    assert "retry 1 of 3" in caplog.text
    assert error.__cause__ is None and error.__suppress_context__  # litellm's text is not chained


def test_redact_removes_keys_and_keeps_prose_and_model_names():
    text = (
        f"key {SK_KEY}, Authorization: Bearer tok_9f8e7d6c5b4a, api_key=hunter2hunter2, "
        f"http://user:pass@proxy:8080/v1, {LONG_TOKEN}, env {ENV_KEY}; "
        "model deepseek-r1-distill-llama-70b-instruct-fp16 at http://localhost:11434"
    )
    cleaned = lp.redact(text, environ={"DEEPSEEK_API_KEY": ENV_KEY, "HOME": "/home/user"})
    for secret in (SK_KEY, "tok_9f8e7d6c5b4a", "hunter2hunter2", "user:pass", LONG_TOKEN, ENV_KEY):
        assert secret not in cleaned
    assert "http://[redacted]@proxy:8080/v1" in cleaned
    assert "deepseek-r1-distill-llama-70b-instruct-fp16" in cleaned
    assert "http://localhost:11434" in cleaned


# -- offline and plugin --------------------------------------------------------------------------

_OFFLINE_SCRIPT = textwrap.dedent(
    """
    import json, os, socket, sys

    attempts = []

    def refuse(self, address, *rest):
        attempts.append(repr(address))
        raise OSError("the network is off in this test")

    def no_dns(host, *rest, **options):
        attempts.append(repr(host))
        raise socket.gaierror("the network is off in this test")

    socket.socket.connect = refuse
    socket.socket.connect_ex = refuse
    socket.getaddrinfo = no_dns

    import pragma_core
    from pragma_core.providers import litellm_provider as lp
    from pragma_core.records import ChatMessage, CompletionRequest

    imported_early = "litellm" in sys.modules
    request = CompletionRequest(role="coder", messages=[ChatMessage(role="user", content="hi")],
                                model="openai/gpt-4o-mini")
    completion = lp.LiteLLMProvider(lp.LiteLLMSettings(extra={"mock_response": "offline"})).complete(request)
    print(json.dumps({
        "imported_early": imported_early,
        "attempts": attempts,
        "text": completion.text,
        "cost": completion.cost_usd,
        "cost_map": os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP"),
    }))
    """
)


def test_import_and_a_mock_call_never_touch_the_network():
    environ = {name: value for name, value in os.environ.items() if not name.startswith("LITELLM_")}
    done = subprocess.run(
        [sys.executable, "-c", _OFFLINE_SCRIPT], capture_output=True, text=True, env=environ, timeout=300
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["imported_early"] is False  # import pragma_core stays fast: litellm waits for a call
    assert report["attempts"] == []
    assert report["text"] == "offline"
    assert report["cost"] > 0  # the bundled price list answered
    assert report["cost_map"] == "True"


def test_the_module_registers_the_litellm_provider():
    registry = PluginRegistry(builtins=("pragma_core.providers.litellm_provider",), entry_points=lambda: [], environ={})
    provider = registry.llm_provider("litellm")
    assert provider.complete == lp.complete
    assert "litellm" in provider.description
    assert registry.failures() == ()
