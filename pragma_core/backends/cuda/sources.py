"""The CUDA source of a candidate, read from its text without running it.

A ``cuda`` or ``hip`` candidate builds its kernel at import, KernelBench style::

    cuda_source = r'''
    __global__ void relu_kernel(...) { ... }
    torch::Tensor relu(torch::Tensor x) { ... }
    '''
    ext = load_inline(name="relu_ext", cpp_sources=cpp_source, cuda_sources=cuda_source, functions=["relu"])

:func:`extract_sources` finds each ``load_inline`` call that has ``cuda_sources`` (by any import
path or alias) and works out the text ``load_inline`` would write to ``cuda.cu``, following what
can be followed without executing anything: string literals, names bound once to them (in the
calling function or at module level), lists and tuples of them (``load_inline`` joins a list with
newlines), ``+``, f-strings whose fields are such names or numbers, ``textwrap.dedent`` and
``.strip()``. Anything else (a call, a loop, an import from another module, a name bound twice) is
not guessed at: the :class:`KernelSource` has no ``text`` and ``unresolved`` says what stopped it.

Each line of the text remembers the candidate line it came from where that is certain
(:meth:`KernelSource.candidate_line`), so a compiler's ``kernel.cu(12)`` can be shown as the line
of the candidate the Coder wrote.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

import attrs
from attrs import validators as v

from ...records import frozen_tuple
from ...tasks.python_source import parse

__all__ = ["KernelSource", "extract_sources"]

_LOAD_INLINE_MODULES = ("torch.utils.cpp_extension", "torch.utils", "torch")
# load_inline(name, cpp_sources, cuda_sources=None, functions=None, ...): positions of those arguments
_POSITIONS = {"name": 0, "cpp_sources": 1, "cuda_sources": 2, "functions": 3}
_SCOPES = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
# where a name used in a function is looked up: its own body, enclosing functions, the module (not classes)
_LOOKUP_SCOPES = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_FOLLOWED = "only string literals, names bound once to them, lists, +, simple f-strings and dedent are followed"


@attrs.frozen(kw_only=True)
class KernelSource:
    """The CUDA source of one ``load_inline`` call, or why it could not be read.

    ``text`` is the joined ``cuda_sources`` (without the three ``#include`` lines ``load_inline``
    puts first unless ``no_implicit_headers=True``, which ``implicit_headers`` records), None when
    it could not be worked out; then ``unresolved`` says why. ``unresolved`` also notes arguments
    that could not be read (``name``, ``functions``) when the text could. ``line_map[i]`` is the
    candidate line of the text's line ``i + 1``, None where unknown; ``call_line`` is the line of
    the call. Sources written by hand, not read from a candidate, need only ``text``.
    """

    text: str | None = attrs.field(default=None, validator=v.optional(v.instance_of(str)))
    extension: str | None = None
    functions: tuple[str, ...] = attrs.field(default=(), converter=frozen_tuple)
    implicit_headers: bool = True
    call_line: int | None = attrs.field(default=None, validator=v.optional(v.ge(1)))
    line_map: tuple[int | None, ...] = attrs.field(default=(), converter=frozen_tuple)
    extra_cuda_cflags: tuple[str, ...] = attrs.field(default=(), converter=frozen_tuple)
    unresolved: tuple[str, ...] = attrs.field(default=(), converter=frozen_tuple)

    def __attrs_post_init__(self) -> None:
        if self.text is None and not self.unresolved:
            raise ValueError("a KernelSource without text must say why in `unresolved`")
        if self.line_map and self.text is not None and len(self.line_map) != self.text.count("\n") + 1:
            raise ValueError("line_map needs one entry per line of text")

    def candidate_line(self, line: int) -> int | None:
        """The candidate's line that holds line ``line`` (1-based) of ``text``, when known."""
        if 1 <= line <= len(self.line_map):
            return self.line_map[line - 1]
        return None


def extract_sources(candidate_source: str) -> list[KernelSource]:
    """The CUDA source of every ``load_inline(..., cuda_sources=...)`` call in ``candidate_source``.

    Calls without ``cuda_sources`` (C++ only) are not listed. Nothing of the candidate runs.
    Raises SyntaxError when the candidate is not valid Python.
    """
    tree = parse(candidate_source)
    reader = _Reader(tree, candidate_source)
    return [reader.kernel_source(call, scopes) for call, scopes in reader.load_inline_calls()]


