"""Likely causes and remedies for what the Verifier finds, one line each, for the agents' prompts.

The PRAGMA paper gives the Conductor each verifier finding together with its likely cause and a
remedy, so a failed attempt turns into a concrete next step instead of a bare status. Every
:class:`~pragma_core.records.VerdictStatus` and every integrity check the verifier names
(:data:`pragma_core.verifier.checks.CHECKS`) has an entry here; a test keeps the tables complete.
:func:`remedies_for` gives the entries that apply to one verdict.
"""

from __future__ import annotations

import attrs

from ..records import Verdict, VerdictStatus

__all__ = ["Remedy", "STATUS_REMEDIES", "CHECK_REMEDIES", "remedies_for"]


@attrs.frozen(kw_only=True)
class Remedy:
    """What a finding most likely means and what to do about it."""

    finding: str
    cause: str
    remedy: str


def _table(entries: dict[str, tuple[str, str]]) -> dict[str, Remedy]:
    return {key: Remedy(finding=key, cause=cause, remedy=remedy) for key, (cause, remedy) in entries.items()}


STATUS_REMEDIES: dict[VerdictStatus, Remedy] = {
    VerdictStatus(key): remedy
    for key, remedy in _table(
        {
            "compile_error": (
                "the C++ source or the Python module does not build: a syntax or type error, a missing "
                "include or declaration, or a signature that does not match its call",
                "fix the first error the compiler reports (later ones often follow from it) and change "
                "nothing else in this attempt",
            ),
            "runtime_error": (
                "importing, constructing or running ModelNew raised: constructor arguments that differ "
                "from Model's, a tensor of the wrong dtype or layout for a pointer parameter, or a shape "
                "mismatch",
                "read the exception; match Model's __init__ and forward signatures exactly and pass "
                "contiguous tensors whose dtype matches each pointer type",
            ),
            "timeout": (
                "no result within the time limit: a loop that never ends, a deadlock, nested parallel "
                "regions oversubscribing the cores, or a kernel far slower than the reference",
                "check every loop bound and exit condition; use one flat OpenMP parallel region and no busy waiting",
            ),
            "crashed": (
                "the process died by a signal, most often an out-of-bounds read or write (SIGSEGV) or a "
                "failed assertion (SIGABRT)",
                "check every index against the tensor sizes, the element counts passed to the kernel, "
                "and that each pointer's type matches its tensor",
            ),
            "out_of_memory": (
                "an allocation failed under the memory limit: a buffer sized far beyond the output, or "
                "scratch allocated per thread or per element",
                "allocate only the outputs and small scratch, with sizes computed from the actual shapes",
            ),
            "wrong_output": (
                "the outputs differ from the reference: an indexing or layout error, a missed remainder "
                "after a blocked or vectorized loop, a wrong initial value or order of a reduction, or an "
                "approximation beyond the tolerance",
                "work out the reference formula at the failing index; check strides, the last partial "
                "block, accumulator types and initial values",
            ),
            "rejected": (
                "an integrity check failed: the candidate computed its result in a way the verifier does not accept",
                "follow the remedy for the failed check below",
            ),
            "unchanged": (
                "the candidate is correct, but the code it built and runs is identical to the attempt it "
                "changed: the change was folded away by the compiler, or touched only comments, names or "
                "a setting the code does not depend on",
                "make a change the compiler cannot fold away: another loop structure, blocking, "
                "vectorization or parallel split, not a comment, a name or an equivalent constant",
            ),
            "correct": (
                "the candidate is correct",
                "make it faster: attack the bottleneck the profile and the diagnosis point to",
            ),
        }
    ).items()
}
"""One entry per verdict status."""

