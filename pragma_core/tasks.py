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
import re
import sys
from collections.abc import Iterable, Mapping
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

from .categories import infer_category
from .errors import SizeOverrideError, TaskError, describe_exception
from .records import Task

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
    namespace = _execute(path, apply_sizes(source, typed_sizes, path=path))
    from .task_analysis import analyze_task_module  # imports torch: only when a task is loaded

    analysis = analyze_task_module(namespace, path)
    level, problem_id = _level_and_problem(path)
    return Task(
        name=path.stem,
        source=source,
        path=path.resolve(),
        category=infer_category(path.stem, analysis.ops),
        sizes=typed_sizes,
        level=level,
        problem_id=problem_id,
        analysis=analysis,
    )


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
            f"{where}: size override {', '.join(sorted(unused))}: no task there has a module-level int or "
            "float constant of that name"
        )
    return plan


def task_program(task: Task) -> str:
    """The task's source with its size overrides applied: what the reference really runs."""
    return apply_sizes(task.source, task.sizes, path=task.path)


def task_namespace(task: Task) -> dict[str, Any]:
    """Run the task's program and return its namespace (``Model``, ``get_inputs``, ...)."""
    return _execute(task.path or Path(f"{task.name}.py"), task_program(task))


# -- size constants -----------------------------------------------------------------------------


def size_constants(source: str) -> dict[str, int | float]:
    """Module-level ``NAME = <int or float literal>`` assignments, the sizes ``--set`` can change."""
    return {name: value for name, (value, _node) in _constant_nodes(ast.parse(source)).items()}


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


def apply_sizes(source: str, sizes: Mapping[str, int | float], *, path: Path | None = None) -> str:
    """The source with each named constant's literal replaced; formatting and comments are kept."""
    if not sizes:
        return source
    nodes = _constant_nodes(ast.parse(source), every=True)
    lines = source.splitlines(keepends=True)
    edits = []
    for name, value in sizes.items():
        if name not in nodes:
            raise SizeOverrideError(_unknown_size_message(path, name, source))
        edits += [(node, repr(value)) for node in nodes[name]]
    # Replace from the end so earlier offsets stay valid.
    for node, text in sorted(edits, key=lambda edit: (edit[0].lineno, edit[0].col_offset), reverse=True):
        start, end = node.lineno - 1, node.end_lineno - 1
        head = lines[start][: _char_offset(lines[start], node.col_offset)]
        tail = lines[end][_char_offset(lines[end], node.end_col_offset) :]
        lines[start : end + 1] = [head + text + tail]
    return "".join(lines)


def _constant_nodes(module: ast.Module, *, every: bool = False) -> dict[str, Any]:
    """name -> (value, node) of the last assignment, or name -> [nodes] of all when ``every``."""
    found: dict[str, Any] = {}
    for statement in module.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target, value_node = statement.targets[0], statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            target, value_node = statement.target, statement.value
        else:
            continue
        value = _number(value_node)
        if not isinstance(target, ast.Name) or value is None:
            continue
        if every:
            found.setdefault(target.id, []).append(value_node)
        else:
            found[target.id] = (value, value_node)
    return found


def _number(node: ast.expr) -> int | float | None:
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        sign = -1 if isinstance(node.op, ast.USub) else 1
        node = node.operand
    value = node.value if isinstance(node, ast.Constant) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return sign * value
    return None


def _char_offset(line: str, byte_offset: int) -> int:
    """ast gives UTF-8 byte offsets; string slicing needs characters."""
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8", errors="replace"))


def _typed_sizes(path: Path, source: str, sizes: Mapping[str, Any]) -> dict[str, int | float]:
    if not sizes:
        return {}
    constants = _constants_in(path, source)
    typed: dict[str, int | float] = {}
    for name, raw in sizes.items():
        if name not in constants:
            raise SizeOverrideError(_unknown_size_message(path, name, source))
        kind = type(constants[name])
        typed[name] = _convert(path, name, raw, kind)
    return typed


def _convert(path: Path, name: str, raw: Any, kind: type) -> int | float:
    where = f"{path}: size override {name}={raw}"
    if isinstance(raw, bool):
        raise SizeOverrideError(f"{where}: {name} is a {kind.__name__} constant, not a boolean")
    if isinstance(raw, (int, float)) and not isinstance(raw, str):
        if kind is int and isinstance(raw, float) and not raw.is_integer():
            raise SizeOverrideError(f"{where}: {name} is an int constant; give a whole number")
        return kind(raw)
    text = str(raw).strip()
    try:
        return int(text) if kind is int else float(text)
    except ValueError:
        example = "16" if kind is int else "0.5"
        article = "an" if kind is int else "a"
        raise SizeOverrideError(
            f"{where}: {name} is {article} {kind.__name__} constant; give a number such as {name}={example}"
        ) from None


def _unknown_size_message(path: Path | None, name: str, source: str) -> str:
    try:
        known = ", ".join(sorted(size_constants(source))) or "none"
    except SyntaxError:
        known = "unknown"
    where = f"{path}: " if path else ""
    return (
        f"{where}size override {name}: the task has no module-level int or float constant named {name!r}; "
        f"its size constants are: {known}"
    )


def _constants_in(path: Path, source: str) -> dict[str, int | float]:
    try:
        return size_constants(source)
    except SyntaxError as error:
        raise TaskError(_syntax_message(path, error)) from None


def _constants_of(path: Path) -> dict[str, int | float]:
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
        raise TaskError(f"{path}: running the module raised {describe_exception(error, path)}") from None
    missing = [name for name in ("Model", "get_inputs", "get_init_inputs") if name not in namespace]
    if missing:
        raise TaskError(f"{path}: no {', '.join(missing)} defined; {_FORMAT_HINT}")
    for name in ("get_inputs", "get_init_inputs"):
        if not callable(namespace[name]):
            raise TaskError(f"{path}: {name} is not a function; {_FORMAT_HINT}")
    return namespace


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
