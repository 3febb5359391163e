"""One small representative graph ("probe") per op of the Theano paper's Table 1.

``docs/table1.md`` lists the names; ``tensorjit.tools.kernel_coverage`` compiles each probe to
see which backend gives its nodes kernels. A builder takes nothing and returns
``(inputs, outputs)`` built on symbolic inputs of typical dtypes: float64 matrices and
vectors for data, int64 for indices and sizes, bool for masks, complex128 where an op
is meant for complex values. Symbolic sizes keep allocation ops from being
constant-folded away, so that the op itself, not a constant, is what gets a kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import tensorjit.tensor as T
from tensorjit.core.graph.basic import Variable
from tensorjit.tensor import linalg, nnet
from tensorjit.tensor.random import MRG_RandomStreams, RandomStreams

Graph = tuple[list[Variable], list[Variable]]


@dataclass(frozen=True)
class Probe:
    name: str  # as in docs/table1.md
    section: str  # the Table 1 section it is listed under
    build: Callable[[], Graph]


# Table 1 names that are not ops computed at run time: no kernel can cover them.
SKIPPED: dict[str, str] = {
    "ifelse": "lazy conditional run by the VM itself (branches are ordinary nodes)",
    "Print": "debugging op that prints its input: I/O, not a dense tensor computation",
    "grad": "symbolic differentiation at graph-build time (its result is a graph of ops)",
    "Lop": "symbolic differentiation at graph-build time (its result is a graph of ops)",
    "Rop": "symbolic differentiation at graph-build time (its result is a graph of ops)",
    "jacobian": "symbolic differentiation at graph-build time (builds a scan loop of ops)",
    "hessian": "symbolic differentiation at graph-build time (builds a scan loop of ops)",
    "verify_grad": "numerical test helper run in Python, not an op",
}


def _mat(name: str = "x") -> Variable:
    return T.dmatrix(name)


def _unary(fn: Callable[[Variable], Variable], make: Callable[[str], Variable] = _mat):
    def build() -> Graph:
        x = make("x")
        return [x], [fn(x)]

    return build


def _binary(fn: Callable[..., Variable], make: Callable[[str], Variable] = _mat):
    def build() -> Graph:
        x, y = make("x"), make("y")
        return [x, y], [fn(x, y)]

    return build


def _bool_mat(name: str) -> Variable:
    return T.tensor("bool", shape=(None, None), name=name)


def _sizes(fn: Callable[[Variable, Variable], Variable]):
    """An allocation from symbolic int64 sizes (constant sizes would be folded)."""

    def build() -> Graph:
        n, m = T.lscalar("n"), T.lscalar("m")
        return [n, m], [fn(n, m)]

    return build


def _alloc() -> Graph:
    v, n, m = T.dscalar("v"), T.lscalar("n"), T.lscalar("m")
    return [v, n, m], [T.alloc(v, n, m)]


def _full() -> Graph:
    v, n, m = T.dscalar("v"), T.lscalar("n"), T.lscalar("m")
    return [v, n, m], [T.full((n, m), v)]


def _with_scalar(fn: Callable[[Variable, Variable], Variable]):
    def build() -> Graph:
        x, v = _mat("x"), T.dscalar("v")
        return [x, v], [fn(x, v)]

    return build


def _arange() -> Graph:
    n = T.lscalar("n")
    return [n], [T.arange(n)]


def _indexed(fn: Callable[[Variable, Variable], Variable]):
    """``x[idx]`` with an int64 index vector (the typical embedding/scatter pattern)."""

    def build() -> Graph:
        x, y, idx = _mat("x"), _mat("y"), T.lvector("idx")
        return [x, y, idx], [fn(x[idx], y)]

    return build


def _take() -> Graph:
    x, idx = _mat("x"), T.lvector("idx")
    return [x, idx], [T.take(x, idx, axis=0)]


def _clip() -> Graph:
    x = _mat("x")
    return [x], [T.clip(x, 0.0, 1.0)]


def _tensor3(name: str) -> Variable:
    return T.dtensor3(name)


def _squeeze() -> Graph:
    x = T.tensor("float64", shape=(None, 1), name="x")
    return [x], [T.squeeze(x, axis=1)]


def _split() -> Graph:
    x, sizes = _mat("x"), T.lvector("sizes")
    return [x, sizes], list(T.split(x, sizes, 2, axis=0))


def _stack() -> Graph:
    x, y = _mat("x"), _mat("y")
    return [x, y], [T.stack([x, y])]


def _concatenate() -> Graph:
    x, y = _mat("x"), _mat("y")
    return [x, y], [T.concatenate([x, y], axis=0)]


def _where(fn: Callable[..., Variable]):
    def build() -> Graph:
        cond, x, y = _bool_mat("cond"), _mat("x"), _mat("y")
        return [cond, x, y], [fn(cond, x, y)]

    return build


def _outer() -> Graph:
    v, w = T.dvector("v"), T.dvector("w")
    return [v, w], [T.outer(v, w)]


def _tensordot() -> Graph:
    a, b = T.dtensor3("a"), _mat("b")
    return [a, b], [linalg.tensordot(a, b, axes=1)]


def _diag() -> Graph:
    v = T.dvector("v")
    return [v], [linalg.diag(v)]


def _crossentropy() -> Graph:
    p, y = _mat("p"), T.lvector("y")
    return [p, y], [nnet.categorical_crossentropy(p, y)]


def _hinge() -> Graph:
    pred, y = _mat("pred"), T.lvector("y")
    return [pred, y], [nnet.multiclass_hinge_loss(pred, y)]


def _conv2d() -> Graph:
    x, w = T.dtensor4("x"), T.dtensor4("w")
    return [x, w], [nnet.conv2d(x, w)]


def _pool(fn: Callable[..., Variable]):
    def build() -> Graph:
        x = T.dtensor4("x")
        return [x], [fn(x, (2, 2))]

    return build


def _pairs(name: str) -> Variable:
    """A batch of complex vectors stored as (re, im) pairs: shape (batch, n, 2)."""
    return T.tensor("float64", shape=(None, None, 2), name=name)


def _random(stream_class: type) -> Callable[[], Graph]:
    # A constant size: the draw reads shared generator state, so it is never folded.
    def build() -> Graph:
        return [], [stream_class(1234).uniform((64, 64))]

    return build


def _as_list(outputs: Variable | tuple | list) -> list[Variable]:
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]


def _multi(fn: Callable[[Variable], Variable | tuple]):
    """For ops returning several outputs (slogdet, eigh, qr, svd)."""

    def build() -> Graph:
        x = _mat("x")
        return [x], _as_list(fn(x))

    return build


_OPERATORS = (
    "add sub mul true_div int_div floor_div mod pow neg abs eq neq lt le gt ge and_ or_ xor "
    "invert maximum minimum"
).split()
_MATH = (
    "exp exp2 expm1 log log2 log10 log1p sqrt sqr sin cos tan arcsin arccos arctan arctan2 "
    "sinh cosh tanh arcsinh arccosh arctanh floor ceil round trunc sign abs clip erf erfc "
    "erfinv gamma gammaln psi real imag conj angle"
).split()
_REDUCTIONS = "sum prod mean var std max min all any argmin argmax".split()


def _axis1(fn: Callable[..., Variable]) -> Callable[[Variable], Variable]:
    return lambda x: fn(x, axis=1)  # a row-wise reduction, the usual case in models


def _probes() -> list[Probe]:
    ops = "Operators"
    special = {
        "int_div": _binary(T.int_div, T.lmatrix),
        "mod": _binary(T.mod, T.lmatrix),
        "neg": _unary(T.neg),
        "abs": _unary(T.abs),
        "invert": _unary(T.invert, _bool_mat),
        **{n: _binary(getattr(T, n), _bool_mat) for n in ("and_", "or_", "xor")},
    }
    probes = [Probe(n, ops, special.get(n) or _binary(getattr(T, n))) for n in _OPERATORS]
    alloc = "Allocation"
    probes += [
        Probe("alloc", alloc, _alloc),
        Probe("zeros", alloc, _sizes(lambda n, m: T.zeros((n, m)))),
        Probe("ones", alloc, _sizes(lambda n, m: T.ones((n, m)))),
        Probe("zeros_like", alloc, _unary(T.zeros_like)),
        Probe("ones_like", alloc, _unary(T.ones_like)),
        Probe("full", alloc, _full),
        Probe("full_like", alloc, _with_scalar(T.full_like)),
        Probe("fill", alloc, _with_scalar(T.fill)),
        Probe("second", alloc, _binary(T.second)),
        Probe("eye", alloc, _sizes(T.eye)),
        Probe("identity_like", alloc, _unary(T.identity_like)),
        Probe("tri", alloc, _sizes(T.tri)),
        Probe("tril", alloc, _unary(T.tril)),
        Probe("triu", alloc, _unary(T.triu)),
        Probe("arange", alloc, _arange),
    ]
    indexing = "Indexing"
    probes += [
        Probe("set_subtensor", indexing, _indexed(T.set_subtensor)),
        Probe("inc_subtensor", indexing, _indexed(T.inc_subtensor)),
        Probe("take", indexing, _take),
    ]
    math = "Math"
    special = {
        "arctan2": _binary(T.arctan2),
        "clip": _clip,
        # real/imag/conj/angle are meant for complex values; on floats they are trivial.
        **{n: _unary(getattr(T, n), T.zmatrix) for n in ("real", "imag", "conj", "angle")},
    }
    probes += [Probe(n, math, special.get(n) or _unary(getattr(T, n))) for n in _MATH]
    red = "Reductions"
    probes += [
        Probe(n, red, _unary(_axis1(getattr(T, n)), _bool_mat if n in ("all", "any") else _mat))
        for n in _REDUCTIONS
    ]
    shape = "Shape"
    probes += [
        Probe("reshape", shape, _unary(lambda x: T.reshape(x, (3, -1)))),
        Probe("flatten", shape, _unary(T.flatten)),
        Probe("dimshuffle", shape, _unary(lambda x: T.dimshuffle(x, (1, "x", 0)))),
        Probe("transpose", shape, _unary(T.transpose)),
        Probe("swapaxes", shape, _unary(lambda x: T.swapaxes(x, 0, 2), _tensor3)),
        Probe("squeeze", shape, _squeeze),
        Probe("expand_dims", shape, _unary(lambda x: T.expand_dims(x, 0))),
        Probe("concatenate", shape, _concatenate),
        Probe("stack", shape, _stack),
        Probe("join", shape, _binary(lambda x, y: T.join(0, x, y))),
        Probe("split", shape, _split),
        Probe("tile", shape, _unary(lambda x: T.tile(x, (2, 3)))),
        Probe("repeat", shape, _unary(lambda x: T.repeat(x, 2, axis=0))),
        Probe("roll", shape, _unary(lambda x: T.roll(x, 1, axis=1))),
        Probe("sort", shape, _unary(lambda x: T.sort(x, axis=1))),
        Probe("argsort", shape, _unary(lambda x: T.argsort(x, axis=1))),
        Probe("cumsum", shape, _unary(lambda x: T.cumsum(x, axis=1))),
        Probe("cumprod", shape, _unary(lambda x: T.cumprod(x, axis=1))),
    ]
    cond = "Conditional"
    probes += [Probe("switch", cond, _where(T.switch)), Probe("where", cond, _where(T.where))]
    la = "Linear algebra"
    probes += [
        Probe("dot", la, _binary(T.dot)),
        Probe("outer", la, _outer),
        Probe("matmul", la, _binary(linalg.matmul, _tensor3)),
        Probe("tensordot", la, _tensordot),
        Probe("batched_dot", la, _binary(linalg.batched_dot, _tensor3)),
        Probe("diag", la, _diag),
        Probe("diagonal", la, _unary(linalg.diagonal)),
        Probe("trace", la, _unary(linalg.trace)),
        Probe("cholesky", la, _unary(linalg.cholesky)),
        Probe("inv", la, _unary(linalg.inv)),
        Probe("pinv", la, _unary(linalg.pinv)),
        Probe("solve", la, _binary(linalg.solve)),
        Probe("det", la, _unary(linalg.det)),
        Probe("slogdet", la, _multi(linalg.slogdet)),
        Probe("eigh", la, _multi(linalg.eigh)),
        Probe("norm", la, _unary(linalg.norm)),
        Probe("qr", la, _multi(linalg.qr)),
        Probe("svd", la, _multi(linalg.svd)),
    ]
    nn = "nnet"
    probes += [
        Probe(n, nn, _unary(getattr(nnet, n)))
        for n in ("sigmoid", "hard_sigmoid", "softplus", "relu", "elu", "softmax", "log_softmax")
    ]
    probes += [
        Probe("categorical_crossentropy", nn, _crossentropy),
        Probe("binary_crossentropy", nn, _binary(nnet.binary_crossentropy)),
        Probe("multiclass_hinge_loss", nn, _hinge),
        Probe("conv2d", nn, _conv2d),
        Probe("max_pool_2d", nn, _pool(nnet.max_pool_2d)),
        Probe("avg_pool_2d", nn, _pool(nnet.avg_pool_2d)),
        Probe("pool_2d", nn, _pool(nnet.pool_2d)),
        Probe("fft", nn, _unary(nnet.fft, _pairs)),
        Probe("ifft", nn, _unary(nnet.ifft, _pairs)),
        Probe("rfft", nn, _unary(nnet.rfft)),
        Probe("irfft", nn, _unary(nnet.irfft, _pairs)),
    ]
    rnd = "Random"
    probes += [
        Probe("RandomStreams", rnd, _random(RandomStreams)),
        Probe("MRG_RandomStreams", rnd, _random(MRG_RandomStreams)),
    ]
    return probes


PROBES: list[Probe] = _probes()
