"""Devices and the array kinds of the values that live on them.

A *device* is a place values live ("cpu", "opencl", "cuda", a third party's). Its
*array kind* says how to tell one of its values, allocate one, copy one from and to the
host, and whether two values may share memory. The core only ever touches device values
through the kind, so nothing outside a backend assumes a value is an ``ndarray``.

Devices are declared by backends (``Backend.array_kind``, see core/registries.py); the
host ("cpu", NumPy arrays) is declared by the core's own Python backend.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Protocol

HOST = "cpu"
_ORDINAL = re.compile(r"^([A-Za-z_]+?)(\d+)$")


def split_ordinal(name: str) -> tuple[str, int | None]:
    """A device name and the ordinal of one of its units: ``"cuda1"`` is ``("cuda",
    1)`` (Theano's ``device=cuda1``), ``"opencl"`` is ``("opencl", None)``."""
    found = _ORDINAL.match(name)
    return (found.group(1), int(found.group(2))) if found else (name, None)


def default_device() -> str:
    """The device ``config.device`` names, without an ordinal (``cuda1`` -> ``cuda``);
    the backend reads the ordinal itself (``default_ordinal``) when it starts."""
    from tensorjit.core.config import config

    return split_ordinal(config.device)[0]


def default_ordinal() -> int | None:
    """The unit ``config.device`` names (``cuda1`` -> 1), or None."""
    from tensorjit.core.config import config

    return split_ordinal(config.device)[1]


class ArrayKind:
    """How values of one device are handled. Subclass it for a device backend.

    Every method gets or returns values of this kind, except ``from_host`` (takes a
    host ``ndarray``) and ``to_host`` (returns one). Copies are always new buffers.
    The values themselves must have ``shape`` (a tuple), ``dtype`` (anything
    ``numpy.dtype`` accepts) and ``ndim``, as every device array library gives them.
    """

    #: the device these values live on
    device: str = HOST
    #: the value class, for messages ("WrappedArray", "pyopencl.array.Array", ...)
    type_name: str = "value"

    def is_value(self, value: Any) -> bool:
        """Whether ``value`` is an array of this kind."""
        raise NotImplementedError

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        raise NotImplementedError

    def from_host(self, array: Any) -> Any:
        """A new value of this kind holding a C-contiguous copy of host ``array``."""
        raise NotImplementedError

    def to_host(self, value: Any) -> Any:
        """A new host ``ndarray`` holding ``value``'s elements."""
        raise NotImplementedError

    def write_from_host(self, dest: Any, array: Any) -> bool:
        """Copy host ``array`` into the existing ``dest`` when shape and dtype match
        (``set_value`` then reuses the device buffer); False when it can not."""
        return False

    def copy(self, value: Any) -> Any:
        """A new value of this kind equal to ``value`` (sharing no memory with it)."""
        return self.from_host(self.to_host(value))

    def may_share_memory(self, a: Any, b: Any) -> bool:
        """Whether ``a`` and ``b`` may overlap. The default says yes (extra copies are
        safe; a missed overlap is not): a kind whose arrays can be views overrides it."""
        return True

    def shares_memory(self, a: Any, b: Any) -> bool:
        """The exact (possibly slower) form of ``may_share_memory``, for DebugMode."""
        return self.may_share_memory(a, b)

    def describe(self, value: Any) -> str:
        dtype = getattr(value, "dtype", "?")
        shape = getattr(value, "shape", "?")
        return f"{self.type_name} on {self.device} of dtype {dtype} and shape {shape}"


class HostArrays(ArrayKind):
    """NumPy arrays in host memory: the "cpu" device."""

    device = HOST
    type_name = "ndarray"

    def is_value(self, value: Any) -> bool:
        import numpy as np

        return isinstance(value, np.ndarray)

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        import numpy as np

        return np.empty(shape, dtype)

    def from_host(self, array: Any) -> Any:
        import numpy as np

        return np.array(array, copy=True, order="C")

    def to_host(self, value: Any) -> Any:
        import numpy as np

        return np.array(value, copy=True)

    def write_from_host(self, dest: Any, array: Any) -> bool:
        if dest.shape != array.shape or dest.dtype != array.dtype or not dest.flags.writeable:
            return False
        dest[...] = array
        return True

    def copy(self, value: Any) -> Any:
        import numpy as np

        return np.array(value, copy=True)

    def may_share_memory(self, a: Any, b: Any) -> bool:
        import numpy as np

        return bool(np.may_share_memory(a, b))

    def shares_memory(self, a: Any, b: Any) -> bool:
        import numpy as np

        # numpy's stubs allow only -1 and 0 for max_work; an int bound is documented
        return bool(np.shares_memory(a, b, max_work=10**6))  # type: ignore[arg-type]


HOST_ARRAYS = HostArrays()


def writeable(value: Any) -> bool:
    """Whether ``value`` may be written: False only for a value flagged read-only (a
    device array without a ``writeable`` flag, as pyopencl's, is writeable)."""
    return bool(getattr(getattr(value, "flags", None), "writeable", True))


class UnknownDeviceError(ValueError):
    """A type or shared variable names a device no loaded backend declares."""


class DeclaredDevices(Protocol):
    """The devices backends declared, with their array kinds (the backend registry)."""

    def array_kind(self, device: str) -> ArrayKind: ...

    def array_kinds(self) -> Mapping[str, ArrayKind]: ...


_declared: Callable[[], DeclaredDevices] | None = None


def use_declared_devices(source: Callable[[], DeclaredDevices] | None) -> None:
    """Where ``array_kind`` and ``kind_of`` find the devices that backends declared: the
    plugin system installs its backend registry here (core/hooks.py), so this module
    needs nothing above it; a test may install its own."""
    global _declared
    _declared = source


def array_kind(device: str) -> ArrayKind:
    """The array kind of ``device``, as declared by the backends that plugins registered."""
    if device == HOST:
        return HOST_ARRAYS
    if _declared is None:
        raise UnknownDeviceError(
            f"device {device!r}: no backend can declare it, no plugin system is installed"
        )
    return _declared().array_kind(device)


def kind_of(value: Any) -> ArrayKind | None:
    """The array kind that recognises ``value`` (the host's first), or None."""
    if HOST_ARRAYS.is_value(value):
        return HOST_ARRAYS
    for kind in (_declared().array_kinds() if _declared is not None else {}).values():
        if kind.is_value(value):
            return kind
    return None
