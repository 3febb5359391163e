"""The compat ``theano`` API: custom Ops, flags, dtype rules, clear errors (each case in a
subprocess, so ``sys.modules`` stays clean)."""

from __future__ import annotations

from test_theano_programs import run_program

CUSTOM_OP = """
import numpy
import theano
import theano.tensor as T
from theano import gof


class DoubleOp(theano.Op):
    __props__ = ()

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return theano.Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage):
        x = inputs[0]
        z = output_storage[0]
        z[0] = x * 2

    def infer_shape(self, node, i0_shapes):
        return i0_shapes

    def grad(self, inputs, output_grads):
        return [output_grads[0] * 2]


class AddScaled(gof.Op):
    __props__ = ("scale",)

    def __init__(self, scale):
        self.scale = scale

    def make_node(self, x, y):
        x, y = T.as_tensor_variable(x), T.as_tensor_variable(y)
        return gof.Apply(self, [x, y], [x.type()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0] + self.scale * inputs[1]

    def grad(self, inputs, output_grads):
        return [output_grads[0], theano.gradient.DisconnectedType()()]

    def connection_pattern(self, node):
        return [[True], [False]]


class ScaleInplace(theano.Op):
    __props__ = ()
    destroy_map = {0: [0]}

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return theano.Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage):
        x = inputs[0]
        x *= 3
        output_storage[0][0] = x


class FirstRow(theano.Op):
    __props__ = ()
    view_map = {0: [0]}

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return theano.Apply(self, [x], [T.vector(dtype=x.dtype)])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0][0]


x = T.matrix()
f = theano.function([x], DoubleOp()(x))
inp = numpy.random.rand(5, 4)
assert numpy.allclose(f(inp), inp * 2)
assert DoubleOp() == DoubleOp() and hash(DoubleOp()) == hash(DoubleOp())
# infer_shape (Theano signature, no fgraph) gives the shape without running perform
fs = theano.function([x], DoubleOp()(x).shape)
assert tuple(fs(inp)) == (5, 4)
g = theano.function([x], theano.grad(DoubleOp()(x).sum(), x))
assert numpy.allclose(g(inp), 2 * numpy.ones_like(inp))
theano.gradient.verify_grad(DoubleOp(), [inp], rng=numpy.random.default_rng(0))

y = T.matrix()
out = AddScaled(0.5)(x, y)
assert AddScaled(0.5) == AddScaled(0.5) and AddScaled(0.5) != AddScaled(2.0)
gx = theano.grad(out.sum(), x)
assert numpy.allclose(theano.function([x, y], gx)(inp, inp), 1.0)
try:
    theano.grad(out.sum(), y)
except theano.gradient.DisconnectedInputError as exc:
    print("disconnected ok", exc)
else:
    raise AssertionError("expected DisconnectedInputError")

v = T.vector()
fi = theano.function([theano.In(v, mutable=True)], ScaleInplace()(v), accept_inplace=True)
arg = numpy.ones(3)
assert numpy.allclose(fi(arg), 3.0)
fi2 = theano.function([v], ScaleInplace()(v) + v, accept_inplace=True)
arg = numpy.ones(3)
assert numpy.allclose(fi2(arg), 4.0) and numpy.allclose(arg, 1.0)  # protected input copied

fr = theano.function([x], FirstRow()(x) * 2)
assert numpy.allclose(fr(inp), inp[0] * 2)


@theano.compile.ops.as_op(itypes=[T.dmatrix], otypes=[T.dvector])
def row_norms(m):
    return numpy.sqrt((m ** 2).sum(axis=1))


assert numpy.allclose(theano.function([x], row_norms(x))(inp), numpy.linalg.norm(inp, axis=1))
print("custom ops ok")
"""


def test_custom_theano_style_ops():
    out = run_program(CUSTOM_OP)
    assert "custom ops ok" in out
    assert "disconnected ok" in out


