"""The cuda backend's pieces that need no GPU: nvcc's messages (real outputs in tests/data/nvcc),
reading a candidate's CUDA source without running it, and compiling it with the real nvcc.

Compiling with torch's headers is slow here (130 to 320 s for a kernel that compiles, 25 to 55 s
for one that stops at a front-end error, on two cores): those tests run only with
``PRAGMA_NVCC_TORCH=1`` (about ten minutes on two cores; too long for every CI run). The others
compile sources without torch's headers, in seconds, or stop in preprocessing (4 to 13 s).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shutil
from pathlib import Path

import pytest

from pragma_core.backends.cuda import guide
from pragma_core.backends.cuda.compile_check import CompileReport, KernelSource, compile_only, extract_sources
from pragma_core.backends.cuda.diagnostics import parse_nvcc_diagnostics, stable_log
from pragma_core.backends.gpu.clock import gpu_available
from pragma_core.native import CompilerNotFoundError, NativeBuildError

DATA = Path(__file__).parent / "data" / "nvcc"
with_torch_headers = pytest.mark.skipif(
    not os.environ.get("PRAGMA_NVCC_TORCH"),
    reason="compiling against torch's headers takes 2 to 5 minutes per kernel on two cores: set PRAGMA_NVCC_TORCH=1",
)
CANDIDATES = Path(__file__).parent / "candidates" / "cuda"
CORRECT = CANDIDATES / "leaky_relu_correct.py"
TYPE_ERROR = CANDIDATES / "leaky_relu_type_error.py"
SPLIT = CANDIDATES / "leaky_relu_split_launcher.py"
LEAKY_RELU_TASK = Path(__file__).resolve().parents[1] / "examples" / "tasks" / "level1" / "2_LeakyReLU.py"

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH: install the CUDA toolkit to compile")
needs_hipcc = pytest.mark.skipif(shutil.which("hipcc") is None, reason="hipcc is not on PATH: install ROCm to compile")


def _log(case: str) -> str:
    return (DATA / f"{case}.log").read_text(encoding="utf-8")


def _candidate_line(source: KernelSource, line: int) -> int:
    number = source.candidate_line(line)
    assert number is not None, f"line {line} of the source has no candidate line"
    return number


def _example(guide_text: str) -> str:
    """The worked example of a guide: its Python block that defines ModelNew."""
    blocks = re.findall(r"```python\n(.*?)```", guide_text, re.S)
    (example,) = [block for block in blocks if "class ModelNew" in block]
    return example


def _plain(case: str) -> KernelSource:
    """A saved source without torch's headers, as a candidate with ``no_implicit_headers=True`` has it."""
    return KernelSource(text=(DATA / f"{case}.cu").read_text(encoding="utf-8"), implicit_headers=False)


# -- nvcc's messages, from real outputs ----------------------------------------------------------


def test_a_front_end_error_gives_file_line_message_and_the_column_of_its_caret():
    (error,) = parse_nvcc_diagnostics(_log("undefined_identifier"))
    assert (error.file, error.line, error.severity) == ("kernel.cu", 6, "error")
    assert error.message == 'identifier "zero" is undefined'
    source = (DATA / "undefined_identifier.cu").read_text().splitlines()[5]
    assert error.column is not None and source[error.column - 1 :].startswith(
        "zero"
    )  # the caret's column is the source's
    assert error.context == ("          out[i] = fmaxf(x[i], zero);", "                               ^")
    assert str(error) == 'kernel.cu:6:30: error: identifier "zero" is undefined'


def test_each_front_end_error_keeps_its_own_source_line():
    first, second = parse_nvcc_diagnostics(_log("type_errors"))
    assert (first.line, first.column, second.line, second.column) == (9, 18, 10, 44)
    assert first.message == 'a value of type "float *" cannot be used to initialize an entity of type "int *"'
    assert "int* index = out;" in first.context[0]
    assert "scale_kernel<<<" in second.context[0]
    assert not any("errors detected" in line for line in first.context + second.context)


def test_a_template_error_keeps_where_it_was_instantiated():
    (error,) = parse_nvcc_diagnostics(_log("template_instantiation"))
    assert (error.line, error.message) == (6, 'name followed by "::" must be a class or namespace name')
    assert error.context[-1].strip().startswith('detected during instantiation of "void fill_kernel(T *, int)')


