"""Loading tasks: PyTorch reference programs in KernelBench format.

A task file defines ``class Model(nn.Module)``, ``get_inputs()`` (the forward's tensors) and
``get_init_inputs()`` (the constructor's arguments), with its sizes as module-level constants::

    batch_size = 4096          # override with --set batch_size=16
    dim = 8192

:func:`load_task` reads one file, applies size overrides, runs one traced forward (on the meta
device when it can, so large tasks cost nothing) and infers the category. :func:`load_tasks` walks a
KernelBench tree (``level1/19_ReLU.py``: level 1, problem 19). Every problem with a file is a
:class:`~pragma_core.errors.TaskError` whose message names the file and what to do.

The reference is the user's own program and runs in this process, as in KernelBench; candidates
written by a model never do (they run in the sandbox).
"""

from __future__ import annotations

import ast
import operator
import re
import sys
from collections.abc import Iterable, Mapping
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

from ..errors import SizeOverrideError, TaskError, describe_exception
from ..records import Task
from .categories import infer_category
from .python_source import parse

__all__ = [
    "load_task",
    "load_tasks",
    "find_task_files",
    "sizes_per_file",
    "size_constants",
    "apply_sizes",
    "parse_size_assignments",
    "task_program",
    "task_namespace",
]

_FORMAT_HINT = "a KernelBench task defines class Model(nn.Module), get_inputs() and get_init_inputs()"


def load_task(path: str | Path, sizes: Mapping[str, Any] | None = None) -> Task:
    """Load, check and analyze one task file.

    :param path: the task's ``.py`` file.
    :param sizes: size overrides, ``{"batch_size": 16}``; string values are converted to the
        constant's type, so ``parse_size_assignments(["batch_size=16"])`` can be passed as is.
    """
    path = Path(path)
    if not path.is_file():
        raise TaskError(f"{path}: no such task file" if not path.exists() else f"{path}: not a file")
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise TaskError(f"{path}: cannot read the file ({error})") from None
    typed_sizes = _typed_sizes(path, source, sizes or {})
    program = apply_sizes(source, typed_sizes, path=path)
    namespace = _execute(path, program)
    from .analysis import analyze_task_module  # imports torch: only when a task is loaded

    analysis = analyze_task_module(namespace, path)
    level, problem_id = _level_and_problem(path)
    task = Task(
        name=path.stem,
        source=source,
        path=path.resolve(),
        category=infer_category(path.stem, analysis.ops),
        sizes=typed_sizes,
        level=level,
        problem_id=problem_id,
        analysis=analysis,
    )
    object.__setattr__(task, "_program", program)  # derived here once: see task_program
    return task


def find_task_files(directory: str | Path) -> list[Path]:
    """Task files below ``directory``, in KernelBench order: by level, then problem id, then name.

    Files and folders whose names start with ``_`` or ``.`` are skipped (``__init__.py``, caches).
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise TaskError(
            f"{directory}: no such directory" if not directory.exists() else f"{directory}: not a directory"
        )
    files = [
        path
        for path in directory.rglob("*.py")
        if not any(part.startswith(("_", ".")) for part in path.relative_to(directory).parts)
    ]
    if not files:
        raise TaskError(f"{directory}: no task files (*.py) found; {_FORMAT_HINT}")

    def order(path: Path) -> tuple[int, int, str]:
        level, problem_id = _level_and_problem(path)
        return (level or 0, problem_id if problem_id is not None else sys.maxsize, str(path))

    return sorted(files, key=order)


def load_tasks(directory: str | Path, sizes: Mapping[str, Any] | None = None) -> list[Task]:
    """Load every task of a KernelBench-style tree; the first bad file raises.

    A size override applies to every task that has that constant; naming a constant that no task
    has is an error, raised before any task runs.
    """
    files = find_task_files(directory)
    plan = sizes_per_file(files, sizes or {}, where=Path(directory))
    return [load_task(path, plan[path]) for path in files]


def sizes_per_file(files: Iterable[Path], sizes: Mapping[str, Any], *, where: Path) -> dict[Path, dict[str, Any]]:
    """Which overrides apply to which file: each file gets those of its own constants."""
    plan = {}
    unused = set(sizes)
    for path in files:
        constants = _constants_of(path)
        plan[path] = {name: value for name, value in sizes.items() if name in constants}
        unused -= set(plan[path])
    if unused:
        raise SizeOverrideError(
            f"{where}: size override {', '.join(sorted(unused))}: no task there has a module-level size "
            "constant of that name"
        )
    return plan


def task_program(task: Task) -> str:
    """The task's source with its size overrides applied: what the reference really runs. Derived
    once per task (the source parsed and the sizes applied) and kept with it."""
    if task._program is None:
        object.__setattr__(
            task, "_program", apply_sizes(task.source, task.sizes, path=task.path)
        )  # a frozen record's memo
    assert task._program is not None
    return task._program


def task_namespace(task: Task) -> dict[str, Any]:
    """Run the task's program and return its namespace (``Model``, ``get_inputs``, ...)."""
    return _execute(task.path or Path(f"{task.name}.py"), task_program(task))


