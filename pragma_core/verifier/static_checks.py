"""Reading a candidate's source before anything runs.

``read_candidate(source)`` parses the module once and returns :class:`StaticFindings`. What ends a
verification, and what is only noted:

Fatal at once: a syntax error, no ``ModelNew``, a ``ModelNew`` that inherits from or names the
reference ``Model``.

``forbidden`` (the verifier rejects with ``forbidden-construct``), anywhere in the module: a
construct an honest kernel never needs and that reaches into the harness, the interpreter or the
machine. Names are resolved through imports and aliases (``import gc as g``, ``from sys import
_getframe as f``, ``x = gc.get_objects``), along attribute chains (``torch.os.system``) and through
``getattr``/``object.__getattribute__`` with a constant name. The families:

- the garbage collector (``gc``, any use), frame walks (``sys._getframe``, ``inspect.currentframe``,
  ``inspect.stack``, ``.f_back``, ``.f_globals``, ``.f_locals``, ``.tb_frame``, ...), interpreter
  hooks (``sys.settrace``/``setprofile``, ``threading.settrace``/``setprofile``, ``sys.monitoring``,
  ``sys.excepthook`` ...), global module hooks (``register_module_forward_hook`` ...), the module
  table (``sys.modules``, ``sys.meta_path``), ``builtins``/``__builtins__``;
- code loaded past this check: the builtins ``exec``, ``eval``, ``compile`` and ``__import__``,
  ``importlib``, ``runpy``, ``code``, ``types.CodeType``/``FunctionType``, unpickling
  (``pickle.load(s)``, ``marshal.load(s)``, ``dill``, ``cloudpickle``, ``shelve``);
- reaching objects without naming them: ``__subclasses__``, ``__globals__``, ``__code__``,
  ``__closure__``, ``co_code``;
- PyTorch's dispatch and profiler machinery: ``torch._C`` (any use), ``torch.utils._python_dispatch``,
  ``torch._ops``, ``torch._dispatch``, ``torch._subclasses``, ``torch.profiler``,
  ``torch.autograd.profiler``, and the private mode-stack names wherever they are found
  (``_disable_current_modes``, ``_pop_mode``, ``_push_mode``, ``_set_dispatch_mode``, ...);
- native code outside ``pragma_core.native`` and ``torch.utils.cpp_extension``: ``ctypes``, ``cffi``;
- processes, signals and exit hooks: ``subprocess``, ``multiprocessing``, ``pty``, ``_thread``
  (threads the thread count misses), ``ProcessPoolExecutor``, ``os.fork``/``forkpty``/``setsid``/
  ``setpgid``/``kill``/``killpg``/``system``/``popen``/``exec*``/``spawn*``/``posix_spawn``/``_exit``,
  ``atexit``, ``signal``, ``resource.setrlimit``;
- files and descriptors: ``os.dup``/``dup2``/``write``/``open``/``remove``/``unlink``/``rename``/
  ``replace``/``rmdir``/``truncate``/``symlink``/``link``, ``shutil.rmtree``/``move``, any
  ``.unlink()``/``.rmdir()``;
- the network: ``socket``, ``ssl``, ``http.client``, ``urllib.request``, ``requests``, ``httpx`` ...;
- patching what the candidate did not define: ``object.__setattr__``/``__delattr__``, ``setattr``/
  ``delattr`` on an imported module or class, ``type(x)`` or ``x.__class__``, and assigning or
  deleting an attribute of an imported module or class (``time.perf_counter = ...``,
  ``torch.Tensor.add = ...``); ``torch.backends`` settings are the exception (noted, or a
  precision finding).

``library_fallback`` (rejected with ``library-fallback``): another library does the work. Anywhere:
``torch.compile``, ``torch.jit.script``/``trace``, ``torch._dynamo``, ``torch._inductor`` (they
compile PyTorch's own operators). In ``forward`` and what it calls (functions of the module and
methods of ``ModelNew``, followed three calls deep, including callables stored on ``self``): NumPy,
SciPy, numba, JAX, CuPy, TensorFlow, numexpr or scikit-learn calls, ``.numpy()``, ``__array__``,
``torch.from_numpy``, and functions decorated by numba or JAX. NumPy dtypes, ``finfo``/``iinfo``
and constants are not work, nor is ``np.prod`` of a shape; outside forward's calls NumPy is setup.

``precision`` (rejected with ``precision-downgrade`` only when the task is float32, which the
verifier knows): lower-precision types and modes. Python: ``torch``/``numpy``/``triton.language``
``float16``, ``bfloat16``, ``half``, ``float8_*``, ``.half()``, ``.bfloat16()``, ``dtype="float16"``,
autocast, ``allow_tf32``/``allow_bf16_reduced_precision_reduction``/
``allow_fp16_reduced_precision_reduction`` or ``fp32_precision`` set, ``set_float32_matmul_precision``
other than ``"highest"``, Triton's ``allow_tf32=True`` or ``input_precision`` other than ``"ieee"``.
C/C++ in string constants (comments stripped): ``__bf16``, ``_Float16``, ``__fp16``, ``half`` as a
type, ``(b)float16_t``, ``at::``/``c10::Half``/``BFloat16``, ``kHalf``/``kBFloat16``, ``__half``,
``__nv_bfloat16``, conversions and arithmetic intrinsics (``_mm512_cvtneps_pbh``,
``_mm256_cvtps_ph``, ``_mm512_dpbf16_ps``, ``_mm512_*_ph``, ``vcvtps2ph``, AMX and NEON ones).

Notes only: ``flagged_calls`` lists PyTorch compute calls and the ``@`` operator in ``forward``
(whether they run is what the sandbox's monitor decides); ``notes`` lists what is unusual but
honest: ``threading`` or a thread pool (threads left running are caught at run time), ``getattr``
with a computed name, ``torch.backends`` settings, ``sys.path`` changes.

Each finding reads ``"what, line N: why"``. Reading a candidate takes about a millisecond.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

import attrs

from ..tasks.python_source import parse
from ._static_names import BUILTIN_ROOTS, Function, SourceNames, body_nodes, constant_attribute
from ._static_rules import (
    _ALLOWED_TORCH_CALLS,
    _C_COMMENTS,
    _C_PRECISION,
    _C_PRECISION_HINTS,
    _C_PRECISION_NAMES,
    _COMPILED_TORCH,
    _COMPILED_TORCH_NAMES,
    _FORBIDDEN,
    _FORBIDDEN_ATTRIBUTES,
    _FORBIDDEN_METHODS,
    _LIBRARIES,
    _LIBRARY,
    _LOW_PRECISION_TYPES,
    _LOW_PRECISION_WHY,
    _NUMPY_NOT_WORK,
    _PATCH,
    _PRECISION_ROOTS,
    _PRECISION_SWITCHES,
    _SHAPE_METHODS,
    _TO_NUMPY,
)

__all__ = ["StaticFindings", "read_candidate"]


@attrs.frozen(kw_only=True)
class StaticFindings:
    """What reading the source found.

    Fatal: ``syntax_error``, ``missing_model_new``, ``reference_reuse``. Rejections, each entry
    ``"what, line N: why"``: ``forbidden`` (check ``forbidden-construct``), ``library_fallback``
    (``library-fallback``), ``precision`` (``precision-downgrade``, for float32 tasks only). Notes:
    ``flagged_calls`` (PyTorch compute and ``@`` in forward, ``"torch.relu (line 5)"``) and
    ``notes`` (unusual but honest constructs).
    """

    syntax_error: str | None = None
    missing_model_new: bool = False
    reference_reuse: str | None = None
    forbidden: tuple[str, ...] = ()
    library_fallback: tuple[str, ...] = ()
    precision: tuple[str, ...] = ()
    flagged_calls: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def rejection(self, *, float32_task: bool) -> tuple[str, str] | None:
        """The check that rejects the candidate and its message, or None: forbidden constructs
        first, then library fallback, then (for a float32 task) lower precision."""
        for check, found in (
            ("forbidden-construct", self.forbidden),
            ("library-fallback", self.library_fallback),
            ("precision-downgrade", self.precision if float32_task else ()),
        ):
            if found:
                return check, "; ".join(found)
        return None


def read_candidate(source: str) -> StaticFindings:
    try:
        module = parse(source, filename="candidate.py")
    except SyntaxError as error:
        return StaticFindings(syntax_error=f"candidate.py:{error.lineno}: syntax error: {error.msg}")
    model_new = next((node for node in module.body if isinstance(node, ast.ClassDef) and node.name == "ModelNew"), None)
    if model_new is None:
        return StaticFindings(missing_model_new=True)
    reader = _Reader(module, model_new)
    forward = reader.methods.get("forward")
    return StaticFindings(
        reference_reuse=_reference_reuse(reader.nodes, model_new),
        forbidden=reader.forbidden(),
        library_fallback=reader.library_fallback(),
        precision=reader.precision(),
        flagged_calls=(*_torch_compute_calls(forward), *_matmul_operators(forward)) if forward else (),
        notes=reader.notes(),
    )


def _reference_reuse(nodes: list[ast.AST], model_new: ast.ClassDef) -> str | None:
    for base in model_new.bases:
        if _names_model(base):
            return "ModelNew inherits from the reference Model"
    for node in nodes:
        if isinstance(node, ast.Name) and node.id == "Model":
            return f"line {node.lineno} uses the reference Model"
    return None


def _names_model(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "Model") or (
        isinstance(node, ast.Attribute) and node.attr == "Model"
    )


def _torch_compute_calls(forward: Function) -> tuple[str, ...]:
    """``torch.relu``, ``F.gelu``, ``x.sum`` ... called in forward, except allocation and views."""
    flagged = []
    for node in ast.walk(forward):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        name = node.func.attr
        owner = _dotted(node.func.value)
        if name in _ALLOWED_TORCH_CALLS or name.startswith("_"):
            continue
        if owner in (
            "torch",
            "F",
            "torch.nn.functional",
            "nn.functional",
            "torch.special",
            "torch.linalg",
            "torch.fft",
        ):
            flagged.append(f"{owner}.{name} (line {node.lineno})")
    return tuple(dict.fromkeys(flagged))


def _matmul_operators(forward: Function) -> tuple[str, ...]:
    """``a @ b`` in forward: on tensors PyTorch's matmul, which the run-time monitor judges."""
    return tuple(
        dict.fromkeys(
            f"@ (line {node.lineno})"
            for node in ast.walk(forward)
            if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.MatMult)
        )
    )


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


