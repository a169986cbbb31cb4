"""Scans (prefix sums and products) along one dim: cumsum, cumprod, reversed, exclusive, masked.

Recognizes a forward that is one ``cumsum`` or ``cumprod`` of a float32 input along a fixed dim,
optionally:

- reversed: ``torch.cumsum(x.flip(d), d).flip(d)``;
- exclusive, padded before the scan: the input padded at the front of ``d`` with the scan's identity
  (``zeros_like`` / ``new_zeros`` of a one-wide slice, ``ones_like`` / ``new_ones`` for a product,
  in a ``torch.cat((pad, x), dim=d)``, or ``F.pad``), then sliced (the recipe reproduces whatever
  the slice selects, including a ``[:-1]`` that slices the FIRST dim and keeps ``n + 1`` scan
  positions);
- exclusive, padded after the scan: the scan of the input without its last element along ``d``
  (``x.narrow(d, 0, x.size(d) - 1)``, ``x[..., :-1]``), or the scan's result so sliced, with the
  identity padded in front the same ways (KernelBench's ``92_cumsum_exclusive``); or a sum written
  ``torch.cumsum(x, d) - x``;
- masked: ``x * mask`` with a bool ``mask`` input of ``x``'s shape.

Every exclusive form becomes one kernel: the identity first, then the running values of the first
inputs along ``d``, as many as the slices keep.

PyTorch accumulates CPU scans in double and rounds each output, so the kernels do the same; a
float running sum over 8192 elements drifts past the 1e-4 tolerance where the sum crosses zero.
Scanning the last dim, a row is split into ``accumulators`` chunks: their totals come first, then
the chunks advance together from their carries (independent chains instead of one latency-bound
chain). Scanning another dim walks the inner dim contiguously, ``block`` columns at a time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..graph import Node, OpGraph, Ref
from ..modules import candidate_module
from ..recipe import GenerationContext, Knob, Match
from ._scan_kernels import scan_kernel

__all__ = ["ScanRecipe"]

_SCANS = {"cumsum": "sum", "cumprod": "prod"}
_PADS = {"sum": ("zeros_like", "new_zeros"), "prod": ("ones_like", "new_ones")}
_IDENTITY = {"sum": 0, "prod": 1}
# Ops a pad may read its shape through (their values never reach it), and arithmetic on sizes.
_SHAPE_OPS = {"select", "unsqueeze", "getitem", "narrow", "view", "reshape", "size", "getattr"}
_SIZE_ARITHMETIC = {"add", "sub", "mul", "floordiv"}
_PAD_KWARGS = {"dtype", "device", "layout", "requires_grad", "memory_format", "pin_memory"}
_FLOAT32, _BOOL = "torch.float32", "torch.bool"


def _normalized_dim(dim: Any, rank: int) -> int | None:
    if isinstance(dim, bool) or not isinstance(dim, int) or not -rank <= dim < rank:
        return None
    return dim % rank


def _flip_dims(node: Node, rank: int) -> tuple[int, ...] | None:
    """The dims a ``flip`` node reverses, normalized; None when they are not plain ints."""
    dims: Any = node.kwargs.get("dims", node.args[1:])
    if len(dims) == 1 and isinstance(dims[0], tuple):
        dims = dims[0]
    normalized = [_normalized_dim(d, rank) for d in dims]
    valid = [d for d in normalized if d is not None]
    return tuple(sorted(set(valid))) if len(valid) == len(normalized) else None


def _slices(index: Any, rank: int) -> list[list[Any]] | None:
    """A getitem index as one ``[start, stop]`` per dim; None unless it is made of unit-step slices
    (and at most one Ellipsis)."""
    items = list(index) if isinstance(index, tuple) else [index]
    if items.count(Ellipsis) > 1:
        return None
    if Ellipsis in items:
        position = items.index(Ellipsis)
        items[position : position + 1] = [slice(None)] * (rank - len(items) + 1)
    if len(items) > rank:
        return None
    items += [slice(None)] * (rank - len(items))
    result = []
    for item in items:
        if not isinstance(item, slice) or item.step not in (None, 1):
            return None
        if any(
            bound is not None and (isinstance(bound, bool) or not isinstance(bound, int))
            for bound in (item.start, item.stop)
        ):
            return None
        result.append([item.start, item.stop])
    return result


def _assembled_operand(graph: OpGraph, node: Node) -> Node | None:
    """The tensor a ``cat`` of two tensors appends, that ``F.pad`` pads, or that a plain ``sub``
    subtracts from; None for any other node."""
    if node.op == "cat":
        tensors = node.arg(0, "tensors")
        if isinstance(tensors, tuple) and len(tensors) == 2 and all(isinstance(t, Ref) for t in tensors):
            return graph.tensor(tensors[1])
    elif node.op == "pad" and node.args and isinstance(node.args[0], Ref):
        return graph.tensor(node.args[0])
    elif node.op == "sub" and not node.kwargs and len(node.args) == 2 and all(isinstance(a, Ref) for a in node.args):
        return graph.tensor(node.args[0])
    return None


def _same_value(first: Node, second: Node) -> bool:
    """The same node, or the same op on the same arguments (fx does not merge repeated expressions)."""
    return first.name == second.name or (
        first.op == second.op and first.args == second.args and first.kwargs == second.kwargs
    )


def _slice_bounds(graph: OpGraph, node: Node, rank: int, used: set[str]) -> list[list[Any]] | None:
    """A ``getitem`` or ``narrow`` of a rank-``rank`` tensor as one ``[start, stop]`` per dim; None
    unless it keeps a contiguous range of each dim whose ends do not depend on the sizes, or end a
    fixed count before the dim's end (``x.narrow(d, 0, x.size(d) - 1)``)."""
    if not node.args or not isinstance(node.args[0], Ref):
        return None
    sliced = graph.tensor(node.args[0])
    if sliced.shape is None or len(sliced.shape) != rank:
        return None
    if node.op == "getitem":
        return _slices(node.arg(1, "index"), rank) if len(node.inputs) == 1 else None
    dim, start, length = _normalized_dim(node.arg(1, "dim"), rank), node.arg(2, "start"), node.arg(3, "length")
    if dim is None or isinstance(start, bool) or not isinstance(start, int) or start < 0:
        return None
    slices: list[list[Any]] = [[None, None]] * rank
    if isinstance(length, int) and not isinstance(length, bool) and length >= 0:
        slices[dim] = [start, start + length]
        return slices
    dropped = _size_less(graph, length, dim, sliced.dims[dim], used)
    if dropped is None or dropped < start:
        return None
    slices[dim] = [start, start - dropped if dropped > start else None]
    return slices


