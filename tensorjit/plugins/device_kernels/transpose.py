"""Copies that transpose, through tiles in local memory (the groups schedule).

A copy into a C-contiguous array of a value whose fast axis is the second-to-last one
(``x.T`` made contiguous, a reshape or GEMM operand of a transposed view) reads one
axis fast and writes the other: a work-item per element makes one of the two sides
stride through memory, uncoalesced on a GPU. Here a work-group moves a 32 x 32 tile: it
reads the tile along the value's fast axis into local memory (a padded row keeps the
columns in different banks), then writes it along the output's fast axis. Used where
``tuning.uses_groups`` says groups (a GPU; PoCL when ``config.device_schedule`` forces
them); other copies keep the elementwise copy.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from tensorjit.plugins.device_kernels.arrays import is_c_contiguous
from tensorjit.plugins.device_kernels.target import Target
from tensorjit.plugins.device_kernels.tuning import GROUP_SIZE, uses_groups

TILE = 32
ROWS = GROUP_SIZE // TILE  # rows of a tile each work-group pass moves


@cache
def transpose_source(t: Target, in_dtype: str, out_dtype: str) -> str:
    """``out[b, r, c] = (out_dtype) x[b, r, c]`` for a value ``x`` read through its byte
    strides (``sb``, ``sr``, ``sc``), a tile per work-group."""
    D = t.dialect
    G, L = D.global_qualifier, D.local_qualifier
    ti, to = D.type_name(in_dtype), D.type_name(out_dtype)
    read = f"*(const {G} {ti} *)(x + o_x + b * sb + r * sr + c * sc)"
    lines = [
        t.preamble({in_dtype, out_dtype}),
        f"{D.kernel_qualifier} void tj_transpose(long R, long C, long tiles_r, long tiles_c, "
        f"{G} char *x, long o_x, long sb, long sr, long sc, {G} char *out, long o_out) {{",
        f"    {L} {to} tile[{TILE}][{TILE + 1}];",
        f"    long g = {D.group_id}, lid = {D.local_id};",
        "    long per = tiles_r * tiles_c, b = g / per, rest = g - b * per;",
        "    long tr = rest / tiles_c, tc = rest - tr * tiles_c;",
        f"    long lx = lid % {TILE}, ly = lid / {TILE};",
        "    /* read along x's fast axis (r): tile[c][r] */",
        f"    for (long k = ly; k < {TILE}; k += {ROWS}) {{",
        f"        long r = tr * {TILE} + lx, c = tc * {TILE} + k;",
        "        if (r < R && c < C)",
        f"            tile[k][lx] = {D.convert(read, in_dtype, out_dtype)};",
        "    }",
        f"    {D.local_barrier};",
        "    /* write along out's fast axis (c) */",
        f"    {G} {to} *po = ({G} {to} *)(out + o_out) + b * R * C;",
        f"    for (long k = ly; k < {TILE}; k += {ROWS}) {{",
        f"        long r = tr * {TILE} + k, c = tc * {TILE} + lx;",
        "        if (r < R && c < C) po[r * C + c] = tile[lx][k];",
        "    }",
        "}",
    ]
    return "\n".join(lines) + "\n"


def transposing(t: Target, out: Any, value: Any) -> bool:
    """Whether the copy of ``value`` into ``out`` is one this module does: ``out``
    C-contiguous of ``value``'s shape (2-d, or 3-d with a leading batch axis), the
    value's fast axis the second-to-last, the groups schedule on ``t``."""
    if out.ndim not in (2, 3) or value.shape != out.shape or out.size == 0:
        return False
    if not is_c_contiguous(out) or not t.dialect.local_qualifier:
        return False
    item = value.dtype.itemsize
    if value.strides[-2] != item or value.strides[-1] == item:
        return False

    def kernels() -> list[Any]:  # (rendered only where the groups shape is wanted)
        source = transpose_source(t, value.dtype.name, out.dtype.name)
        return [t.runtime().kernel(source, "tj_transpose")]

    return uses_groups(t, out.shape[-2], kernels)


def transpose_into(t: Target, out: Any, value: Any) -> None:
    """The tiled copy (``transposing`` said yes)."""
    rt = t.runtime()
    kernel = rt.kernel(transpose_source(t, value.dtype.name, out.dtype.name), "tj_transpose")
    batch = out.shape[0] if out.ndim == 3 else 1
    rows, cols = out.shape[-2:]
    sb = value.strides[0] if out.ndim == 3 else 0
    tiles_r, tiles_c = -(-rows // TILE), -(-cols // TILE)
    longs = [np.int64(v) for v in (rows, cols, tiles_r, tiles_c)]
    strides = [np.int64(v) for v in (sb, value.strides[-2], value.strides[-1])]
    args = [*longs, *rt.buffer_args(value), *strides, *rt.buffer_args(out)]
    rt.launch_groups(kernel, batch * tiles_r * tiles_c, GROUP_SIZE, *args)
