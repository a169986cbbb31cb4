"""The tile every row-wise Triton kernel walks (reductions, softmax, norms).

The input is viewed as ``(outer, count, inner)`` around the reduced dims, as the C++ recipes view
it. One program owns one ``outer`` index and a strip of ``BLOCK_I`` inner columns, and walks the
``count`` reduced rows of that strip ``BLOCK_R`` at a time: a ``[BLOCK_R, BLOCK_I]`` tile of at most
``BLOCK`` elements. With ``inner == 1`` the strip is one column and the tile one contiguous run of a
row; otherwise each tile row is ``BLOCK_I`` contiguous floats, so loads stay coalesced whichever dim
is reduced. Rows no longer than ``BLOCK_R`` are loaded once (``ONE_PASS``); longer rows are looped
over. Masks cover row lengths and inner extents that are not powers of two.
"""

from __future__ import annotations

import textwrap

__all__ = ["TILE_HELPER", "kernel_prologue", "tile_loads", "tiled_launch"]

TILE_HELPER = '''
def _tile(count, inner):
    """The tile one program walks: (rows of the reduced extent, inner columns), powers of two with
    at most BLOCK elements in all."""
    columns = min(triton.next_power_of_2(inner), BLOCK)
    rows = min(triton.next_power_of_2(count), max(BLOCK // columns, 1))
    return rows, columns
'''
"""The generated module's helper that picks ``BLOCK_R`` and ``BLOCK_I`` from the shape and ``BLOCK``."""


def kernel_prologue() -> str:
    """Kernel lines (4-space indented) that find this program's outer index, its inner columns
    (``cols``, ``col_mask``) and the offset of its strip (``base``, int64, shape ``[1, BLOCK_I]``)."""
    return textwrap.indent(
        textwrap.dedent("""\
            pid = tl.program_id(0).to(tl.int64)
            strips = tl.cdiv(inner, BLOCK_I)
            outer_index = pid // strips
            cols = (pid % strips) * BLOCK_I + tl.arange(0, BLOCK_I)
            col_mask = cols < inner
            base = outer_index * count * inner + cols[None, :]
        """),
        "    ",
    )


def tile_loads(start: str, indent: int) -> str:
    """Lines that find the tile at reduced row ``start``: ``rows`` (``[BLOCK_R, 1]``), ``mask`` and
    ``offsets`` (``[BLOCK_R, BLOCK_I]``)."""
    return textwrap.indent(
        textwrap.dedent(f"""\
            rows = ({start} + tl.arange(0, BLOCK_R))[:, None]
            mask = (rows < count) & col_mask[None, :]
            offsets = base + rows.to(tl.int64) * inner
        """),
        " " * indent,
    )


def tiled_launch(
    kernel: str, x: str, first: int, last: int, arguments: str, *, one_pass: bool = False, after: str = ""
) -> str:
    """Forward lines that view ``x`` as ``(outer, count, inner)`` around dims ``[first, last)``
    and launch ``kernel`` over every (outer, strip) with ``arguments`` before ``count, inner``.
    ``after`` are lines between the view and the launch (the output's allocation)."""
    flag = ", ONE_PASS=rows >= count" if one_pass else ""
    lines = [
        f"{x} = {x}.contiguous()",
        f"shape = {x}.shape",
        f"outer, count, inner = shape[:{first}].numel(), shape[{first}:{last}].numel(), shape[{last}:].numel()",
        *([after] if after else []),
        "rows, columns = _tile(count, inner)",
        "grid = (outer * triton.cdiv(inner, columns),)",
        f"{kernel}[grid]({arguments}, count, inner, BLOCK_R=rows, BLOCK_I=columns{flag}, num_warps=NUM_WARPS)",
    ]
    return "\n".join(lines)