class _Reader(SourceNames):
    """The three rule sets and the notes over the names :class:`SourceNames` resolved, each a walk
    over the nodes it concerns."""

    # -- forbidden ------------------------------------------------------------------------------

    def forbidden(self) -> tuple[str, ...]:
        found: list[tuple[int, str, str]] = []
        for node in self.nodes:
            line = getattr(node, "lineno", 0)
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self._match(alias.name, node.lineno, found, import_=True)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    self._match(f"{node.module}.{alias.name}", node.lineno, found, import_=True)
            attribute = _attribute_name(node)
            if attribute is not None and attribute in _FORBIDDEN_ATTRIBUTES:
                reason = _FORBIDDEN_ATTRIBUTES[attribute] or _FORBIDDEN[attribute]
                resolved = self.resolve(node) if isinstance(node, ast.expr) else None
                found.append((line, resolved or f".{attribute}", reason))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in _FORBIDDEN_METHODS:
                    found.append((node.lineno, f".{node.func.attr}()", _FORBIDDEN_METHODS[node.func.attr]))
            if isinstance(node, ast.Call):
                self._patching_call(node, found)
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                self._patching_assignment(node, found)
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value in _FORBIDDEN_ATTRIBUTES
                and _FORBIDDEN_ATTRIBUTES[node.value]
            ):
                found.append((node.lineno, repr(node.value), _FORBIDDEN_ATTRIBUTES[node.value] or ""))
        for resolved, chain in self.chains:
            self._match(resolved, chain.lineno, found)
        return _unique(found)

    def _match(self, resolved: str, line: int, found: list[tuple[int, str, str]], *, import_: bool = False) -> None:
        parts = resolved.split(".")
        for start in range(len(parts)):
            for end in range(len(parts), start, -1):
                candidate = ".".join(parts[start:end])
                single = end - start == 1
                if candidate in _FORBIDDEN and (start == 0 or not single):
                    found.append((line, resolved, _FORBIDDEN[candidate]))
                    return
            if import_:  # ``import torch.signal`` is torch's, not the signal module
                return

    def _patching_call(self, node: ast.Call, found: list[tuple[int, str, str]]) -> None:
        function = self.resolve(node.func)
        if function not in ("setattr", "delattr") or not node.args:
            return
        target = node.args[0]
        if self._foreign(target):
            found.append((node.lineno, f"{function}({ast.unparse(target)}, ...)", _PATCH))

    def _patching_assignment(
        self, node: ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete, found: list[tuple[int, str, str]]
    ) -> None:
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        for target in targets:
            for element in ast.walk(target):
                if not isinstance(element, ast.Attribute) or not isinstance(element.ctx, (ast.Store, ast.Del)):
                    continue
                owner = self.resolve(element.value)
                if owner is not None and owner.split(".")[0] == "torch" and ".backends" in f".{owner}":
                    continue  # torch.backends settings: noted, or a precision finding
                if self._foreign(element.value):
                    found.append((node.lineno, f"{ast.unparse(element)} = ...", _PATCH))

    def _foreign(self, node: ast.expr) -> bool:
        """Whether ``node`` is a module or class the candidate did not define (or ``type(x)``,
        ``x.__class__``): changing its attributes changes what the harness uses too."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "__class__":
            return True
        if isinstance(node, ast.Name) and node.id in self.classes:
            return False
        resolved = self.resolve(node)
        return resolved is not None and resolved not in BUILTIN_ROOTS

    # -- library fallback ------------------------------------------------------------------------

    def library_fallback(self) -> tuple[str, ...]:
        found: list[tuple[int, str, str]] = []
        for resolved, node in self.chains:
            if _under(resolved, _COMPILED_TORCH_NAMES):
                found.append((node.lineno, resolved, _COMPILED_TORCH))
        for function in self.forward_graph():
            for resolved, node in self.chains_in(body_nodes(function)):
                if resolved == "torch.from_numpy" or _under(resolved, _LIBRARIES):
                    if not self._numpy_not_work(resolved, node):
                        found.append((node.lineno, resolved, _LIBRARY))
            for call in body_nodes(function):
                if not isinstance(call, ast.Call):
                    continue
                if isinstance(call.func, ast.Attribute) and call.func.attr in ("numpy", "__array__"):
                    found.append((call.lineno, f".{call.func.attr}()", _TO_NUMPY))
                if isinstance(call.func, ast.Name) and call.func.id in self.functions:
                    library = self._library_decorator(self.functions[call.func.id])
                    if library:
                        found.append((call.lineno, f"{call.func.id} (decorated by {library})", _LIBRARY))
        return _unique(found)

    def _numpy_not_work(self, resolved: str, node: ast.expr) -> bool:
        parts = resolved.split(".")
        if parts[0] != "numpy" or len(parts) != 2:
            return False
        if parts[1] in _NUMPY_NOT_WORK:
            return True
        # ``np.prod(x.shape)``: arguments that are shapes, not data.
        call = self.calls.get(id(node))
        return (
            parts[1] == "prod"
            and isinstance(call, ast.Call)
            and call.func is node
            and all(_shape_like(argument) for argument in call.args)
        )

    def _library_decorator(self, function: Function) -> str | None:
        for decorator in function.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            resolved = self.resolve(target)
            if resolved and _under(resolved, ("numba", "jax", "cupy", "tensorflow")):
                return resolved
        return None

    # -- precision -------------------------------------------------------------------------------

    def precision(self) -> tuple[str, ...]:
        found: list[tuple[int, str, str]] = []
        for resolved, chain in self.chains:
            last = resolved.rsplit(".", 1)[-1]
            if _under(resolved, _PRECISION_ROOTS) and (last in _LOW_PRECISION_TYPES or last.startswith("float8")):
                found.append((chain.lineno, resolved, _LOW_PRECISION_WHY))
            elif "autocast" in resolved.split("."):
                found.append((chain.lineno, resolved, "runs operators in lower precision (autocast)"))
        for node in self.nodes:
            self._precision_node(node, found)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in self.docstrings:
                if not any(hint in node.value for hint in _C_PRECISION_HINTS):
                    continue
                code = _C_COMMENTS.sub(lambda match: "\n" * match.group().count("\n"), node.value)
                for match in _C_PRECISION.finditer(code):
                    if _dispatch_argument(code, match.start()):
                        continue
                    what = _C_PRECISION_NAMES[int((match.lastgroup or "p0")[1:])][1]
                    line = node.lineno + code.count("\n", 0, match.start())
                    found.append((line, f"{what} in C/C++ source ({match.group().strip()})", _LOW_PRECISION_WHY))
        return _unique(found)

    def _precision_node(self, node: ast.AST, found: list[tuple[int, str, str]]) -> None:
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and node.func.attr in ("half", "bfloat16"):
                found.append((node.lineno, f".{node.func.attr}()", _LOW_PRECISION_WHY))
            function = self.resolve(node.func) or _dotted(node.func)
            if function.endswith("set_float32_matmul_precision") and not _is_constant(node.args[:1], "highest"):
                found.append((node.lineno, function, "lets float32 matrix products run in TF32 or bf16"))
            for keyword in node.keywords:
                if keyword.arg == "dtype" and _is_constant([keyword.value], "float16", "bfloat16", "half"):
                    found.append((node.lineno, f"dtype={keyword.value.value!r}", _LOW_PRECISION_WHY))  # type: ignore[attr-defined]
                elif keyword.arg == "allow_tf32" and not _is_constant([keyword.value], False):
                    found.append((node.lineno, "allow_tf32=...", "lets matrix products run in TF32"))
                elif keyword.arg == "input_precision" and not _is_constant([keyword.value], "ieee"):
                    found.append((node.lineno, "input_precision=...", "lets matrix products run in TF32"))
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr in _PRECISION_SWITCHES:
                    if not _is_constant([node.value], False, "ieee", "none"):
                        found.append((node.lineno, f"{_dotted(target)} = ...", "lets float32 math run in TF32 or bf16"))

    # -- notes -----------------------------------------------------------------------------------

    def notes(self) -> tuple[str, ...]:
        found: list[tuple[int, str, str]] = []
        threads = "threads still running after forward are caught at run time"
        for resolved, chain in self.chains:
            if _under(resolved, ("threading", "concurrent.futures")):
                found.append((chain.lineno, resolved, threads))
            elif _under(resolved, ("sys.path",)):
                found.append((chain.lineno, resolved, "changes where imports are found"))
        for node in self.nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [
                    alias.name if isinstance(node, ast.Import) else f"{node.module}.{alias.name}"
                    for alias in node.names
                ]
                found += [
                    (node.lineno, name, threads) for name in names if _under(name, ("threading", "concurrent.futures"))
                ]
            if isinstance(node, ast.Call) and self.resolve(node.func) in ("getattr", "setattr", "delattr"):
                if len(node.args) >= 2 and constant_attribute(node) is None:
                    found.append((node.lineno, f"{self.resolve(node.func)} with a computed name", "not checked"))
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    owner = self.resolve(target) if isinstance(target, ast.Attribute) else None
                    if owner and owner.startswith("torch.backends.") and target.attr not in _PRECISION_SWITCHES:  # type: ignore[attr-defined]
                        found.append((node.lineno, owner, "a PyTorch backend setting"))
        return _unique(found)


def _attribute_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name) and node.id == "__builtins__":
        return node.id
    return constant_attribute(node)


def _dispatch_argument(code: str, position: int) -> bool:
    """Whether ``position`` is among the dtype arguments of an ``AT_DISPATCH_...(`` macro, before
    its lambda: generic code that also instantiates a half variant computes in the tensor's own
    dtype, float32 in a float32 task."""
    start = code.rfind("AT_DISPATCH_", 0, position)
    return start >= 0 and "[" not in code[start:position] and ";" not in code[start:position]


def _under(resolved: str, prefixes: Iterable[str]) -> bool:
    return any(resolved == prefix or resolved.startswith(prefix + ".") for prefix in prefixes)


def _is_constant(nodes: list[ast.expr], *values: object) -> bool:
    return bool(nodes) and all(
        isinstance(node, ast.Constant) and any(node.value is v or node.value == v for v in values) for node in nodes
    )


def _shape_like(node: ast.expr) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr == "shape"
    if isinstance(node, ast.Subscript):
        return _shape_like(node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr in _SHAPE_METHODS
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(isinstance(element, ast.Constant) or _shape_like(element) for element in node.elts)
    return isinstance(node, ast.Constant)


def _unique(found: list[tuple[int, str, str]]) -> tuple[str, ...]:
    """``"what, line N: why"`` in line order, once each; a name is dropped when a longer one on the
    same line, for the same reason, extends it (``gc`` beside ``gc.get_objects``)."""
    entries = set(found)
    kept = [
        (line, what, why)
        for line, what, why in entries
        if not any(
            other_line == line and other_why == why and other != what and other.lstrip(".").startswith(what.lstrip("."))
            for other_line, other, other_why in entries
        )
    ]
    return tuple(f"{what}, line {line}: {why}" for line, what, why in sorted(kept))
