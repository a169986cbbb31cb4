"""Calling the functions of a compiled kernel with torch tensors, checked and counted.

:func:`load_library` builds the source (see :mod:`.build`), reads its exported signatures (see
:mod:`.signatures`) and opens the result as a :class:`NativeLibrary`, whose attributes are the
kernel's functions::

    lib = load_library(SOURCE)
    lib.relu(x, out, x.numel())

A pointer parameter takes a plain ``torch.Tensor`` on the CPU, contiguous, of the dtype the
pointer's type gives (any dtype for ``void*``); a scalar takes a Python int, float or bool that fits
its C type. Anything else raises :class:`NativeCallError` before the native code runs, naming the
argument and what it needs, because a wrong pointer does not fail: it reads or writes the wrong
memory.

Every call adds one to its function's count (``lib.call_counts``) and to a total over all
libraries and extension modules, :func:`native_call_count`, which the harness reads around each
timed call to see that the candidate's own code ran. The checks of each function are generated
once, as Python source, when the library is loaded; a call costs about a microsecond more than a
bare ctypes call.
"""

from __future__ import annotations

import ctypes
import operator
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch

from ....errors import PragmaError
from .build import build_library
from .diagnostics import NativeBuildError
from .signatures import FunctionSignature, Parameter, parse_signatures

__all__ = ["NativeLibrary", "NativeCallError", "load_library", "native_call_count", "CTYPES"]

CTYPES: dict[str, Any] = {
    "float": ctypes.c_float,
    "double": ctypes.c_double,
    "bool": ctypes.c_bool,
    "int": ctypes.c_int,
    "int32_t": ctypes.c_int32,
    "int64_t": ctypes.c_int64,
    "long": ctypes.c_long,
    "long long": ctypes.c_longlong,
    "short": ctypes.c_short,
    "int16_t": ctypes.c_int16,
    "int8_t": ctypes.c_int8,
    "signed char": ctypes.c_byte,
    "unsigned": ctypes.c_uint,
    "uint32_t": ctypes.c_uint32,
    "uint64_t": ctypes.c_uint64,
    "unsigned long": ctypes.c_ulong,
    "unsigned long long": ctypes.c_ulonglong,
    "unsigned short": ctypes.c_ushort,
    "uint16_t": ctypes.c_uint16,
    "uint8_t": ctypes.c_uint8,
    "unsigned char": ctypes.c_ubyte,
    "size_t": ctypes.c_size_t,
    "ptrdiff_t": ctypes.c_ssize_t,
}
_SIGNED = {
    ctypes.c_byte,
    ctypes.c_short,
    ctypes.c_int,
    ctypes.c_long,
    ctypes.c_longlong,
    ctypes.c_int8,
    ctypes.c_int16,
    ctypes.c_int32,
    ctypes.c_int64,
    ctypes.c_ssize_t,
}

# The total of native calls, and the recording in force (set by .recording); one-item lists so the
# generated callers reach them with a single lookup.
_total_calls = [0]
_recording: list[Any] = [None]


def native_call_count() -> int:
    """How many calls went through every :class:`NativeLibrary` and counted extension so far."""
    return _total_calls[0]


class NativeCallError(TypeError, PragmaError):
    """A native function was called with arguments that do not fit its C signature."""


