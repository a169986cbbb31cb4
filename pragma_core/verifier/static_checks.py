"""Reading a candidate's source before anything runs.

A syntax error, a missing ``ModelNew`` and a ``ModelNew`` that inherits from or names the reference
``Model`` end the verification here. PyTorch compute calls in ``forward`` are only flagged: whether
they run is what the sandbox's monitor decides.
"""

from __future__ import annotations

import ast

import attrs

__all__ = ["StaticFindings", "read_candidate"]

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


@attrs.frozen(kw_only=True)
class StaticFindings:
    """What reading the source found: a fatal problem (kind and message) and flags for the notes."""

    syntax_error: str | None = None
    missing_model_new: bool = False
    reference_reuse: str | None = None
    flagged_calls: tuple[str, ...] = ()


def read_candidate(source: str) -> StaticFindings:
    try:
        module = ast.parse(source, filename="candidate.py")
    except SyntaxError as error:
        return StaticFindings(syntax_error=f"candidate.py:{error.lineno}: syntax error: {error.msg}")
    model_new = next((node for node in module.body if isinstance(node, ast.ClassDef) and node.name == "ModelNew"), None)
    if model_new is None:
        return StaticFindings(missing_model_new=True)
    for base in model_new.bases:
        if _names_model(base):
            return StaticFindings(reference_reuse="ModelNew inherits from the reference Model")
    for node in ast.walk(module):
        if isinstance(node, ast.Name) and node.id == "Model":
            return StaticFindings(reference_reuse=f"line {node.lineno} uses the reference Model")
    forward = next(
        (node for node in model_new.body if isinstance(node, ast.FunctionDef) and node.name == "forward"), None
    )
    return StaticFindings(flagged_calls=_torch_compute_calls(forward) if forward else ())


def _names_model(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "Model") or (
        isinstance(node, ast.Attribute) and node.attr == "Model"
    )


def _torch_compute_calls(forward: ast.FunctionDef) -> tuple[str, ...]:
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


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""
