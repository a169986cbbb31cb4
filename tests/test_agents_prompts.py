"""The Coder's and the Conductor's prompts: what they carry, and that they stay bounded."""

from __future__ import annotations

import re

import jinja2
import pytest

from pragma_core import (
    Attempt,
    Candidate,
    Category,
    ChatMessage,
    Diagnosis,
    Guidance,
    Metric,
    Profile,
    Speedup,
    Task,
    Timing,
    Verdict,
    VerdictStatus,
)
from pragma_core.agents import coder_messages, conductor_messages
from pragma_core.agents.clipping import clip
from pragma_core.agents.history import MAX_HISTORY_ROWS
from pragma_core.agents.remedies import CHECK_REMEDIES, STATUS_REMEDIES
from pragma_core.agents.rendering import fenced, render_parts
from pragma_core.backends.cpu_cpp import guide as cpu_cpp_guide

from .conftest import EXAMPLES

TASK = Task(
    name="2_LeakyReLU",
    source=(EXAMPLES / "level1" / "2_LeakyReLU.py").read_text(),
    category=Category.ACTIVATION,
    level=1,
)
GUIDE = cpu_cpp_guide()


def module(tag: str, kernel_lines: int = 6) -> str:
    """A candidate module; ``kernel_lines`` pads the C++ source to make it as large as wanted."""
    body = "\n".join(f"        acc{i % 8} += x[i] * {i}.0f;  // step {i} of {tag}" for i in range(kernel_lines))
    return f'''import torch
import torch.nn as nn
from pragma_core.native import load_library

SOURCE = r"""
#include <cstdint>
extern "C" void leaky_relu_{tag}(const float* x, float* out, int64_t n, float slope) {{
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {{
{body}
        out[i] = x[i] > 0.0f ? x[i] : x[i] * slope;
    }}
}}
"""

lib = load_library(SOURCE)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        out = torch.empty_like(x)
        lib.leaky_relu_{tag}(x.contiguous(), out, x.numel(), self.negative_slope)
        return out  # end of {tag}
'''


def timing(ms: float) -> Timing:
    return Timing(median_ms=ms, iqr_ms=ms / 40, samples_ms=(ms,) * 5)


def correct(speedup: float) -> Verdict:
    return Verdict(
        status="correct",
        message=f"correct in 5 trials; {speedup:.2f}x faster than the reference",
        reference=timing(2.0),
        candidate=timing(2.0 / speedup),
        speedup=Speedup(value=speedup, low=speedup * 0.97, high=speedup * 1.03),
        floor_ms=0.5,
    )


WRONG = Verdict(
    status="wrong_output",
    message="trial 2: values differ beyond atol + rtol * |reference|",
    max_abs_error=0.52,
    max_rel_error=1.0,
    error_index=(7, 8191),
    failing_trial=2,
)
REJECTED = Verdict(
    status="rejected",
    failed_check="unwritten-output",
    message="output elements 8184..8191 of row 0 still hold the NaN poison",
)
COMPILE_ERROR = Verdict(
    status="compile_error",
    message="the C++ source does not compile",
    diagnostics=("kernel.cpp:9:17: error: 'tanhf' was not declared in this scope",),
)


def profile(d1_miss: float, kernel: str = "leaky_relu") -> Profile:
    return Profile(
        profiler="valgrind",
        metrics=(
            Metric(
                name="D1 miss rate",
                value=d1_miss,
                unit="%",
                kernel=kernel,
                profiler="valgrind",
                meaning="share of memory accesses that missed the simulated D1 cache",
            ),
            Metric(
                name="Ir",
                value=3.4e7,
                unit="count",
                kernel=kernel,
                profiler="valgrind",
                meaning="instructions executed",
            ),
            Metric(
                name="Mispred rate",
                value=0.4,
                unit="%",
                kernel=kernel,
                profiler="valgrind",
                meaning="branch mispredict rate",
            ),
        ),
        not_collected={"LLd miss rate": "the last-level cache is not simulated in this mode"},
        notes=("cachegrind ran one OpenMP thread so that counts repeat exactly",),
    )