@attrs.frozen
class _Text:
    """A string worked out from the candidate, with the candidate line of each of its lines."""

    value: str
    lines: tuple[int | None, ...]

    @classmethod
    def unmapped(cls, value: str) -> _Text:
        return cls(value, (None,) * (value.count("\n") + 1))

    def __add__(self, other: _Text) -> _Text:
        joined = self.lines[-1] if self.lines[-1] is not None else other.lines[0]
        return _Text(self.value + other.value, (*self.lines[:-1], joined, *other.lines[1:]))


class _Unresolved(Exception):
    """Why an expression's string value is not known without running the candidate."""


class _Reader:
    def __init__(self, tree: ast.Module, source: str):
        self.tree = tree
        self.source = source
        self.load_inline_names, self.module_aliases = self._imports()
        self.following: set[int] = set()  # the bindings being followed now, against A = B; B = A
        self.parents: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node

    # -- finding the calls ---------------------------------------------------------------------

    def _imports(self) -> tuple[set[str], set[str]]:
        """Names that are ``load_inline``, and names of modules that have it as an attribute."""
        functions = {"load_inline"}
        modules = {"cpp_extension"}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom) and node.module in _LOAD_INLINE_MODULES:
                for alias in node.names:
                    if alias.name == "load_inline":
                        functions.add(alias.asname or alias.name)
                    elif alias.name == "cpp_extension":
                        modules.add(alias.asname or alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "torch.utils.cpp_extension" and alias.asname:
                        modules.add(alias.asname)
        return functions, modules

    def _is_load_inline(self, call: ast.Call) -> bool:
        func = call.func
        if isinstance(func, ast.Name):
            return func.id in self.load_inline_names
        if isinstance(func, ast.Attribute) and func.attr == "load_inline":
            # cpp_extension.load_inline, torch.utils.cpp_extension.load_inline, an alias of the module
            base = func.value
            return isinstance(base, ast.Attribute) or (isinstance(base, ast.Name) and base.id in self.module_aliases)
        return False

    def load_inline_calls(self) -> Iterator[tuple[ast.Call, list[ast.AST]]]:
        """Each ``load_inline`` call with ``cuda_sources``, in source order, with its scopes, innermost first."""
        calls = [node for node in ast.walk(self.tree) if isinstance(node, ast.Call) and self._is_load_inline(node)]
        for call in sorted(calls, key=lambda node: (node.lineno, node.col_offset)):
            cuda = _argument(call, "cuda_sources")
            if cuda is None or (isinstance(cuda, ast.Constant) and cuda.value is None):
                continue
            yield call, self._scopes(call)

    def _scopes(self, node: ast.AST) -> list[ast.AST]:
        scopes: list[ast.AST] = []
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, _LOOKUP_SCOPES):
                scopes.append(node)
        return scopes

    # -- reading one call ----------------------------------------------------------------------

    def kernel_source(self, call: ast.Call, scopes: list[ast.AST]) -> KernelSource:
        notes: list[str] = []
        text: _Text | None = None
        cuda = _argument(call, "cuda_sources")
        assert cuda is not None  # load_inline_calls yields only calls that have it
        try:
            text = self._sources(cuda, scopes)
        except _Unresolved as reason:
            notes.append(f"cuda_sources at line {call.lineno}: {reason}")
        extension = self._optional_string(call, "name", scopes, notes)
        functions = self._functions(call, scopes, notes)
        flags = self._flags(call, scopes, notes)
        implicit = True
        no_implicit = _argument(call, "no_implicit_headers")
        if no_implicit is not None:
            if isinstance(no_implicit, ast.Constant) and isinstance(no_implicit.value, bool):
                implicit = not no_implicit.value
            else:
                notes.append(f"no_implicit_headers at line {call.lineno}: not a literal True or False")
        return KernelSource(
            text=text.value if text is not None else None,
            extension=extension,
            functions=functions,
            implicit_headers=implicit,
            call_line=call.lineno,
            line_map=text.lines if text is not None else (),
            extra_cuda_cflags=flags,
            unresolved=notes,
        )

    def _sources(self, node: ast.expr, scopes: list[ast.AST]) -> _Text:
        """What ``load_inline`` writes for a ``cuda_sources`` argument: a string, or a list joined by newlines."""
        value, scopes = self._resolve_container(node, scopes)
        if isinstance(value, (ast.List, ast.Tuple)):
            if not value.elts:
                raise _Unresolved("an empty list")
            parts = [self._string(element, scopes) for element in value.elts]
            joined = parts[0]
            for part in parts[1:]:
                joined = joined + _Text("\n", (None, None)) + part
            return joined
        return self._string(value, scopes)

    def _optional_string(self, call: ast.Call, keyword: str, scopes: list[ast.AST], notes: list[str]) -> str | None:
        node = _argument(call, keyword)
        if node is None:
            return None
        try:
            return self._string(node, scopes).value
        except _Unresolved as reason:
            notes.append(f"{keyword} at line {call.lineno}: {reason}")
            return None

    def _functions(self, call: ast.Call, scopes: list[ast.AST], notes: list[str]) -> tuple[str, ...]:
        node = _argument(call, "functions")
        if node is None or (isinstance(node, ast.Constant) and node.value is None):
            return ()
        try:
            value, scopes = self._resolve_container(node, scopes)
            if isinstance(value, ast.Dict):
                keys = [key for key in value.keys if key is not None]
                if len(keys) != len(value.keys):
                    raise _Unresolved("a dict with ** in it")
                return tuple(self._string(key, scopes).value for key in keys)
            if isinstance(value, (ast.List, ast.Tuple)):
                return tuple(self._string(element, scopes).value for element in value.elts)
            return (self._string(value, scopes).value,)
        except _Unresolved as reason:
            notes.append(f"functions at line {call.lineno}: {reason}")
            return ()

    def _flags(self, call: ast.Call, scopes: list[ast.AST], notes: list[str]) -> tuple[str, ...]:
        node = _argument(call, "extra_cuda_cflags")
        if node is None or (isinstance(node, ast.Constant) and node.value is None):
            return ()
        try:
            value, scopes = self._resolve_container(node, scopes)
            if not isinstance(value, (ast.List, ast.Tuple)):
                raise _Unresolved("not a list")
            return tuple(self._string(element, scopes).value for element in value.elts)
        except _Unresolved as reason:
            notes.append(f"extra_cuda_cflags at line {call.lineno}: {reason}")
            return ()

    # -- values --------------------------------------------------------------------------------

    def _resolve_container(self, node: ast.expr, scopes: list[ast.AST]) -> tuple[ast.expr, list[ast.AST]]:
        """``node``, or the expression a name is bound to (and the scopes it is in), for lists and dicts."""
        seen: set[int] = set()
        while isinstance(node, ast.Name):
            name = node.id
            node, scopes = self._binding(node, scopes)
            if id(node) in seen:
                raise _Unresolved(f"`{name}` refers back to itself")
            seen.add(id(node))
        return node, scopes

    def _string(self, node: ast.expr, scopes: list[ast.AST]) -> _Text:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                return self._literal(node, node.value)
            raise _Unresolved(f"{node.value!r} is not a string")
        if isinstance(node, ast.Name):
            bound, where = self._binding(node, scopes)
            if id(bound) in self.following:
                raise _Unresolved(f"`{node.id}` refers back to itself")
            self.following.add(id(bound))
            try:
                return self._string(bound, where)
            finally:
                self.following.discard(id(bound))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self._string(node.left, scopes) + self._string(node.right, scopes)
        if isinstance(node, ast.JoinedStr):
            pieces = [self._field(part, scopes) for part in node.values]
            return self._literal(node, "".join(pieces))
        if isinstance(node, ast.Call):
            return self._string_call(node, scopes)
        raise _Unresolved(f"`{_shown(node)}` is {_kind(node)}; {_FOLLOWED}")

    def _string_call(self, call: ast.Call, scopes: list[ast.AST]) -> _Text:
        func = call.func
        dedent = (isinstance(func, ast.Name) and func.id == "dedent") or (
            isinstance(func, ast.Attribute) and func.attr == "dedent"
        )
        if dedent and len(call.args) == 1 and not call.keywords:
            import textwrap

            inner = self._string(call.args[0], scopes)
            return _Text(textwrap.dedent(inner.value), inner.lines)  # dedent keeps every line
        if isinstance(func, ast.Attribute) and func.attr in ("strip", "lstrip", "rstrip") and not call.args:
            inner = self._string(func.value, scopes)
            return _stripped(inner, func.attr)
        raise _Unresolved(f"`{_shown(call)}` is a call; {_FOLLOWED}")

    def _field(self, part: ast.expr, scopes: list[ast.AST]) -> str:
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            return part.value
        if isinstance(part, ast.FormattedValue) and part.conversion == -1 and part.format_spec is None:
            value = part.value
            if isinstance(value, ast.Name):
                value, scopes = self._binding(value, scopes)
            if isinstance(value, ast.Constant) and isinstance(value.value, (str, int, float)):
                if not isinstance(value.value, bool):
                    return str(value.value)
        raise _Unresolved(f"the f-string field `{_shown(part)}` is not a name bound to a string or number literal")

    def _literal(self, node: ast.expr, value: str) -> _Text:
        """``value`` with candidate lines, when the literal's lines are the value's lines one for one."""
        segment = ast.get_source_segment(self.source, node) or ""
        if segment.count("\n") == value.count("\n"):
            return _Text(value, tuple(node.lineno + offset for offset in range(value.count("\n") + 1)))
        return _Text.unmapped(value)  # "\n" escapes or implicit concatenation across lines

    def _binding(self, name: ast.Name, scopes: list[ast.AST]) -> tuple[ast.expr, list[ast.AST]]:
        """The one expression ``name`` is bound to, from the innermost scope that binds it."""
        for index, scope in enumerate(scopes):
            values, other = _bindings(scope, name.id)
            if other:
                raise _Unresolved(f"`{name.id}` is {other}; its value is not known without running the candidate")
            if len(values) > 1:
                lines = ", ".join(str(line) for line in sorted(value.lineno for value in values))
                raise _Unresolved(f"`{name.id}` is assigned more than once (lines {lines})")
            if values:
                return values[0], scopes[index:]
        raise _Unresolved(f"`{name.id}` is not assigned in this file")


