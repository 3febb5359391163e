"""Work-group building blocks of the groups schedule (``config.device_schedule``): what a
GPU wants from a kernel that folds many elements into one value. A group's work-items
stride through the elements (neighbouring items read neighbouring elements), each folds
its share, then the group folds the items' values by a fixed tree in local memory: the
result does not depend on timing, and needs no atomics."""

from __future__ import annotations

from tensorjit.plugins.device_kernels.dialect import DeviceDialect


def group_fold(D: DeviceDialect, buffer: str, ctype: str, value: str, combine: str) -> list[str]:
    """C lines folding the group's ``value``s (of C type ``ctype``) into ``value`` of
    every work-item through ``buffer`` (``TJ_GROUP`` elements of local memory; ``lid``
    the item's index). ``combine`` is an expression of ``a`` (the lower item's) and
    ``b``. Every item must reach these lines (they hold barriers)."""
    return [
        f"    {buffer}[lid] = {value};",
        f"    {D.local_barrier};",
        "    for (long s = TJ_GROUP / 2; s > 0; s >>= 1) {",
        f"        if (lid < s) {{ {ctype} a = {buffer}[lid], b = {buffer}[lid + s]; "
        f"{buffer}[lid] = {combine}; }}",
        f"        {D.local_barrier};",
        "    }",
        f"    {value} = {buffer}[0];",
    ]


def group_fold_pair(
    D: DeviceDialect,
    buffers: tuple[str, str],
    ctypes: tuple[str, str],
    values: tuple[str, str],
    take_b: str,
) -> list[str]:
    """``group_fold`` for a pair (a value and its index, say): ``take_b`` is a condition
    on ``av, ai`` (the lower item's pair) and ``bv, bi`` choosing the second pair."""
    (vb, ib), (vt, it), (v, i) = buffers, ctypes, values
    return [
        f"    {vb}[lid] = {v}; {ib}[lid] = {i};",
        f"    {D.local_barrier};",
        "    for (long s = TJ_GROUP / 2; s > 0; s >>= 1) {",
        "        if (lid < s) {",
        f"            {vt} av = {vb}[lid], bv = {vb}[lid + s];",
        f"            {it} ai = {ib}[lid], bi = {ib}[lid + s];",
        f"            if ({take_b}) {{ {vb}[lid] = bv; {ib}[lid] = bi; }}",
        "        }",
        f"        {D.local_barrier};",
        "    }",
        f"    {v} = {vb}[0]; {i} = {ib}[0];",
    ]
