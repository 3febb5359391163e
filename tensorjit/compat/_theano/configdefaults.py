"""``theano.configdefaults``."""

import struct


def python_int_bitwidth() -> int:
    """The width of a C long on this platform, as Theano measured it."""
    return struct.calcsize("l") * 8