ERRORS = """
import theano
import theano.tensor as T


def expect(exc_type, text, fn):
    try:
        fn()
    except exc_type as exc:
        assert text in str(exc), str(exc)
        print("ok:", exc)
    else:
        raise AssertionError(f"no {exc_type.__name__} for {text}")


def imp(stmt):
    return lambda: exec(stmt, {})


expect(ImportError, "theano.sandbox.cuda is not supported by tensorjit yet",
       imp("import theano.sandbox.cuda"))
expect(ImportError, "theano.sandbox.cuda is not supported by tensorjit yet",
       imp("from theano.sandbox.cuda import dnn"))
expect(ImportError, "theano.tensor.nnet.neighbours is not supported by tensorjit yet",
       imp("from theano.tensor.nnet.neighbours import images2neibs"))
from theano.printing import pydotprint  # pictures through the [graphviz] extra
assert pydotprint.__module__ == "tensorjit.printing"
expect(AttributeError, "theano.tensor.foo is not supported by tensorjit yet", lambda: T.foo)
expect(AttributeError, "theano.tensor.nnet.bn is not supported", lambda: T.nnet.bn)
expect(AttributeError, "theano.config.nonexistent_flag is not supported",
       lambda: theano.config.nonexistent_flag)
expect(ValueError, "not supported by tensorjit yet",
       lambda: theano.function([], [], mode="NanGuardMode"))
expect(NotImplementedError, "filter_dilation",
       lambda: T.nnet.conv2d(T.tensor4(), T.tensor4(), filter_dilation=(2, 2)))
assert not hasattr(theano.tensor, "foo")
import tensorjit.compat
tensorjit.compat.install()  # idempotent
import sys
assert sum(type(f).__name__ == "TheanoFinder" for f in sys.meta_path) == 1

# A tensorjit module that does not exist (yet) behind a lazy Theano name.
from tensorjit.compat import _finder
_finder.LAZY["theano.tensor.fancy"] = ("tensorjit.not_written_yet", "fancy")
expect(AttributeError, "theano.tensor.fancy is not available yet", lambda: T.fancy)
expect(ImportError, "theano.tensor.fancy is not available yet",
       imp("from theano.tensor import fancy"))
print("errors ok")
"""


def test_clear_errors_for_unsupported_names():
    assert "errors ok" in run_program(ERRORS)


def test_install_refuses_an_already_imported_theano():
    out = run_program(
        """
        import sys, types
        import tensorjit.compat
        tensorjit.compat.uninstall()
        sys.modules["theano"] = types.ModuleType("theano")
        try:
            tensorjit.compat.install()
        except RuntimeError as exc:
            assert "already imported" in str(exc)
            print("refused")
        """
    )
    assert "refused" in out


FLAGS = """
import warnings
import numpy
import theano
import theano.tensor as T

assert theano.config.floatX == "float32"
assert theano.config.mode == "FAST_COMPILE"
assert theano.config.optimizer == "None"  # Theano-only flag: stored, no effect
assert theano.config.gcc.cxxflags == ""
theano.config.compute_test_value = "off"
import tensorjit
assert tensorjit.config.floatX == "float32"
x = T.matrix()
assert x.dtype == "float32"
assert (T.fvector() * 2.0).dtype == "float32"
assert (T.fvector() * 0.1).dtype == "float32"
# Theano's rules: the mean of integers and int / int are floatX
assert T.mean(T.ivector()).dtype == "float32"
assert T.mean(T.neq(T.ivector(), T.ivector())).dtype == "float32"
assert T.true_div(T.ivector(), T.ivector()).dtype == "float32"
assert T.mean(T.dvector()).dtype == "float64"
assert T.mean(T.ivector(), dtype="float64").dtype == "float64"
f = theano.function([x], T.mean(T.cast(x > 0.5, "int32")))
assert f(numpy.ones((2, 2), dtype="float32")) == 1.0
with theano.config.change_flags(floatX="float64"):
    assert T.matrix().dtype == "float64"
assert T.matrix().dtype == "float32"
print("flags ok")
"""


def test_theano_flags_float32_and_theano_dtype_rules():
    with_warning = run_program(
        "import warnings\n" + FLAGS,
        theano_flags="floatX=float32,mode=FAST_COMPILE,optimizer=None,warn_float64=raise",
    )
    assert "flags ok" in with_warning


def test_unknown_theano_flags_warn_once_listing_them():
    out = run_program(
        """
        import warnings
        import tensorjit.compat
        tensorjit.compat.uninstall()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tensorjit.compat.install()
        msgs = [str(w.message) for w in caught if "THEANO_FLAGS" in str(w.message)]
        assert len(msgs) == 1, msgs
        assert "optimizer" in msgs[0] and "lib.cnmem" in msgs[0], msgs
        assert "floatX" not in msgs[0]
        import theano
        assert theano.config.floatX == "float32" and theano.config.device == "cpu"
        print("warned once")
        """,
        theano_flags="floatX=float32,device=cpu,optimizer=fast_compile,lib.cnmem=0.5",
    )
    assert "warned once" in out


