"""Finding the candidate module in Coder replies, written as models really answer."""

from __future__ import annotations

import ast

import pytest

from pragma_core.agents.extraction import extract_code, fenced_blocks

MODULE = '''import torch
import torch.nn as nn
from pragma_core.native import load_library

SOURCE = r"""
#include <cstdint>
extern "C" void leaky_relu(const float* __restrict__ x, float* __restrict__ out, int64_t n, float slope) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        out[i] = v > 0.0f ? v : v * slope;
    }
}
"""

lib = load_library(SOURCE)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.leaky_relu(x, out, x.numel(), self.negative_slope)
        return out
'''

CPP = """#include <cstdint>
extern "C" void leaky_relu(const float* x, float* out, int64_t n, float slope) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0 ? x[i] : x[i] * slope;
}"""


def test_one_python_block_in_prose():
    reply = (
        "The previous version was memory bound, so I fused the branch into a select and let the\n"
        "compiler vectorize the loop.\n\n"
        f"```python\n{MODULE}```\n\n"
        "This keeps one pass over memory and should reach close to the bandwidth limit."
    )
    assert extract_code(reply) == MODULE


def test_cpp_block_first_then_the_module():
    reply = (
        "First, the kernel itself:\n\n"
        f"```cpp\n{CPP}\n```\n\n"
        "And the complete module that loads it:\n\n"
        f"```python\n{MODULE}```\n"
    )
    assert extract_code(reply) == MODULE


def test_of_two_modules_the_corrected_last_one_wins():
    draft = MODULE.replace("schedule(static)", "schedule(dynamic)")
    reply = (
        f"Here is a first version:\n```python\n{draft}```\n"
        "Wait, dynamic scheduling adds overhead for an elementwise loop. Corrected version:\n"
        f"```python\n{MODULE}```"
    )
    assert extract_code(reply) == MODULE


def test_a_cut_off_last_module_loses_to_a_complete_earlier_one():
    truncated = MODULE[: MODULE.index("out = torch.empty_like") - 1] + "\n        out = torch.empty_like(\n"
    reply = f"```python\n{MODULE}```\n\nAn even faster variant:\n\n```python\n{truncated}"
    assert extract_code(reply) == MODULE


@pytest.mark.parametrize("label", ["py", "python3", "Python", "", "python title=model_new.py"])
def test_fence_labels(label):
    assert extract_code(f"Updated kernel:\n```{label}\n{MODULE}```\nDone.") == MODULE


def test_unterminated_final_fence():
    reply = f"Here's the optimized implementation:\n\n```python\n{MODULE}"
    assert extract_code(reply) == MODULE


def test_closing_fence_glued_to_the_last_line():
    reply = f"```python\n{MODULE.rstrip()}```"
    assert extract_code(reply) == MODULE


def test_no_block_but_the_reply_is_the_module():
    assert extract_code(MODULE) == MODULE


def test_no_block_with_prose_before_and_after_the_module():
    reply = f"Sure. Below is the full code.\n\n{MODULE}\nThis version vectorizes with AVX2.\n"
    assert extract_code(reply) == MODULE


def test_no_code_at_all():
    reply = (
        "I'm sorry, but I can't produce a faster kernel without knowing the target CPU. "
        "Could you tell me whether it supports AVX-512?"
    )
    assert extract_code(reply) is None


def test_only_a_cpp_block_is_no_candidate():
    assert extract_code(f"The kernel:\n```cpp\n{CPP}\n```") is None


def test_without_model_new_the_longest_python_block():
    helper = "def blocks(n, size):\n    return (n + size - 1) // size\n"
    usage = "print(blocks(10, 4))"
    reply = f"```python\n{usage}\n```\nand\n```python\n{helper}```\n```bash\npip install torch\n```"
    assert extract_code(reply) == helper


def test_reasoning_drafts_are_skipped():
    draft = MODULE.replace("leaky_relu", "draft_kernel")
    reply = f"<think>\nMaybe like this:\n```python\n{draft}```\nNo, keep the name.\n</think>\n\n```python\n{MODULE}```"
    assert extract_code(reply) == MODULE


def test_thinking_only_reply_still_yields_its_module():
    reply = f"<think>\nThe answer:\n```python\n{MODULE}```\n</think>"
    assert extract_code(reply) == MODULE


def test_indented_fence_in_a_list():
    indented = "".join(f"   {line}" if line.strip() else line for line in MODULE.splitlines(keepends=True))
    reply = f"1. Replace the module with:\n\n   ```python\n{indented}   ```\n"
    assert extract_code(reply) == MODULE


def test_windows_line_endings():
    reply = f"Code:\r\n```python\r\n{MODULE}```\r\n".replace("\n", "\r\n").replace("\r\r\n", "\r\n")
    assert extract_code(reply) == MODULE


def test_longer_fence_holds_backticks_inside_the_code():
    module = MODULE.replace("class ModelNew", 'USAGE = """\n```\nModelNew(0.01)(x)\n```\n"""\n\n\nclass ModelNew')
    reply = f"````python\n{module}````"
    code = extract_code(reply)
    assert code == module
    ast.parse(code)


def test_fenced_blocks_reports_labels_and_unclosed_blocks():
    blocks = fenced_blocks("a\n```json\n{}\n```\nb\n```py\nx = 1\n")
    assert [(b.label, b.code, b.closed) for b in blocks] == [("json", "{}", True), ("py", "x = 1\n", False)]
