"""``theano.tensor.basic``: the same names as ``theano.tensor``."""

import importlib


def _compat_getattr(attr):
    return getattr(importlib.import_module("theano.tensor"), attr)
