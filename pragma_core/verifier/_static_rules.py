"""The rules the static reading of a candidate applies: which names and constructs are forbidden,
which count as another library doing the work, which mean lower precision, and why each matters.

:mod:`.static_checks` reads a module and looks these up; the rules live here so they can be read
(and extended) as tables. Each reason is the text a finding carries after ``"what, line N: "``.
"""

from __future__ import annotations

import re

_GC = "the garbage collector hands out every live object, the reference model and the harness included"
_FRAMES = "walks the interpreter's frames, which reach the harness's variables, models and clocks"
_HOOKS = "installs a hook on the interpreter or on every module, the harness's included"
_MODULES = "reaches the table of loaded modules or the import machinery, and through it the harness"
_BUILTINS = "changes or reaches Python's builtins"
_DYNAMIC_CODE = "runs code this check never read"
_UNPICKLE = "loads pickled or marshalled objects, code this check never read"
_INTROSPECTION = "reaches objects without naming them (a function's globals, code or closure, every subclass)"
_DISPATCH = "reaches PyTorch's dispatch-mode stack or dispatch keys, which hides operators from the verifier's monitor"
_PROFILER = "switches PyTorch's profiler or its callbacks, which the verifier's monitor relies on"
_NATIVE = (
    "loads native code outside pragma_core.native and torch.utils.cpp_extension "
    "(load_library, load_extension, load_inline)"
)
_PROCESS = "starts, signals, detaches or ends a process"
_EXIT = "runs code at exit or on a signal, outside the verifier's watch"
_LIMITS = "changes the process's resource limits"
_THREADS = "starts threads the verifier's thread count does not see"
_FILES = "writes, removes or renames files or file descriptors"
_NETWORK = "reaches for the network"
_PATCH = "changes an attribute of a module or class the candidate did not define"
_COMPILED_TORCH = "compiles PyTorch's own operators: the work is PyTorch's, not the candidate's kernel"
_LIBRARY = "does the work in another library instead of the candidate's kernel"
_TO_NUMPY = "hands the tensor to NumPy (the work then runs in another library)"

_OS_PROCESS = (
    "fork forkpty setsid setpgid setpgrp kill killpg system popen posix_spawn posix_spawnp _exit register_at_fork "
    "execl execle execlp execlpe execv execve execvp execvpe "
    "spawnl spawnle spawnlp spawnlpe spawnv spawnve spawnvp spawnvpe"
).split()
_OS_FILES = (
    "dup dup2 write pwrite writev open remove unlink rename renames replace rmdir removedirs truncate ftruncate "
)
_OS_FILES += "symlink link sendfile"

_FORBIDDEN: dict[str, str] = {
    "gc": _GC,
    **dict.fromkeys(["sys._getframe", "sys._current_frames", "sys._getframemodulename"], _FRAMES),
    **dict.fromkeys(["traceback.walk_stack", "traceback.walk_tb"], _FRAMES),
    **{f"inspect.{name}": _FRAMES for name in "currentframe stack trace getouterframes getinnerframes".split()},
    **{f"sys.{name}": _HOOKS for name in "settrace setprofile monitoring call_tracing addaudithook".split()},
    **{f"sys.{name}": _HOOKS for name in "excepthook displayhook breakpointhook unraisablehook".split()},
    **{
        f"threading.{name}": _HOOKS
        for name in "settrace setprofile settrace_all_threads setprofile_all_threads".split()
    },
    **{f"sys.{name}": _MODULES for name in "modules meta_path path_hooks path_importer_cache".split()},
    "builtins": _BUILTINS,
    "__builtins__": _BUILTINS,
    **dict.fromkeys(["exec", "eval", "compile", "__import__", "breakpoint"], _DYNAMIC_CODE),
    **dict.fromkeys(["importlib", "runpy", "code", "codeop", "types.CodeType", "types.FunctionType"], _DYNAMIC_CODE),
    **{
        f"{lib}.{name}": _UNPICKLE for lib in ("pickle", "_pickle", "dill", "cloudpickle") for name in ("load", "loads")
    },
    **dict.fromkeys(["pickle.Unpickler", "marshal.load", "marshal.loads", "shelve"], _UNPICKLE),
    "torch._C": _DISPATCH,
    "torch.utils._python_dispatch": _DISPATCH,
    "torch._ops": _DISPATCH,
    "torch._dispatch": _DISPATCH,
    "torch._subclasses": _DISPATCH,
    "torch.nn.modules.module._global_forward_hooks": _HOOKS,
    "torch.nn.modules.module._global_forward_pre_hooks": _HOOKS,
    "torch.nn.modules.module._global_module_registration_hooks": _HOOKS,
    **dict.fromkeys(["torch.profiler", "torch.autograd.profiler", "torch.autograd.profiler_util"], _PROFILER),
    "torch.autograd.profiler_legacy": _PROFILER,
    **dict.fromkeys(["ctypes", "_ctypes", "cffi"], _NATIVE),
    **dict.fromkeys(["subprocess", "multiprocessing", "pty", "concurrent.futures.ProcessPoolExecutor"], _PROCESS),
    **dict.fromkeys(["asyncio.create_subprocess_exec", "asyncio.create_subprocess_shell"], _PROCESS),
    **{f"os.{name}": _PROCESS for name in _OS_PROCESS},
    **dict.fromkeys(["atexit", "signal"], _EXIT),
    **dict.fromkeys(["resource.setrlimit", "resource.prlimit"], _LIMITS),
    **dict.fromkeys(["_thread", "threading._start_new_thread", "threading._start_joinable_thread"], _THREADS),
    **{f"os.{name}": _FILES for name in _OS_FILES.split()},
    **dict.fromkeys(["shutil.rmtree", "shutil.move"], _FILES),
    **dict.fromkeys(["socket", "ssl", "http.client", "urllib.request", "urllib3", "requests", "httpx"], _NETWORK),
    **dict.fromkeys(["ftplib", "smtplib", "telnetlib", "xmlrpc", "asyncio.open_connection"], _NETWORK),
    **dict.fromkeys(["object.__setattr__", "object.__delattr__", "type.__setattr__", "type.__delattr__"], _PATCH),
}
"""Dotted names (a prefix of the resolved chain) -> why. Names of one component match only at the
root of a chain (``import signal`` but not ``torch.signal``); longer ones anywhere in it."""

