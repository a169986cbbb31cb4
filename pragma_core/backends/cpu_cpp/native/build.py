"""Compiling C or C++ source into a shared library, once per distinct source and settings.

:func:`build_library` returns the path of a shared library built from ``source``. Artifacts live
in :func:`cache_dir` under a key that hashes everything that changes the result: the source, the
language, the compiler and its version, every flag, the include folders and the file suffix. A
cache hit costs a few ``stat`` calls and no process. A miss takes a lock on ``<key>.lock``, looks
again (another process may have built it meanwhile), compiles to a temporary file in the same
folder and renames it into place, so a reader sees either no artifact or a whole one.

In a sandboxed child the shared cache is read-only: there ``PRAGMA_NATIVE_BUILD_DIR`` names a folder
of the child's own (:func:`pragma_core.sandbox.process.build_environment` sets it). An artifact the shared
cache already holds is returned from there; anything else is built into that folder, with the same
layout and locks. So a candidate can reuse what pragma built, but cannot plant a library that another
candidate, or pragma, would load later.

Compiler messages name the source ``kernel.cpp`` (or ``kernel.c``), never its path in the cache.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

from .... import paths
from ....errors import PragmaError
from ....files import atomic_write_text
from .diagnostics import NativeBuildError

__all__ = [
    "build_library",
    "rebuild",
    "cache_dir",
    "BUILD_DIR_VARIABLE",
    "BUILD_READ_VARIABLE",
    "builds_so_far",
    "compiler_for",
    "CompilerNotFoundError",
    "DEFAULT_FLAGS",
    "LANGUAGES",
]

DEFAULT_FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-g")
"""``-g`` adds debug information only (the code is the same): profilers use it to attribute counts
to the kernel's source file and lines."""
LANGUAGES = {
    # language: (compiler variable, default compiler, source suffix, flags it adds)
    "c++": ("CXX", "g++", ".cpp", ("-std=c++17",)),
    "c": ("CC", "gcc", ".c", ()),
}
BUILD_DIR_VARIABLE = "PRAGMA_NATIVE_BUILD_DIR"
"""Where a process that may not write the shared cache builds its kernels (see the module docstring)."""
BUILD_READ_VARIABLE = "PRAGMA_NATIVE_READ_DIR"
"""A folder of another candidate's builds that this process only reads, looked in after the shared
cache: the verifier's child sets it while it loads the loop's best beside the candidate, so the best's
kernels are not compiled again (what is missing there is built in the child's own folder)."""
# English, ASCII quotes and no colour: messages read the same on every machine and in a prompt.
_COMPILER_ENV = {"LC_ALL": "C", "LANG": "C", "GCC_COLORS": ""}

# (compiler path, its stat) -> first line of ``--version``; a new compiler binary is asked again.
_versions: dict[tuple[str, int, int], str] = {}

# (source, artifact) of every build_library call of this process, in order (see builds_so_far)
_builds: list[tuple[str, Path]] = []


def builds_so_far() -> list[tuple[str, Path]]:
    """The source and artifact of each :func:`build_library` call this process made, in order: what
    a candidate built is read from it (:mod:`.fingerprint`)."""
    return list(_builds)


class CompilerNotFoundError(PragmaError):
    """The C or C++ compiler to build kernels with is not installed or not on PATH."""


def cache_dir() -> Path:
    """Where built kernels are kept: ``native/`` in pragma's cache folder (:func:`pragma_core.paths.cache_dir`)."""
    return paths.cache_dir("native")


def _build_dir() -> Path:
    """Where this process writes what it builds: its own build folder if it has one, else the cache."""
    own = os.environ.get(BUILD_DIR_VARIABLE)
    return Path(own) if own else cache_dir()


def compiler_for(language: str) -> str:
    """The absolute path of the compiler for ``language``: ``$CXX``/``$CC`` or ``g++``/``gcc``."""
    variable, default, _suffix, _flags = _language(language)
    name = os.environ.get(variable) or default
    path = shutil.which(name)
    if path is None:
        raise CompilerNotFoundError(
            f"cannot build {language} kernels: the compiler {name!r} is not on PATH; "
            f"install it (for example `apt-get install {default}`) or set ${variable}"
        )
    return path


