"""The integrity checks the verifier runs, by name.

Each name is what a rejected :class:`~pragma_core.records.Verdict` carries in ``failed_check``; the
number is the entry it answers in the catalogue of ways to fool a harness (``docs/integrity.md``).
"""

from __future__ import annotations

__all__ = ["CHECKS", "describe_check"]

CHECKS: dict[str, tuple[int, str]] = {
    "background-work": (2, "outputs changed after forward returned, or a thread it started still runs"),
    "tensor-type": (3, "outputs must be plain torch.Tensor objects with real CPU storage"),
    "harness-patched": (4, "the candidate replaced a clock, a torch function or the task"),
    "below-roofline": (7, "faster than the machine's memory or compute roofline allows"),
    "unwritten-output": (8, "output elements still hold the poison the harness put in fresh memory"),
    "input-mutation": (9, "forward changed its inputs"),
    "output-caching": (10, "forward returned the previous trial's result for new input values"),
    "exact-arithmetic-probe": (13, "a linear task on small integers must match bit for bit"),
    "drift-after-timing": (14, "outputs on fresh inputs after timing no longer match"),
    "uninitialized-read": (15, "two runs on the same inputs with differently poisoned memory disagree"),
    "torch-fallback": (17, "forward ran PyTorch compute operators instead of the candidate's kernel"),
    "kernel-not-called": (19, "a timed forward called no compiled kernel"),
    "reference-reuse": (18, "ModelNew inherits from or calls the reference Model"),
    "harness-modified": (21, "files of the task or of pragma changed while the candidate ran"),
    "spawned-process": (22, "forward started a process"),
    "forbidden-construct": (26, "the source uses a construct that can reach into the harness or the machine"),
    "library-fallback": (26, "NumPy, SciPy or another library does the work"),
    "precision-downgrade": (12, "lower precision than the task's float32"),
    "timed-output-mismatch": (23, "an output of a timed call, checked at random, differs from the reference"),
    "forged-timing": (4, "the child's clock disagrees with the parent's"),
    "monitor-disabled": (26, "the operator recorder was switched off during forward"),
    "sandbox-escape": (22, "wrote, removed or renamed a file outside its folder, or reached for the network"),
}
"""name -> (catalogue entry in docs/integrity.md, what it means)."""


def describe_check(name: str) -> str:
    number, meaning = CHECKS[name]
    return f"{name} (integrity check {number}: {meaning})"