# -- size constants -----------------------------------------------------------------------------


def size_constants(source: str) -> dict[str, Any]:
    """Module-level ``NAME = <constant expression>`` assignments, the sizes ``--set`` can change.

    A constant expression is a literal (number, boolean, string, ``None``), a tuple or list of
    them, or arithmetic on them: ``dim = 16384 * 4`` and ``input_shape = (4096,)`` are size
    constants; ``rows = batch_size * 2`` names another constant, so it is derived and follows that
    one when it changes.
    """
    return {name: value for name, (value, _node) in _constant_nodes(parse(source)).items()}


def parse_size_assignments(assignments: Iterable[str]) -> dict[str, str]:
    """``["batch_size=16", "dim=64"]`` -> ``{"batch_size": "16", "dim": "64"}`` (values as text)."""
    sizes = {}
    for assignment in assignments:
        name, sep, value = assignment.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name.isidentifier() or not value:
            raise SizeOverrideError(f"size override {assignment!r}: expected NAME=VALUE, as in batch_size=16")
        sizes[name] = value
    return sizes


def apply_sizes(source: str, sizes: Mapping[str, Any], *, path: Path | None = None) -> str:
    """The source with each named constant's expression replaced by the value's literal; formatting
    and comments are kept. A list given for a tuple constant (as JSON stores it) is written as a tuple."""
    if not sizes:
        return source
    source = _split_chains(source, set(sizes))
    nodes = _constant_nodes(parse(source), every=True)
    lines = source.splitlines(keepends=True)
    edits = []
    for name, value in sizes.items():
        if name not in nodes:
            raise SizeOverrideError(_unknown_size_message(path, name, source))
        edits += [(node, _source_text(value, like=node)) for node in nodes[name]]
    # Replace from the end so earlier offsets stay valid.
    for node, text in sorted(edits, key=lambda edit: (edit[0].lineno, edit[0].col_offset), reverse=True):
        start, end = node.lineno - 1, node.end_lineno - 1
        head = lines[start][: _char_offset(lines[start], node.col_offset)]
        tail = lines[end][_char_offset(lines[end], node.end_col_offset) :]
        lines[start : end + 1] = [head + text + tail]
    return "".join(lines)


def _split_chains(source: str, names: set[str]) -> str:
    """``height = width = 128`` written as ``height = 128; width = 128`` (on its own line still) where
    one of its names is to change, so each can take its own value."""
    lines = source.splitlines(keepends=True)
    chains = [
        statement
        for statement in parse(source).body
        if isinstance(statement, ast.Assign)
        and len(statement.targets) > 1
        and all(isinstance(target, ast.Name) for target in statement.targets)
        and names & {target.id for target in statement.targets}  # type: ignore[attr-defined]
    ]
    for statement in reversed(chains):
        expression = ast.get_source_segment(source, statement.value)
        text = "; ".join(f"{target.id} = {expression}" for target in statement.targets)  # type: ignore[attr-defined]
        start, end = statement.lineno - 1, (statement.end_lineno or statement.lineno) - 1
        head = lines[start][: _char_offset(lines[start], statement.col_offset)]
        tail = lines[end][_char_offset(lines[end], statement.end_col_offset or 0) :]
        lines[start : end + 1] = [head + text + tail]
    return "".join(lines)


def _source_text(value: Any, *, like: ast.expr) -> str:
    if isinstance(value, list) and isinstance(like, ast.Tuple):
        value = tuple(value)
    return repr(value)