def test_device_compiler_errors_without_a_source_line_have_no_column():
    first, second = parse_nvcc_diagnostics(_log("host_call_from_device"))
    assert first.message.startswith('calling a __host__ function("host_scale(float)") from a __global__ function')
    assert second.message == 'identifier "host_scale" is undefined in device code'
    assert (first.line, first.column, first.context) == (8, None, ())


def test_a_numbered_warning_is_a_warning_and_the_remark_is_no_context():
    (warning,) = parse_nvcc_diagnostics(_log("unused_variable_warning"))
    assert (warning.severity, warning.line, warning.is_error) == ("warning", 5, False)
    assert warning.message == 'variable "unused" was declared but never referenced'  # "#177-D" stays in the log
    assert len(warning.context) == 2


def test_host_preprocessor_errors_are_read_in_gccs_format():
    (error,) = parse_nvcc_diagnostics(_log("missing_header"))
    assert (error.file, error.line, error.column, error.severity) == ("kernel.cu", 2, 10, "fatal error")
    assert error.message == "cub/not_a_header.cuh: No such file or directory"
    assert error.context[0].strip() == "2 | #include <cub/not_a_header.cuh>"


def test_the_host_compilers_own_error_is_read():
    (error,) = parse_nvcc_diagnostics(_log("bad_host_flag"))
    assert (error.file, error.severity) == ("gcc", "error")
    assert error.message.startswith("unrecognized command-line option '-fno-such-flag'")


def test_a_ptxas_error_without_a_place_names_ptxas():
    (error,) = parse_nvcc_diagnostics(_log("too_much_shared"))
    assert (error.file, error.line, error.severity) == ("ptxas", None, "error")
    assert (
        error.message == "Entry function '_Z10sum_kernelPKfPfi' uses too much shared data (0x20000 bytes, 0xc000 max)"
    )


def test_ptxas_errors_in_the_generated_ptx_name_a_stable_ptx_file_and_drop_the_abort_line():
    raw = _log("bad_inline_ptx")
    assert "/tmp/tmpxft_" in raw  # nvcc's temporary file, a new name each run
    first, second = parse_nvcc_diagnostics(stable_log(raw, folder="/no/such/folder"))
    assert (first.file, first.line, first.message) == ("kernel.ptx", 43, "Unknown modifier '.f33'")
    assert second.message == "Unexpected instruction types specified for 'mov'"


def test_the_abort_line_stays_when_it_is_all_ptxas_said():
    (fatal,) = parse_nvcc_diagnostics("ptxas fatal   : Ptx assembly aborted due to errors\n")
    assert (fatal.file, fatal.severity) == ("ptxas", "fatal error")


def test_an_nvcc_fatal_error_names_nvcc():
    (fatal,) = parse_nvcc_diagnostics(_log("bad_arch"))
    assert (fatal.file, fatal.severity, fatal.message) == (
        "nvcc",
        "fatal error",
        "Unsupported gpu architecture 'sm_50'",
    )


def test_line_numbers_count_from_the_candidates_text_after_the_line_directive():
    (error,) = parse_nvcc_diagnostics(_log("torch_type_error"))
    source = (DATA / "torch_type_error.cu").read_text().splitlines()
    directive = source.index('#line 1 "kernel.cu"')
    assert error.line == 15 and "scale_kernel<<<" in source[directive + error.line]
    assert error.message == 'argument of type "float *" is incompatible with parameter of type "const double *"'
    assert error.column == 39


def test_gccs_include_chain_is_context_of_no_message():
    (error,) = parse_nvcc_diagnostics(_log("cpu_torch_cuda_header"))
    assert error.file.endswith("torch/include/c10/cuda/CUDAMacros.h")
    assert (error.line, error.column, error.severity) == (9, 10, "fatal error")
    assert not any("from " in line for line in error.context)


def test_every_saved_failure_parses_to_at_least_one_error():
    for log in sorted(DATA.glob("*.log")):
        errors = [d for d in parse_nvcc_diagnostics(log.read_text()) if d.is_error]
        assert errors or log.stem == "unused_variable_warning", log.name


