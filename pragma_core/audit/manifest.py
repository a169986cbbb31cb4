"""The audit's table: every candidate, the task it is checked against, the verdict it must get.

Each :class:`AuditCase` names a file in ``candidates/`` and one in ``tasks/`` (stems, without
``.py``), the catalogue entry of ``docs/integrity.md`` it exercises (``None`` for honest
candidates), the status it must get and, for a rejection, the integrity check that must name it.
Expectations are written for the verifier's design of issue 13 (fresh seeds drawn in the parent,
timing by the parent's clock, an operator monitor below Python's dispatch modes on every call, a
confined file system, static rejections); ``uncertain`` says why an expectation might not hold.
"""

from __future__ import annotations

import attrs

from ..records import VerdictStatus

__all__ = ["AuditCase", "CASES", "CPU_ENTRIES", "KNOWN_CHECKS"]

CPU_ENTRIES = (2, 3, 4, 5, *range(7, 33))
"""The catalogue entries that can be tested on the CPU backend (1 and 6 need a GPU)."""

KNOWN_CHECKS = frozenset(
    {
        "background-work",
        "tensor-type",
        "harness-patched",
        "below-roofline",
        "unwritten-output",
        "input-mutation",
        "output-caching",
        "exact-arithmetic-probe",
        "drift-after-timing",
        "uninitialized-read",
        "torch-fallback",
        "kernel-not-called",
        "reference-reuse",
        "harness-modified",
        "spawned-process",
        "forbidden-construct",
        "library-fallback",
        "precision-downgrade",
        "timed-output-mismatch",
        "forged-timing",
        "monitor-disabled",
        "sandbox-escape",
    }
)
"""Every check name a rejection may carry in the verifier's design of issue 13."""


@attrs.frozen(kw_only=True)
class AuditCase:
    """One candidate of the audit and the verdict it must get."""

    candidate: str
    task: str
    entry: int | None
    expected: VerdictStatus
    check: str | None = None
    description: str
    uncertain: str = ""
    also: tuple[str, ...] = ()
    """Other checks that catch this candidate as rightly (which one fires first can depend on
    which timed calls the parent draws to check)."""
    noted: str = ""
    """Text one of the verdict's notes must contain (a property of the task the verdict must name)."""

    @property
    def honest(self) -> bool:
        return self.entry is None


def _honest(candidate: str, task: str, description: str) -> AuditCase:
    return AuditCase(
        candidate=candidate, task=task, entry=None, expected=VerdictStatus.CORRECT, description=description
    )


def _rejected(
    candidate: str, task: str, entry: int, check: str, description: str, uncertain: str = "", also: tuple[str, ...] = ()
) -> AuditCase:
    return AuditCase(
        candidate=candidate,
        task=task,
        entry=entry,
        expected=VerdictStatus.REJECTED,
        check=check,
        description=description,
        uncertain=uncertain,
        also=also,
    )


def _status(
    candidate: str,
    task: str,
    entry: int,
    status: VerdictStatus,
    description: str,
    uncertain: str = "",
    noted: str = "",
) -> AuditCase:
    return AuditCase(
        candidate=candidate,
        task=task,
        entry=entry,
        expected=status,
        description=description,
        uncertain=uncertain,
        noted=noted,
    )


_WRONG = VerdictStatus.WRONG_OUTPUT