def _constant_nodes(module: ast.Module, *, every: bool = False) -> dict[str, Any]:
    """name -> (value, node) of the last assignment, or name -> [nodes] of all when ``every``."""
    found: dict[str, Any] = {}
    pairs: list[tuple[ast.expr, ast.expr]] = []  # (target, value node)
    for statement in module.body:
        if isinstance(statement, ast.Assign):  # one name, or a chain: height = width = 128
            pairs += [(target, statement.value) for target in statement.targets]
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            pairs.append((statement.target, statement.value))
    for target, value_node in pairs:
        if (
            isinstance(target, ast.Tuple)
            and isinstance(value_node, ast.Tuple)
            and len(target.elts) == len(value_node.elts)
        ):
            names = list(zip(target.elts, value_node.elts))  # depth, height, width = 16, 32, 32
        else:
            names = [(target, value_node)]
        for name, node in names:
            if not isinstance(name, ast.Name):
                continue
            try:
                value = constant_value(node)
            except ValueError:
                continue
            if every:
                found.setdefault(name.id, []).append(node)
            else:
                found[name.id] = (value, node)
    return found


_ARITHMETIC: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_LARGEST_SEQUENCE = 1_000_000
"""A size literal never builds a longer list or string (``[0] * 10**9`` is refused, not built)."""


def constant_value(node: ast.expr) -> Any:
    """The value of a constant expression (see :func:`size_constants`); ``ValueError`` otherwise.

    Nothing is executed: the tree is evaluated here, and powers and repeated sequences are bounded.
    """
    if isinstance(node, ast.Constant) and not isinstance(node.value, bytes):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [constant_value(item) for item in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = constant_value(node.operand)
        if isinstance(operand, bool) or not isinstance(operand, (int, float)):
            raise ValueError("a sign applies to a number")
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = constant_value(node.left), constant_value(node.right)
        if isinstance(node.op, ast.Pow) and (not isinstance(right, (int, float)) or abs(right) > 64):
            raise ValueError("an exponent must be a number of at most 64")
        if isinstance(node.op, ast.Mult) and isinstance(left, int) and isinstance(right, (list, tuple, str)):
            left, right = right, left
        if isinstance(node.op, ast.Mult) and isinstance(left, (list, tuple, str)) and isinstance(right, int):
            if len(left) * right > _LARGEST_SEQUENCE:
                raise ValueError("a repeated sequence that long is not a size")
        try:
            return _ARITHMETIC[type(node.op)](left, right)
        except (TypeError, ArithmeticError, OverflowError) as error:
            raise ValueError(str(error)) from None
    raise ValueError(f"not a constant expression: {ast.unparse(node)}")


def _char_offset(line: str, byte_offset: int) -> int:
    """ast gives UTF-8 byte offsets; string slicing needs characters."""
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8", errors="replace"))


def _typed_sizes(path: Path, source: str, sizes: Mapping[str, Any]) -> dict[str, Any]:
    if not sizes:
        return {}
    constants = _constants_in(path, source)
    typed: dict[str, Any] = {}
    for name, raw in sizes.items():
        if name not in constants:
            raise SizeOverrideError(_unknown_size_message(path, name, source))
        typed[name] = _convert(path, name, raw, constants[name])
    return typed


def _convert(path: Path, name: str, raw: Any, original: Any) -> Any:
    """``raw`` (text from ``--set``, or a value) as a value of the kind ``original`` is."""
    where = f"{path}: size override {name}={raw}"
    kind = _kind(original)
    example = f"{name}={_example(original)}"
    value = raw
    if isinstance(raw, str) and not isinstance(original, str):
        try:
            value = constant_value(parse(raw.strip(), mode="eval").body)
        except (SyntaxError, ValueError):
            raise SizeOverrideError(
                f"{where}: {name} is {kind} constant; give {_what(original)} such as {example}"
            ) from None
    if isinstance(original, bool) or original is None:
        if original is not None and not isinstance(value, bool):
            raise SizeOverrideError(f"{where}: {name} is a boolean constant; give True or False")
        return value
    if isinstance(value, bool):
        raise SizeOverrideError(f"{where}: {name} is {kind} constant, not a boolean")
    if isinstance(original, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, float):
            raise SizeOverrideError(f"{where}: {name} is an int constant; give a whole number such as {example}")
    if isinstance(original, (int, float)) and isinstance(value, (int, float)):
        return type(original)(value)
    if isinstance(original, (tuple, list)) and isinstance(value, (tuple, list)):
        return type(original)(value)
    if isinstance(original, str) and isinstance(value, str):
        return value
    raise SizeOverrideError(f"{where}: {name} is {kind} constant; give {_what(original)} such as {example}")


def _kind(value: Any) -> str:
    name = type(value).__name__
    return f"an {name}" if name[0] in "aeiou" else f"a {name}"


def _what(value: Any) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "a number"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__}"
    return "a Python literal"


