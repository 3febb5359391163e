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