API = """
import numpy
import theano
import theano.tensor as T
from theano import In, Out, Mode, function, shared, config
from theano.compile.io import In as In2
from theano.compile.function import function as function2
from theano.ifelse import ifelse
from theano.gof import graph, FunctionGraph, DestroyHandler, Apply, Variable, Constant, Type
import theano.compile

assert In is In2 and function2 is theano.function
x, y = T.dscalars("x", "y")
f = theano.compile.function([x, In(y, value=1.0)], x + y)  # the module is callable
assert f(2.0) == 3.0 and f(2.0, 5.0) == 7.0
s = shared(numpy.arange(3.0), borrow=True)
v = s.get_value(borrow=True)
s.set_value(v * 2, borrow=True)
assert isinstance(s.get_value(), numpy.ndarray) and numpy.allclose(s.get_value(), [0, 2, 4])
g = function([In(x, borrow=True)], Out(x * 2, borrow=True), mode=Mode(linker="py"))
assert g(3.0) == 6.0
h = function([x], x * 3, mode="DEBUG_MODE")
assert h(2.0) == 6.0
assert isinstance(theano.compile.mode.get_default_mode(), Mode)
r = T.arange(5)
assert list(function([], r)()) == [0, 1, 2, 3, 4]
z = T.cast(x, "int32")
assert z.dtype == "int32"
c = ifelse(T.lt(x, y), x, y)
assert function([x, y], c)(1.0, 2.0) == 1.0
out = (x + y) * x
assert set(graph.inputs([out])) == {x, y}
assert x in graph.ancestors([out])
assert len(graph.io_toposort([x, y], [out])) == 2
ci, co = graph.clone([x, y], [out])
assert ci[0] is not x and co[0] is not out
fg = FunctionGraph([x, y], [out])
fg.attach_feature(DestroyHandler())
cl = theano.clone(out, replace={y: T.constant(2.0)})
assert function([x], cl)(3.0) == 15.0
gz = theano.grad(x * theano.gradient.zero_grad(y * y), [x, y])
assert function([x, y], gz, on_unused_input="ignore")(2.0, 3.0)[1] == 0.0
gd = theano.gradient.grad(x * theano.gradient.disconnected_grad(x), x)
assert function([x], gd)(3.0) == 3.0
vec = T.dvector()
assert function([vec], T.extra_ops.cumsum(vec))(numpy.ones(3))[-1] == 3.0
m = T.dmatrix()
inv = function([m], T.nlinalg.matrix_inverse(m))(numpy.eye(2) * 2)
assert numpy.allclose(inv, numpy.eye(2) / 2)
assert numpy.allclose(function([m], T.slinalg.cholesky(m))(numpy.eye(2) * 4), numpy.eye(2) * 2)
assert isinstance(T.dmatrix().type, T.TensorType)
assert T.TensorType("float64", (False, True))().type.shape == (None, 1)
assert T.shape_padleft(vec).ndim == 2 and T.shape_padright(vec, 2).ndim == 3
a3 = T.dtensor3()
assert T.dot(a3, m).ndim == 3
p = theano.printing.Print("x is")(x)
assert function([x], p * 1)(1.0) == 1.0
assert "x" in theano.printing.pprint(x + y)
assert theano.printing.debugprint(x + y, file="str")
from theano.sandbox.rng_mrg import MRG_RandomStreams
mrg = MRG_RandomStreams(seed=42)
u = mrg.uniform((4,), ndim=1)
bsamp = mrg.binomial(size=(1000,), p=0.25)
fu = function([], [u, bsamp])
uv, bv = fu()
assert uv.dtype == config.floatX and 0 < uv.min() and uv.max() < 1
assert 0.18 < bv.mean() < 0.32
img = T.dtensor4()
pooled = function([img], T.signal.pool.pool_2d(img, ws=(2, 2)))(numpy.ones((1, 1, 5, 5)))
assert pooled.shape == (1, 1, 3, 3)  # Theano 1.0's default ignore_border=False
pooled = function([img], T.signal.downsample.max_pool_2d(img, (2, 2), True))(
    numpy.ones((1, 1, 5, 5))
)
assert pooled.shape == (1, 1, 2, 2)
assert theano.scan is not None
print("api ok")
"""


def test_theano_api_surface():
    assert "api ok" in run_program(API)
