"""A fingerprint of the machine code a ``cpu-cpp`` candidate runs, equal for two candidates that run
the same code: the loop records a move that changed nothing ("unchanged") without timing it.

In the sandbox child, :class:`LoadWatch` is made just before the candidate is loaded and, once it
has run, gives :meth:`LoadWatch.machine_code`: a hash of

- the code of every native library the process mapped since (:func:`code_hash`: the loaded,
  read-only sections of the ELF file, so a build-id or the path it was built at does not count),
- and the candidate module's syntax tree, without docstrings, where each native source string it
  passed to :func:`~.build.build_library` stands for the code hash of what it built, and the
  ``flags`` of that build call are left out (what they changed is in the code).

So two modules differing only in C++ comments, whitespace or a knob the compiler folded to the same
code have the same fingerprint; a change in the Python around the kernels (a launch argument)
gives another. A candidate can only spoil its own fingerprint: one that looks unchanged is not
timed and cannot become the best.
"""

from __future__ import annotations

import ast
import hashlib
import json
import struct
from pathlib import Path

from .build import builds_so_far

__all__ = ["LoadWatch", "code_hash", "mapped_libraries"]

_SHF_WRITE = 0x1
_SHF_ALLOC = 0x2
_SHT_NOBITS = 8
_SHT_NOTE = 7  # .note.gnu.build-id: differs between builds of the same code
_ELF_MAGIC = b"\x7fELF"


def code_hash(path: str | Path) -> str:
    """The SHA-256 of a shared library's loaded, read-only sections (code, read-only data, symbol
    tables), by name and content; the whole file's for a file that is not ELF."""
    data = Path(path).read_bytes()
    digest = hashlib.sha256()
    sections = _read_only_sections(data)
    if sections is None:
        digest.update(data)
    for name, content in sections or ():
        digest.update(name + b"\0" + len(content).to_bytes(8, "little") + content)
    return digest.hexdigest()


def _read_only_sections(data: bytes) -> list[tuple[bytes, bytes]] | None:
    """(name, bytes) of each allocated, non-writable section with contents, notes left out; None
    when ``data`` is not an ELF file this reader understands."""
    if len(data) < 64 or not data.startswith(_ELF_MAGIC) or data[4] not in (1, 2) or data[5] not in (1, 2):
        return None
    wide, order = data[4] == 2, "<" if data[5] == 1 else ">"
    table = struct.unpack_from(order + ("Q" if wide else "I"), data, 0x28 if wide else 0x20)[0]
    entry_size, count, names_index = struct.unpack_from(order + "HHH", data, 0x3A if wide else 0x2E)
    layout = order + ("IIQQQQIIQQ" if wide else "IIIIIIIIII")
    try:
        entries = [struct.unpack_from(layout, data, table + i * entry_size) for i in range(count)]
        names = entries[names_index]
    except (struct.error, IndexError):
        return None
    sections = []
    for name_at, kind, flags, _address, offset, size, *_rest in entries:
        if not flags & _SHF_ALLOC or flags & _SHF_WRITE or kind in (_SHT_NOBITS, _SHT_NOTE):
            continue
        start = names[4] + name_at
        name = data[start : data.index(b"\0", start)] if start < len(data) else b""
        sections.append((name, data[offset : offset + size]))
    return sections


def mapped_libraries() -> set[str]:
    """The files this process maps executable (its loaded libraries), from ``/proc/self/maps``;
    empty where there is none."""
    try:
        lines = Path("/proc/self/maps").read_text().splitlines()
    except OSError:
        return set()
    found = set()
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and "x" in fields[1] and fields[5].startswith("/"):
            found.add(fields[5].removesuffix(" (deleted)"))
    return found


class LoadWatch:
    """What this process had built and mapped before a candidate was loaded, to tell what the
    candidate built and loaded (:meth:`machine_code`)."""

    def __init__(self) -> None:
        self._builds = len(builds_so_far())
        self._mapped = mapped_libraries()

    def machine_code(self, source: str) -> str | None:
        """The fingerprint of the candidate whose module is ``source``, loaded since this watch was
        made (the module docstring says what it covers); None when its source does not parse."""
        built = builds_so_far()[self._builds :]
        libraries = (mapped_libraries() - self._mapped) | {str(artifact) for _source, artifact in built}
        hashes: dict[str, str] = {}
        for library in libraries:
            try:
                hashes[library] = code_hash(library)
            except OSError:
                hashes[library] = f"unreadable {Path(library).name}"
        by_source = {text: hashes.get(str(artifact), "") for text, artifact in built}
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return None
        module = _NativeSourcesAsCode(by_source).visit(_without_docstrings(tree))
        identity = {"libraries": sorted(hashes.values()), "module": ast.dump(module)}
        return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def _without_docstrings(tree: ast.Module) -> ast.Module:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            first = body[0].value if body and isinstance(body[0], ast.Expr) else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


class _NativeSourcesAsCode(ast.NodeTransformer):
    """Each string constant that is a built native source becomes its code hash; a call given such
    a source (directly, or by a name bound to it) loses its ``flags`` argument."""

    def __init__(self, by_source: dict[str, str]) -> None:
        self.by_source = by_source
        self.names: set[str] = set()

    def visit_Module(self, node: ast.Module) -> ast.AST:
        for statement in ast.walk(node):
            if isinstance(statement, ast.Assign) and self._is_source(statement.value):
                self.names |= {target.id for target in statement.targets if isinstance(target, ast.Name)}
        return self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if isinstance(node.value, str) and node.value in self.by_source:
            return ast.Constant(value=f"native code {self.by_source[node.value]}")
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        given = [*node.args, *(keyword.value for keyword in node.keywords)]
        if any(self._is_source(value) or isinstance(value, ast.Name) and value.id in self.names for value in given):
            node.keywords = [keyword for keyword in node.keywords if keyword.arg != "flags"]
        return self.generic_visit(node)

    def _is_source(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in self.by_source
