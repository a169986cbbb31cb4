"""pragma_core.native: real builds with the system compiler, in a cache under tmp_path."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
import textwrap
import types
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from pragma_core.backends.cpu_cpp.native import build as build_module
from pragma_core.errors import PragmaError, RecordError
from pragma_core.native import (
    BuildDiagnostic,
    CallRecording,
    CompilerNotFoundError,
    CountingModule,
    NativeBuildError,
    NativeCallError,
    NativeLibrary,
    PointerArgument,
    ScalarArgument,
    SignatureError,
    build_library,
    cache_dir,
    count_calls,
    load_extension,
    load_library,
    native_call_count,
    parse_diagnostics,
    parse_signatures,
    record_calls,
)

RELU = r"""
#include <cstdint>
extern "C" void relu(const float* x, float* out, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""

KERNELS = r"""
#include <cstdint>
#include <cstring>
extern "C" {
void scale(const float* x, float* out, int64_t n, float factor) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * factor;
}
double total(const double* x, int32_t n) {
    double s = 0; for (int32_t i = 0; i < n; ++i) s += x[i]; return s;
}
void copy_bytes(const void* src, void* dst, size_t nbytes) { std::memcpy(dst, src, nbytes); }
int flag_value(bool flag) { return flag ? 7 : -7; }
}
"""


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    """Every test builds into its own cache, never the user's."""
    monkeypatch.setenv("PRAGMA_CACHE_DIR", str(tmp_path / "cache"))
    for variable in ("CC", "CXX"):
        monkeypatch.delenv(variable, raising=False)
    return tmp_path / "cache" / "native"


# -- build -----------------------------------------------------------------------------------------


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    assert cache_dir() == tmp_path / "cache" / "native"
    monkeypatch.delenv("PRAGMA_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "pragma" / "native"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "pragma" / "native"


def test_build_writes_source_artifact_and_lock_named_by_key(cache):
    path = build_library(RELU)
    assert path.parent == cache and path.suffix == ".so"
    key = path.name.removesuffix(".so")
    assert (cache / f"{key}.cpp").read_text() == RELU
    assert (cache / f"{key}.lock").exists()
    assert not [p for p in cache.iterdir() if p.name.endswith(".tmp")]


def test_cache_hit_neither_recompiles_nor_starts_a_process(cache, monkeypatch):
    build_module._versions.clear()
    first = build_library(RELU, flags=["-ffast-math"])
    mtime = first.stat().st_mtime_ns
    build_module._versions.clear()  # a fresh process: the compiler version comes from the disk note

    def no_process(*args, **kwargs):
        raise AssertionError(f"a cache hit started a process: {args}")

    monkeypatch.setattr(build_module.subprocess, "run", no_process)
    lock = first.with_suffix(".lock")
    lock.unlink()
    lock.mkdir()  # a lock that cannot be opened: the fast path must not need it
    second = build_library(RELU, flags=["-ffast-math"])
    assert second == first and second.stat().st_mtime_ns == mtime


def test_cache_key_covers_flags_language_and_suffix():
    plain = build_library(RELU)
    assert build_library(RELU, flags=["-ffast-math"]) != plain
    assert build_library(RELU, output_suffix=".dylib.so") != plain
    c_source = "void twice(float* x, int n) { for (int i = 0; i < n; ++i) x[i] *= 2; }\n"
    c_library = build_library(c_source, language="c")
    assert c_library != build_library(c_source)  # the same text as C++ is another artifact
    assert c_library.with_suffix(".c").read_text() == c_source


def test_output_name_builds_into_a_folder_per_key(cache):
    path = build_library(RELU, output_name="relu_module", output_suffix=".so")
    assert path.name == "relu_module.so" and path.parent.parent == cache


def test_flags_must_be_a_sequence_not_a_string():
    with pytest.raises(TypeError, match="single string"):
        build_library(RELU, flags="-O2")


def test_missing_compiler_is_a_pragma_error(monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler-g++")
    with pytest.raises(CompilerNotFoundError, match=r"'no-such-compiler-g\+\+' is not on PATH.*\$CXX"):
        build_library(RELU)


def _build_in_child(source: str, cache_root: str, barrier, results) -> None:
    os.environ["PRAGMA_CACHE_DIR"] = cache_root
    barrier.wait()
    results.put(str(build_library(source)))


def test_two_processes_building_one_new_source_compile_it_once(tmp_path, monkeypatch, cache):
    log = tmp_path / "compiles.log"
    wrapper = tmp_path / "logging-g++"
    wrapper.write_text(
        textwrap.dedent(f"""\
        #!/bin/sh
        case "$*" in *" -o "*) echo compile >> {log} ;; esac
        exec g++ "$@"
        """)
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("CXX", str(wrapper))
    source = RELU + "\n// built by two processes at once\n"
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(2), context.Queue()
    children = [
        context.Process(target=_build_in_child, args=(source, str(tmp_path / "cache"), barrier, results))
        for _ in range(2)
    ]
    for child in children:
        child.start()
    paths = [results.get(timeout=120) for _ in children]
    for child in children:
        child.join(timeout=60)
    assert [child.exitcode for child in children] == [0, 0]
    assert paths[0] == paths[1]
    assert log.read_text().split() == ["compile"]
    assert [p.name for p in cache.glob("*.so")] == [Path(paths[0]).name]
    assert not [p for p in cache.iterdir() if p.name.endswith(".tmp")]


# -- diagnostics -----------------------------------------------------------------------------------

BROKEN = """\
#include <cstdint>
extern "C" void relu(const float* x, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = undefined_thing;
    int unused = 0;
    return 3.0f +;
}
"""


def test_compile_error_names_lines_in_kernel_cpp(cache):
    with pytest.raises(NativeBuildError) as caught:
        build_library(BROKEN)
    error = caught.value
    errors = [d for d in error.diagnostics if d.is_error]
    assert [(d.file, d.line) for d in errors] == [("kernel.cpp", 3), ("kernel.cpp", 5)]
    assert errors[0].column == 46 and "undefined_thing" in errors[0].message
    message = str(error)
    assert "\n" not in message
    assert message.startswith("the kernel failed to compile: kernel.cpp:3:46: error: ")
    assert message.endswith("(and 1 more error)")
    summary = error.summary()
    assert summary.splitlines()[0].startswith("kernel.cpp:3:46: error:")
    assert "out[i] = undefined_thing;" in summary and "kernel.cpp:5:" in summary
    assert str(cache) not in error.log and str(cache) not in summary
    assert isinstance(error, PragmaError)
    assert not list(cache.glob("*.so"))  # a failure leaves no artifact and no temporary file
    assert not [p for p in cache.iterdir() if p.name.endswith(".tmp")]


def test_linker_and_tool_messages_are_parsed():
    log = textwrap.dedent("""\
        /usr/bin/ld: /tmp/ccXkTMsJ.o: in function `f':
        kernel.cpp:(.text+0x14): undefined reference to `ext'
        /usr/bin/ld: cannot find -lnothere: No such file or directory
        g++: error: unrecognized command-line option '-ffoo'
        kernel.cpp:7:2: warning: unused variable 'k' [-Wunused-variable]
        collect2: error: ld returned 1 exit status
        """)
    diagnostics = parse_diagnostics(log)
    assert [(d.file, d.line, d.severity) for d in diagnostics] == [
        ("kernel.cpp", None, "error"),
        ("/usr/bin/ld", None, "error"),
        ("g++", None, "error"),
        ("kernel.cpp", 7, "warning"),
    ]
    assert diagnostics[0].message == "undefined reference to `ext'"
    assert str(diagnostics[3]) == "kernel.cpp:7:2: warning: unused variable 'k' [-Wunused-variable]"
    error = NativeBuildError(log=log)
    assert str(error) == (
        "the kernel failed to compile: kernel.cpp: error: undefined reference to `ext' (and 2 more errors)"
    )


def test_summary_keeps_the_first_errors_within_its_size():
    log = "".join(f"kernel.cpp:{i}:1: error: problem number {i}\n    {i} | {'x' * 300}\n" for i in range(1, 12))
    summary = NativeBuildError(log=log).summary()
    assert len(summary) <= 2000
    assert summary.startswith("kernel.cpp:1:1: error: problem number 1")
    assert "problem number 6" not in summary
    assert NativeBuildError(log=log).summary(max_chars=100_000).endswith("... and 6 more errors")


def test_a_log_without_recognised_errors_still_gives_a_one_line_message():
    error = NativeBuildError(log="something odd happened\ncompilation terminated.\n")
    assert str(error) == "the kernel failed to compile: compilation terminated."
    assert error.summary().startswith("something odd")


def test_an_undefined_symbol_fails_at_load_with_its_name():
    source = 'extern "C" void missing(float*);\nextern "C" void f(float* x) { missing(x); }\n'
    with pytest.raises(NativeBuildError, match=r"failed to load: kernel.cpp: error: undefined symbol: missing"):
        load_library(source)


# -- signatures ------------------------------------------------------------------------------------


def test_signatures_from_an_extern_c_block_with_restrict_const_and_unnamed_parameters():
    source = textwrap.dedent("""
        #include <cstdint>
        // extern "C" void commented_out(int x);
        static inline float helper(float v) { return v; }
        extern "C" {
        void a(float* __restrict__ x, const double *y, float *const, long long n);
        int64_t b(void) { const char* s = "extern \\"C\\" void fake(int);"; return 1; }
        static void hidden(int x) {}
        struct Pair { int first; };
        void c(std::size_t, unsigned int k, const uint8_t* restrict bytes, void* any);
        }
        extern "C" __attribute__((visibility("default"))) double d(bool flag, std::int64_t q) noexcept {
            return 0;
        }
        """)
    signatures = {s.name: s for s in parse_signatures(source)}
    assert list(signatures) == ["a", "b", "c", "d"]
    a = signatures["a"]
    assert a.returns == "void" and a.line == 6
    assert [(p.name, p.ctype, p.pointer, p.const, p.dtype) for p in a.params] == [
        ("x", "float", True, False, "float32"),
        ("y", "double", True, True, "float64"),
        ("", "float", True, False, "float32"),
        ("n", "long long", False, False, None),
    ]
    assert signatures["b"].returns == "int64_t" and signatures["b"].params == ()
    assert [(p.name, p.ctype, p.dtype) for p in signatures["c"].params] == [
        ("", "size_t", None),
        ("k", "unsigned", None),
        ("bytes", "uint8_t", "uint8"),
        ("any", "void", None),
    ]
    assert [p.spelling for p in signatures["c"].params] == ["size_t", "unsigned", "const uint8_t*", "void*"]
    assert str(signatures["d"]) == "double d(bool flag, int64_t q)"


def test_single_extern_c_declarations_and_a_later_definition():
    source = 'extern "C" void f(float*, int);\nextern "C" void g(int n) {}\nvoid f(float* x, int n) {}\n'
    assert [str(s) for s in parse_signatures(source)] == ["void f(float*, int)", "void g(int n)"]


def test_c_exports_every_non_static_definition():
    source = textwrap.dedent("""
        #include <stdint.h>
        static void helper(float* x) {}
        int prototype_only(int);
        struct point { int x, y; };
        void k(const float* restrict x, float* restrict y, int n) { for (int i = 0; i < n; i++) y[i] = x[i]; }
        long total(const long *x, unsigned long n) { return 0; }
        """)
    assert [str(s) for s in parse_signatures(source, language="c")] == [
        "void k(const float* x, float* y, int n)",
        "long total(const long* x, unsigned long n)",
    ]
    assert parse_signatures(source) == ()  # as C++, nothing is extern "C"


@pytest.mark.parametrize(
    "declaration, message",
    [
        ('extern "C" void f(float* x, MyType t) {}', "kernel.cpp:1: f(): parameter 2 't' has unknown type 'MyType t'"),
        ('extern "C" void f(float** x);', "kernel.cpp:1: f(): parameter 1 has type 'float** x'; pointers to pointers"),
        ('extern "C" void f(std::vector<float>& v) {}', "references cannot be passed from Python"),
        ('extern "C" float* f(int n);', "f(): returns a pointer (float*)"),
        ('extern "C" API void f(int n);', "unknown return type 'API void'"),
        (
            'extern "C" void f(char* text);',
            "parameter 1 'text' has type 'char* text', a pointer to a type with no torch dtype",
        ),
    ],
)
def test_unsupported_types_name_the_function_and_the_type(declaration, message):
    with pytest.raises(SignatureError) as caught:
        parse_signatures(declaration)
    assert message in str(caught.value)
    assert isinstance(caught.value, PragmaError)


# -- calling ---------------------------------------------------------------------------------------


def test_the_documented_relu_candidate_runs():
    lib = load_library(RELU, flags=["-ffast-math"])

    class ModelNew(nn.Module):
        def forward(self, x):
            out = torch.empty_like(x)
            lib.relu(x, out, x.numel())
            return out

    x = torch.randn(64, 33)
    assert torch.equal(ModelNew()(x), torch.relu(x))
    assert isinstance(lib, NativeLibrary) and list(lib.functions) == ["relu"]
    assert lib["relu"] is lib.relu and lib.relu.__name__ == "relu"
    with pytest.raises(AttributeError, match="exports no function 'gelu'.*: relu"):
        _ = lib.gelu


class _Lazy(torch.Tensor):
    pass


def test_a_models_parameters_pass_as_they_are():
    lib = load_library(RELU)
    weight = nn.Parameter(torch.randn(5))
    out = torch.empty(5)
    lib.relu(weight, out, 5)
    assert torch.equal(out, torch.relu(weight.detach()))


def test_scalars_return_values_and_void_pointers():
    lib = load_library(KERNELS)
    x = torch.arange(6, dtype=torch.float32)
    out = torch.empty(6)
    assert lib.scale(x, out, 6, 0.5) is None
    assert torch.equal(out, x * 0.5)
    lib.scale(x, out, 6, 2)  # an int for a float parameter converts
    assert torch.equal(out, x * 2)
    assert lib.total(torch.arange(5, dtype=torch.float64), 5) == 10.0
    assert lib.flag_value(True) == 7 and lib.flag_value(False) == -7
    source, target = torch.arange(4, dtype=torch.int16), torch.zeros(4, dtype=torch.int16)
    lib.copy_bytes(source, target, 8)  # void* takes any dtype
    assert torch.equal(source, target)


def test_c_library_loads_and_runs():
    lib = load_library("void twice(float* x, int n) { for (int i = 0; i < n; ++i) x[i] *= 2; }\n", language="c")
    x = torch.ones(3)
    lib.twice(x, 3)
    assert x.tolist() == [2.0, 2.0, 2.0]


@pytest.mark.parametrize(
    "make_args, message",
    [
        (
            lambda: (torch.randn(4, dtype=torch.float64), torch.empty(4), 4),
            "relu(): argument 1 'x' (const float*) needs a contiguous float32 CPU tensor; "
            "got a float64 tensor of shape (4,)",
        ),
        (
            lambda: (torch.randn(8, 4).t(), torch.empty(32), 32),
            "relu(): argument 1 'x' (const float*) needs a contiguous float32 CPU tensor; "
            "got a non-contiguous float32 tensor of shape (4, 8)",
        ),
        (
            lambda: (torch.randn(4).as_subclass(_Lazy), torch.empty(4), 4),
            "got a _Lazy (a torch.Tensor subclass) of shape (4,); pass a plain tensor, for example x.detach()",
        ),
        (
            lambda: (torch.randn(4), torch.empty(4, device="meta"), 4),
            "argument 2 'out' (float*) needs a contiguous float32 CPU tensor; got a float32 tensor on meta of shape (4,)",
        ),
        (lambda: ([1.0, 2.0], torch.empty(2), 2), "got list [1.0, 2.0]"),
        (
            lambda: (torch.randn(4), torch.empty(4)),
            "relu() takes 3 arguments (void relu(const float* x, float* out, int64_t n)); got 2",
        ),
        (
            lambda: (torch.randn(4), torch.empty(4), 2**63),
            "relu(): argument 3 'n' (int64_t) needs an int in [-9223372036854775808, 9223372036854775807]; got 9223372036854775808",
        ),
        (lambda: (torch.randn(4), torch.empty(4), 4.0), "argument 3 'n' (int64_t) needs a Python int; got float 4.0"),
        (lambda: (torch.randn(4), torch.empty(4), torch.tensor(4)), "got an int64 tensor of shape (); pass a number"),
    ],
)
def test_bad_arguments_are_refused_before_the_call(make_args, message):
    lib = load_library(RELU)
    before = native_call_count()
    with pytest.raises(NativeCallError) as caught:
        lib.relu(*make_args())
    assert message in str(caught.value)
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, PragmaError)
    assert native_call_count() == before and lib.call_counts == {"relu": 0}


def test_int32_range_and_index_like_integers():
    lib = load_library(KERNELS)
    x = torch.ones(3, dtype=torch.float64)
    with pytest.raises(
        NativeCallError, match=r"argument 2 'n' \(int32_t\) needs an int in \[-2147483648, 2147483647\]; got 2147483648"
    ):
        lib.total(x, 2**31)
    import numpy

    assert lib.total(x, numpy.int64(3)) == 3.0


def test_calls_are_counted_per_function_and_in_total():
    lib = load_library(KERNELS)
    other = load_library(RELU)
    x = torch.ones(4)
    before = native_call_count()
    for _ in range(3):
        lib.scale(x, x, 4, 1.0)
    other.relu(x, x, 4)
    assert native_call_count() == before + 4
    assert lib.call_counts == {"scale": 3, "total": 0, "copy_bytes": 0, "flag_value": 0}
    assert other.call_counts == {"relu": 1}


# -- recording -------------------------------------------------------------------------------------


def test_recording_keeps_aliasing_offsets_and_contents_before_the_call(tmp_path):
    lib = load_library(RELU)
    data = torch.tensor([-1.0, 2.0, -3.0, 4.0, -5.0, 6.0])
    original = data.clone()
    with record_calls() as recording:
        lib.relu(data, data, 6)  # in place: both pointers are one buffer
        view = data[2:]
        lib.relu(original[2:], view, 4)  # a view: offset 8 bytes into its storage
    lib.relu(data, data, 6)  # outside the block: not recorded
    assert len(recording.calls) == 2

    first, second = recording.calls
    assert first.function == "relu" and first.library == str(lib.path)
    x, out, n = first.arguments
    assert isinstance(x, PointerArgument) and isinstance(out, PointerArgument)
    assert x.buffer == out.buffer and x.offset == out.offset == 0
    assert x.buffer_nbytes == 24 and x.dtype == "float32" and x.shape == (6,)
    assert x.const and not out.const
    assert n == ScalarArgument(name="n", ctype="int64_t", value=6)
    assert torch.equal(recording.buffers[x.buffer].view(torch.float32), original)  # before the call

    source, target, _ = second.arguments
    assert source.buffer != target.buffer
    assert source.offset == target.offset == 8 and source.buffer_nbytes == 24 and source.shape == (4,)

    recording.save(tmp_path / "rec")
    document = json.loads((tmp_path / "rec" / "calls.json").read_text())
    assert document["schema_version"] == 1
    assert sorted(p.name for p in (tmp_path / "rec" / "buffers").iterdir()) == [
        f"{b}.bin" for b in sorted(recording.buffers)
    ]
    loaded = CallRecording.load(tmp_path / "rec")
    assert loaded.calls == recording.calls
    assert all(torch.equal(loaded.buffers[b], recording.buffers[b]) for b in recording.buffers)

    # Replaying the first call on fresh copies repeats it, aliasing included.
    arguments = loaded.arguments(0)
    assert arguments[0].data_ptr() == arguments[1].data_ptr()
    lib.relu(*arguments)
    assert torch.equal(arguments[1], torch.relu(original))
    assert torch.equal(loaded.buffers[x.buffer].view(torch.float32), original)  # the recording is intact


def test_an_unchanged_storage_is_not_copied_again():
    lib = load_library(RELU)
    weight, out = torch.randn(16), torch.empty(16)
    with record_calls() as recording:
        lib.relu(weight, out, 16)
        lib.relu(weight, out, 16)
    (w1, o1, _), (w2, o2, _) = (call.arguments for call in recording.calls)
    assert w1.buffer == w2.buffer  # weight did not change between the calls
    assert o1.buffer != o2.buffer  # out did: the first call wrote it


def test_recording_is_off_by_default_and_nested_blocks_restore():
    lib = load_library(RELU)
    x = torch.ones(2)
    with record_calls() as outer:
        with record_calls() as inner:
            lib.relu(x, x, 2)
        lib.relu(x, x, 2)
    lib.relu(x, x, 2)
    assert len(inner.calls) == 1 and len(outer.calls) == 1


def test_loading_a_recording_of_another_schema_version_fails(tmp_path):
    (tmp_path / "calls.json").write_text(json.dumps({"schema_version": 99, "calls": [], "buffers": []}))
    with pytest.raises(RecordError, match="schema_version 99"):
        CallRecording.load(tmp_path)


# -- pybind11 extensions ---------------------------------------------------------------------------

PLAIN_EXTENSION = r"""
#include <pybind11/pybind11.h>
int add(int a, int b) { return a + b; }
PYBIND11_MODULE(adder_ext, m) { m.def("add", &add); }
"""

# torch's pybind11 tensor caster and the tensor type alone: 14 s to build here, where
# <torch/extension.h> takes 54 s (the audit's honest_softmax_pybind11 builds that one, sandboxed).
TORCH_EXTENSION = r"""
#include <torch/csrc/utils/pybind.h>
#include <ATen/core/Tensor.h>
at::Tensor twice(at::Tensor x) { return x.mul(2); }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("twice", &twice); }
"""


def test_plain_pybind11_extension_is_built_imported_and_counted(cache):
    ext = load_extension(PLAIN_EXTENSION, name="adder_ext", flags=["-O0"])
    assert isinstance(ext, CountingModule) and ext.module.__name__ == "adder_ext"
    before = native_call_count()
    assert ext.add(2, 3) == 5 and ext.add(4, 5) == 9
    assert native_call_count() == before + 2 and ext.call_counts == {"add": 2}
    artifact = Path(ext.module.__file__)
    assert artifact.parent.parent == cache and artifact.name.startswith("adder_ext.")
    again = load_extension(PLAIN_EXTENSION, name="adder_ext", flags=["-O0"])
    assert again.module is ext.module


def test_extension_name_must_match_its_module_declaration(cache):
    with pytest.raises(
        NativeBuildError,
        match=r"kernel.cpp:4:1: error: PYBIND11_MODULE names the module "
        r"'adder_ext' but it is loaded as 'other'",
    ):
        load_extension(PLAIN_EXTENSION, name="other")
    with pytest.raises(NativeBuildError, match="no PYBIND11_MODULE"):
        load_extension(RELU, name="relu_ext")
    assert not cache.exists() or not list(cache.iterdir())  # refused before compiling


@pytest.mark.slow
def test_torch_extension_takes_tensors_and_is_counted():
    ext = load_extension(TORCH_EXTENSION, name="twice_ext", flags=["-O0"], torch=True)
    before = native_call_count()
    assert torch.equal(ext.twice(torch.ones(3)), torch.full((3,), 2.0))
    assert native_call_count() == before + 1


def test_count_calls_wraps_an_imported_module_once():
    module = types.ModuleType("fake_inline")
    module.forward = lambda x: x + 1
    module.Kind = type("Kind", (), {})
    counted = count_calls(module)
    assert count_calls(counted) is counted
    before = native_call_count()
    assert counted.forward(1) == 2
    assert counted.Kind is module.Kind  # classes pass through uncounted
    assert native_call_count() == before + 1 and counted.call_counts == {"forward": 1}


def test_torch_include_dirs_match_cpp_extension():
    from torch.utils.cpp_extension import include_paths

    from pragma_core.backends.cpu_cpp.native.extension import torch_include_dirs

    assert torch_include_dirs() == include_paths()


def test_build_errors_survive_pickling_across_processes():
    import pickle

    error = NativeBuildError(log="kernel.cpp:3:5: error: bad\n    3 | x\n", stage="compile")
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == str(error) and copy.diagnostics == error.diagnostics and copy.log == error.log


def test_a_function_named_like_a_library_attribute_is_reached_by_subscript():
    lib = load_library('extern "C" int path(int x) { return x + 1; }\n')
    assert isinstance(lib.path, Path) and lib["path"](1) == 2


def test_building_and_reading_signatures_do_not_import_torch():
    import subprocess
    import sys

    code = (
        "import sys; from pragma_core.native import build_library, parse_signatures, NativeBuildError; "
        "print('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_build_diagnostic_location_without_line():
    assert str(BuildDiagnostic(file="g++", severity="error", message="bad flag")) == "g++: error: bad flag"


def test_torchs_extension_build_failure_becomes_diagnostics_that_name_main_cpp():
    from pragma_core.backends.cpu_cpp.native.diagnostics import extension_build_error
    from pragma_core.backends.cuda.diagnostics import parse_nvcc_diagnostics

    message = (Path(__file__).parent / "data" / "load_inline" / "gcc_undeclared.txt").read_text()
    for parse in (None, parse_nvcc_diagnostics):
        error = extension_build_error(message, parse)
        assert error is not None
        assert str(error) == (
            "the kernel failed to compile: main.cpp:2:43: error: ‘undeclared_thing’ was not declared in this scope"
        )
        summary = error.summary()
        assert "return undeclared_thing(x);" in summary and "/tmp/li" not in summary
    assert (
        extension_build_error("RuntimeError: Error building extension 'x': ninja: error: loading 'build.ninja'") is None
    )
