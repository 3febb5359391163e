"""Inplace versions of the elementwise functions, for graphs built by hand.

``add_inplace(x, y)`` computes ``x + y`` into ``x``'s buffer: ``x`` is destroyed, and the
result stands for ``x`` after the addition. As in Theano, ``function`` refuses graphs
with such ops unless called with ``accept_inplace=True``; normally the inplace rewrite
introduces them where that is safe.
"""

from __future__ import annotations

from tensorjit.tensor.elemwise import Elemwise
from tensorjit.tensor.scalar import SCALAR_OPS


def _inplace(name: str):
    op = Elemwise(SCALAR_OPS[name], inplace=0)

    def fn(*args):
        return op(*args)

    fn.__name__ = fn.__qualname__ = f"{name}_inplace"
    fn.__doc__ = f"``{name}`` computed into (and destroying) its first input."
    return fn


INPLACE_FUNCTIONS = {f"{name}_inplace": _inplace(name) for name in SCALAR_OPS}
globals().update(INPLACE_FUNCTIONS)  # add_inplace, mul_inplace, exp_inplace, ...

__all__ = sorted(INPLACE_FUNCTIONS)