def _size_less(graph: OpGraph, value: Any, dim: int, size: int, used: set[str]) -> int | None:
    """``k`` when ``value`` is ``t.size(dim) - k`` (or ``t.shape[dim] - k``) of a tensor ``t`` whose
    size along ``dim`` is ``size``; the nodes read are added to ``used``. None for anything else."""
    seen, less = [], 0
    node = graph.node(value)
    if node is not None and node.op == "sub" and node.shape is None and len(node.args) == 2:
        count = node.args[1]
        if isinstance(count, bool) or not isinstance(count, int):
            return None
        seen.append(node.name)
        less, node = count, graph.node(node.args[0])
    if node is not None and node.op == "getitem" and node.shape is None and isinstance(node.args[0], Ref):
        index, shape = node.arg(1, "index"), graph.tensor(node.args[0])
        if shape.op not in ("size", "getattr") or len(shape.args) != (1 if shape.op == "size" else 2):
            return None
        if shape.op == "getattr" and shape.args[1] != "shape":
            return None
        seen += [node.name, shape.name]
        tensor, axis = graph.node(shape.args[0]), index
    elif node is not None and node.op == "size" and len(node.args) + len(node.kwargs) == 2:
        seen.append(node.name)
        tensor, axis = graph.node(node.args[0]), node.arg(1, "dim")
    else:
        return None
    if tensor is None or tensor.shape is None or _normalized_dim(axis, len(tensor.shape)) != dim:
        return None
    if tensor.shape[dim] != size:
        return None
    used.update(seen)
    return less


