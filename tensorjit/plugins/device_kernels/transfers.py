"""Transfer rules the device backends register (``tensorjit_register_transfers``):
which host ops a device takes, decided per device when placement asks.

Convolutions and pooling (Conv2d, its two gradients, Pool and its two gradients) go to
a device through lifters: on a GPU they run there (im2col + the device GEMM, direct
pooling kernels: convolution.py); on a CPU device such as PoCL the lifter keeps them on
the host, whose kernels and BLAS run on the same cores faster
(``config.device_schedule="groups"`` forces the device's shapes there too). One lifter
is registered per device and op class, so a faster form for a device (cuDNN, say) is
chosen by that device's lifter or by its kernel table once the node is there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tensorjit.core.graph.basic import Apply
from tensorjit.core.registries import TransferRegistry
from tensorjit.plugins.device_kernels.target import Target


def takes_convolutions(t: Target) -> bool:
    """Whether convolutions and pooling run on ``t``'s device (``config.device_schedule``):
    on a GPU by default; on a CPU device only when 'groups' forces the GPU shapes (a LeNet
    step on PoCL: ~5 ms with them on the host and copies around them, ~17 ms on PoCL's
    kernels, benchmarks/RESULTS.md)."""
    from tensorjit.core.config import config

    choice = config.device_schedule
    return choice == "groups" or (choice == "auto" and not t.runtime().is_cpu)


def convolution_lifter(t: Target) -> Callable[[Apply, str], Any]:
    """The lifter of a convolution or pooling node to ``t``'s device: its own op where
    the device takes them, else None (placement keeps the node on the host)."""

    def lift(node: Apply, device: str) -> Any:
        return node.op if takes_convolutions(t) else None

    return lift


def register_transfers(registry: TransferRegistry, t: Target) -> None:
    """Register ``t``'s lifters (imports nothing of the device's driver)."""
    from tensorjit.tensor.nnet.conv import Conv2d, Conv2dGradInputs, Conv2dGradWeights
    from tensorjit.tensor.nnet.pool import AveragePoolGrad, MaxPoolGrad, Pool

    lift = convolution_lifter(t)
    for op_class in (
        Conv2d,
        Conv2dGradInputs,
        Conv2dGradWeights,
        Pool,
        MaxPoolGrad,
        AveragePoolGrad,
    ):
        registry.add_lifter(t.device, op_class, lift, plugin=t.plugin)