def test_nvcc_diagnostics_travel_as_a_native_build_error():
    log = _log("type_errors")
    error = NativeBuildError(log=log, diagnostics=parse_nvcc_diagnostics(log), display_name="kernel.cu")
    assert str(error) == (
        'the kernel failed to compile: kernel.cu:9:18: error: a value of type "float *" cannot be used '
        'to initialize an entity of type "int *" (and 1 more error)'
    )
    assert "int* index = out;" in error.summary()


def test_stable_log_replaces_the_build_folder_by_display_names():
    log = "/tmp/pragma-cuda-x1/kernel.hip:3:5: error: bad\n/tmp/pragma-cuda-x1/other.h:1:1: note: here\n"
    stable = stable_log(log, folder="/tmp/pragma-cuda-x1/", display_names={"kernel.hip": "kernel.cu"})
    assert stable == "kernel.cu:3:5: error: bad\nother.h:1:1: note: here\n"


def test_an_empty_log_has_no_diagnostics():
    assert parse_nvcc_diagnostics("") == ()


# -- reading the CUDA source of a candidate --------------------------------------------------------


def test_a_kernelbench_candidate_gives_its_source_name_functions_and_flags():
    candidate = CORRECT.read_text()
    (source,) = extract_sources(candidate)
    assert (source.extension, source.functions, source.implicit_headers) == ("leaky_relu_vec4", ("leaky_relu",), True)
    assert source.extra_cuda_cflags == ("-O3",) and source.unresolved == ()
    assert source.text is not None and "__global__ void leaky_relu_vec4_kernel" in source.text
    assert source.call_line is not None
    assert candidate.splitlines()[source.call_line - 1].startswith("leaky_relu_ext = load_inline(")
    lines = candidate.splitlines()
    texts = source.text.split("\n")
    for number, text in enumerate(texts, start=1):
        line = lines[_candidate_line(source, number) - 1]
        # a raw literal maps one for one; its first and last lines share theirs with the quotes
        assert line.endswith(text) if number == 1 else line.startswith(text) if number == len(texts) else line == text


def test_a_call_through_the_module_path_is_found():
    (source,) = extract_sources(TYPE_ERROR.read_text())
    assert (source.extension, source.functions) == ("leaky_relu", ("leaky_relu_cuda",))
    assert source.text is not None and "const double* x" in source.text


def test_aliases_positional_arguments_concatenation_dedent_and_f_strings_are_followed():
    candidate = SPLIT.read_text()
    (source,) = extract_sources(candidate)
    assert (source.extension, source.functions, source.implicit_headers) == ("leaky_relu_split", ("leaky_relu",), False)
    assert source.text is not None
    assert "\n#include <cstdint>\n" in source.text  # dedented
    assert "    const int threads = 256;" in source.text  # the f-string's field, from THREADS = 256
    number = source.text.split("\n").index("    leaky_relu_kernel<<<blocks, threads>>>(x, slope, n, out);") + 1
    assert candidate.splitlines()[_candidate_line(source, number) - 1].strip().startswith("leaky_relu_kernel<<<")


def test_a_list_of_sources_is_joined_by_newlines_and_names_in_the_calling_function_are_used():
    candidate = '''
from torch.utils import cpp_extension

HEADER = "#include <cuda_runtime.h>"

def build():
    body = r"""__global__ void k(float* x) { x[0] = 1.0f; }"""
    return cpp_extension.load_inline("ext", "", cuda_sources=[HEADER, body], functions={"k": "doc"})
'''
    (source,) = extract_sources(candidate)
    assert source.text == "#include <cuda_runtime.h>\n__global__ void k(float* x) { x[0] = 1.0f; }"
    assert source.functions == ("k",)
    assert source.line_map == (4, 7)


def test_newline_escapes_leave_the_lines_unmapped():
    candidate = 'from torch.utils.cpp_extension import load_inline\nload_inline("e", "", "int a;\\nint b;")\n'
    (source,) = extract_sources(candidate)
    assert source.text == "int a;\nint b;"
    assert source.candidate_line(1) is None and source.candidate_line(2) is None


