"""Theano 1.0's function and shared-variable contracts through the compat layer, on
the default (C) backend and in DebugMode (each program in a subprocess, so that
``sys.modules`` stays clean)."""

from __future__ import annotations

import pytest
from test_theano_programs import run_program

MODES = ["None", "'DebugMode'"]

FUNCTION_STATE = """
import copy
import numpy as np
import theano
import theano.tensor as T
from theano import In, function

mode = {mode}
a = T.scalar()
x, s = T.scalars('xs')  # one variable per character, as in Theano
assert (x.name, s.name) == ('x', 's')
one = T.dscalars('q')
assert not isinstance(one, list) and one.name == 'q'
assert len(T.dmatrices(3)) == 3

f = function([x, In(a, value=1.0, name='a'), In(s, value=0.0, update=s + a * x, mutable=True)],
             s + a * x, mode=mode)
g = function([x, In(a, value=1.0, name='a'), In(s, value=f.container[s], update=s - a * x,
             mutable=True)], s + a * x, mode=mode)
assert f[a] == 1.0 and f['a'] == 1.0 and f[s] == 0.0
f(1, 2)
assert f[s] == 2 and g[s] == 2  # g shares f's state
g(1, 2)
assert f[s] == 0 and g[s] == 0
f[a] = 5.0
assert f(1.0) == 5.0 and f.value[s] == 5.0

h = copy.copy(f)  # its own state, equal to f's now
assert h.container[s].storage is not f.container[s].storage
assert h[s] == f[s]
h(1.0)
assert h[s] != f[s]
shared_copy = f.copy(share_memory=True)
shared_copy(1.0)
assert f[s] == shared_copy[s]

w = theano.shared(np.float64(1.0), name='w')
step = function([x], w * x, updates={{w: w + 1}}, mode=mode)
frozen = step.copy(delete_updates=True)
frozen(2.0)
assert w.get_value() == 1.0
other = theano.shared(np.float64(10.0), name='other')
swapped = step.copy(swap={{w: other}})
assert swapped(2.0) == 20.0 and other.get_value() == 11.0 and w.get_value() == 1.0

ops = [type(node.op).__name__ for node in step.maker.fgraph.toposort()]
assert ops, ops
assert step.maker.inputs[0].variable is x and step.maker.mode is not None
step.trust_input = True
assert step(np.asarray(3.0)) == 3.0 * w.get_value() - 3.0

try:
    function([x], x * 2, givens={{x: x + 1}}, mode=mode)
except RuntimeError as exc:
    assert "explicit input" in str(exc)
else:
    raise AssertionError("givens replacing an explicit input must raise")
try:
    In(T.dscalar(), update=T.dvector())
except TypeError:
    pass
else:
    raise AssertionError("an update of another type must raise TypeError")
try:
    function([In(w, update=w + 1)], [])
except TypeError:
    pass
else:
    raise AssertionError("In(shared) must raise TypeError")
print("ok")
"""

SHARED = """
import numpy as np
import theano
import theano.tensor as T
from theano.compile.sharedvalue import generic, shared

assert shared(7).type == T.lscalar
assert shared(7.0).type == T.dscalar
assert shared(np.float32(7)).type == T.fscalar
assert shared([]).type == generic
holder = shared({{'a': 1}})
assert holder.get_value() == {{'a': 1}}

strict = shared(np.int64(7), strict=True)
try:
    strict.set_value(np.int32(8))
except TypeError:
    pass
else:
    raise AssertionError("strict=True must refuse another dtype")
lenient = shared(7, allow_downcast=True)
lenient.set_value(8.23)
assert lenient.get_value() == 8
plain = shared(7)
try:
    plain.set_value(8.23)
except TypeError:
    pass
else:
    raise AssertionError("a lossy set_value must raise without allow_downcast")
v = shared(np.zeros(3))
assert v.container.storage is v.container.storage and v.container.value.shape == (3,)
f = theano.function([], v + 1, mode={mode})
assert f.container[v].storage is v.container.storage
print("ok")
"""