DIAGNOSIS = Diagnosis(
    bound="memory",
    roofline_attainment=0.41,
    deltas={"D1 miss rate": -2.6, "Ir": -1.1e7},
    hints=("the kernel moves each byte once; only wider loads and stores can help now",),
    request_metrics=("LLd miss rate",),
)
BEST = Attempt(
    number=3,
    candidate=Candidate(source=module("best"), backend="cpu-cpp", attempt=3),
    verdict=correct(1.8),
    profiles=(profile(9.1),),
    diagnosis=Diagnosis(bound="memory", roofline_attainment=0.33),
)
GUIDANCE = Guidance(
    analysis="The inner loop is scalar: Ir is 8 per element.",
    actions=("Vectorize the inner loop with #pragma omp simd", "Remove the branch with a select"),
)


def attempt(number: int, verdict: Verdict | None, code: str | None = None, **parts) -> Attempt:
    candidate = Candidate(source=code or module(f"a{number}"), backend="cpu-cpp", attempt=number)
    return Attempt(number=number, candidate=candidate, verdict=verdict, **parts)


def roles(messages: tuple[ChatMessage, ...]) -> list[str]:
    return [message.role for message in messages]


# -- the Conductor ---------------------------------------------------------------------------------


def conductor_prompt(**overrides) -> str:
    arguments = dict(
        candidate=Candidate(source=module("current"), backend="cpu-cpp", attempt=5),
        verdict=correct(2.2),
        diagnosis=DIAGNOSIS,
        profiles=[profile(6.5)],
        best=BEST,
        metric_docs={"D1 miss rate": "Cachegrind D1 misses over all data accesses (index text)."},
    )
    arguments.update(overrides)
    candidate, verdict, diagnosis = (arguments.pop(k) for k in ("candidate", "verdict", "diagnosis"))
    messages = conductor_messages(TASK, candidate, verdict, diagnosis, **arguments)
    assert roles(messages) == ["system", "user"]
    return messages[1].content


def test_conductor_prompt_has_the_five_parts_in_order():
    text = conductor_prompt()
    headings = [
        "## 1. Current code (attempt 5)",
        "## 2. Verifier findings",
        "## 3. Documentation of the profiled metrics",
        "## 4. Profile of the current code",
        "## 5. Best code so far",
        "## Diagnosis by the rules",
        "## Your reply",
    ]
    positions = [text.index(heading) for heading in headings]
    assert positions == sorted(positions)
    part = dict(zip(headings, (text[a:b] for a, b in zip(positions, positions[1:] + [len(text)]))))
    assert "leaky_relu_current" in part["## 1. Current code (attempt 5)"]
    assert "speedup over the reference: 2.20x (95% CI 2.13-2.27)" in part["## 2. Verifier findings"]
    docs = part["## 3. Documentation of the profiled metrics"]
    assert "D1 miss rate: Cachegrind D1 misses over all data accesses (index text)." in docs
    assert "Ir: instructions executed" in docs
    profile_part = part["## 4. Profile of the current code"]
    assert "D1 miss rate [leaky_relu] = 6.5 %" in profile_part
    assert "LLd miss rate: the last-level cache is not simulated" in profile_part
    assert "one OpenMP thread" in profile_part
    best_part = part["## 5. Best code so far"]
    assert "Attempt 3, speedup 1.80x" in best_part and "leaky_relu_best" in best_part
    assert "D1 miss rate [leaky_relu] = 9.1 %" in best_part
    assert "leaky_relu_current" not in best_part


