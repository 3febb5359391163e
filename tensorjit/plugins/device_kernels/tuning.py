"""Work per work-item: the tunable every flat kernel takes at launch.

On a CPU runtime (PoCL) one element per work-item costs a scheduling step per element
(about 2x slower than NumPy for ``a*b+c``); a contiguous chunk per work-item streams
like a C loop. GPUs prefer the opposite: many work-items, one or a few elements each.
The runtime's ``work_per_item`` (``config.opencl_work_per_item`` on OpenCL) overrides
the choice ("auto", or elements per item).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tensorjit.plugins.device_kernels.target import DeviceRuntime, Target

# CPU: a few work-items per compute unit (so uneven chunks balance), chunks of at least
# this many elements (so the per-item overhead is amortised).
CPU_ITEMS_PER_UNIT = 4
CPU_MIN_CHUNK = 256
GPU_CHUNK = 1


def chunk_size(rt: DeviceRuntime, n: int) -> int:
    """Elements per work-item for a flat kernel over ``n`` elements."""
    chosen = rt.work_per_item
    if chosen != "auto":
        return max(int(chosen), 1)
    if rt.is_cpu:
        per_item = -(-n // (rt.compute_units * CPU_ITEMS_PER_UNIT))
        return max(per_item, CPU_MIN_CHUNK)
    return GPU_CHUNK


def work_items(rt: DeviceRuntime, n: int) -> tuple[int, int]:
    """(work-items, elements per work-item) covering ``n`` elements."""
    chunk = chunk_size(rt, n)
    return -(-n // chunk), chunk


# Work-items of a row's work-group under the "groups" schedule: a power of two (the tree
# halves it), enough to cover a GPU's memory latency, within every device's group limit.
GROUP_SIZE = 128


def uses_groups(t: Target, length: int, kernels: Callable[[], Sequence[Any]] = lambda: ()) -> bool:
    """Whether a kernel folding rows of ``length`` elements runs a work-group per row
    (``config.device_schedule``: forced, or by default on a device that is not a CPU
    for rows long enough to give the group's items work), where the target's dialect
    has work-groups and its device takes groups of ``GROUP_SIZE`` work-items, and so
    does each of the group-shaped kernels ``kernels()`` gives (asked last: a kernel's
    registers or local memory can lower its own limit below the device's)."""
    from tensorjit.core.config import config

    rt = t.runtime()
    if not t.dialect.local_qualifier or rt.max_group_size < GROUP_SIZE:
        return False  # the target can not run the group shape at all
    choice = config.device_schedule
    if choice != "auto":
        wanted = choice == "groups"
    else:
        wanted = not rt.is_cpu and length >= GROUP_SIZE // 4
    return wanted and all(rt.group_limit(kernel) >= GROUP_SIZE for kernel in kernels())