def build_library(
    source: str,
    *,
    language: str = "c++",
    flags: Iterable[str] = (),
    include_dirs: Iterable[str | os.PathLike] = (),
    output_suffix: str = ".so",
    output_name: str | None = None,
) -> Path:
    """Compile ``source`` into a shared library (or return the cached one) and give its path.

    The compiler gets :data:`DEFAULT_FLAGS` (plus ``-std=c++17`` for C++), then ``-I`` for each
    include folder, then ``flags``, which come after the source file so that ``-l`` options link.
    The artifact is ``<key><output_suffix>`` in :func:`cache_dir`; with ``output_name`` it is
    ``<key>/<output_name><output_suffix>`` instead, for files whose name matters (Python
    extension modules). With ``$PRAGMA_NATIVE_BUILD_DIR`` set, an artifact missing from the cache is
    built in that folder instead (the cache is only read); ``$PRAGMA_NATIVE_READ_DIR`` is another
    folder only read, after the cache. Raises :class:`NativeBuildError` when the source does not compile.
    """
    artifact = _build_library(source, language, flags, include_dirs, output_suffix, output_name)
    _builds.append((source, artifact))
    return artifact


def _build_library(
    source: str,
    language: str,
    flags: Iterable[str],
    include_dirs: Iterable[str | os.PathLike],
    output_suffix: str,
    output_name: str | None,
) -> Path:
    _variable, _default, source_suffix, language_flags = _language(language)
    compiler = compiler_for(language)
    command_flags = [*DEFAULT_FLAGS, *language_flags]
    command_flags += [f"-I{Path(folder)}" for folder in include_dirs]
    if isinstance(flags, str):
        raise TypeError(f"flags must be a sequence of strings, got the single string {flags!r}")
    extra_flags = list(flags)
    key = _cache_key(source, language, compiler, command_flags + extra_flags, output_suffix, output_name)

    shared = _artifact(cache_dir(), key, output_suffix, output_name)
    if shared.exists():  # the fast path: no lock, no process
        return shared
    read_only = os.environ.get(BUILD_READ_VARIABLE)
    if read_only and (other := _artifact(Path(read_only), key, output_suffix, output_name)).exists():
        return other
    folder = _build_dir()
    artifact = _artifact(folder, key, output_suffix, output_name)
    if artifact.exists():
        return artifact

    folder.mkdir(parents=True, exist_ok=True)
    with _locked(folder / f"{key}.lock"):
        if artifact.exists():  # built by another process while this one waited for the lock
            return artifact
        artifact.parent.mkdir(parents=True, exist_ok=True)
        source_path = folder / f"{key}{source_suffix}"
        atomic_write_text(source_path, source)
        manifest = {
            "language": language,
            "flags": extra_flags,
            "include_dirs": [str(Path(d)) for d in include_dirs],
            "output_suffix": output_suffix,
            "output_name": output_name,
            "source": source_path.name,
        }
        atomic_write_text(folder / f"{key}.build.json", json.dumps(manifest, indent=1) + "\n")
        fd, temporary = tempfile.mkstemp(prefix=f".{artifact.name}.", suffix=".tmp", dir=artifact.parent)
        os.close(fd)
        try:
            _compile(
                compiler,
                source_path,
                Path(temporary),
                command_flags,
                extra_flags,
                display_name=f"kernel{source_suffix}",
            )
            os.replace(temporary, artifact)
        finally:
            Path(temporary).unlink(missing_ok=True)
    return artifact


def _artifact(folder: Path, key: str, suffix: str, name: str | None) -> Path:
    return folder / f"{key}{suffix}" if name is None else folder / key / f"{name}{suffix}"