def test_conductor_prompt_compares_historical_best_with_current():
    text = conductor_prompt()
    diagnosis = text[text.index("## Diagnosis by the rules") :]
    assert "| | historical best (attempt 3) | current (attempt 5) |" in diagnosis
    assert "Changes against the best (current minus best)" in diagnosis
    assert "| speedup | 1.80x (95% CI 1.75-1.85) | 2.20x (95% CI 2.13-2.27) |" in diagnosis
    assert "| bound | memory | memory |" in diagnosis
    assert "| roofline attainment | 33% | 41% |" in diagnosis
    assert "| D1 miss rate [leaky_relu] | 9.1 % | 6.5 % |" in diagnosis
    assert "- D1 miss rate: -2.6" in diagnosis
    assert "only wider loads and stores can help now" in diagnosis
    assert "Metrics the rules suggest collecting next: LLd miss rate." in diagnosis


def test_conductor_prompt_asks_for_the_json_reply():
    text = conductor_prompt()
    reply = text[text.index("## Your reply") :]
    for field in ('"analysis"', '"actions"', '"extra_metrics"', '"new_best"'):
        assert field in reply


def test_conductor_prompt_for_a_rejected_candidate_gives_cause_and_remedy():
    text = conductor_prompt(verdict=REJECTED, profiles=(), diagnosis=Diagnosis(bound="unknown"))
    findings = text[text.index("## 2. Verifier findings") : text.index("## 3.")]
    assert "failed integrity check: unwritten-output" in findings
    assert STATUS_REMEDIES[VerdictStatus.REJECTED].cause in findings
    assert CHECK_REMEDIES["unwritten-output"].remedy in findings
    assert "Not profiled: only correct candidates are profiled." in text
    assert "D1 miss rate: Cachegrind D1 misses" in text  # the best's metrics are still documented
    unprofiled = conductor_prompt(verdict=REJECTED, profiles=(), best=None, diagnosis=Diagnosis(bound="unknown"))
    assert "No metrics were profiled for this attempt." in unprofiled


def test_conductor_prompt_on_a_first_compile_error():
    text = conductor_prompt(
        verdict=COMPILE_ERROR, profiles=(), best=None, metric_docs=None, diagnosis=Diagnosis(bound="unknown")
    )
    assert "'tanhf' was not declared in this scope" in text
    assert STATUS_REMEDIES[VerdictStatus.COMPILE_ERROR].remedy in text
    assert "No correct candidate yet." in text
    assert "| status | - | compile_error |" in text


def test_conductor_prompt_when_the_current_attempt_is_the_best():
    text = conductor_prompt(best=attempt(5, correct(2.2), code=module("current")))
    assert "already recorded as the best" in text
    assert text.count("leaky_relu_current(") == 2  # the C++ definition and its call, once each


def test_conductor_prompt_shows_each_profile():
    perf = Profile(
        profiler="perf", metrics=(Metric(name="ipc", value=2.9, profiler="perf", meaning="instructions per cycle"),)
    )
    text = conductor_prompt(profiles=[profile(6.5), perf])
    profile_part = text[text.index("## 4.") : text.index("## 5.")]
    assert "Profiler: valgrind." in profile_part and "Profiler: perf." in profile_part
    assert "ipc = 2.9" in profile_part
    assert "ipc: instructions per cycle" in text
    assert "| ipc | - | 2.9 |" in text


def test_conductor_prompt_when_the_reply_held_no_code():
    verdict = Verdict(status="compile_error", message="the Coder's reply held no Python module defining class ModelNew")
    messages = conductor_messages(
        task=TASK,
        candidate=None,
        verdict=verdict,
        profiles=[],
        diagnosis=Diagnosis(bound="unknown"),
        best=BEST,
        metric_docs={},
        attempt=4,
    )
    text = messages[1].content
    assert "## 1. Current code (attempt 4)\n\nNone: the Coder's reply held no Python module" in text
    assert "leaky_relu_best" in text


def test_conductor_uses_the_configured_metric_selector():
    text = conductor_prompt(select=lambda p: [m for m in p.metrics if m.name == "Ir"])
    profile_part = text[text.index("## 4.") : text.index("## 5.")]
    assert "Ir [leaky_relu]" in profile_part and "D1 miss rate" not in profile_part


