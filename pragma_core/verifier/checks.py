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
    "forged-timing": (4, "the child's clock disagrees with the parent's"),
    "below-roofline": (7, "faster than the machine's memory or compute roofline allows"),
    "unwritten-output": (8, "output elements still hold the poison the harness put in fresh memory"),
    "input-mutation": (9, "forward changed its inputs"),
    "output-caching": (10, "forward returned the previous trial's result for new input values"),
    "precision-downgrade": (
        12,
        "whole-output relative error beyond the float32 bound, or lower-precision types in a float32 task's candidate",
    ),
    "exact-arithmetic-probe": (13, "a linear task on small integers must match bit for bit"),
    "drift-after-timing": (14, "outputs on fresh inputs after timing no longer match"),
    "uninitialized-read": (15, "two runs on the same inputs with differently poisoned memory disagree"),
    "torch-fallback": (17, "forward ran PyTorch compute operators instead of the candidate's kernel"),
    "kernel-not-called": (19, "a timed forward called no compiled kernel"),
    "reference-reuse": (18, "ModelNew inherits from or calls the reference Model"),
    "harness-modified": (21, "files of the task or of pragma changed while the candidate ran"),
    "spawned-process": (22, "forward started a process"),
    "sandbox-escape": (22, "wrote, removed or renamed a file outside its folder, or reached for the network"),
    "timed-output-mismatch": (23, "an output of a timed call, checked at random, differs from the reference"),
    "forbidden-construct": (
        26,
        "the source uses a construct that can reach into the harness or the machine (catalogue entries 4, 20, 22, 26)",
    ),
    "library-fallback": (26, "NumPy, SciPy or another library does the work instead of the candidate's kernel"),
    "monitor-disabled": (
        26,
        "the operator recorder was switched off or the dispatch-mode stack changed during forward",
    ),
}
"""name -> (catalogue entry in docs/integrity.md, what it means)."""


def describe_check(name: str) -> str:
    number, meaning = CHECKS[name]
    return f"{name} (integrity check {number}: {meaning})"