@pytest.mark.parametrize(
    ("setup", "argument", "reason"),
    [
        ("def make(): return 'x'", "make()", "`make()` is a call"),
        ("SRC = 'a'\nSRC = 'b'", "SRC", "`SRC` is assigned more than once (lines 3, 4)"),
        ("from kernels import SRC", "SRC", "`SRC` is imported from another module"),
        ("", "SRC", "`SRC` is not assigned in this file"),
        ("SRC = 'a'", "SRC * 2", "`SRC * 2` is an operation other than +"),
        ("N = 4", "f'{N:x}'", "the f-string field"),
        ("A = B\nB = A", "A", "`A` refers back to itself"),
    ],
)
def test_what_cannot_be_worked_out_is_said_not_guessed(setup, argument, reason):
    candidate = f"from torch.utils.cpp_extension import load_inline\n\n{setup}\next = load_inline('e', '', cuda_sources={argument})\n"
    (source,) = extract_sources(candidate)
    assert source.text is None
    (note,) = source.unresolved
    assert note.startswith("cuda_sources at line ") and reason in note


def test_a_parameter_of_the_calling_function_is_not_guessed():
    candidate = "from torch.utils.cpp_extension import load_inline\ndef build(src):\n    return load_inline('e', '', cuda_sources=src)\n"
    (source,) = extract_sources(candidate)
    assert "`src` is a parameter of the function that calls load_inline" in source.unresolved[0]


def test_calls_without_cuda_sources_are_not_cuda_kernels():
    candidate = "from torch.utils.cpp_extension import load_inline\nload_inline('cpu_only', 'int f();')\nload_inline('e', '', None)\n"
    assert extract_sources(candidate) == []


def test_a_candidate_that_is_not_python_is_a_syntax_error():
    with pytest.raises(SyntaxError):
        extract_sources("def broken(:\n")


def test_a_kernel_source_without_text_must_say_why():
    with pytest.raises(ValueError, match="must say why"):
        KernelSource()


# -- the guides ---------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["cuda", "hip"])
def test_each_guide_has_a_worked_example_whose_source_can_be_read(backend):
    text = guide(backend)
    assert text.startswith(f"# Writing a {backend} candidate")
    code = _example(text)
    ast.parse(code)
    (source,) = extract_sources(code)
    assert source.functions == ("gelu_tanh",) and source.unresolved == ()
    assert source.text is not None and "TORCH_CHECK" in source.text and "__global__" in source.text
    assert "class ModelNew(nn.Module)" in code


def test_the_hip_guide_says_what_differs():
    text = guide("hip")
    for fact in ("wavefront", "warpSize", "__launch_bounds__", "hipcc", "--offload-arch", "hipify"):
        assert fact in text, fact


def test_an_unknown_backend_has_no_guide():
    with pytest.raises(ValueError, match="cuda"):
        guide("sycl")


# -- compiling with the real nvcc -----------------------------------------------------------------


@needs_nvcc
def test_a_wrong_launch_is_an_error_at_its_line_in_kernel_cu_and_in_the_candidate():
    candidate = SPLIT.read_text()
    report = compile_only(extract_sources(candidate))
    assert not report.ok
    (unit,) = report.units
    assert unit.returncode not in (0, None) and not unit.timed_out
    first = unit.errors[0]
    assert (first.file, first.line, first.column) == ("kernel.cu", 14, 47)
    assert first.message == 'argument of type "float" is incompatible with parameter of type "float *"'
    line = unit.source.candidate_line(14)
    assert line is not None and "leaky_relu_kernel<<<" in candidate.splitlines()[line - 1]
    assert f"(candidate line {line})" in report.summary()
    assert "pragma-cuda-" not in unit.log  # the build folder's path is replaced
    assert unit.command[1:5] == ("-c", "-std=c++17", "-Xcompiler", "-fPIC")
    assert unit.command[-3:] == ("kernel.cu", "-o", "kernel.o")
    assert report.compiler_version.startswith("Cuda compilation tools, release")
    error = unit.error()
    assert error is not None and str(error).startswith("the kernel failed to compile: kernel.cu:14:47: error:")


@needs_nvcc
def test_the_same_kernel_launched_right_compiles_with_no_errors():
    fixed = SPLIT.read_text().replace("(x, slope, n, out)", "(x, out, n, slope)")
    report = compile_only(extract_sources(fixed))
    assert report.ok, report.summary()
    assert report.errors == () and report.summary() == "compiled with no errors"
    assert report.units[0].error() is None


