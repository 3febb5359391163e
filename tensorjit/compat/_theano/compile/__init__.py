"""``theano.compile``."""

import sys

import theano.compile.function  # noqa: F401
from theano.compile.debugmode import DebugMode  # noqa: F401

from tensorjit.compat.compile import Mode, Param, get_default_mode, get_mode  # noqa: F401
from tensorjit.compat.generic import shared  # noqa: F401
from tensorjit.compat.op import as_op  # noqa: F401
from tensorjit.core.compile import FAST_COMPILE, FAST_RUN, Function  # noqa: F401
from tensorjit.core.compile.function import UnusedInputError  # noqa: F401
from tensorjit.core.graph import MissingInputError  # noqa: F401
from tensorjit.core.memory import In, Out, SharedVariable  # noqa: F401

#: The module ``theano.compile.function``; calling it calls ``theano.function``.
function = sys.modules["theano.compile.function"]

from tensorjit.compat._theano_rewrites import optdb  # noqa: E402, F401