def _exclusive_stop(stop: Any, subtracted: bool) -> Any:
    """Where an exclusive scan's output ends along the scan dim, counted among the ``n + 1``
    positions of the identity followed by every input: from the stop of the slice of the input (or of
    its scan) that was padded with the identity, or that was scanned and then subtracted."""
    if subtracted:  # out[j] = scan[j] - x[j]: as many positions as the input has
        return -1 if stop is None else stop if stop >= 0 else stop - 1
    return None if stop is None else stop + 1 if stop >= 0 else stop


def _expected_shape(shape: tuple[int, ...], dim: int, exclusive: bool, slices: list[list[Any]]) -> tuple[int, ...]:
    """The output shape the recipe produces for an input of ``shape``."""
    sizes = list(shape)
    if exclusive:
        sizes[dim] += 1
    return tuple(len(range(size)[slice(*bounds)]) for size, bounds in zip(sizes, slices))


def _around_the_scan(
    graph: OpGraph, final: Node, used: set[str]
) -> tuple[Node | None, Node | None, Node | None, Node] | None:
    """What wraps the scan on its way to the output: a flip, the assembly of an exclusive scan and
    a slice of the scan's result (each None when absent), and the node under them; None when the
    assembly has no scan in it."""
    node = final
    post_flip = None
    if node.op == "flip" and len(node.inputs) == 1:
        used.add(node.name)
        post_flip, node = node, graph.tensor(node.inputs[0])
    # An exclusive scan assembled from an inclusive one: the identity padded in front, or ``- x``.
    assembly, after = None, None
    if node.op in ("cat", "pad", "sub"):
        inner = _assembled_operand(graph, node)
        if inner is None:
            return None
        used.add(node.name)
        assembly, node = node, inner
        if node.op in ("getitem", "narrow") and assembly.op != "sub":  # the scan's result sliced
            after, node = node, graph.tensor(node.args[0])
    return post_flip, assembly, after, node


def _sliced_source(
    graph: OpGraph, source: Node, after: Node | None, rank: int, dim: int, used: set[str]
) -> tuple[list[list[Any]], Node] | None:
    """The slice bounds per dim (of the scan's input, or of its result when sliced ``after``) and
    the tensor under a slice of the input; None for slices the recipe does not generate."""
    slices: list[list[Any]] = [[None, None]] * rank
    before = source if source.op in ("getitem", "narrow") else None
    if after is not None and before is not None:
        return None  # sliced both before and after the scan
    sliced = after or before
    if sliced is not None:
        found = _slice_bounds(graph, sliced, rank, used)
        if found is None or found[dim][0] not in (None, 0):
            return None
        used.add(sliced.name)
        slices = found
        if sliced is before:
            source = graph.tensor(sliced.args[0])
    return slices, source


def _unflipped_source(
    graph: OpGraph,
    source: Node,
    post_flip: Node | None,
    exclusive: bool,
    slices: list[list[Any]],
    rank: int,
    dim: int,
    used: set[str],
) -> tuple[bool, Node] | None:
    """Whether the scan runs in reverse (flipped along its dim before and after), and the tensor
    under the first flip; None when flipped on one side only or along other dims."""
    pre_flip = None
    if source.op == "flip" and len(source.inputs) == 1:
        used.add(source.name)
        pre_flip, source = source, graph.tensor(source.inputs[0])
    if pre_flip is not None and post_flip is not None:
        if (
            exclusive
            or slices != [[None, None]] * rank
            or _flip_dims(pre_flip, rank) != (dim,)
            or _flip_dims(post_flip, rank) != (dim,)
        ):
            return None
    elif pre_flip is not None or post_flip is not None:
        return None  # flipped on one side only
    return pre_flip is not None, source