@needs_nvcc
def test_a_ptxas_error_comes_back_with_a_stable_file_name():
    report = compile_only([_plain("bad_inline_ptx")], arch="sm_80")
    (unit,) = report.units
    assert "-arch=sm_80" in unit.command
    assert [(d.file, d.line) for d in unit.errors] == [("kernel.ptx", 43), ("kernel.ptx", 43)]
    assert "tmpxft_" not in unit.log


@needs_nvcc
def test_an_architecture_nvcc_does_not_know_is_an_nvcc_fatal_error():
    report = compile_only([_plain("undefined_identifier")], arch="sm_10")
    (error,) = report.errors
    assert (error.file, error.severity) == ("nvcc", "fatal error")
    assert "sm_10" in error.message


@needs_nvcc
def test_several_sources_get_numbered_names_and_unreadable_ones_are_listed():
    unreadable = KernelSource(unresolved=["cuda_sources at line 9: `make()` is a call"])
    report = compile_only([_plain("undefined_identifier"), unreadable, _plain("unused_variable_warning")])
    assert [unit.display_name for unit in report.units] == ["kernel_1.cu", "kernel_2.cu"]
    assert [unit.ok for unit in report.units] == [False, True]
    assert report.units[1].diagnostics[0].file == "kernel_2.cu"  # the warning
    assert report.skipped == (unreadable,) and not report.ok
    summary = report.summary()
    assert 'kernel_1.cu:6:30: error: identifier "zero" is undefined' in summary
    assert summary.endswith("not compiled: cuda_sources at line 9: `make()` is a call")


@needs_nvcc
def test_nothing_to_compile_is_not_ok():
    report = compile_only([])
    assert isinstance(report, CompileReport) and not report.ok
    assert report.summary() == "no load_inline call with cuda_sources was found"


@needs_nvcc
def test_a_compile_that_takes_too_long_is_stopped():
    report = compile_only([_plain("type_errors")], timeout_s=0.05)
    (unit,) = report.units
    assert unit.timed_out and unit.returncode is None and not report.ok
    assert "did not finish within 0.05 s" in report.summary()
    error = unit.error()
    assert error is not None and "did not finish within 0.05 s" in str(error)


@needs_nvcc
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_a_cuda_header_a_cpu_build_of_torch_lacks_is_said_to_be_this_machines():
    import torch

    if torch.version.cuda is not None or torch.version.hip is not None:
        pytest.skip(f"torch {torch.__version__} is a GPU build: its CUDA headers are all there")
    source = KernelSource(text=(DATA / "cpu_torch_cuda_header.cu").read_text().split('#line 1 "kernel.cu"\n')[1])
    report = compile_only([source])  # stops in preprocessing: seconds, not minutes
    (error,) = report.errors
    assert error.message == "c10/cuda/impl/cuda_cmake_macros.h: No such file or directory"
    assert any("CPU build" in note and "not the candidate's" in note for note in report.notes)