_FORBIDDEN_ATTRIBUTES: dict[str, str | None] = {
    **dict.fromkeys(
        "f_back f_globals f_locals f_builtins tb_frame gi_frame cr_frame ag_frame _getframe currentframe".split(),
        _FRAMES,
    ),
    **dict.fromkeys("settrace setprofile settrace_all_threads setprofile_all_threads".split(), _HOOKS),
    **{
        f"register_module_{kind}": _HOOKS
        for kind in (
            "forward_hook",
            "forward_pre_hook",
            "full_backward_hook",
            "full_backward_pre_hook",
            "backward_hook",
            "buffer_registration_hook",
            "module_registration_hook",
            "parameter_registration_hook",
        )
    },
    **dict.fromkeys("__subclasses__ __globals__ __code__ __closure__ co_code".split(), _INTROSPECTION),
    "__builtins__": _BUILTINS,
    **dict.fromkeys(
        (
            "_disable_current_modes _pop_mode _pop_mode_temporarily _push_mode _set_torch_dispatch_mode "
            "_get_current_dispatch_mode _get_current_dispatch_mode_stack _get_dispatch_stack_at "
            "_pop_torch_dispatch_stack _push_on_torch_dispatch_stack _len_torch_dispatch_stack "
            "_set_dispatch_mode _unset_dispatch_mode _disable_infra_mode _unset_infra_mode "
            "_DisableTorchDispatch _disabled_torch_dispatch_impl _DisablePythonDispatcher _EnablePythonDispatcher "
            "ExcludeDispatchKeyGuard _ExcludeDispatchKeyGuard _IncludeDispatchKeyGuard _ForceDispatchKeyGuard "
            "_SetExcludeDispatchKeyGuard _PreserveDispatchKeyGuard _RestorePythonTLSSnapshot "
            "_AutoDispatchBelowAutograd _AutoDispatchBelowADInplaceOrView "
            "_dispatch_tls_set_dispatch_key_excluded _dispatch_tls_set_dispatch_key_included "
            "_pop_torch_function_stack _push_on_torch_function_stack _len_torch_function_stack "
            "_get_current_function_mode_stack DisableTorchFunction DisableTorchFunctionSubclass "
            "_set_torch_function_state _disabled_torch_function_impl"
        ).split(),
        _DISPATCH,
    ),
    **dict.fromkeys(
        (
            "_disable_profiler _disable_profiler_legacy _enable_profiler _enable_profiler_legacy _prepare_profiler "
            "_toggle_collection_dynamic _enable_record_function _set_record_function_enabled "
            "_record_function_with_args_enter _record_function_with_args_exit _clear_callbacks"
        ).split(),
        _PROFILER,
    ),
    **dict.fromkeys(["gc", "ctypes", "_ctypes", "cffi", "_thread", "subprocess", "importlib", "builtins"], None),
}
"""Attribute names forbidden whatever they are found on (also as a constant ``getattr`` name or a
string equal to the name). A ``None`` reason means: the module of that name, reached as an attribute
of another module (``torch.some_module.gc``), with the module's own reason."""

_FORBIDDEN_METHODS = {"unlink": _FILES, "rmdir": _FILES}
"""Method names forbidden on any object (``Path.unlink``): nothing a kernel does with its inputs."""