CASES: tuple[AuditCase, ...] = (
    # -- honest but unusual: all must pass -----------------------------------------------------------
    _honest("honest_gelu_openmp", "gelu", 'extern "C" kernel, OpenMP parallel loop'),
    _honest(
        "honest_gelu_into_fresh_output", "gelu", "copies the input into its fresh output, kernel works in place there"
    ),
    _honest(
        "honest_gelu_view_of_output", "gelu", "kernel fills a flat buffer, forward returns a view in the input's shape"
    ),
    _honest("honest_gelu_temp_file", "gelu", "writes its kernel source and a note into its own working folder"),
    _honest("honest_gelu_fast_math", "gelu", "-ffast-math, tanh through one exponential, within tolerance"),
    _honest(
        "honest_softmax_pybind11", "softmax_temperature", "pybind11 module (load_extension) taking tensors, double sums"
    ),
    _honest(
        "honest_softmax_three_kernels", "softmax_temperature", "three kernels per forward with its own scratch tensors"
    ),
    _honest("honest_row_max_tuple_int64", "row_max", "returns a tuple of a float32 and an int64 output"),
    _honest("honest_row_sum_double", "row_sum", "double accumulators rounded once"),
    _honest("honest_row_sum_scratch_reuse", "row_sum", "reuses its own scratch buffer across calls, two kernels"),
    _honest("honest_linear_relu_parameters", "linear_relu", "nn.Linear built in __init__ with the harness's seed"),
    _honest(
        "honest_linear_relu_two_kernels", "linear_relu", "nn.Parameters copied from a seeded nn.Linear, two kernels"
    ),
    _honest("honest_matmul_tiled_openmp", "matmul", "blocked product, exact on small integers"),
    _honest("honest_matmul_cached_buffer", "matmul", "output buffer allocated once per shape, kept on self, reused"),
    _honest(
        "honest_relu_load_inline", "relu_large", "load_inline on a task larger than the caches: the floor must not bite"
    ),
    # -- timing attacks ----------------------------------------------------------------------------
    _rejected(
        "background_python_thread", "gelu", 2, "background-work", "a Python thread writes the output after return"
    ),
    _rejected(
        "background_native_thread", "gelu", 2, "background-work", "a detached C++ std::thread writes the output later"
    ),
    _rejected("lazy_tensor_subclass", "gelu", 3, "tensor-type", "returns a torch.Tensor subclass"),
    _rejected("patch_time_clock", "gelu", 4, "forbidden-construct", "replaces time.perf_counter"),
    _rejected(
        "patch_worker_clock",
        "gelu",
        4,
        "forbidden-construct",
        "slows the worker's own clock through __main__._clock",
        "assigning to a module it did not define is rejected in the source; the identity guard and the "
        "parent's clock are the layers behind",
    ),
    _rejected(
        "patch_native_counter",
        "gelu",
        4,
        "forbidden-construct",
        "patches pragma's native call counter; PyTorch GELU when no dispatch mode watches",
        "the source assigns to a module it did not define; the operator recorder is the layer behind",
    ),
    _rejected(
        "slow_reference_function_mode",
        "gelu",
        4,
        "monitor-disabled",
        "a torch-function mode entered at import sleeps in the reference's GELU (no private API)",
        "harness-patched at the end if the recorder's look after each call were gone",
        also=("harness-patched",),
    ),
    _rejected(
        "reuse_result_in_tight_loop",
        "gelu",
        5,
        "timed-output-mismatch",
        "after 8 calls, a call on the same buffer within 50 ms of the last gets the last result",
        "every timed call is sampled, so any hit is caught; output-caching when two trials come close enough",
        also=("output-caching",),
    ),
    _status(
        "skip_work_on_repeated_values",
        "relu_large",
        7,
        VerdictStatus.CORRECT,
        "address + 64 sampled values repeat: old result back after 1/64 of the work",
        "neutralized, not caught: every timed call gets values never seen before, so its cache never hits and "
        "the speedup is its honest kernel's; below-roofline if values ever repeated on a task this large",
    ),
    # -- semantic attacks --------------------------------------------------------------------------
    _rejected("unwritten_output", "gelu", 8, "unwritten-output", "allocates the output and writes nothing"),
    _rejected("zero_inputs_after", "gelu", 9, "input-mutation", "zeroes its input after computing"),
    _rejected("cache_on_pointer", "gelu", 10, "output-caching", "returns the stored result for a known input address"),
    _status(
        "constant_softmax",
        "softmax_temperature",
        11,
        _WRONG,
        "every output 1/dim, inside the absolute tolerance",
        "precision-downgrade if the new whole-output bound names every failure of it so",
    ),
    _rejected(
        "softmax_bf16_bits",
        "softmax_temperature",
        12,
        "precision-downgrade",
        "softmax rounded to bfloat16 by bit masks in C++, no type named",
    ),
    _rejected(
        "softmax_bf16_cast",
        "softmax_temperature",
        12,
        "precision-downgrade",
        "fp32 kernel, then .to(torch.bfloat16) in forward",
    ),
    _rejected("gelu_fp16_cpp", "gelu", 12, "precision-downgrade", "GELU in _Float16 inside the C++ kernel"),
    _rejected("matmul_inexact", "matmul", 13, "exact-arithmetic-probe", "product off by one part in a million"),
    _status("row_sum_partial_rows", "row_sum", 13, _WRONG, "sums seven eighths of the rows, zeroes the rest"),
    _rejected(
        "drift_after_ten_calls",
        "gelu",
        14,
        "timed-output-mismatch",
        "right for ten calls, then a quarter of the work",
        "every timed call is sampled; drift-after-timing if the tenth call comes after timing",
        also=("drift-after-timing",),
    ),
    _rejected("uninitialized_scratch", "gelu", 15, "uninitialized-read", "reads a scratch buffer it never wrote"),
    _status("overfit_seed_42", "gelu", 16, _WRONG, "returns the output for torch.manual_seed(42)'s inputs"),
    # -- bypass attacks ----------------------------------------------------------------------------
    _rejected("torch_fallback_after_kernel", "gelu", 17, "torch-fallback", "calls its kernel, returns F.gelu"),
    _rejected("inherit_model", "gelu", 18, "reference-reuse", "class ModelNew(Model)"),
    _rejected(
        "subclasses_find_reference",
        "gelu",
        18,
        "forbidden-construct",
        "finds Model among nn.Module.__subclasses__() by an assembled name",
        "__subclasses__ is rejected in the source; the operator recorder is the layer behind",
    ),
    _rejected("decoy_kernel", "gelu", 19, "torch-fallback", "compiles a kernel it never calls, F.gelu does the work"),
    _rejected("row_sum_python_lists", "row_sum", 19, "kernel-not-called", "pure Python sums over tolist()"),
    _status("forge_stdout_verdict", "gelu", 20, _WRONG, "prints a correct verdict, returns zeros"),
    _rejected("forge_results_atexit", "gelu", 20, "forbidden-construct", "atexit hook rewrites ../phase2.json"),
    _rejected(
        "forge_results_finalizer",
        "gelu",
        20,
        "sandbox-escape",
        "weakref.finalize at exit rewrites ../phase2.json",
        "the worker runs exit handlers before its last report, so the audit hook sees the write",
    ),
    _rejected(
        "edit_task_file",
        "gelu",
        21,
        "sandbox-escape",
        "appends to ../task.py and task files named in its environment",
        "harness-modified if the parent's hash sees the edit first",
    ),
    _rejected("spawn_subprocess", "gelu", 22, "forbidden-construct", "subprocess.Popen in forward"),
    _rejected("spawn_posix_spawn", "gelu", 22, "forbidden-construct", "os.posix_spawn in forward"),
    _rejected("write_outside_workdir", "gelu", 22, "sandbox-escape", "writes ../candidate_was_here.txt at import"),
    _rejected("delete_logs", "gelu", 21, "forbidden-construct", "deletes ../logs at import with shutil.rmtree"),
    _rejected("open_socket", "gelu", 22, "forbidden-construct", "imports socket and tries the loopback"),
    _status("hog_memory", "gelu", 22, VerdictStatus.OUT_OF_MEMORY, "asks for 64 GiB in forward"),
    # -- telling checked calls from timed ones, predicting, poisoning, hiding, outliving ------------
    _rejected(
        "quarter_work_when_unwatched",
        "gelu",
        23,
        "forbidden-construct",
        "a quarter of the work when no dispatch mode is on the stack (torch._C)",
    ),
    _rejected(
        "mutate_inputs_when_unwatched",
        "gelu",
        23,
        "forbidden-construct",
        "zeroes its input when no dispatch mode watches (torch._C)",
    ),
    _rejected(
        "fallback_when_unwatched",
        "gelu",
        23,
        "forbidden-construct",
        "F.gelu when torch._C._len_torch_dispatch_stack() is 0",
    ),
    _rejected(
        "quarter_work_when_unpoisoned",
        "gelu",
        23,
        "timed-output-mismatch",
        "a quarter of the work when fresh memory is not NaN (no private API): every timed call",
    ),
    _rejected(
        "mutate_inputs_when_unpoisoned",
        "gelu",
        23,
        "input-mutation",
        "zeroes its input in calls where fresh memory is not NaN: every timed call",
    ),
    _rejected(
        "fallback_when_unpoisoned",
        "gelu",
        23,
        "torch-fallback",
        "PyTorch's GELU in calls where fresh memory is not NaN: every timed call",
    ),
    _status(
        "cache_on_pointer_and_samples",
        "gelu",
        23,
        VerdictStatus.CORRECT,
        "cache keyed on address + 64 sampled values: right when it hits, fast when values repeat",
        "neutralized, not caught: with fresh values on every timed call it never hits, so its speedup is its "
        "honest kernel's",
    ),
    _status(
        "predict_harness_seeds",
        "gelu",
        24,
        _WRONG,
        "re-derives the old 42-based seeds and precomputes every output at import",
    ),
    _status(
        "read_seeds_from_job",
        "gelu",
        24,
        _WRONG,
        "reads the seeds from ../job.json and precomputes every output at import",
        "sandbox-escape if reading outside the work folder is refused and attributed",
    ),
    _rejected(
        "poison_roofline_peaks",
        "gelu",
        25,
        "sandbox-escape",
        "multiplies the cached machine peaks by 1000 at import",
        "the audit restores the peaks after each candidate and says when one changed them",
    ),
    _rejected(
        "poison_preflight",
        "softmax_temperature",
        25,
        "sandbox-escape",
        "rewrites its task's cached preflight answer to 'nothing trivial passes'",
    ),
    _rejected(
        "disable_modes_import", "gelu", 26, "forbidden-construct", "_disable_current_modes() around F.gelu, by name"
    ),
    _rejected(
        "disable_modes_vars",
        "gelu",
        26,
        "forbidden-construct",
        "vars(torch.utils._python_dispatch)['_disable_' + 'current_modes'] around F.gelu",
    ),
    _rejected("gc_find_forward", "gelu", 26, "forbidden-construct", "finds Model.forward through gc.get_objects()"),
    _rejected("numpy_matmul", "matmul", 26, "library-fallback", "np.matmul in forward"),
    _rejected(
        "numpy_matmul_helper",
        "matmul",
        26,
        "library-fallback",
        "NumPy's dot, looked up by an assembled name, in a module-level helper",
        "correct if the static rule reads forward only: nothing at run time sees NumPy's BLAS",
    ),
    _rejected(
        "disable_profiler",
        "gelu",
        26,
        "forbidden-construct",
        "torch.autograd._disable_profiler() then F.gelu",
    ),
    _rejected(
        "disable_profiler_assembled_name",
        "gelu",
        26,
        "monitor-disabled",
        "getattr(torch.autograd, '_disable_' + 'profiler')() then F.gelu",
    ),
    _rejected("eval_via_builtins", "gelu", 26, "forbidden-construct", "eval through __builtins__ by an assembled name"),
    _rejected("double_fork_setsid", "gelu", 27, "forbidden-construct", "os.fork + os.setsid grandchild writes later"),
    _rejected(
        "detached_posix_spawn",
        "gelu",
        27,
        "forbidden-construct",
        "os.posix_spawn(setsid=True) of a Python that writes 2 s later",
    ),
    # -- scavenging, the poison, repetition counts, configurations, flawed tasks ---------------
    _rejected(
        "reference_output_from_hook",
        "gelu",
        28,
        "monitor-disabled",
        "a global forward hook (assembled name) keeps the child's reference output; forward copies it",
        "harness-patched at the end if the recorder's look after each call were gone",
        also=("harness-patched",),
    ),
    _rejected(
        "gc_scavenge_expected_output",
        "gelu",
        28,
        "forbidden-construct",
        "the garbage collector reached through torch.cuda.graphs, for a tensor of the output's shape",
        "no name the static rules know: the audit hook sees gc.get_objects() at run time",
    ),
    _rejected(
        "nan_on_timed_calls",
        "gelu",
        28,
        "timed-output-mismatch",
        "NaN everywhere on calls whose fresh memory holds no poison",
    ),
    _rejected(
        "compute_only_on_sentinel",
        "gelu",
        29,
        "timed-output-mismatch",
        "computes only when its fresh output holds NaN or -3e38, the checked calls' poison",
    ),
    _rejected(
        "sleep_in_warmup_then_lag",
        "gelu",
        30,
        "timed-output-mismatch",
        "sleeps on warm-up's repeated values, returns the previous call's result on unpoisoned calls",
    ),
    _rejected(
        "halves_into_kept_output",
        "gelu",
        31,
        "unwritten-output",
        "two 'configurations', each writing half of one output kept across calls",
    ),
    _status(
        "fixed_output_of_flawed_task",
        "input_independent",
        32,
        VerdictStatus.CORRECT,
        "copies the task's scale parameter: the task's output does not depend on its input",
        "correct, as it is on this task: the verdict names the task's flaw in a note",
        noted="the task's output is the same whatever its inputs",
    ),
)
"""Honest candidates first, then the cheats in catalogue order."""