def test_conductor_prompt_is_bounded_with_huge_code_and_diagnostics():
    huge = module("current", kernel_lines=3000)
    verdict = Verdict(
        status="compile_error",
        message="does not compile",
        diagnostics=tuple(f"kernel.cpp:{i}:1: error: expected ';'" for i in range(5000)),
    )
    text = conductor_prompt(
        candidate=Candidate(source=huge, backend="cpu-cpp", attempt=5),
        verdict=verdict,
        profiles=(),
        best=attempt(3, correct(1.2), code=module("best", 3000)),
        diagnosis=Diagnosis(bound="unknown"),
    )
    assert len(text) < 50_000
    assert "left out here to keep the prompt short" in text
    assert "# end of current" in text and "class ModelNew" in text
    assert "kernel.cpp:0:1: error" in text


def test_every_status_and_integrity_check_has_a_cause_and_remedy():
    from pragma_core.verifier.checks import CHECKS

    assert set(STATUS_REMEDIES) == set(VerdictStatus)
    assert set(CHECK_REMEDIES) == set(CHECKS)
    for remedy in [*STATUS_REMEDIES.values(), *CHECK_REMEDIES.values()]:
        assert remedy.cause and remedy.remedy and "\n" not in remedy.cause + remedy.remedy


# -- the Coder -------------------------------------------------------------------------------------


def test_first_coder_prompt():
    messages = coder_messages(TASK, GUIDE)
    assert roles(messages) == ["system", "user"]
    text = messages[1].content
    assert "## Task: level1/2_LeakyReLU (activation)" in text
    assert "nn.functional.leaky_relu(x, negative_slope=self.negative_slope)" in text
    assert "# Writing a cpu-cpp candidate" in text
    assert "this is the first attempt" in text
    assert "Best candidate" not in text and "Earlier attempts" not in text
    assert "single ```python fenced block" in text


def test_coder_prompt_carries_guidance_best_last_and_the_table():
    history = [attempt(1, COMPILE_ERROR), attempt(2, correct(1.2)), BEST, attempt(4, WRONG)]
    text = coder_messages(TASK, GUIDE, guidance=GUIDANCE, best=BEST, last=history[-1], history=history)[1].content
    assert "The inner loop is scalar: Ir is 8 per element." in text
    assert "1. Vectorize the inner loop with #pragma omp simd\n2. Remove the branch with a select" in text
    assert "## Best candidate so far: attempt 3, speedup 1.80x (95% CI 1.75-1.85)" in text
    assert "leaky_relu_best" in text
    assert "## Last attempt: attempt 4, wrong_output" in text
    assert "max abs error: 0.52 at index (7, 8191)" in text
    assert STATUS_REMEDIES[VerdictStatus.WRONG_OUTPUT].remedy in text
    assert "leaky_relu_a4" in text
    table = text[text.index("## Earlier attempts") :]
    assert "| 1 | compile_error | - | the C++ source does not compile |" in table
    assert "| 3 | correct | 1.80x | correct in 5 trials; 1.80x faster than the reference; memory-bound;" in table
    assert "leaky_relu_a1" not in text and "leaky_relu_a2" not in text


def test_coder_prompt_shows_the_best_code_once_when_it_is_also_the_last():
    text = coder_messages(TASK, GUIDE, guidance=GUIDANCE, best=BEST, last=BEST, history=[BEST])[1].content
    assert "The last attempt is the best candidate above." in text
    assert text.count("lib.leaky_relu_best(") == 1


def test_coder_prompt_when_the_last_attempt_resubmitted_the_best_code():
    last = attempt(4, correct(1.7), code=BEST.candidate.source)
    text = coder_messages(TASK, GUIDE, best=BEST, last=last, history=[BEST, last])[1].content
    assert "Its code is the same as the best candidate's above." in text
    assert "speedup over the reference: 1.70x" in text
    assert text.count("lib.leaky_relu_best(") == 1


