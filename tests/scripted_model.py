"""A pragma LLM-provider plugin for tests: a model whose replies are written in a script file.

``PRAGMA_TEST_SCRIPT`` names a JSON file ``{"coder": [...], "conductor": [...]}``. Each call takes
the next entry of its agent's list; the count is kept in a file beside the script, so a run resumed
in a new process goes on where a killed one stopped. An entry is either

- the reply text, which litellm's ``mock_response`` turns into a response (the text
  ``"litellm.RateLimitError"`` makes litellm raise that error, as a rate-limited API would), or
- ``{"hang": PATH}``: write PATH and sleep, so a test can kill the run in the middle of an attempt.

Replies go through the real built-in litellm provider (retries, usage, redaction are the real ones).
Like a hosted API, the fake model reports the prompt tokens of the messages it was sent, counted by
litellm's tokenizer. The tests install this module as a plugin with its own entry point.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from pragma_core import Completion, CompletionRequest, LLMProvider, hookimpl
from pragma_core.providers.litellm_calls import LiteLLMProvider, LiteLLMSettings

SCRIPT_VARIABLE = "PRAGMA_TEST_SCRIPT"


def next_entry(role: str) -> Any:
    script = Path(os.environ[SCRIPT_VARIABLE])
    counter = script.with_name(f"{script.stem}.{role}.count")
    used = int(counter.read_text()) if counter.exists() else 0
    entries = json.loads(script.read_text())[role]
    if used >= len(entries):
        raise AssertionError(f"the script has no reply left for the {role} (call {used + 1})")
    counter.write_text(str(used + 1))
    return entries[used]


def complete(request: CompletionRequest) -> Completion:
    role = request.role.value

    def completion(**arguments: Any) -> Any:
        import litellm  # after the provider set litellm's offline switches

        entry = next_entry(role)
        if isinstance(entry, dict):
            Path(entry["hang"]).write_text(f"{os.getpid()}\n")
            time.sleep(3600)
        response = litellm.completion(mock_response=entry, **arguments)
        usage = response.usage  # litellm's mock reports a constant; a hosted API counts the prompt
        usage.prompt_tokens = litellm.token_counter(model=arguments["model"], messages=arguments["messages"])
        usage.total_tokens = usage.prompt_tokens + usage.completion_tokens
        return response

    provider = LiteLLMProvider(LiteLLMSettings(max_retries=2), completion=completion, sleep=lambda seconds: None)
    return provider.complete(request)


_ROOM = LiteLLMProvider(LiteLLMSettings())
"""The built-in provider's own window and token count: with ``PRAGMA_CONTEXT_WINDOW`` set, the
loop fits this model's prompts as it fits a real one's."""


@hookimpl
def pragma_register_llm_providers(register):
    register(
        LLMProvider(
            name="scripted",
            description="replies from the test script in $PRAGMA_TEST_SCRIPT",
            complete=complete,
            room=_ROOM.room,
        )
    )
