"""Random number streams: ``RandomStreams`` (NumPy generators) and ``MRG_RandomStreams``
(the MRG31k3p generator of L'Ecuyer & Touzin, in vectorized NumPy).

Random ops are *functional*: a sampling node takes the current generator state as an
input and returns ``(new_state, sample)``; it never modifies its input. The state lives
in a shared variable, and the stream arranges for ``state <- new_state`` after each
call of a compiled function:

- ``stream.updates()`` lists the ``(state, new_state)`` pairs, to pass as
  ``function(..., updates=stream.updates())``;
- each state shared variable carries ``default_update = new_state`` (Theano's
  convention), for ``function()`` to apply when the caller gives no explicit update.

Each call (``rs.uniform(...)``) creates its own state variable, so two calls are two
independent draws: nodes with different inputs never merge, and random ops opt out of
constant folding (``constant_folding = False``).
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.random.bit_generator import ISpawnableSeedSequence

from tensorjit.core.config import config
from tensorjit.core.gradient import grad_undefined
from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.graph.op import Op
from tensorjit.core.graph.type import Type
from tensorjit.core.memory.shared import SharedVariable
from tensorjit.tensor.type import TensorType, normalize_dtype
from tensorjit.tensor.variable import as_tensor_variable, constant

__all__ = [
    "MRG31k3p",
    "MRGSample",
    "MRG_RandomStreams",
    "RandomGeneratorSharedVariable",
    "RandomGeneratorType",
    "RandomStreams",
    "RandomVariable",
    "mrg31k3p_uniform",
    "random_generator_type",
]


# ====================================================================== generator type
class RandomGeneratorType(Type):
    """Values are ``numpy.random.Generator`` objects (the state of a ``RandomStreams``
    stream). Two values are equal when their bit generators are in the same state."""

    # Shape inference asks every variable for its static shape; a generator has none.
    shape: tuple = ()
    ndim = 0

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))

    def __str__(self) -> str:
        return "RandomGeneratorType"

    def short_str(self) -> str:
        return "rng"

    def filter(self, value: Any, strict: bool = False, allow_downcast: bool | None = None):
        if isinstance(value, np.random.Generator):
            return value
        raise TypeError(f"expected a numpy.random.Generator, got {type(value).__name__}")

    def values_eq(self, a: Any, b: Any) -> bool:
        return _state_eq(a.bit_generator.state, b.bit_generator.state)

    def may_share_memory(self, a: Any, b: Any) -> bool:
        return a is b

    def copy_value(self, value: Any) -> np.random.Generator:
        return copy_generator(value)

    # Gradients never flow into a generator state (RandomVariable.L_op ignores it).
    def grad_zeros_like(self, var: Variable) -> None:  # type: ignore[override]
        return None


random_generator_type = RandomGeneratorType()


class _StateOnlySeed(ISpawnableSeedSequence):
    """The seed of a copied bit generator: construction draws no entropy and hashes
    nothing (the copy's state is set right after). Its attributes are the original
    seed's; spawning starts from the original's spawn count at the time of the copy and
    leaves the original alone, as spawning from a deep copy would."""

    def __init__(self, original: Any, spawned: int | None = None):
        self._original = original
        self._spawned = getattr(original, "n_children_spawned", 0) if spawned is None else spawned
        self._own: Any = None  # the seed sequence this copy spawns from, once it has

    def generate_state(self, n_words: int, dtype: Any = np.uint32) -> np.ndarray:
        return np.zeros(n_words, dtype=dtype)

    def spawn(self, n_children: int) -> list:
        if self._own is None:
            self._own = self._independent()
        return self._own.spawn(n_children)

    def _independent(self) -> Any:
        seed = self._original
        if type(seed) is np.random.SeedSequence:
            return np.random.SeedSequence(
                seed.entropy,
                spawn_key=seed.spawn_key,
                pool_size=seed.pool_size,
                n_children_spawned=self._spawned,
            )
        return copy.deepcopy(seed)  # a third party's seed sequence

    @property
    def _current(self) -> Any:
        """The seed sequence this copy stands for now: its own once it has spawned."""
        return self._original if self._own is None else self._own

    @property
    def n_children_spawned(self) -> int:
        return self._spawned if self._own is None else self._own.n_children_spawned

    def again(self) -> _StateOnlySeed:
        """The seed of a copy of the generator this seed belongs to."""
        return _StateOnlySeed(self._current, self.n_children_spawned)

    def __getattr__(self, name: str) -> Any:  # entropy, spawn_key, ...
        if name.startswith("_"):  # (while copy or pickle rebuild the object)
            raise AttributeError(name)
        return getattr(self._current, name)

    def __reduce__(self) -> tuple:
        return (_StateOnlySeed, (self._original, self._spawned), {"_own": self._own})


def copy_generator(gen: np.random.Generator) -> np.random.Generator:
    """A new generator in ``gen``'s state. ``copy.deepcopy`` takes ~75 us (it pickles
    the seed sequence and the state); building a bit generator of the same class on a
    state-only seed and setting the state takes ~5 us. A bit generator that can not be
    built that way (a third party's) is deep-copied."""
    bits = gen.bit_generator
    seed = bits.seed_seq
    # (a copy's copy: a new wrapper of the same original seed, no chain of wrappers)
    seed = seed.again() if isinstance(seed, _StateOnlySeed) else _StateOnlySeed(seed)
    try:
        fresh = type(bits)(seed)
        fresh.state = bits.state
    except Exception:
        return copy.deepcopy(gen)
    return np.random.Generator(fresh)


def _state_eq(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return (
            isinstance(b, dict) and a.keys() == b.keys() and all(_state_eq(a[k], b[k]) for k in a)
        )
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(a, b))
    return bool(a == b)


class RandomGeneratorSharedVariable(SharedVariable):
    """A shared ``numpy.random.Generator`` (its ``default_update`` is set by the stream)."""


# ====================================================================== helpers
def _as_size(size: Any) -> list[Variable] | None:
    """``size`` (None, an int, a tuple of ints / symbolic scalars, or a symbolic int
    vector of static length) as a list of int64 scalar variables."""
    if size is None:
        return None
    if isinstance(size, (int, np.integer)):
        size = (size,)
    if isinstance(size, Variable):
        var = as_tensor_variable(size)
        if var.type.ndim == 0:
            size = (var,)
        elif var.type.ndim == 1:
            n = var.type.shape[0]
            if n is None:
                raise ValueError(
                    f"random size {var.describe()} is a vector of unknown length; give a "
                    "tuple of scalars or a vector of static length"
                )
            size = tuple(var[i] for i in range(n))
        else:
            raise TypeError(f"random size must be a scalar or a vector, got {var.describe()}")
    entries = []
    for s in size:
        if isinstance(s, (int, np.integer)):
            if s < 0:
                raise ValueError(f"random size entries must be >= 0, got {size}")
            entries.append(constant(np.int64(s)))
            continue
        var = as_tensor_variable(s)
        if var.type.ndim != 0 or np.dtype(var.type.dtype).kind not in "iu":
            raise TypeError(f"random size entries must be integer scalars, got {var.describe()}")
        if var.type.dtype != "int64":
            from tensorjit.tensor.math import cast

            var = cast(var, "int64")
        entries.append(var)
    return entries


def _static_int(var: Variable) -> int | None:
    if isinstance(var, Constant):
        return int(var.data)
    return None


def _broadcast_static(shapes: Sequence[tuple]) -> tuple:
    """The static shape NumPy broadcasting gives for params of these static shapes."""
    ndim = max((len(s) for s in shapes), default=0)
    out: list[int | None] = []
    for axis in range(ndim):
        dims = [s[axis - ndim + len(s)] for s in shapes if axis - ndim + len(s) >= 0]
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            raise ValueError(f"random parameters of shapes {list(shapes)} do not broadcast")
        if known:
            out.append(known.pop())
        elif any(d is None for d in dims):
            out.append(None)
        else:
            out.append(1)
    return tuple(out)


def _output_dtype(dtype: Any, default: Any) -> str:
    return normalize_dtype(default if dtype is None else dtype)


# ====================================================================== RandomVariable
# dist -> (numpy Generator method, number of parameters)
_DISTS = {
    "uniform": 2,
    "normal": 2,
    "binomial": 2,
    "integers": 2,
    "random_integers": 2,
    "choice": 1,  # plus p when has_p
    "permutation": 1,
}


class RandomVariable(Op):
    """Samples from ``dist`` with a ``numpy.random.Generator``.

    Inputs: ``(state, *size_entries, *params)`` with ``n_size`` int64 size scalars
    (``n_size=None``: no size, the params' broadcast shape). Outputs:
    ``(new_state, sample)``. The input state is never modified: ``perform`` draws from a
    copy and returns it as ``new_state``, so the op declares no destroy_map.
    """

    __props__ = ("dist", "dtype", "ndim", "n_size", "replace", "has_p")
    constant_folding = False

    def __init__(
        self,
        dist: str,
        dtype: str,
        ndim: int,
        n_size: int | None,
        replace: bool = True,
        has_p: bool = False,
    ):
        if dist not in _DISTS:
            raise ValueError(f"unknown distribution {dist!r}; known: {sorted(_DISTS)}")
        self.dist = dist
        self.dtype = normalize_dtype(dtype)
        self.ndim = ndim
        self.n_size = n_size
        self.replace = bool(replace)
        self.has_p = bool(has_p)

    @property
    def n_params(self) -> int:
        return _DISTS[self.dist] + (1 if self.has_p else 0)

    def make_node(self, state: Variable, *rest: Any) -> Apply:
        if not isinstance(state, Variable) or not isinstance(state.type, RandomGeneratorType):
            raise TypeError(f"{self}: the first input must be a generator state, got {state!r}")
        n_size = self.n_size or 0
        if len(rest) != n_size + self.n_params:
            raise TypeError(
                f"{self} takes {n_size} size entries and {self.n_params} parameters, "
                f"got {len(rest)} inputs"
            )
        sizes = [as_tensor_variable(s) for s in rest[:n_size]]
        params = [as_tensor_variable(p) for p in rest[n_size:]]
        for s in sizes:
            if s.type.ndim != 0 or np.dtype(s.type.dtype).kind not in "iu":
                raise TypeError(f"{self}: size entries must be integer scalars: {s.describe()}")
        if self.n_size is not None:
            static = tuple(_static_int(s) for s in sizes)
        elif self.dist == "permutation":
            static = (_static_int(params[0]),)
        elif self.dist == "choice":
            static = ()
        else:
            static = _broadcast_static([p.type.shape for p in params])
        if len(static) != self.ndim:
            raise ValueError(f"{self}: the sample has {len(static)} dimensions, not {self.ndim}")
        outputs = [state.type.make_variable(), TensorType(self.dtype, static).make_variable()]
        return Apply(self, [state, *sizes, *params], outputs)

    def perform(self, node, inputs, output_storage):
        state, *rest = inputs
        n_size = self.n_size or 0
        size = None if self.n_size is None else tuple(int(s) for s in rest[:n_size])
        params = rest[n_size:]
        gen = copy_generator(state)  # functional: the input state stays as it was
        if self.dist == "uniform":
            sample = gen.uniform(params[0], params[1], size=size)
        elif self.dist == "normal":
            sample = gen.normal(params[0], params[1], size=size)
        elif self.dist == "binomial" and params[0].size and np.all(params[0] == 1):
            # One trial (dropout and corruption masks): a uniform below p, five times
            # cheaper than the Generator's general binomial, same distribution.
            shape = size if size is not None else np.broadcast_shapes(*(p.shape for p in params))
            sample = gen.random(size=shape) < params[1]
        elif self.dist == "binomial":
            sample = gen.binomial(params[0], params[1], size=size)
        elif self.dist == "integers":
            sample = gen.integers(params[0], params[1], size=size)
        elif self.dist == "random_integers":
            sample = gen.integers(params[0], params[1], size=size, endpoint=True)
        elif self.dist == "choice":
            a = params[0] if params[0].ndim else int(params[0])
            p = params[1] if self.has_p else None
            sample = gen.choice(a, size=size, replace=self.replace, p=p)
        else:  # permutation
            sample = gen.permutation(int(params[0]))
        sample = np.asarray(sample)
        if sample.dtype != node.outputs[1].type.numpy_dtype:
            sample = sample.astype(node.outputs[1].type.numpy_dtype)
        output_storage[0][0] = gen
        output_storage[1][0] = sample

    def infer_shape(self, fgraph, node, input_shapes):
        if self.n_size is not None:
            return [(), tuple(node.inputs[1 : 1 + self.n_size])]
        if self.dist == "permutation":
            return [(), (node.inputs[1],)]
        return [(), None]

    def L_op(self, inputs, outputs, output_grads):
        n_size = self.n_size or 0
        grads: list[Any] = [None] * (1 + n_size)
        for k, p in enumerate(inputs[1 + n_size :]):
            if np.dtype(p.type.dtype).kind in "fc":
                grads.append(
                    grad_undefined(self, 1 + n_size + k, p, "samples are not differentiable")
                )
            else:
                grads.append(None)
        return grads


class RandomStreams:
    """Theano's ``shared_randomstreams.RandomStreams`` over ``numpy.random.Generator``.

    Every sampling call (``uniform``, ``normal``, ...) makes a new stream: a shared
    generator, seeded from this object's seed generator, and a ``RandomVariable`` node.
    ``seed(s)`` reseeds every stream made so far, reproducibly (same seed, same draws).
    Pass ``updates=rs.updates()`` to ``function`` so repeated calls draw new numbers
    (each state also carries ``default_update``).
    """

    def __init__(self, seed: int | None = None):
        self.default_instance_seed = seed
        self.gen_seedgen = np.random.default_rng(seed)
        self.state_updates: list[tuple[RandomGeneratorSharedVariable, Variable]] = []

    def updates(self) -> list[tuple[RandomGeneratorSharedVariable, Variable]]:
        """The ``(state, new_state)`` pairs of every stream, for ``function(updates=...)``."""
        return list(self.state_updates)

    def seed(self, seed: int | None = None) -> None:
        """Reseed every stream (None: the seed given at construction)."""
        if seed is None:
            seed = self.default_instance_seed
        self.gen_seedgen = np.random.default_rng(seed)
        for state, _ in self.state_updates:
            state.set_value(self._new_generator(), borrow=True)

    def _new_generator(self) -> np.random.Generator:
        return np.random.default_rng(int(self.gen_seedgen.integers(2**30)))

    def gen(
        self, dist: str, size: Any, params: Sequence[Any], dtype: str, **props: Any
    ) -> Variable:
        """Create a stream for ``dist`` and return its sample variable."""
        sizes = _as_size(size)
        params = [as_tensor_variable(p) for p in params]
        if sizes is not None:
            ndim = len(sizes)
        elif dist == "permutation":
            ndim = 1
        elif dist == "choice":
            ndim = 0
        else:
            ndim = max((p.type.ndim for p in params), default=0)
        op = RandomVariable(dist, dtype, ndim, None if sizes is None else len(sizes), **props)
        state = RandomGeneratorSharedVariable(
            random_generator_type, self._new_generator(), name="rng_state", borrow=True
        )
        new_state, sample = op(state, *(sizes or []), *params)
        state.default_update = new_state
        self.state_updates.append((state, new_state))
        return sample

    def uniform(
        self, size: Any = None, low: Any = 0.0, high: Any = 1.0, dtype: Any = None
    ) -> Variable:
        """Uniform samples in ``[low, high)`` (dtype default ``floatX``)."""
        return self.gen("uniform", size, [low, high], _output_dtype(dtype, config.floatX))

    def normal(
        self, size: Any = None, avg: Any = 0.0, std: Any = 1.0, dtype: Any = None
    ) -> Variable:
        """Gaussian samples of mean ``avg`` and standard deviation ``std``."""
        return self.gen("normal", size, [avg, std], _output_dtype(dtype, config.floatX))

    def binomial(
        self, size: Any = None, n: Any = 1, p: Any = 0.5, dtype: Any = "int64"
    ) -> Variable:
        """Number of successes in ``n`` trials of probability ``p``."""
        return self.gen("binomial", size, [n, p], _output_dtype(dtype, "int64"))

    def random_integers(
        self, size: Any = None, low: Any = 0, high: Any = 1, dtype: Any = "int64"
    ) -> Variable:
        """Integers uniformly drawn from ``[low, high]`` (both ends included, as Theano)."""
        return self.gen("random_integers", size, [low, high], _output_dtype(dtype, "int64"))

    def integers(
        self, size: Any = None, low: Any = 0, high: Any = None, dtype: Any = "int64"
    ) -> Variable:
        """Integers uniformly drawn from ``[low, high)`` (NumPy's ``Generator.integers``;
        ``high=None`` means ``[0, low)``)."""
        if high is None:
            low, high = 0, low
        return self.gen("integers", size, [low, high], _output_dtype(dtype, "int64"))

    def choice(
        self, size: Any = None, a: Any = 2, replace: bool = True, p: Any = None, dtype: Any = None
    ) -> Variable:
        """Samples from ``a`` (a vector, or an int n for ``arange(n)``), with probabilities
        ``p`` (default uniform), with or without replacement."""
        a_var = as_tensor_variable(a)
        if a_var.type.ndim not in (0, 1):
            raise TypeError(f"choice: a must be an int or a vector, got {a_var.describe()}")
        if a_var.type.ndim == 0 and np.dtype(a_var.type.dtype).kind not in "iu":
            raise TypeError(f"choice: a scalar a must be an integer, got {a_var.describe()}")
        default = "int64" if a_var.type.ndim == 0 else a_var.type.dtype
        params = [a_var] if p is None else [a_var, p]
        return self.gen(
            "choice",
            size,
            params,
            _output_dtype(dtype, default),
            replace=replace,
            has_p=p is not None,
        )

    def permutation(self, n: Any, dtype: Any = "int64") -> Variable:
        """A random permutation of ``arange(n)``."""
        return self.gen("permutation", None, [n], _output_dtype(dtype, "int64"))


# ====================================================================== MRG31k3p
class MRG31k3p:
    """Constants and reference arithmetic of L'Ecuyer & Touzin's MRG31k3p.

    Two multiple recursive components::

        x1[n] = (2**22 * x1[n-2] + (2**7 + 1) * x1[n-3]) mod m1,   m1 = 2**31 - 1
        x2[n] = (2**15 * x2[n-1] + (2**15 + 1) * x2[n-3]) mod m2,  m2 = 2**31 - 21069
        z[n] = (x1[n] - x2[n]) mod m1;  u[n] = z[n] / 2**31, or m1 / 2**31 if z[n] == 0

    A state is ``(x1[n-1], x1[n-2], x1[n-3], x2[n-1], x2[n-2], x2[n-3])``.
    """

    M1 = 2147483647  # 2**31 - 1
    M2 = 2147462579  # 2**31 - 21069
    MASK12 = 511  # 2**9 - 1
    MASK13 = 16777215  # 2**24 - 1
    MASK2 = 65535  # 2**16 - 1
    MULT2 = 21069
    NORM = 4.656612873077392578125e-10  # 1 / 2**31
    # One step as matrices acting on (x[n-1], x[n-2], x[n-3]).
    A1 = ((0, 4194304, 129), (1, 0, 0), (0, 1, 0))
    A2 = ((32768, 0, 32769), (1, 0, 0), (0, 1, 0))

    @staticmethod
    def mat_mul(a, b, m):
        return tuple(
            tuple(sum(a[i][k] * b[k][j] for k in range(3)) % m for j in range(3)) for i in range(3)
        )

    @classmethod
    def mat_pow2(cls, a, e: int, m: int):
        """``a ** (2 ** e) mod m`` by repeated squaring (exact Python integers)."""
        for _ in range(e):
            a = cls.mat_mul(a, a, m)
        return a

    @staticmethod
    def mat_vec(a, v, m) -> list[int]:
        return [sum(int(a[i][k]) * int(v[k]) for k in range(3)) % m for i in range(3)]


# Jump-ahead matrices: 2**72 steps (between substreams), 2**134 (between streams).
A1p72 = MRG31k3p.mat_pow2(MRG31k3p.A1, 72, MRG31k3p.M1)
A2p72 = MRG31k3p.mat_pow2(MRG31k3p.A2, 72, MRG31k3p.M2)
A1p134 = MRG31k3p.mat_pow2(MRG31k3p.A1, 134, MRG31k3p.M1)
A2p134 = MRG31k3p.mat_pow2(MRG31k3p.A2, 134, MRG31k3p.M2)


def _jump(rstate: Sequence[int], a1, a2) -> list[int]:
    return MRG31k3p.mat_vec(a1, rstate[:3], MRG31k3p.M1) + MRG31k3p.mat_vec(
        a2, rstate[3:], MRG31k3p.M2
    )


def _mrg_step(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One MRG31k3p step for every row of the int64 state array ``x`` (rows are
    substreams), with the shift/mask arithmetic of the GPU kernels (no 64-bit
    products needed). Returns the new states and the integers z in [1, m1]."""
    m1, m2 = MRG31k3p.M1, MRG31k3p.M2
    x11, x12, x13, x21, x22, x23 = (x[:, i] for i in range(6))
    # First component: 2**22 x12 + (2**7 + 1) x13 mod m1 (2**31 = 1 mod m1).
    y1 = ((x12 & MRG31k3p.MASK12) << 22) + (x12 >> 9) + ((x13 & MRG31k3p.MASK13) << 7) + (x13 >> 24)
    y1 = np.where(y1 >= m1, y1 - m1, y1)
    y1 = y1 + x13
    y1 = np.where(y1 >= m1, y1 - m1, y1)
    # Second component: 2**15 x21 + (2**15 + 1) x23 mod m2 (2**31 = 21069 mod m2).
    t1 = ((x21 & MRG31k3p.MASK2) << 15) + MRG31k3p.MULT2 * (x21 >> 16)
    t1 = np.where(t1 >= m2, t1 - m2, t1)
    t2 = ((x23 & MRG31k3p.MASK2) << 15) + MRG31k3p.MULT2 * (x23 >> 16)
    t2 = np.where(t2 >= m2, t2 - m2, t2)
    t2 = t2 + x23
    t2 = np.where(t2 >= m2, t2 - m2, t2)
    t2 = t2 + t1
    t2 = np.where(t2 >= m2, t2 - m2, t2)
    new = np.stack([y1, x11, x12, t2, x21, x22], axis=1)
    z = np.where(y1 <= t2, y1 - t2 + m1, y1 - t2)
    return new, z


MRG_STATE_WIDTH = 6  # the six words of one MRG31k3p substream


def check_mrg_state(rstate: Any, n: int, where: str) -> None:
    """The state check every MRG31k3p implementation makes (``where`` names the node):
    substreams of six words, at least one when anything is drawn."""
    if rstate.ndim != 2 or rstate.shape[1] != MRG_STATE_WIDTH:
        raise ValueError(
            f"{where}: rstate must have shape (n_streams, {MRG_STATE_WIDTH}), got {rstate.shape}"
        )
    if n and not rstate.shape[0]:
        raise ValueError(
            f"{where}: no substreams to draw {n} values from (rstate shape {rstate.shape})"
        )


def mrg31k3p_uniform(rstate: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` uniforms in (0, 1) (float64) from the substreams ``rstate`` (shape
    (n_streams, 6)): element i comes from substream ``i % n_streams``, and each
    substream advances once per element it produced. Returns (new_rstate, samples)."""
    state = np.array(rstate, dtype=np.int64, copy=True)
    check_mrg_state(state, n, "MRG31k3p")
    ns = state.shape[0]
    out = np.empty(n, dtype=np.float64)
    steps = -(-n // ns) if ns else 0
    for k in range(steps):
        count = min(ns, n - k * ns)
        new, z = _mrg_step(state[:count])
        state[:count] = new
        out[k * ns : k * ns + count] = z * MRG31k3p.NORM
    return state, out


def _guess_n_streams(sizes: list[Variable]) -> int:
    """Theano's heuristic: a sixth of the elements, at most 60 * 256 substreams."""
    static = [_static_int(s) for s in sizes]
    if all(s is not None for s in static):
        r = math.prod(static)  # type: ignore[arg-type]
        if r > 6:
            r //= 6
        return max(1, min(r, 60 * 256))
    return 60 * 256


class MRGSample(Op):
    """Uniform (or, with Box-Muller, standard normal) samples from MRG31k3p substreams.

    Inputs: ``(rstate, *size_entries)`` with ``rstate`` an int64 matrix of substream
    states (n_streams, 6). Outputs: ``(new_rstate, sample)``. Functional: the input
    state is copied, never modified.
    """

    __props__ = ("dist", "dtype", "ndim")
    constant_folding = False

    def __init__(self, dist: str, dtype: str, ndim: int):
        if dist not in ("uniform", "normal"):
            raise ValueError(f"MRGSample: dist must be 'uniform' or 'normal', got {dist!r}")
        self.dist = dist
        self.dtype = normalize_dtype(dtype)
        if np.dtype(self.dtype).kind != "f":
            raise TypeError(f"MRGSample: dtype must be a float dtype, got {self.dtype}")
        self.ndim = ndim

    def host_inputs(self, node: Apply) -> range:
        return range(1, len(node.inputs))  # the sample's size entries

    def make_node(self, rstate: Any, *sizes: Any) -> Apply:
        rstate = as_tensor_variable(rstate)
        if rstate.type.ndim != 2 or rstate.type.dtype != "int64":
            raise TypeError(f"MRGSample: rstate must be an int64 matrix, got {rstate.describe()}")
        sizes = [as_tensor_variable(s) for s in sizes]
        if len(sizes) != self.ndim:
            raise TypeError(f"{self} takes {self.ndim} size entries, got {len(sizes)}")
        static = tuple(_static_int(s) for s in sizes)
        sample = TensorType(self.dtype, static).make_variable()
        return Apply(self, [rstate, *sizes], [rstate.type.make_variable(), sample])

    def perform(self, node, inputs, output_storage):
        rstate, *sizes = inputs
        shape = tuple(int(s) for s in sizes)
        n = math.prod(shape)
        if self.dist == "uniform":
            new_state, u = mrg31k3p_uniform(rstate, n)
            sample = u
        else:
            # Box-Muller on an even number of uniforms: first half U1, second half U2.
            n_even = n + n % 2
            new_state, u = mrg31k3p_uniform(rstate, n_even)
            u1, u2 = u[: n_even // 2], u[n_even // 2 :]
            radius = np.sqrt(-2.0 * np.log(u1))
            sample = np.concatenate(
                [radius * np.cos(2 * np.pi * u2), radius * np.sin(2 * np.pi * u2)]
            )
            sample = sample[:n]
        sample = sample.reshape(shape).astype(self.dtype)
        if self.dist == "uniform" and self.dtype != "float64":
            # Rounding may reach 1.0 in a narrower dtype: keep the interval open.
            below_one = np.nextafter(np.array(1, self.dtype), np.array(0, self.dtype))
            sample = np.minimum(sample, below_one)
        output_storage[0][0] = new_state
        output_storage[1][0] = sample

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0], tuple(node.inputs[1:])]

    def L_op(self, inputs, outputs, output_grads):
        return [None] * len(inputs)


class MRG_RandomStreams:
    """Theano's ``MRG_RandomStreams``: MRG31k3p streams, each split into ``nstreams``
    substreams 2**72 steps apart (the GPU-friendly layout); successive streams start
    2**134 steps apart. ``seed`` is an int in [1, m2) or six ints (a state)."""

    def __init__(self, seed: int | Sequence[int] = 12345):
        self.state_updates: list[tuple[SharedVariable, Variable]] = []
        self.set_rstate(seed)
        self._seed0 = seed

    def set_rstate(self, seed: int | Sequence[int]) -> None:
        if isinstance(seed, (int, np.integer)):
            if seed <= 0 or seed >= MRG31k3p.M2:
                raise ValueError(
                    f"MRG_RandomStreams: seed must be in [1, {MRG31k3p.M2}), got {seed}"
                )
            self.rstate = [int(seed)] * 6
        else:
            state = [int(s) for s in seed]
            if len(state) != 6:
                raise ValueError("MRG_RandomStreams: a state seed needs six integers")
            if not (all(0 <= s < MRG31k3p.M1 for s in state[:3]) and any(state[:3])):
                raise ValueError("MRG_RandomStreams: the first three must be in [0, m1), not all 0")
            if not (all(0 <= s < MRG31k3p.M2 for s in state[3:]) and any(state[3:])):
                raise ValueError("MRG_RandomStreams: the last three must be in [0, m2), not all 0")
            self.rstate = state

    def inc_rstate(self) -> None:
        """Move the base state 2**134 steps ahead (to the next stream)."""
        self.rstate = _jump(self.rstate, A1p134, A2p134)

    def get_substream_rstates(self, n_streams: int) -> np.ndarray:
        """States of ``n_streams`` substreams (2**72 apart) of the next stream."""
        rval = np.zeros((n_streams, 6), dtype=np.int64)
        cur = list(self.rstate)
        for i in range(n_streams):
            if i:
                cur = _jump(cur, A1p72, A2p72)
            rval[i] = cur
        self.inc_rstate()
        return rval

    def updates(self) -> list[tuple[SharedVariable, Variable]]:
        return list(self.state_updates)

    def seed(self, seed: int | Sequence[int] | None = None) -> None:
        """Restart from ``seed``: every stream made so far gets its initial substreams."""
        self.set_rstate(self._seed0 if seed is None else seed)
        for state, _ in self.state_updates:
            n_streams = state.get_value(borrow=True).shape[0]
            state.set_value(self.get_substream_rstates(n_streams), borrow=True)

    def _sample(self, dist: str, size: Any, dtype: str, nstreams: int | None) -> Variable:
        from tensorjit.core.memory.shared import shared

        if size is None:
            raise ValueError("MRG_RandomStreams needs a size")
        sizes = _as_size(size)
        if nstreams is None:
            nstreams = _guess_n_streams(sizes)
            if any(_static_int(s) is None for s in sizes):
                warnings.warn(
                    "MRG_RandomStreams: symbolic size, using 60 * 256 substreams "
                    "(pass nstreams= to choose)",
                    stacklevel=3,
                )
        state = shared(self.get_substream_rstates(int(nstreams)), name="mrg_rstate", borrow=True)
        new_state, sample = MRGSample(dist, dtype, len(sizes))(state, *sizes)
        state.default_update = new_state
        self.state_updates.append((state, new_state))
        return sample

    def uniform(
        self,
        size: Any,
        low: Any = 0.0,
        high: Any = 1.0,
        dtype: Any = None,
        nstreams: int | None = None,
    ) -> Variable:
        """Uniform samples in (low, high): ``u * (high - low) + low``."""
        from tensorjit.tensor.math import cast

        dtype = _output_dtype(dtype, config.floatX)
        u = self._sample("uniform", size, dtype, nstreams)
        if _is_const(low, 0.0) and _is_const(high, 1.0):
            return u
        low, high = cast(as_tensor_variable(low), dtype), cast(as_tensor_variable(high), dtype)
        return cast(u * (high - low) + low, dtype)

    def normal(
        self,
        size: Any,
        avg: Any = 0.0,
        std: Any = 1.0,
        dtype: Any = None,
        nstreams: int | None = None,
    ) -> Variable:
        """Gaussian samples (Box-Muller on MRG31k3p uniforms) ``z * std + avg``."""
        from tensorjit.tensor.math import cast

        dtype = _output_dtype(dtype, config.floatX)
        z = self._sample("normal", size, dtype, nstreams)
        if _is_const(avg, 0.0) and _is_const(std, 1.0):
            return z
        avg, std = cast(as_tensor_variable(avg), dtype), cast(as_tensor_variable(std), dtype)
        return cast(z * std + avg, dtype)

    def binomial(
        self,
        size: Any,
        n: int = 1,
        p: Any = 0.5,
        dtype: Any = "int64",
        nstreams: int | None = None,
    ) -> Variable:
        """Binomial samples: the number of ``n`` uniforms below ``p`` (``n`` a Python int)."""
        from tensorjit.tensor.math import cast, lt
        from tensorjit.tensor.math import sum as tsum

        if not isinstance(n, (int, np.integer)) or n < 1:
            raise TypeError(f"MRG_RandomStreams.binomial: n must be an int >= 1, got {n!r}")
        dtype = _output_dtype(dtype, "int64")
        p = as_tensor_variable(p)
        u_dtype = p.type.dtype if p.type.dtype in ("float32", "float64") else "float64"
        if n == 1:
            return cast(lt(self.uniform(size, dtype=u_dtype, nstreams=nstreams), p), dtype)
        sizes = _as_size(size)
        u = self.uniform((*sizes, n), dtype=u_dtype, nstreams=nstreams)
        p_last = p.dimshuffle(*range(p.type.ndim), "x")
        return cast(tsum(cast(lt(u, p_last), "int64"), axis=-1), dtype)


def _is_const(value: Any, target: float) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == target