def _bindings(scope: ast.AST, name: str) -> tuple[list[ast.expr], str]:
    """The values assigned to ``name`` directly in ``scope``, and how else it is bound there, if at all."""
    values: list[ast.expr] = []
    other = ""
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        arguments = scope.args
        every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
        if any(argument is not None and argument.arg == name for argument in every):
            other = "a parameter of the function that calls load_inline"
    for node in _own_nodes(scope):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == name:
                    values.append(node.value)
                elif isinstance(target, (ast.Tuple, ast.List)) and _binds(target, name):
                    other = other or "unpacked from a tuple"
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            if node.value is not None:
                values.append(node.value)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            values.append(node.value)  # counts as a second binding
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) and _binds(node.target, name):
            other = other or "a loop variable"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((alias.asname or alias.name.split(".")[0]) == name for alias in node.names):
                other = other or "imported from another module"
        elif isinstance(node, ast.NamedExpr) and node.target.id == name:
            values.append(node.value)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None and _binds(node.optional_vars, name):
            other = other or "bound by a with statement"
    return values, other


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``scope``'s body, not descending into nested functions, classes or lambdas."""
    body = scope.body if isinstance(scope, ast.Lambda) else getattr(scope, "body", [])
    stack: list[ast.AST] = list(body) if isinstance(body, list) else [body]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, _SCOPES):
            continue
        stack.extend(ast.iter_child_nodes(node))