def rebuild(library: str | os.PathLike, *, extra_flags: Iterable[str]) -> Path:
    """Build the source of a cached ``library`` again with the same options plus ``extra_flags``.

    For profilers that cannot run every instruction of this CPU: valgrind decodes no AVX-512, so
    it replays a ``-mno-avx512f`` build of the same kernel. ``library`` may be in the shared cache
    or in a child's build folder; the new build goes where this process builds. Raises
    :class:`FileNotFoundError` when the library was not built by :func:`build_library`.
    """
    library = Path(library)
    # ``<key>.so`` beside ``<key>.build.json``, or ``<key>/<name>.so`` with the manifest one level up
    folder, key = library.parent, library.name.split(".")[0]
    if not (folder / f"{key}.build.json").exists():
        folder, key = library.parent.parent, library.parent.name
    manifest = json.loads((folder / f"{key}.build.json").read_text(encoding="utf-8"))
    source = (folder / manifest["source"]).read_text(encoding="utf-8")
    return build_library(
        source,
        language=manifest["language"],
        flags=[*manifest["flags"], *extra_flags],
        include_dirs=manifest["include_dirs"],
        output_suffix=manifest["output_suffix"],
        output_name=manifest["output_name"],
    )


def _language(language: str) -> tuple[str, str, str, tuple[str, ...]]:
    try:
        return LANGUAGES[language]
    except KeyError:
        raise ValueError(f"language must be one of {sorted(LANGUAGES)}, got {language!r}") from None


def _compiler_version(compiler: str) -> str:
    """The first line of ``compiler --version``, asked once per compiler binary.

    The answer is kept in memory and on disk beside the cache, keyed by the binary's size and
    modification time, so a cache hit in a fresh process starts no compiler.
    """
    real = os.path.realpath(compiler)
    info = os.stat(real)
    memo = (real, info.st_size, info.st_mtime_ns)
    version = _versions.get(memo)
    if version is not None:
        return version
    name = hashlib.sha256(repr(memo).encode()).hexdigest()[:32] + ".txt"
    note = _build_dir() / "compilers" / name
    version = ""
    for known in dict.fromkeys([cache_dir() / "compilers" / name, note]):
        try:
            version = known.read_text(encoding="utf-8").strip()
        except OSError:
            continue
        if version:
            break
    if not version:
        result = subprocess.run(
            [compiler, "--version"], capture_output=True, text=True, env=os.environ | _COMPILER_ENV, check=False
        )
        lines = (result.stdout or result.stderr).splitlines()
        version = lines[0].strip() if lines else "unknown"
        try:
            atomic_write_text(note, version + "\n")
        except OSError:
            pass  # a read-only cache still builds; it only asks the compiler again next time
    _versions[memo] = version
    return version


def _cache_key(
    source: str, language: str, compiler: str, flags: list[str], suffix: str, output_name: str | None
) -> str:
    identity = {
        "source": source,
        "language": language,
        "compiler": compiler,
        "compiler_version": _compiler_version(compiler),
        "flags": flags,
        "suffix": suffix,
        "output_name": output_name,
        # -march=native code is only valid on CPUs with the same instruction set.
        "host": _host_cpu() if "-march=native" in flags else "",
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:32]


@functools.cache
def _host_cpu() -> str:
    """This CPU's model and feature flags, from /proc/cpuinfo (the machine type where absent)."""
    try:
        lines = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return platform.machine()
    wanted = ("model name", "flags", "Features", "CPU part")
    found = [line for line in lines if line.split(":")[0].strip() in wanted]
    return hashlib.sha256("\n".join(dict.fromkeys(found)).encode()).hexdigest()[:16] or platform.machine()


class _locked:
    """An exclusive ``flock`` on ``path`` for the ``with`` block; the file itself stays."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self) -> None:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(self.fd)
            raise

    def __exit__(self, *exc_info: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def _compile(
    compiler: str, source_path: Path, output: Path, flags: list[str], extra_flags: list[str], *, display_name: str
) -> None:
    command = [compiler, str(source_path), *flags, *extra_flags, "-o", str(output), "-fdiagnostics-color=never"]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        errors="replace",
        cwd=source_path.parent,
        env=os.environ | _COMPILER_ENV,
        check=False,
    )
    if result.returncode != 0:
        log = (result.stdout + result.stderr).replace(str(source_path), display_name)
        log = log.replace(source_path.name, display_name).replace(str(output), "<output>")
        raise NativeBuildError(log=log, display_name=display_name)