def test_a_missing_compiler_says_what_to_install(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(CompilerNotFoundError, match="install the CUDA toolkit"):
        compile_only([KernelSource(text="")])
    with pytest.raises(CompilerNotFoundError, match="install ROCm"):
        compile_only([KernelSource(text="")], compiler="hipcc")


def test_only_nvcc_and_hipcc_are_compilers_here():
    with pytest.raises(ValueError, match="nvcc or hipcc"):
        compile_only([], compiler="g++")


# -- with torch's headers: minutes each ------------------------------------------------------------


@with_torch_headers
@needs_nvcc
def test_a_kernelbench_candidate_with_torch_headers_compiles_with_no_errors():
    report = compile_only(extract_sources(CORRECT.read_text()))
    assert report.ok, report.summary()


@with_torch_headers
@needs_nvcc
def test_a_kernelbench_candidate_with_a_type_error_names_its_line():
    candidate = TYPE_ERROR.read_text()
    report = compile_only(extract_sources(candidate))
    (error,) = report.errors
    assert (error.file, error.line) == ("kernel.cu", 14)
    assert error.message == 'argument of type "float *" is incompatible with parameter of type "const double *"'
    line = report.units[0].source.candidate_line(14)
    assert line is not None and "leaky_relu_kernel<<<" in candidate.splitlines()[line - 1]


@with_torch_headers
@needs_nvcc
def test_the_cuda_guides_example_compiles():
    report = compile_only(extract_sources(_example(guide("cuda"))))
    assert report.ok, report.summary()


# -- hipcc ------------------------------------------------------------------------------------------


def test_hipcc_gets_a_hipified_source_and_rocm_flags(tmp_path, monkeypatch):
    """Where hipcc is absent: a stand-in records what it was given (the compile itself is tested below)."""
    pytest.importorskip("torch.utils.hipify.hipify_python")
    record = tmp_path / "record"
    record.mkdir()
    fake = tmp_path / "bin" / "hipcc"
    fake.parent.mkdir()
    fake.write_text(
        '#!/bin/sh\n[ "$1" = --version ] && { echo "HIP version: 0.0"; exit 0; }\n'
        'printf "%s\\n" "$@" > "$RECORD/argv"\nfor a in "$@"; do case "$a" in *.hip|*.cu) cp "$a" "$RECORD/";; esac; done\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("RECORD", str(record))
    monkeypatch.setenv("PATH", f"{fake.parent}:/usr/bin:/bin")
    source = KernelSource(text="__global__ void k(float* x) { x[0] = 1.0f; }\nvoid go(float* x) { k<<<1, 64>>>(x); }")
    report = compile_only([source], compiler="hipcc", arch="gfx942")
    assert report.ok and report.compiler_version == "HIP version: 0.0"
    argv = (record / "argv").read_text().splitlines()
    assert {"-c", "-fPIC", "-std=c++17", "--offload-arch=gfx942", "-DWITH_HIP", "-D__HIP_PLATFORM_AMD__=1"} <= set(argv)
    assert argv[-3:] == ["kernel.hip", "-o", "kernel.o"]
    hipified = (record / "kernel.hip").read_text()
    assert "#include <hip/hip_runtime.h>" in hipified and "hipLaunchKernelGGL" in hipified
    assert '#line 1 "kernel.cu"' in hipified  # messages still name the candidate's kernel.cu


@needs_hipcc
@pytest.mark.slow
def test_the_hip_guides_example_compiles_with_hipcc():
    report = compile_only(extract_sources(_example(guide("hip"))), compiler="hipcc")
    assert report.ok, report.summary()


# -- on a GPU ------------------------------------------------------------------------------------------

NO_GPU = gpu_available()


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(bool(NO_GPU), reason=NO_GPU or "a GPU is here")
def test_the_correct_candidate_matches_leaky_relu_on_the_gpu():
    import torch
    import torch.nn.functional as F

    spec = importlib.util.spec_from_file_location("leaky_relu_correct", CORRECT)
    assert spec is not None and spec.loader is not None and LEAKY_RELU_TASK.exists()
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # builds the extension: minutes
    x = torch.randn(1023, 515, device="cuda")  # an odd size: the float4 part and the tail
    out = module.ModelNew(0.01)(x)
    torch.testing.assert_close(out, F.leaky_relu(x, 0.01), rtol=1e-4, atol=1e-4)


# -- the cuda and hip backends as registered ------------------------------------------------------


def test_a_cuda_candidate_is_read_as_one_and_hip_only_by_its_markers():
    from pragma_core.backends import backend_for_source
    from pragma_core.plugin_api.registry import get_registry

    registry = get_registry()
    source = CORRECT.read_text()
    assert backend_for_source(source, registry) == "cuda"
    hip = source.replace("#include <cuda_runtime.h>", "#include <hip/hip_runtime.h>")
    assert hip != source and backend_for_source(hip, registry) == "hip"
    assert registry.backend("cuda").execution_device() == "cuda"
    assert registry.backend("hip").execution_device() == "rocm"


@pytest.mark.skipif(not gpu_available(), reason="a GPU is here: the cuda backend runs")
def test_verifying_a_cuda_candidate_without_a_gpu_is_bad_input_that_names_the_compile_check(capsys):
    from pragma_core.cli import main

    with pytest.raises(SystemExit) as done:
        main(["verify", str(LEAKY_RELU_TASK), str(CORRECT), "--set", "batch_size=4"])
    assert done.value.code == 2
    error = capsys.readouterr().err
    assert "backend cuda cannot run here" in error and "compile_only" in error
