"""The dense tensor op family: a NumPy-like symbolic API (``tensorjit.tensor``).

Dtype promotion follows NumPy's for arrays: an op's output dtype is the dtype NumPy's
own function gives for inputs of those dtypes (``int8 + float32 -> float32``,
``exp(int16) -> float32``, ``int32 / int32 -> float64``, comparisons -> bool). Python
scalars are *weak* like NumPy's (NEP 50): ``float32_vector * 2.0`` stays float32.
"""

from tensorjit.core.gradient import grad
from tensorjit.tensor.elemwise import DimShuffle, Elemwise
from tensorjit.tensor.gradient_check import GradientError, verify_grad
from tensorjit.tensor.ifelse import IfElse, ifelse
from tensorjit.tensor.math import (
    Alloc,
    Argmax,
    Dot,
    Reduce,
    abs,
    abs_,
    add,
    all,
    alloc,
    and_,
    angle,
    any,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctan2,
    arctanh,
    argmax,
    argmin,
    bitwise_and,
    bitwise_not,
    bitwise_or,
    bitwise_xor,
    cast,
    ceil,
    clip,
    conj,
    conjugate,
    cos,
    cosh,
    deg2rad,
    digamma,
    divide,
    dot,
    eq,
    erf,
    erfc,
    erfinv,
    exp,
    exp2,
    expm1,
    floor,
    floor_div,
    floor_divide,
    gamma,
    gammaln,
    ge,
    gt,
    imag,
    int_div,
    invert,
    iround,
    isfinite,
    isinf,
    isnan,
    le,
    log,
    log1p,
    log2,
    log10,
    logaddexp,
    lt,
    max,
    maximum,
    mean,
    min,
    minimum,
    mod,
    mul,
    neg,
    neq,
    ones,
    ones_like,
    or_,
    outer,
    polygamma,
    pow,
    power,
    prod,
    psi,
    ptp,
    rad2deg,
    real,
    reciprocal,
    round,
    round_half_away_from_zero,
    round_half_to_even,
    sgn,
    sigmoid,
    sign,
    sin,
    sinh,
    softplus,
    sqr,
    sqrt,
    std,
    sub,
    sum,
    switch,
    tan,
    tanh,
    tri_gamma,
    true_div,
    trunc,
    var,
    where,
    xor,
    zeros,
    zeros_like,
)
from tensorjit.tensor.shape_ops import (
    Reshape,
    Shape,
    Unbroadcast,
    addbroadcast,
    dimshuffle,
    expand_dims,
    flatten,
    patternbroadcast,
    reshape,
    shape,
    squeeze,
    stack,
    transpose,
    unbroadcast,
)
from tensorjit.tensor.subtensor import (
    AdvancedIncSubtensor,
    AdvancedSubtensor,
    IncSubtensor,
    Subtensor,
    inc_subtensor,
    set_subtensor,
    take,
)
from tensorjit.tensor.type import CONSTRUCTORS, DTYPE_PREFIXES, TensorType, tensor
from tensorjit.tensor.variable import (
    TensorConstant,
    TensorSharedVariable,
    TensorVariable,
    as_tensor_variable,
    constant,
)

globals().update(CONSTRUCTORS)  # scalar, vector, matrix, ..., fmatrix, lvector, matrices, ...

# Table 1 families; each module lists its public names in __all__.
from tensorjit.tensor import allocation, extra_ops, linalg, nnet, random  # noqa: E402
from tensorjit.tensor.allocation import *  # noqa: E402, F403
from tensorjit.tensor.checks import Assert, SpecifyShape, assert_op, specify_shape  # noqa: E402
from tensorjit.tensor.extra_ops import *  # noqa: E402, F403
from tensorjit.tensor.linalg import *  # noqa: E402, F403
from tensorjit.tensor.math import inv  # noqa: E402  (Theano: elementwise 1/x; linalg.inv is the matrix inverse)

as_tensor = as_tensor_variable

__all__ = [name for name in dir() if not name.startswith("_")]
