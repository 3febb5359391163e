"""Axes that every operand walks as one, merged at run time (NumPy's coalescing).

A strided kernel's innermost loop is its last axis. When that axis is short (an image's
row of 30 in an NCHW tensor, a bias broadcast over whole images), each pass through it
pays the loop's entry and tail, and the kernel runs at a fraction of its speed. Where the
axes before it are contiguous with it in every operand, they are one axis: the generated
code folds them into the last (its length the product, theirs 1) before looping, so the
same loops run over long rows. Broadcasting is static (the kernel's pattern), so only
axes broadcast exactly like the last in every operand can merge; strides are checked at
run time.
"""

from __future__ import annotations

from collections.abc import Sequence


def merge_into_last(
    operands: Sequence[tuple[str, Sequence[bool]]], lowest: int, last: int, indent: str = "    "
) -> list[str]:
    """C lines folding axes ``last - 1``, ``last - 2`` ... down to ``lowest`` into axis
    ``last`` while each is contiguous with the ones after it. ``operands``: each
    operand's name (its strides are ``st_<name>_<axis>``) and per axis whether it is
    statically broadcast there (stride ignored). Lengths are ``n<axis>``."""
    mergeable = []
    for a in range(last - 1, lowest - 1, -1):
        if any(b[a] != b[last] for _, b in operands):
            break  # a broadcast pattern differs here: this axis and those before stay
        mergeable.append(a)
    if not mergeable:
        return []
    moving = [name for name, b in operands if not b[last]]
    lines = [
        f"{indent}/* axes contiguous with the last become part of it */",
        f"{indent}const int64_t m{last} = n{last};",
    ]
    depth = indent
    for a in mergeable:
        # after folding a + 1 .. last, axis a follows on when its stride spans them
        span = " * ".join(f"m{k}" for k in range(a + 1, last + 1))
        checks = [f"st_{name}_{a} == {span} * st_{name}_{last}" for name in moving]
        lines.append(f"{depth}const int64_t m{a} = n{a};")
        # (an axis of length 1 never moves: its stride, whatever it is, is never used)
        lines.append(f"{depth}if (m{a} == 1 || ({' && '.join(checks) or '1'})) {{")
        depth += "    "
        lines.append(f"{depth}n{last} *= m{a}; n{a} = 1;")
    for _ in mergeable:
        depth = depth[:-4]
        lines.append(f"{depth}}}")
    return lines
