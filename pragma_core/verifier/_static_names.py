"""What the names in a candidate's source stand for, for the rules of :mod:`.static_checks`.

:class:`SourceNames` makes one pass of bookkeeping over the parsed module (imports, aliases, the
module's functions, ``ModelNew``'s methods, docstrings) and then resolves an expression to the
dotted name it stands for: through imports and aliases (``import gc as g``, ``x = gc.get_objects``,
``self.mm = np.matmul``), along attribute chains, through ``getattr``/``object.__getattribute__``
with a constant name and ``vars(x)["name"]``. It also follows ``forward`` into what it calls.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

__all__ = ["BUILTIN_ROOTS", "Function", "SourceNames", "body_nodes", "constant_attribute"]

Function = ast.FunctionDef | ast.AsyncFunctionDef

BUILTIN_ROOTS = frozenset(
    {"exec", "eval", "compile", "__import__", "breakpoint", "__builtins__", "getattr", "setattr", "delattr", "object"}
) | frozenset({"type"})


class SourceNames:
    """One pass of bookkeeping over the module (imports, aliases, functions), then what each
    expression's name resolves to."""

    def __init__(self, module: ast.Module, model_new: ast.ClassDef) -> None:
        self.module = module
        self.model_new = model_new
        self.aliases: dict[str, str] = {}
        self.self_aliases: dict[str, str] = {}
        self.bound: set[str] = set()
        self.functions: dict[str, Function] = {}
        self.nodes = list(ast.walk(module))
        self.classes = {node.name for node in self.nodes if isinstance(node, ast.ClassDef)}
        self.methods = {
            node.name: node for node in model_new.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
        self.docstrings = _docstrings(self.nodes)
        self.calls = {id(node.func): node for node in self.nodes if isinstance(node, ast.Call)}
        self._collect_names()
        self.chains = list(self.chains_in(self.nodes))

    # -- names --------------------------------------------------------------------------------

    def _collect_names(self) -> None:
        assignments: list[tuple[ast.expr, ast.expr]] = []
        for node in self.nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.aliases[alias.asname] = alias.name
                    else:
                        root = alias.name.split(".")[0]
                        self.aliases[root] = root
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.bound.add(node.name)
                if node in self.module.body:
                    self.functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                self.bound.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.bound.add(node.id)
            elif isinstance(node, ast.arg):
                self.bound.add(node.arg)
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                assignments.append((node.targets[0], node.value))
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                assignments.append((node.target, node.value))
        # ``f = gc.get_objects``, ``self.mm = np.matmul``: aliases of aliases, twice over for chains.
        for _ in range(2):
            for target, value in assignments:
                resolved = self.resolve(value)
                if resolved is None:
                    continue
                if isinstance(target, ast.Name):
                    self.aliases.setdefault(target.id, resolved)
                elif (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                ):
                    self.self_aliases.setdefault(target.attr, resolved)

    def resolve(self, node: ast.expr) -> str | None:
        """The dotted name an expression stands for, through imports and aliases; None when it is
        not rooted in an import, an alias or a builtin."""
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return self.aliases[node.id]
            return node.id if node.id not in self.bound and node.id in BUILTIN_ROOTS else None
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "self" and node.attr in self.self_aliases:
                return self.self_aliases[node.attr]
            owner = self.resolve(node.value)
            return f"{owner}.{node.attr}" if owner else None
        name = constant_attribute(node)
        if name is not None and isinstance(node, ast.Call):
            owner = self.resolve(node.args[0])
            return f"{owner}.{name}" if owner else None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            # ``vars(sys)["modules"]``, ``torch.__dict__["_C"]``: an attribute read by its name.
            namespace = node.value
            if isinstance(namespace, ast.Call) and isinstance(namespace.func, ast.Name) and namespace.args:
                owner = self.resolve(namespace.args[0]) if namespace.func.id == "vars" else None
            elif isinstance(namespace, ast.Attribute) and namespace.attr == "__dict__":
                owner = self.resolve(namespace.value)
            else:
                owner = None
            return f"{owner}.{node.slice.value}" if owner and isinstance(node.slice.value, str) else None
        return None

    def chains_in(self, nodes: Iterable[ast.AST]) -> Iterator[tuple[str, ast.expr]]:
        """Every resolved name in ``nodes``, outermost chains only."""
        inner: set[int] = set()
        for node in nodes:
            if not isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)) or id(node) in inner:
                continue
            resolved = self.resolve(node)
            if resolved is None:
                continue
            yield resolved, node
            inner.update(id(part) for part in _spine(node))

    def forward_graph(self) -> list[Function]:
        """``forward`` and the module's functions and ``ModelNew``'s methods it calls, three deep."""
        forward = self.methods.get("forward")
        if forward is None:
            return []
        reached = [forward]
        frontier = [forward]
        for _ in range(3):
            following = []
            for function in frontier:
                for node in body_nodes(function):
                    if not isinstance(node, ast.Call):
                        continue
                    callee = None
                    if isinstance(node.func, ast.Name):
                        callee = self.functions.get(node.func.id)
                    elif (
                        isinstance(node.func, ast.Attribute)
                        and isinstance(node.func.value, ast.Name)
                        and node.func.value.id == "self"
                    ):
                        callee = self.methods.get(node.func.attr)
                    if callee is not None and callee not in reached:
                        reached.append(callee)
                        following.append(callee)
            frontier = following
        return reached


def _spine(node: ast.expr) -> Iterator[ast.expr]:
    """The owners a resolved chain was resolved through (``torch._C`` and ``torch`` of
    ``torch._C._foo``, ``sys`` of ``getattr(sys, "modules")``), which are not chains of their own."""
    while True:
        if isinstance(node, ast.Attribute):
            node = node.value
        elif isinstance(node, ast.Call) and node.args:
            node = node.args[0]
        elif isinstance(node, ast.Subscript):
            namespace = node.value
            node = namespace.args[0] if isinstance(namespace, ast.Call) and namespace.args else namespace
        else:
            return
        yield node


def constant_attribute(node: ast.AST) -> str | None:
    """The attribute a ``getattr(x, "name")`` or ``object.__getattribute__(x, "name")`` call reads."""
    if not (isinstance(node, ast.Call) and len(node.args) >= 2):
        return None
    func = node.func
    is_getattr = isinstance(func, ast.Name) and func.id in ("getattr", "setattr", "delattr", "hasattr")
    is_dunder = isinstance(func, ast.Attribute) and func.attr in ("__getattribute__", "__getattr__")
    name = node.args[1]
    if (is_getattr or is_dunder) and isinstance(name, ast.Constant) and isinstance(name.value, str):
        return name.value
    return None


def body_nodes(function: Function) -> Iterator[ast.AST]:
    """The nodes of a function's body (not its decorators)."""
    for statement in function.body:
        yield from ast.walk(statement)


def _docstrings(nodes: list[ast.AST]) -> set[int]:
    found = set()
    for node in nodes:
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found
