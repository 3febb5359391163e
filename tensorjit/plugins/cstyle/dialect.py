"""A dialect of C-like source: the data that makes one renderer serve C, OpenCL and CUDA."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np


class Unsupported(Exception):
    """This node (or scalar op, or dtype) has no kernel in this dialect."""


def _c_int_literal(value: int, dtype: str, type_name: str) -> str:
    if dtype.startswith("uint"):
        return f"(({type_name})UINT64_C({value}))"
    if value == -(2**63):
        return "INT64_MIN"
    return f"(({type_name})INT64_C({value}))"


def _float_literal(x: float, type_name: str) -> str:
    if math.isnan(x):
        text = "NAN"
    elif math.isinf(x):
        text = "INFINITY" if x > 0 else "(-INFINITY)"
    else:
        text = repr(x)  # shortest repr that round-trips: exact as a C double literal
    return f"(({type_name})({text}))"


@dataclass(frozen=True)
class Dialect:
    """How one C-like language spells what the renderer needs.

    - ``type_names``: dtype -> type name (a dtype missing here is Unsupported);
    - ``math_suffix_f32``: whether float32 math functions take an ``f`` suffix (C, CUDA:
      ``expf``) or are overloaded (OpenCL: ``exp``);
    - ``unary``: op name -> function name for unary float math;
    - ``helpers``: op name -> helper prefix; the call is ``tj_<prefix>_<d|f>``, and the
      dialect's ``preamble`` (or its helper sources) defines it;
    - ``double_only``: op name -> a helper computing in double (float32 converts);
    - ``int_literal``: ``(value, dtype, type name) -> literal``;
    - ``powi``: ``(x, n, type name) -> expression`` for ``x**n`` with a small constant
      integer n, or None to use ``pow``;
    - ``kernel_qualifier``, ``global_qualifier``: what precedes a kernel, a pointer to
      device memory (empty for host C: its kernels are plain functions);
    - ``function_qualifier``: what precedes the per-element helper function;
    - ``restrict``: the no-alias pointer qualifier (C99 ``restrict``; CUDA's C++ spells
      it ``__restrict__``);
    - ``signed_wraps``: whether signed integer arithmetic is defined to wrap (the host's
      C is compiled with -fwrapv); where not, integer sums accumulate unsigned;
    - ``flat_loop``: the loop (or launch) over ``{n}`` contiguous elements with index
      ``{i}``: a plain loop in C, a work-item's chunk in OpenCL, a grid-stride loop in
      CUDA (the work per thread is the dialect's tunable);
    - ``preamble``: source every kernel starts with.
    """

    name: str
    type_names: Mapping[str, str]
    math_suffix_f32: bool = True
    unary: Mapping[str, str] = field(default_factory=dict)
    helpers: Mapping[str, str] = field(default_factory=dict)
    double_only: Mapping[str, str] = field(default_factory=dict)
    int_literal: Callable[[int, str, str], str] = _c_int_literal
    powi: Callable[[str, int, str], str] | None = None
    kernel_qualifier: str = ""
    global_qualifier: str = ""
    function_qualifier: str = "static inline"
    restrict: str = "restrict"
    signed_wraps: bool = False
    flat_loop: str = "for (int64_t {i} = 0; {i} < {n}; {i}++)"
    preamble: str = ""

    def type_name(self, dtype: str) -> str:
        try:
            return self.type_names[dtype]
        except KeyError:
            raise Unsupported(f"dtype {dtype} in {self.name}") from None

    def convert(self, expr: str, src: str, dst: str) -> str:
        return expr if src == dst else f"(({self.type_name(dst)})({expr}))"

    def math(self, fn: str, dtype: str) -> str:
        """The math library's ``fn`` for ``dtype``."""
        return fn + ("f" if dtype == "float32" and self.math_suffix_f32 else "")

    @staticmethod
    def suffix(dtype: str) -> str:
        """The suffix of a helper for ``dtype``: ``tj_<name>_d`` or ``tj_<name>_f``."""
        return "f" if dtype == "float32" else "d"

    def literal(self, value: object) -> str:
        """A constant of this dialect equal to the NumPy scalar ``value``, exactly."""
        value = np.asarray(value).reshape(())
        dtype = value.dtype.name
        t = self.type_name(dtype)
        if value.dtype.kind == "b":
            return "1" if value else "0"
        if value.dtype.kind == "f":
            return _float_literal(float(value), t)
        return self.int_literal(int(value), dtype, t)