class NativeLibrary:
    """A loaded kernel library: each exported function is an attribute, checked and counted.

    ``functions`` maps names to :class:`FunctionSignature`; ``lib["name"]`` also gives a function
    (the only way to reach one whose name is an attribute of this class, such as ``path``).
    """

    def __init__(
        self,
        path: str | os.PathLike,
        signatures: Iterable[FunctionSignature],
        *,
        name: str | None = None,
        display_name: str = "kernel.cpp",
    ):
        self.path = Path(path)
        self.name = name or "kernel"
        self.functions: dict[str, FunctionSignature] = {s.name: s for s in signatures}
        try:
            self._cdll = ctypes.CDLL(str(self.path), mode=os.RTLD_LOCAL)
        except OSError as error:
            reason = str(error).replace(f"{self.path}: ", "").replace(str(self.path), "the library")
            if "undefined symbol" in reason:
                reason += " (declared but not defined in the source, or its library is not linked)"
            raise NativeBuildError(
                log=f"{display_name}: error: {reason}", display_name=display_name, stage="load"
            ) from None
        self._callers: dict[str, Callable[..., Any]] = {}
        self._counts: dict[str, list[int]] = {}
        for signature in self.functions.values():
            try:
                cfunc = getattr(self._cdll, signature.name)
            except AttributeError:
                where = f"{display_name}:{signature.line}" if signature.line else display_name
                raise NativeBuildError(
                    log=f"{where}: error: {signature.name}() is declared but the built library does not "
                    "export it; define it, and do not make it static or inline",
                    display_name=display_name,
                    stage="load",
                ) from None
            counts = [0]
            caller = _make_caller(signature, cfunc, counts, self)
            self._callers[signature.name] = caller
            self._counts[signature.name] = counts
            taken = signature.name in self.__dict__ or hasattr(type(self), signature.name)
            if not taken and not signature.name.startswith("_"):
                self.__dict__[signature.name] = caller

    @property
    def call_counts(self) -> dict[str, int]:
        """Calls made so far to each function of this library."""
        return {name: counts[0] for name, counts in self._counts.items()}

    def __getitem__(self, name: str) -> Callable[..., Any]:
        try:
            return self._callers[name]
        except KeyError:
            raise KeyError(self._missing(name)) from None

    def __getattr__(self, name: str) -> Any:  # only reached for names that are not functions
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(self._missing(name))

    def _missing(self, name: str) -> str:
        exported = ", ".join(sorted(self.functions)) or "none"
        return f"the kernel library exports no function {name!r}; its exported functions are: {exported}"

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self.functions))

    def __repr__(self) -> str:
        return f"<NativeLibrary {self.name} {self.path.name}: {', '.join(self.functions) or 'no functions'}>"


def load_library(
    source: str, *, language: str = "c++", flags: Iterable[str] = (), name: str | None = None
) -> NativeLibrary:
    """Build ``source`` (cached by content), read its exported functions and load it.

    Raises :class:`NativeBuildError` when it does not compile or load and
    :class:`SignatureError` when an exported function has a type that cannot be passed from Python.
    """
    display_name = "kernel.cpp" if language == "c++" else "kernel.c"
    signatures = parse_signatures(source, language=language, display_name=display_name)
    path = build_library(source, language=language, flags=flags)
    return NativeLibrary(path, signatures, name=name, display_name=display_name)


# -- the generated callers -----------------------------------------------------------------------


def _make_caller(
    signature: FunctionSignature, cfunc: Any, counts: list[int], library: NativeLibrary
) -> Callable[..., Any]:
    """A Python function that checks the arguments of one native function, counts and calls it.

    Generated as source (as attrs and dataclasses generate ``__init__``) so that each check is
    inline code: a call pays for its tests and nothing else.
    """
    params = signature.params
    cfunc.argtypes = [ctypes.c_void_p if p.pointer else CTYPES[p.ctype] for p in params]
    cfunc.restype = None if signature.returns == "void" else CTYPES[signature.returns]
    namespace: dict[str, Any] = {
        "Tensor": torch.Tensor,
        "Parameter": torch.nn.Parameter,
        "cfunc": cfunc,
        "counts": counts,
        "total": _total_calls,
        "recording": _recording,
        "wrong_count": _wrong_count,
        "bad_pointer": _bad_pointer,
        "to_scalar": _to_scalar,
        "signature": signature,
        "library": library,
    }
    names = [f"a{i}" for i in range(len(params))]
    lines = [
        "def caller(*args):",
        f"    if len(args) != {len(params)}:",
        "        raise wrong_count(signature, args)",
    ]
    if params:
        lines.append(f"    {', '.join(names)}{',' if len(params) == 1 else ''} = args")
    passed = []
    for index, (param, arg) in enumerate(zip(params, names)):
        if param.pointer:
            test = f"(type({arg}) is not Tensor and type({arg}) is not Parameter)"
            if param.dtype is not None:
                namespace[f"dtype{index}"] = getattr(torch, param.dtype)
                test += f" or {arg}.dtype is not dtype{index}"
            test += f" or not {arg}.is_cpu or not {arg}.is_contiguous()"
            lines += [f"    if {test}:", f"        raise bad_pointer(signature, {index}, {arg})"]
            passed.append(f"{arg}.data_ptr()")
        else:
            exact, low, high = _scalar_range(param.ctype)
            test = f"type({arg}) is not {exact}"
            if low is not None:
                test += f" or not {low} <= {arg} <= {high}"
            lines += [f"    if {test}:", f"        {arg} = to_scalar(signature, {index}, {arg})"]
            passed.append(arg)
    lines += [
        "    counts[0] += 1",
        "    total[0] += 1",
        "    if recording[0] is not None:",
        "        recording[0].record(library, signature, args)",
        f"    return cfunc({', '.join(passed)})",
    ]
    code = "\n".join(lines)
    exec(compile(code, f"<native caller {signature.name}>", "exec"), namespace)
    caller = namespace["caller"]
    caller.__name__ = caller.__qualname__ = signature.name
    caller.__doc__ = f"{signature} (native, from {library.path.name})"
    caller.signature = signature
    caller.source = code
    return caller