CHECK_REMEDIES: dict[str, Remedy] = _table(
    {
        "background-work": (
            "a thread or asynchronous task was still writing outputs after forward returned",
            "finish all work before returning: join every thread, or use OpenMP regions, which end "
            "before the call returns",
        ),
        "tensor-type": (
            "forward returned a tensor subclass, a tensor over foreign memory, or one not on the CPU",
            "return plain torch.Tensor objects allocated with torch.empty or torch.empty_like",
        ),
        "harness-patched": (
            "the module replaced a clock, a torch function or part of the task",
            "assign nothing to torch, time or the task; define only ModelNew and its helpers",
        ),
        "below-roofline": (
            "the measured time is below what the machine's memory bandwidth or compute allows, so "
            "work is skipped, reused from an earlier call, or done outside forward",
            "compute every output element from the inputs in every call",
        ),
        "unwritten-output": (
            "some output elements were never written: a loop misses the tail after the vectorized or "
            "blocked part, or the kernel covers fewer elements than the output holds",
            "cover every element including remainders; set accumulators explicitly instead of relying "
            "on fresh memory being zero",
        ),
        "input-mutation": (
            "forward wrote into one of its inputs (an in-place step, or an output that aliases an input)",
            "write only to tensors allocated in forward; copy an input first if the algorithm must modify it",
        ),
        "output-caching": (
            "forward returned an earlier result although the input values changed",
            "compute from the inputs on every call; never memoize on pointers, shapes or call counts",
        ),
        "exact-arithmetic-probe": (
            "on small-integer inputs, where float sums are exact, the result was not bit-exact: terms "
            "are skipped, or the kernel computes in reduced precision or approximates",
            "do the full computation in fp32 or wider, with no reduced-precision or sampled shortcuts",
        ),
        "drift-after-timing": (
            "outputs were right in the correctness trials but wrong after timing: state kept between "
            "calls, a buffer reused across calls, or behaviour that changes after many calls",
            "keep no state between calls besides the parameters; allocate the outputs in every call",
        ),
        "uninitialized-read": (
            "the result depends on what fresh memory held: an accumulator or scratch buffer is read "
            "before it is written",
            "initialise every accumulator and scratch buffer before reading it",
        ),
        "torch-fallback": (
            "forward ran PyTorch compute operators instead of doing the work in the candidate's kernel",
            "do all arithmetic in the compiled kernel; in forward use torch only to allocate, view, "
            "reshape and make tensors contiguous",
        ),
        "kernel-not-called": (
            "a timed forward called no compiled kernel",
            "call the compiled kernel in every forward, not only in the first one or in __init__",
        ),
        "reference-reuse": (
            "ModelNew inherits from, names or holds the task's Model",
            "derive ModelNew from nn.Module and create its parameters as Model does, without using Model",
        ),
        "harness-modified": (
            "files of the task or of pragma changed while the candidate ran",
            "write no files; load_library puts its build output where it belongs",
        ),
        "spawned-process": (
            "forward started a process (subprocess, os.system, multiprocessing)",
            "build the kernel at import with load_library, never in forward; parallelize with OpenMP "
            "threads, not processes",
        ),
        "forbidden-construct": (
            "the module uses something that reaches into the interpreter or the machine (gc, frames, "
            "ctypes, exec or eval, dispatch-mode or profiler internals, os-level files or processes, "
            "atexit, signals)",
            "write a plain module: the kernel source, load_library (or load_extension, load_inline), "
            "and ModelNew; nothing else is needed",
        ),
        "library-fallback": (
            "NumPy, SciPy or another library did the work instead of the candidate's kernel",
            "do the arithmetic in the compiled kernel; use no other library's compute functions in forward",
        ),
        "precision-downgrade": (
            "the result was computed in lower precision than the task's float32 (bf16, fp16, TF32), "
            "so the whole output's relative error is too large",
            "compute and accumulate in float32 or wider; keep fast approximations within about 1e-6 relative",
        ),
        "timed-output-mismatch": (
            "an output of a timed call was wrong although the correctness trials passed: the result "
            "depends on the call count, on repeated buffers or on being watched",
            "compute every call's outputs from its inputs, the same way every time",
        ),
        "forged-timing": (
            "the time the child reported for a call disagrees with the parent's clock around it",
            "leave the harness's clock and reports alone; make the kernel itself faster",
        ),
        "monitor-disabled": (
            "forward stopped or restarted the profiler that records PyTorch operators",
            "use no profiler or dispatch-mode APIs in the candidate",
        ),
        "sandbox-escape": (
            "the candidate wrote, removed or renamed a file outside its working folder, or used the network",
            "write no files outside the working folder; kernels are built by load_library where they belong",
        ),
    }
)
"""One entry per integrity check of :data:`pragma_core.verifier.checks.CHECKS`."""


def remedies_for(verdict: Verdict) -> tuple[Remedy, ...]:
    """The status's entry, then the failed check's (or a plain one for a check added later)."""
    found = [STATUS_REMEDIES[verdict.status]]
    if verdict.failed_check:
        found.append(
            CHECK_REMEDIES.get(verdict.failed_check)
            or Remedy(
                finding=verdict.failed_check,
                cause="an integrity check this version of the prompts does not describe",
                remedy="read the verifier's message and change what it names",
            )
        )
    return tuple(found)
