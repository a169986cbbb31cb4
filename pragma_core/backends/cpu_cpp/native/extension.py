"""Building and importing pybind11 extension modules, with their calls counted.

:func:`load_extension` compiles a source that defines ``PYBIND11_MODULE(name, m)`` through the
same content-hash cache as :func:`load_library` and imports the result from the cache folder,
without touching ``sys.modules``. Plain pybind11 (numbers, buffers, lists) needs only pybind11's
headers, which torch ships; with ``torch=True`` the module may take and return ``torch.Tensor``
(``#include <torch/extension.h>``), at the price of torch's headers: tens of seconds to compile
instead of a few.

The module comes back wrapped in a :class:`CountingModule`, whose functions add to
:func:`native_call_count` like a library's do. :func:`count_calls` wraps a module imported some
other way, such as the result of ``torch.utils.cpp_extension.load_inline``.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import sysconfig
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from . import library as _library
from .build import build_library
from .diagnostics import NativeBuildError

__all__ = ["CountingModule", "count_calls", "load_extension", "torch_include_dirs"]

_MODULE_DECLARATION = re.compile(r"\bPYBIND11_MODULE\s*\(\s*(\w+)\s*,")
_DISPLAY_NAME = "kernel.cpp"

# artifact path -> the module imported from it; importing one file twice gives the same module
_imported: dict[Path, ModuleType] = {}


class CountingModule:
    """An extension module whose functions count their calls; everything else passes through.

    Calling a class the module defines is not counted, nor are its methods.
    """

    def __init__(self, module: ModuleType):
        self.__dict__["_module"] = module
        self.__dict__["_counts"] = {}

    @property
    def module(self) -> ModuleType:
        """The wrapped module itself."""
        return self._module

    @property
    def call_counts(self) -> dict[str, int]:
        """Calls made so far through this wrapper, per function."""
        return {name: counts[0] for name, counts in self._counts.items()}

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if callable(value) and not isinstance(value, type) and not name.startswith("__"):
            counts = self._counts.setdefault(name, [0])
            value = _counting(value, counts)
            self.__dict__[name] = value  # later lookups skip __getattr__
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot set {name!r} on a counted extension module; set it on .module")

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self._module)) | {"module", "call_counts"})

    def __repr__(self) -> str:
        return f"<CountingModule {self._module!r}>"


def count_calls(module: ModuleType | CountingModule) -> CountingModule:
    """``module`` with its functions counted in :func:`native_call_count` (once, however often wrapped)."""
    return module if isinstance(module, CountingModule) else CountingModule(module)


def load_extension(
    source: str, *, name: str, flags: Iterable[str] = (), torch: bool = False, include_dirs: Iterable[str | Path] = ()
) -> CountingModule:
    """Build the pybind11 module ``name`` from ``source`` (cached by content) and import it.

    ``name`` must be the one in ``PYBIND11_MODULE(name, m)`` (``TORCH_EXTENSION_NAME`` is defined
    to it). ``torch=True`` adds torch's headers and libraries, for modules that use tensors.
    Raises :class:`NativeBuildError` when the source does not compile or the module does not import.
    """
    if not name.isidentifier():
        raise ValueError(f"an extension module name must be a Python identifier, got {name!r}")
    _check_module_name(source, name)
    import torch as torch_module  # pybind11's headers come with torch; tensors need it imported

    includes = [*torch_include_dirs()[:1], sysconfig.get_paths()["include"], *include_dirs]
    build_flags = [
        "-fvisibility=hidden",
        f"-DTORCH_EXTENSION_NAME={name}",
        # the headers are torch's: a new torch must rebuild
        f"-DPRAGMA_TORCH_VERSION={torch_module.__version__}",
    ]
    if torch:
        torch_lib = Path(torch_module.__file__).parent / "lib"
        includes = [*torch_include_dirs(), *includes[1:]]
        build_flags += [
            "-std=c++20",
            "-DTORCH_API_INCLUDE_EXTENSION_H",
            f"-D_GLIBCXX_USE_CXX11_ABI={int(torch_module._C._GLIBCXX_USE_CXX11_ABI)}",
            f"-L{torch_lib}",
            "-lc10",
            "-ltorch_cpu",
            "-ltorch",
            "-ltorch_python",
            f"-Wl,-rpath,{torch_lib}",
        ]
    path = build_library(
        source,
        language="c++",
        flags=[*build_flags, *flags],
        include_dirs=includes,
        output_suffix=sysconfig.get_config_var("EXT_SUFFIX"),
        output_name=name,
    )
    module = _imported.get(path)
    if module is None:
        module = _import(name, path)
        _imported[path] = module
    return CountingModule(module)


def torch_include_dirs() -> list[str]:
    """``torch.utils.cpp_extension.include_paths()`` for the CPU, without importing that module.

    The first folder also holds pybind11's headers.
    """
    import torch as torch_module

    include = Path(torch_module.__file__).parent / "include"
    return [str(include), str(include / "torch" / "csrc" / "api" / "include")]


def _check_module_name(source: str, name: str) -> None:
    """Fail before compiling when the source's module name is not ``name``."""
    match = _MODULE_DECLARATION.search(source)
    if match is None:
        raise NativeBuildError(
            log=f"{_DISPLAY_NAME}: error: the source has no PYBIND11_MODULE({name}, m) {{ ... }} "
            "block, so Python cannot import it as an extension module",
            display_name=_DISPLAY_NAME,
            stage="build",
        )
    declared = match.group(1)
    if declared not in (name, "TORCH_EXTENSION_NAME"):
        line = source.count("\n", 0, match.start()) + 1
        raise NativeBuildError(
            log=f"{_DISPLAY_NAME}:{line}:1: error: PYBIND11_MODULE names the module {declared!r} "
            f"but it is loaded as {name!r}; use PYBIND11_MODULE({name}, m)",
            display_name=_DISPLAY_NAME,
            stage="build",
        )


def _import(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise NativeBuildError(
            log=f"{_DISPLAY_NAME}: error: {path.name} is not an importable module",
            display_name=_DISPLAY_NAME,
            stage="load",
        )
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError as error:
        reason = str(error).replace(str(path), path.name)
        raise NativeBuildError(
            log=f"{_DISPLAY_NAME}: error: {reason}", display_name=_DISPLAY_NAME, stage="load"
        ) from None
    return module


def _counting(function: Callable[..., Any], counts: list[int]) -> Callable[..., Any]:
    total = _library._total_calls

    @functools.wraps(function)
    def counted(*args: Any, **kwargs: Any) -> Any:
        counts[0] += 1
        total[0] += 1
        return function(*args, **kwargs)

    return counted