def test_coder_prompt_after_a_reply_without_code():
    last = Attempt(number=1)
    text = coder_messages(TASK, GUIDE, last=last, history=[last])[1].content
    assert "## Last attempt: attempt 1, no code in the reply" in text
    assert "| 1 | no code | - | the reply held no Python module |" in text


def test_coder_prompt_stays_bounded_over_fifteen_attempts():
    """The prompt at attempt 15 is at most 1.5 times the prompt at attempt 2, with big modules."""
    verdicts = [COMPILE_ERROR, WRONG, REJECTED]
    attempts = []
    for number in range(1, 15):
        verdict = correct(1.0 + number / 10) if number % 3 == 1 else verdicts[number % 3]
        done = attempt(
            number,
            verdict,
            code=module(f"a{number}", kernel_lines=2000),
            diagnosis=DIAGNOSIS if verdict.ok else None,
            guidance=Guidance(analysis=f"analysis {number} " * 40, actions=(f"action {number}",) * 3),
        )
        attempts.append(done)

    def prompt_before(number: int) -> str:
        earlier = attempts[: number - 1]
        best_so_far = max((a for a in earlier if a.verdict.ok), key=lambda a: a.verdict.speedup.value, default=None)
        messages = coder_messages(
            TASK, GUIDE, guidance=earlier[-1].guidance, best=best_so_far, last=earlier[-1], history=earlier
        )
        return "".join(message.content for message in messages)

    second, fifteenth = prompt_before(2), prompt_before(15)
    assert len(module("a1", kernel_lines=2000)) > 100_000
    assert len(fifteenth) <= 1.5 * len(second), (len(second), len(fifteenth))
    assert "# end of a13" in fifteenth and "# end of a14" in fifteenth  # tails of best and last kept
    assert "left out here to keep the prompt short" in fifteenth
    assert "your module must still be\ncomplete" in fifteenth
    assert "your module must still be" not in coder_messages(TASK, GUIDE, best=BEST, last=BEST)[1].content
    assert len(re.findall(r"^\| \d+ \|", fifteenth, re.MULTILINE)) == 14


def test_history_table_keeps_the_newest_rows():
    history = [attempt(n, WRONG) for n in range(1, 31)]
    text = coder_messages(TASK, GUIDE, last=history[-1], history=history)[1].content
    rows = re.findall(r"^\| (\d+) \|", text, re.MULTILINE)
    assert rows == [str(n) for n in range(31 - MAX_HISTORY_ROWS, 31)]
    assert f"({30 - MAX_HISTORY_ROWS} older attempts not shown.)" in text


def test_pipes_in_a_summary_do_not_break_the_table():
    last = attempt(1, Verdict(status="runtime_error", message="TypeError: unsupported operand | for int"))
    text = coder_messages(TASK, GUIDE, last=last, history=[last])[1].content
    assert "| 1 | runtime_error | - | TypeError: unsupported operand \\| for int |" in text


# -- the parts -------------------------------------------------------------------------------------


def test_templates_refuse_missing_variables():
    with pytest.raises(jinja2.UndefinedError):
        render_parts("coder.j2", task=TASK)


def test_clip_keeps_head_and_tail_with_a_marker():
    text = "".join(f"line {i}\n" for i in range(2000))
    assert clip(text, len(text)) == text
    clipped = clip(text, 1000, comment="# ")
    assert clipped.startswith("line 0\n") and clipped.endswith("line 1999\n")
    marker = re.search(r"^# \[\.\.\. (\d+) lines \((\d+) characters\) left out", clipped, re.MULTILINE)
    kept = clipped.count("\n") - 1
    assert int(marker[1]) == 2000 - kept
    assert len(clipped) < 1100
    assert len(clip("x" * 5000, 100)) < 200


def test_fence_is_longer_than_backticks_in_the_text():
    assert fenced("x = 1", "python") == "```python\nx = 1\n```"
    assert fenced('doc = """\n```\nexample\n```\n"""').startswith("````\n")