_COMPILED_TORCH_NAMES = ("torch.compile", "torch.jit.script", "torch.jit.trace", "torch._dynamo", "torch._inductor")
_LIBRARIES = ("numpy", "scipy", "numba", "jax", "jaxlib", "cupy", "tensorflow", "numexpr", "sklearn")
_NUMPY_NOT_WORK = frozenset(
    "dtype finfo iinfo pi e inf nan newaxis ndarray float32 float64 int8 int16 int32 int64 uint8 intp bool_".split()
)
_SHAPE_METHODS = frozenset({"size", "stride", "dim", "numel"})

_LOW_PRECISION_TYPES = frozenset({"float16", "bfloat16", "half", "chalf", "complex32"})
_PRECISION_ROOTS = ("torch", "numpy", "triton.language", "jax.numpy", "ml_dtypes")
_PRECISION_SWITCHES = (
    "allow_tf32",
    "allow_bf16_reduced_precision_reduction",
    "allow_fp16_reduced_precision_reduction",
    "fp32_precision",
)
_LOW_PRECISION_WHY = "computes in a lower precision than float32"

_C_PRECISION_NAMES = [
    (pattern, what)
    for pattern, what in (
        (r"\b__bf16\b", "__bf16"),
        (r"\b_Float16\b", "_Float16"),
        (r"\b__fp16\b", "__fp16"),
        (r"\b(?:std::)?b?float16_t\b", "float16_t / bfloat16_t"),
        (r"\b(?:b?float16x\d+(?:x\d+)?_t)\b", "NEON half-precision vector type"),
        (r"\b(?:at|c10|torch)::(?:Half|BFloat16|Float8\w*)\b", "PyTorch's Half / BFloat16 type"),
        (r"\b(?:at|c10|torch)::(?:k|ScalarType::)(?:Half|BFloat16|Float8\w*)\b", "PyTorch's half / bfloat16 dtype"),
        (r"\b__half2?\b|\b__nv_bfloat162?\b|\bhip_bfloat16\b|\b__hip_bfloat16\b", "CUDA / HIP half type"),
        (r"\b__(?:float2half|half2float|float2bfloat16|bfloat162float)\w*", "CUDA half conversion"),
        (r"\bhalf2?\s*[*&]*\s*[A-Za-z_]\w*\s*[=;,)\[(]|\(\s*half2?\s*\)|<\s*half2?\s*>", "half"),
        (r"\b_mm\d*_(?:mask_|maskz_)?cvt(?:ne)?2?ps_(?:pbh|ph)\b", "conversion to bf16 / fp16"),
        (r"\b_mm\d*_(?:mask_|maskz_)?cvtph_ps\b", "fp16 to float conversion"),
        (r"\b_mm\d*_(?:mask_|maskz_)?dpbf16_ps\b", "bf16 dot product"),
        (r"\b_mm\d*_(?:mask_|maskz_)?\w+_ph\b", "AVX512-FP16 arithmetic"),
        (r"\b_tile_dp(?:bf16|fp16)ps\b", "AMX bf16 / fp16 tile product"),
        (r"\bv(?:cvtps2ph|cvtneps2bf16|cvtne2ps2bf16|dpbf16ps|cvtph2ps)\b", "half-precision instruction"),
        (r"\bv(?:bfdot|bfmmla|bfmlal\w*)q?_f32\w*|\bvcvt\w*_(?:f16|bf16)\w*", "NEON half-precision intrinsic"),
    )
]
_C_PRECISION = re.compile(
    "|".join(f"(?P<p{number}>{pattern})" for number, (pattern, _) in enumerate(_C_PRECISION_NAMES))
)
"""One pass over a string finds them all; ``lastgroup`` says which."""
_C_PRECISION_HINTS = ("16", "half", "Half", "_ph", "pbh", "Float8")
_C_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)

# PyTorch calls in forward that allocate, view, move or describe tensors: not compute, so not
# listed among the flagged calls.
_ALLOWED_TORCH_CALLS = frozenset(
    {
        "empty",
        "empty_like",
        "empty_strided",
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "full",
        "full_like",
        "tensor",
        "as_tensor",
        "from_numpy",
        "arange",
        "cat",
        "stack",
        "split",
        "chunk",
        "flatten",
        "reshape",
        "view",
        "view_as",
        "permute",
        "transpose",
        "contiguous",
        "clone",
        "unsqueeze",
        "squeeze",
        "expand",
        "expand_as",
        "narrow",
        "select",
        "detach",
        "to",
        "size",
        "numel",
        "dim",
        "is_contiguous",
        "data_ptr",
        "stride",
        "item",
        "float",
        "double",
        "long",
        "int",
        "no_grad",
        "zero_",
        "fill_",
        "copy_",
        "new_empty",
        "new_zeros",
        "device",
        "dtype",
        "Size",
        "get_num_threads",
        "set_num_threads",
        "unbind",
        "t",
        "movedim",
        "element_size",
        "storage_offset",
        "untyped_storage",
        "is_floating_point",
    }
)