def _scalar_range(ctype: str) -> tuple[str, int | None, int | None]:
    """The Python type a call passes without conversion, and the bounds of an integer C type."""
    if ctype in ("float", "double"):
        return "float", None, None
    if ctype == "bool":
        return "bool", None, None
    kind = CTYPES[ctype]
    bits = 8 * ctypes.sizeof(kind)
    if kind in _SIGNED:
        return "int", -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return "int", 0, (1 << bits) - 1


def _describe(param: Parameter, index: int, signature: FunctionSignature) -> str:
    """``relu(): argument 1 'x' (const float*)``"""
    named = f" {param.name!r}" if param.name else ""
    return f"{signature.name}(): argument {index + 1}{named} ({param.spelling})"


def _wrong_count(signature: FunctionSignature, args: tuple[Any, ...]) -> NativeCallError:
    count = len(signature.params)
    return NativeCallError(
        f"{signature.name}() takes {count} argument{'s' if count != 1 else ''} ({signature}); got {len(args)}"
    )


def _bad_pointer(signature: FunctionSignature, index: int, value: Any) -> NativeCallError:
    param = signature.params[index]
    wanted = f"{param.dtype} " if param.dtype else ""
    needs = f"needs a contiguous {wanted}CPU tensor"
    return NativeCallError(f"{_describe(param, index, signature)} {needs}; got {_describe_value(value)}")


def _describe_value(value: Any) -> str:
    """``a non-contiguous float32 tensor of shape (4, 8)``, ``int 3``, ``a Parameter ...``."""
    if isinstance(value, torch.Tensor):
        if type(value) not in (torch.Tensor, torch.nn.Parameter):
            kind = type(value).__name__
            return (
                f"a {kind} (a torch.Tensor subclass) of shape {tuple(value.shape)}; pass a plain "
                "tensor, for example x.detach() or x.data"
            )
        words = []
        if value.layout is not torch.strided:
            words.append(str(value.layout).removeprefix("torch.").removesuffix("_coo"))
        elif not value.is_contiguous():
            words.append("non-contiguous")
        words.append(str(value.dtype).removeprefix("torch."))
        where = "" if value.is_cpu else f" on {value.device}"
        article = "an" if words[0][0] in "aeiou" else "a"
        return f"{article} {' '.join(words)} tensor{where} of shape {tuple(value.shape)}"
    text = repr(value)
    text = text if len(text) <= 40 else text[:37] + "..."
    return f"{type(value).__name__} {text}"


def _to_scalar(signature: FunctionSignature, index: int, value: Any) -> Any:
    """The slow path for a scalar argument: convert what fits, or say what is wrong."""
    param = signature.params[index]
    exact, low, high = _scalar_range(param.ctype)
    needs = {"float": "a Python float", "bool": "a bool", "int": "a Python int"}[exact]
    problem = None
    if isinstance(value, torch.Tensor):
        problem = f"got {_describe_value(value)}; pass a number (x.item(), x.numel(), x.shape[0])"
    elif exact == "float":
        if isinstance(value, (int, float)) or hasattr(value, "__float__") and not isinstance(value, (str, bytes)):
            return float(value)
    elif exact == "bool":
        if isinstance(value, int) and value in (0, 1) or type(value).__name__ == "bool_":
            return bool(value)
    else:
        try:
            number = operator.index(value)
        except TypeError:
            pass
        else:
            if low is not None and high is not None and low <= number <= high:
                return number
            raise NativeCallError(
                f"{_describe(param, index, signature)} needs an int in "
                f"[{low}, {high}]; got {number}, which does not fit"
            )
    problem = problem or f"got {_describe_value(value)}"
    raise NativeCallError(f"{_describe(param, index, signature)} needs {needs}; {problem}")
