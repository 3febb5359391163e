"""The entry point module: registers the op family, its C kernel and in-place variant."""

from __future__ import annotations

from tensorjit.core.hooks import hookimpl
from tensorjit_softsign.kernels import softsign_kernel
from tensorjit_softsign.ops import Softsign


@hookimpl
def tensorjit_register_ops(registry):
    registry.add(Softsign, "softsign")


@hookimpl
def tensorjit_register_kernels(registry):
    # Nodes of Softsign run this on the C backend (when a C compiler is available);
    # elsewhere Op.perform runs them.
    registry.add("c", Softsign, softsign_kernel, name="c:softsign", plugin="softsign")


@hookimpl
def tensorjit_register_inplace(registry):
    def overwrite_input(node, candidates):
        return Softsign(inplace=True) if 0 in candidates else None

    registry.add(Softsign, overwrite_input, plugin="softsign")
