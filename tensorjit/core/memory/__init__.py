"""The memory model: storage cells, shared variables, In/Out."""

from tensorjit.core.memory.io import In, Out
from tensorjit.core.memory.shared import SharedVariable, shared

__all__ = ["In", "Out", "SharedVariable", "shared"]
