"""softsign(x) = x / (1 + |x|), as a tensorjit op with a C kernel."""

from tensorjit_softsign.ops import Softsign, softsign

__all__ = ["Softsign", "softsign"]