PICKLE = """
import copy
import os
import pickle
import tempfile
import numpy as np
import theano
import theano.tensor as T
from theano import In

mode = {mode}
x = T.vector('x')
a = T.scalar('a')
w = theano.shared(np.ones(3), name='w')
f = theano.function([x, In(a, value=2.0)], T.exp(x) * a + w, updates={{w: w + 1}}, mode=mode)
f.trust_input = False
g, w2 = pickle.loads(pickle.dumps((f, w)))  # pickled together: g updates w2
np.testing.assert_allclose(g(np.zeros(3)), [3.0, 3.0, 3.0])
assert np.all(w2.get_value() == 2.0) and np.all(w.get_value() == 1.0)
h = copy.deepcopy(f)
np.testing.assert_allclose(h(np.zeros(3), 1.0), [2.0, 2.0, 2.0])
assert np.all(w.get_value() == 1.0)  # the deep copy has its own w

d = theano.function([x], {{'sq': x ** 2, 'neg': -x}}, mode=mode)
out = d(np.array([1.0, 2.0]))
assert sorted(out) == ['neg', 'sq'] and np.all(out['sq'] == [1.0, 4.0])
out = pickle.loads(pickle.dumps(d))(np.array([3.0]))
assert out['neg'][0] == -3.0

assert [req for req, _, _ in f.defaults] == [True, False]
path = os.path.join(tempfile.mkdtemp(), 'f.pkl')
theano.function_dump(path, [x], x + 1)
with open(path, 'rb') as fh:
    again = theano.function(**pickle.load(fh))
assert again(np.array([1.0]))[0] == 2.0

c1 = theano.shared(np.float64(0.0), name='c1')
c2 = theano.shared(np.float64(0.0), name='c2')
c1.default_update = c1 + 1
c2.default_update = c2 + 1
step = theano.function([], c1 + c2, no_default_updates=[c1], mode=mode)
step()
step()
assert c1.get_value() == 0.0 and c2.get_value() == 2.0
print("ok")
"""


@pytest.mark.parametrize("mode", MODES)
def test_functions_pickle_and_return_dicts_as_in_theano(mode):
    assert run_program(PICKLE.format(mode=mode)).strip().endswith("ok")


@pytest.mark.parametrize("mode", MODES)
def test_function_state_copy_maker_and_errors_as_in_theano(mode):
    assert run_program(FUNCTION_STATE.format(mode=mode)).strip().endswith("ok")


@pytest.mark.parametrize("mode", MODES)
def test_shared_variables_as_in_theano(mode):
    assert run_program(SHARED.format(mode=mode)).strip().endswith("ok")


def test_tensorjit_plurals_keep_their_own_rule():
    import tensorjit.tensor as T

    xy = T.scalars("xy")
    assert len(xy) == 1 and xy[0].name == "xy"


GOF = """
import numpy as np
import theano
import theano.tensor as T
from theano import gof
from theano.gof.opt import EquilibriumOptimizer, PatternSub, TopoOptimizer, local_optimizer
from theano.gof.toolbox import ReplaceValidate
from theano.tensor.opt import register_canonicalize


class Twice(theano.Op):
    __props__ = ()

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return theano.Apply(self, [x], [x.type()])

    def perform(self, node, inputs, out):
        out[0][0] = inputs[0] * 2


twice = Twice()


@register_canonicalize
@local_optimizer([Twice])
def twice_to_add(node):
    if isinstance(node.op, Twice):
        return [node.inputs[0] + node.inputs[0]]
    return False


x = T.dvector('x')
f = theano.function([x], twice(x), mode={mode})
assert not any(isinstance(n.op, Twice) for n in f.maker.fgraph.toposort())
assert np.all(f(np.arange(3.0)) == [0.0, 2.0, 4.0])

# A Theano-era optimizer on a bare graph, validated by tensorjit's DestroyHandler.
class Plain(theano.Op):  # no __props__: compares by identity, as in Theano
    def __init__(self, name, dmap=None):
        self.name = name
        self.destroy_map = dmap or {{}}

    def make_node(self, *inputs):
        return theano.Apply(self, list(inputs), [inputs[0].type()])

    def __str__(self):
        return self.name


op1, op2 = Plain('Op1'), Plain('Op2')
add_in_place = Plain('AddInPlace', {{0: [0]}})
assert op1 != op2
a, b = T.dscalars('a', 'b')
g = gof.FunctionGraph([a, b], [op1(op1(a, b), b)])
TopoOptimizer(PatternSub((op1, (op1, '1', '2'), '2'), (op2, '1', '2'))).optimize(g)
assert str(g) == '[Op2(a, b)]', str(g)

# EquilibriumOptimizer's budget, as Theano counts it: a local optimizer applied more
# than max_use_ratio x (largest node count) times stops the pass after that application.
op3, op4 = Plain('Op3'), Plain('Op4')
cycle = [PatternSub((op1, 'x', 'y'), (op2, 'x', 'y')),
         PatternSub((op4, 'x', 'y'), (op1, 'x', 'y')),
         PatternSub((op3, (op2, 'x', 'y')), (op4, 'x', 'y'))]
g = gof.FunctionGraph([a, b], [op3(op4(a, b))])
EquilibriumOptimizer(cycle, max_use_ratio=0.5).optimize(g)
assert str(g) == '[Op1(a, b)]', str(g)
g = gof.FunctionGraph([a, b], [op3(op4(a, b))])
EquilibriumOptimizer(cycle, max_use_ratio=10).optimize(g)
assert str(g) == '[Op2(a, b)]', str(g)

a.tag.indestructible = True
h = gof.FunctionGraph([a, b], [add_in_place(a, b)], clone=False)
h.attach_feature(gof.DestroyHandler())
h.attach_feature(ReplaceValidate())
assert not h.consistent()
h.replace_validate(h.outputs[0], op1(a, b))
assert h.consistent()
print("ok")
"""