class ScanRecipe:
    """One prefix sum or product along a dim, in double like PyTorch."""

    family = "scan"
    knobs: Mapping[str, Knob] = {
        "parallel": Knob(default=False, values=(False, True), start=True),
        "simd": Knob(default=False, values=(False, True), start=True),
        "accumulators": Knob(default=1, values=(1, 2, 4, 8)),
        "block": Knob(default=0, values=(0, 32, 64, 128)),
    }

    def match(self, graph: OpGraph) -> Match | None:
        if len(graph.outputs) != 1 or not isinstance(graph.outputs[0], Ref) or graph.params:
            return None
        used: set[str] = set()
        final = graph.tensor(graph.outputs[0])
        if final.shape is None or str(final.dtype) != _FLOAT32:
            return None
        around = _around_the_scan(graph, final, used)
        if around is None:
            return None
        post_flip, assembly, after, node = around
        if node.op not in _SCANS or len(node.inputs) != 1 or str(node.dtype) != _FLOAT32:
            return None
        if node.kwargs.get("dtype") not in (None,) and str(node.kwargs.get("dtype")) != _FLOAT32:
            return None
        scan, op = node, _SCANS[node.op]
        used.add(scan.name)
        source = graph.tensor(scan.inputs[0])
        if source.shape is None:
            return None
        rank = len(source.shape)
        dim = _normalized_dim(scan.arg(1, "dim"), rank)
        if dim is None:
            return None
        sliced = _sliced_source(graph, source, after, rank, dim, used)
        if sliced is None:
            return None
        slices, source = sliced
        exclusive_source = self._exclusive_source(graph, scan, assembly, after, source, op, dim, slices, used)
        if exclusive_source is None:
            return None
        exclusive, source = exclusive_source
        unflipped = _unflipped_source(graph, source, post_flip, exclusive, slices, rank, dim, used)
        if unflipped is None:
            return None
        reverse, source = unflipped
        x, mask = self._operands(graph, source, used)
        if x is None or x.shape is None or len(x.shape) != rank or str(x.dtype) != _FLOAT32:
            return None
        if {node.name for node in graph.ops} != used or set(graph.inputs) != {x.name, *([mask] if mask else [])}:
            return None
        if _expected_shape(x.shape, dim, exclusive, slices) != final.dims or 0 in final.dims:
            return None
        variant = " ".join(
            word
            for word in ("masked" if mask else "", "reverse" if reverse else "", "exclusive" if exclusive else "")
            if word
        )
        return Match(
            family=self.family,
            summary=f"{variant + ' ' if variant else ''}{scan.op} along dim {dim} of a rank-{rank} tensor",
            facts={
                "op": op,
                "dim": dim,
                "rank": rank,
                "reverse": reverse,
                "exclusive": exclusive,
                "x": x.name,
                "mask": mask,
                "slices": slices,
            },
        )

    def _exclusive_source(
        self,
        graph: OpGraph,
        scan: Node,
        assembly: Node | None,
        after: Node | None,
        source: Node,
        op: str,
        dim: int,
        slices: list[list[Any]],
        used: set[str],
    ) -> tuple[bool, Node] | None:
        """Whether the scan is exclusive (assembled from an inclusive one after it, or run on an input
        padded in front), and the tensor it then scans; ``slices[dim]`` is narrowed to match. None when
        the assembly is not an exclusive scan."""
        exclusive = False
        if assembly is not None:
            if assembly.op == "sub":
                scanned, subtracted = graph.tensor(scan.args[0]), graph.tensor(assembly.args[1])
                if op != "sum" or not _same_value(scanned, subtracted):
                    return None
                if subtracted.op != "input":
                    used.add(subtracted.name)  # ``x * mask`` written twice is two nodes
            else:
                padded = self._front_padded(graph, assembly, op, dim, used)
                if padded is None or padded.name != (after or scan).name:
                    return None
            exclusive = True
            slices[dim] = [None, _exclusive_stop(slices[dim][1], assembly.op == "sub")]
        elif source.op in ("cat", "pad"):
            body = self._front_padded(graph, source, op, dim, used)
            if body is None:
                return None
            exclusive, source = True, body
        return exclusive, source

    def _front_padded(self, graph: OpGraph, node: Node, op: str, dim: int, used: set[str]) -> Node | None:
        """The tensor ``node`` pads with one of the scan's identity at the front of ``dim`` (a ``cat``
        after an identity tensor, or ``F.pad``); None otherwise."""
        body = _assembled_operand(graph, node)
        rank = len(node.shape or ())
        if body is None or body.shape is None or str(body.dtype) != _FLOAT32 or len(body.shape) != rank:
            return None
        if node.op == "pad":
            widths = node.arg(1, "pad")
            expected = [0] * (2 * (rank - dim))
            expected[2 * (rank - 1 - dim)] = 1
            value = node.arg(3, "value")
            if (
                not isinstance(widths, tuple)
                or list(widths) + [0] * (len(expected) - len(widths)) != expected
                or node.arg(2, "mode", "constant") != "constant"
                or (value is None and op != "sum")
                or (value is not None and (isinstance(value, bool) or value != _IDENTITY[op]))
            ):
                return None
            used.add(node.name)
            return body
        pad = graph.tensor(node.arg(0, "tensors")[0])
        if (
            _normalized_dim(node.arg(1, "dim", 0), rank) != dim
            or pad.op not in _PADS[op]
            or str(pad.dtype) != _FLOAT32
            or not pad.args
            or not isinstance(pad.args[0], Ref)
            or any(key not in _PAD_KWARGS for key in pad.kwargs)
        ):
            return None
        if pad.shape != tuple(1 if d == dim else size for d, size in enumerate(body.shape)):
            return None
        # The pad only borrows a shape: every node it reads is a shape op leading back to a tensor.
        pending, seen = list(pad.inputs), {node.name, pad.name}
        while pending:
            current = graph.tensor(pending.pop())
            if current.name == body.name or current.op == "input":
                continue
            if current.op not in _SHAPE_OPS and not (current.op in _SIZE_ARITHMETIC and current.shape is None):
                return None
            seen.add(current.name)
            pending.extend(current.inputs)
        used.update(seen)
        return body

    def _operands(self, graph: OpGraph, source: Node, used: set[str]) -> tuple[Node | None, str | None]:
        """The scanned input and the name of the bool mask multiplying it (None when unmasked)."""
        if source.op == "input":
            return source, None
        if source.op != "mul" or len(source.args) != 2 or not all(isinstance(a, Ref) for a in source.args):
            return None, None
        first, second = (graph.tensor(a) for a in source.args)
        for x, mask in ((first, second), (second, first)):
            if (
                x.op == "input"
                and mask.op == "input"
                and str(x.dtype) == _FLOAT32
                and str(mask.dtype) == _BOOL
                and mask.shape == x.shape == source.shape
            ):
                used.add(source.name)
                return x, mask.name
        return None, None

    def generate(self, match: Match, knobs: Mapping[str, Any], context: GenerationContext) -> str:
        facts = match.facts
        dim, rank = facts["dim"], facts["rank"]
        cpp = scan_kernel(facts, knobs, rows_last=dim == rank - 1)
        x, mask = facts["x"], facts["mask"]
        tensors = [x] + ([mask] if mask else [])
        lines = []
        view = [[None, None] if d == dim else bounds for d, bounds in enumerate(facts["slices"])]
        if view != [[None, None]] * rank:
            index = ", ".join(
                ":" if b == [None, None] else f"{'' if b[0] is None else b[0]}:{'' if b[1] is None else b[1]}"
                for b in view
            )
            lines += [f"{t} = {t}[{index}]" for t in tensors]
        lines += [f"{t} = {t}.contiguous()" for t in tensors]
        lines.append(f"n_in = {x}.shape[{dim}]")
        scan_stop = facts["slices"][dim][1]
        length = "n_in + 1" if facts["exclusive"] else "n_in"
        lines.append(f"n_out = {length}" if scan_stop is None else f"n_out = len(range({length})[:{scan_stop}])")
        lines += [
            f"shape = list({x}.shape)",
            f"shape[{dim}] = n_out",
            f"out = torch.empty(shape, dtype={x}.dtype)",
            f"lib.scan({', '.join(tensors)}, out, {x}.shape[:{dim}].numel(), n_in, n_out, "
            f"{x}.shape[{dim + 1}:].numel())",
            "return out",
        ]
        flags = [] if knobs["simd"] else ["-fno-tree-vectorize"]
        return candidate_module(
            match=match, knobs=knobs, context=context, cpp=cpp, forward_body="\n".join(lines), flags=flags
        )