def _example(value: Any) -> str:
    if isinstance(value, bool):
        return "True"
    if isinstance(value, int):
        return "16"
    if isinstance(value, float):
        return "0.5"
    if isinstance(value, tuple):
        return "(64,)" if len(value) == 1 else repr(tuple(16 for _ in value)).replace(" ", "")
    if isinstance(value, list):
        return repr([16 for _ in value]).replace(" ", "")
    return repr(value)


def _unknown_size_message(path: Path | None, name: str, source: str) -> str:
    try:
        known = ", ".join(sorted(size_constants(source))) or "none"
    except SyntaxError:
        known = "unknown"
    where = f"{path}: " if path else ""
    return (
        f"{where}size override {name}: the task has no module-level size constant (a number, tuple or other "
        f"literal) named {name!r}; "
        f"its size constants are: {known}"
    )


def _constants_in(path: Path, source: str) -> dict[str, Any]:
    try:
        return size_constants(source)
    except SyntaxError as error:
        raise TaskError(_syntax_message(path, error)) from None


def _constants_of(path: Path) -> dict[str, Any]:
    try:
        return size_constants(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError):
        return {}  # load_task reports the real problem with this file


# -- running the module -------------------------------------------------------------------------


def _execute(path: Path, program: str) -> dict[str, Any]:
    try:
        code = compile(program, str(path), "exec")
    except SyntaxError as error:
        raise TaskError(_syntax_message(path, error)) from None
    namespace: dict[str, Any] = {"__name__": f"pragma_task_{_identifier(path.stem)}", "__file__": str(path)}
    try:
        with redirect_stdout(sys.stderr):  # a chatty task must not corrupt `--json` output
            exec(code, namespace)
    except BaseException as error:  # noqa: BLE001 - SystemExit from a task is a task error too
        if isinstance(error, KeyboardInterrupt):
            raise
        advice = _install_advice(error) if isinstance(error, ModuleNotFoundError) else ""
        raise TaskError(f"{path}: running the module raised {describe_exception(error, path)}{advice}") from None
    missing = [name for name in ("Model", "get_inputs", "get_init_inputs") if name not in namespace]
    if missing:
        raise TaskError(f"{path}: no {', '.join(missing)} defined; {_FORMAT_HINT}")
    for name in ("get_inputs", "get_init_inputs"):
        if not callable(namespace[name]):
            raise TaskError(f"{path}: {name} is not a function; {_FORMAT_HINT}")
    return namespace


_PIP_NAMES = {
    "cv2": "opencv-python",
    "PIL": "Pillow",
    "sklearn": "scikit-learn",
    "yaml": "PyYAML",
    "skimage": "scikit-image",
    "bs4": "beautifulsoup4",
    "attr": "attrs",
    "google.protobuf": "protobuf",
    "flash_attn": "flash-attn",
    "mamba_ssm": "mamba-ssm",
    "causal_conv1d": "causal-conv1d",
}
"""Modules whose pip package has another name; any other module is installed by its own name."""


def _install_advice(error: ModuleNotFoundError) -> str:
    """``; the task needs the einops package: pip install einops``."""
    name = error.name or ""
    if not name:
        return ""
    top = name.split(".")[0]
    package = _PIP_NAMES.get(name, _PIP_NAMES.get(top, top.replace("_", "-")))
    return f"; the task needs the {package} package: pip install {package}"


def _syntax_message(path: Path, error: SyntaxError) -> str:
    line = f":{error.lineno}" if error.lineno else ""
    return f"{path}{line}: syntax error: {error.msg}; fix the task file"


def _identifier(text: str) -> str:
    return re.sub(r"\W", "_", text)


def _level_and_problem(path: Path) -> tuple[int | None, int | None]:
    level_match = re.fullmatch(r"level[_-]?([1-9]\d*)", path.parent.name, flags=re.IGNORECASE)
    problem_match = re.match(r"(\d+)_", path.stem)
    return (
        int(level_match.group(1)) if level_match else None,
        int(problem_match.group(1)) if problem_match else None,
    )