def _binds(target: ast.AST, name: str) -> bool:
    return any(isinstance(node, ast.Name) and node.id == name for node in ast.walk(target))


def _argument(call: ast.Call, keyword: str) -> ast.expr | None:
    for item in call.keywords:
        if item.arg == keyword:
            return item.value
    position = _POSITIONS.get(keyword)
    if (
        position is not None
        and position < len(call.args)
        and not any(isinstance(arg, ast.Starred) for arg in call.args[: position + 1])
    ):
        return call.args[position]
    return None


def _stripped(text: _Text, how: str) -> _Text:
    value = text.value
    lines = list(text.lines)
    if how in ("strip", "lstrip"):
        kept = value.lstrip()
        lines = lines[value[: len(value) - len(kept)].count("\n") :]
        value = kept
    if how in ("strip", "rstrip"):
        kept = value.rstrip()
        lines = lines[: kept.count("\n") + 1]
        value = kept
    return _Text(value, tuple(lines))


def _shown(node: ast.AST, limit: int = 60) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _kind(node: ast.AST) -> str:
    kinds = {
        ast.Subscript: "a subscript",
        ast.Attribute: "an attribute",
        ast.ListComp: "a comprehension",
        ast.GeneratorExp: "a generator",
        ast.IfExp: "a conditional expression",
        ast.BinOp: "an operation other than +",
    }
    return kinds.get(type(node), f"a {type(node).__name__} expression")