SURFACE = """
import numpy as np
import theano
import theano.tensor as T
import theano.scalar as ts
from theano import In
from theano.compile.ops import deep_copy_op, shape_i, view_op
from theano.tensor import inplace
from theano.tensor.basic import NotScalarConstantError, get_scalar_constant_value

W = T.dmatrix('W')
assert bool(W) and (W or 3) is W  # Theano's truth rule under compat
try:
    bool(W > 0)
except TypeError:
    pass
else:
    raise AssertionError("a comparison has no truth value")

x = T.dvector('x')
f = theano.function([x], [view_op(x) * 2, deep_copy_op(x), shape_i(x, 0)], mode={mode})
doubled, copied, length = f(np.arange(3.0))
assert np.all(doubled == [0.0, 2.0, 4.0]) and np.all(copied == [0.0, 1.0, 2.0]) and length == 3
assert get_scalar_constant_value(T.constant(3.0) * 2 + 1) == 7.0
try:
    get_scalar_constant_value(x.sum())
except NotScalarConstantError:
    pass
else:
    raise AssertionError("a sum of an input is not constant")
assert ts.upcast('int32', 'float32') == 'float64' and ts.float32 == T.fscalar

m = T.dmatrix('m')
try:
    theano.function([m], x * 2, givens={{x: m}}, mode={mode})
except TypeError:
    pass
else:
    raise AssertionError("a replacement of another type needs rebuild_strict=False")
loose = theano.function([m], x * 2, givens={{x: m}}, rebuild_strict=False, mode={mode})
assert loose(np.ones((2, 2))).shape == (2, 2)
assert loose.copy()(np.ones((2, 2))).shape == (2, 2)  # copies keep rebuild_strict

for dtype in ('float64', 'float32', 'int64', 'int32', 'int8', 'uint8'):
    for name in ('add_inplace', 'mul_inplace', 'maximum_inplace', 'xor_inplace'):
        if name == 'xor_inplace' and dtype.startswith('float'):
            continue
        a = T.vector('a', dtype=dtype)
        b = T.vector('b', dtype=dtype)
        g = theano.function([In(a, mutable=True), b], getattr(inplace, name)(a, b),
                            accept_inplace=True, mode={mode})
        av = np.array([1, 2, 3], dtype=dtype)
        out = g(av, np.array([3, 1, 2], dtype=dtype))
        assert np.array_equal(av, out), (name, dtype, av, out)  # written into a
print("ok")
"""


@pytest.mark.parametrize("mode", MODES)
def test_gof_optimizers_and_custom_rewrites_as_in_theano(mode):
    assert run_program(GOF.format(mode=mode)).strip().endswith("ok")


@pytest.mark.parametrize("mode", MODES)
def test_truth_rule_inplace_ops_and_helpers_as_in_theano(mode):
    assert run_program(SURFACE.format(mode=mode)).strip().endswith("ok")
