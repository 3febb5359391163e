"""Classic Theano tutorial programs, run unchanged after ``tensorjit.compat.install()``.

Each program runs in a subprocess so that ``sys.modules`` (``theano``) and tensorjit's
config stay clean for the other tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

PRELUDE = "import tensorjit.compat\ntensorjit.compat.install()\n"


def run_program(body: str, theano_flags: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("THEANO_FLAGS", "TENSORJIT_FLAGS")}
    if theano_flags is not None:
        env["THEANO_FLAGS"] = theano_flags
    proc = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(body)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, f"program failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def costs_of(out: str) -> list[float]:
    return [float(line.split()[1]) for line in out.splitlines() if line.startswith("cost ")]


LOGREG = """
import numpy
import theano
import theano.tensor as T

rng = numpy.random.RandomState(1234)
n_in, n_out, n = 20, 3, 240
true_w = rng.randn(n_in, n_out)
data_x = rng.randn(n, n_in)
data_y = numpy.argmax(data_x.dot(true_w), axis=1)


def shared_dataset(data_x, data_y, borrow=True):
    shared_x = theano.shared(numpy.asarray(data_x, dtype=theano.config.floatX), borrow=borrow)
    shared_y = theano.shared(numpy.asarray(data_y, dtype=theano.config.floatX), borrow=borrow)
    return shared_x, T.cast(shared_y, "int32")


class LogisticRegression(object):
    def __init__(self, input, n_in, n_out):
        self.W = theano.shared(
            value=numpy.zeros((n_in, n_out), dtype=theano.config.floatX), name="W", borrow=True
        )
        self.b = theano.shared(
            value=numpy.zeros((n_out,), dtype=theano.config.floatX), name="b", borrow=True
        )
        self.p_y_given_x = T.nnet.softmax(T.dot(input, self.W) + self.b)
        self.y_pred = T.argmax(self.p_y_given_x, axis=1)
        self.params = [self.W, self.b]
        self.input = input

    def negative_log_likelihood(self, y):
        return -T.mean(T.log(self.p_y_given_x)[T.arange(y.shape[0]), y])

    def errors(self, y):
        return T.mean(T.neq(self.y_pred, y))


train_set_x, train_set_y = shared_dataset(data_x, data_y)
batch_size = 20
n_train_batches = train_set_x.get_value(borrow=True).shape[0] // batch_size

index = T.lscalar()
x = T.matrix("x")
y = T.ivector("y")
classifier = LogisticRegression(input=x, n_in=n_in, n_out=n_out)
cost = classifier.negative_log_likelihood(y)
g_W = T.grad(cost=cost, wrt=classifier.W)
g_b = T.grad(cost=cost, wrt=classifier.b)
learning_rate = 0.13
updates = [
    (classifier.W, classifier.W - learning_rate * g_W),
    (classifier.b, classifier.b - learning_rate * g_b),
]
train_model = theano.function(
    inputs=[index],
    outputs=cost,
    updates=updates,
    givens={
        x: train_set_x[index * batch_size : (index + 1) * batch_size],
        y: train_set_y[index * batch_size : (index + 1) * batch_size],
    },
)
test_model = theano.function(
    inputs=[index],
    outputs=classifier.errors(y),
    givens={
        x: train_set_x[index * batch_size : (index + 1) * batch_size],
        y: train_set_y[index * batch_size : (index + 1) * batch_size],
    },
)
for epoch in range(4):
    c = [train_model(i) for i in range(n_train_batches)]
    print("cost", numpy.mean(c))
err = numpy.mean([test_model(i) for i in range(n_train_batches)])
print("errors", err)
assert isinstance(classifier.W.get_value(), numpy.ndarray)
assert classifier.W.get_value().dtype == theano.config.floatX
assert classifier.errors(y).dtype == theano.config.floatX, classifier.errors(y).dtype
print("W dtype", classifier.W.get_value().dtype)
"""


def _check_decreasing(out: str) -> list[float]:
    costs = costs_of(out)
    assert len(costs) >= 2, out
    assert costs[-1] < costs[0], costs
    return costs


def test_logistic_regression_minibatches_through_givens():
    out = run_program(LOGREG)
    _check_decreasing(out)
    err = float(next(line.split()[1] for line in out.splitlines() if line.startswith("errors")))
    assert err < 0.3
    assert "W dtype float64" in out


def test_logistic_regression_with_theano_flags_float32():
    out = run_program(
        LOGREG + "\nassert theano.config.floatX == 'float32'\nprint('floatX ok')\n",
        theano_flags="floatX=float32,device=cpu,optimizer=fast_run,exception_verbosity=high",
    )
    _check_decreasing(out)
    assert "W dtype float32" in out
    assert "floatX ok" in out


MLP = """
import numpy
import theano
import theano.tensor as T

rng = numpy.random.RandomState(1234)
n, n_in, n_hidden, n_out = 200, 10, 16, 2
data_x = rng.randn(n, n_in).astype(theano.config.floatX)
data_y = (data_x[:, 0] * data_x[:, 1] > 0).astype("int32")


class HiddenLayer(object):
    def __init__(self, rng, input, n_in, n_out, activation=T.tanh):
        W_values = numpy.asarray(
            rng.uniform(
                low=-numpy.sqrt(6.0 / (n_in + n_out)),
                high=numpy.sqrt(6.0 / (n_in + n_out)),
                size=(n_in, n_out),
            ),
            dtype=theano.config.floatX,
        )
        self.W = theano.shared(value=W_values, name="W", borrow=True)
        self.b = theano.shared(numpy.zeros((n_out,), dtype=theano.config.floatX), name="b")
        lin_output = T.dot(input, self.W) + self.b
        self.output = lin_output if activation is None else activation(lin_output)
        self.params = [self.W, self.b]


x = T.matrix("x")
y = T.ivector("y")
hidden = HiddenLayer(rng, x, n_in, n_hidden)
W = theano.shared(numpy.zeros((n_hidden, n_out), dtype=theano.config.floatX), name="W")
b = theano.shared(numpy.zeros((n_out,), dtype=theano.config.floatX), name="b")
p_y = T.nnet.softmax(T.dot(hidden.output, W) + b)
params = hidden.params + [W, b]
L2_sqr = (hidden.W ** 2).sum() + (W ** 2).sum()
cost = T.mean(T.nnet.categorical_crossentropy(p_y, y)) + 0.0001 * L2_sqr
gparams = [T.grad(cost, param) for param in params]
updates = [(param, param - 0.5 * gparam) for param, gparam in zip(params, gparams)]
shared_x = theano.shared(data_x, borrow=True)
shared_y = theano.shared(data_y, borrow=True)
index = T.lscalar("index")
bs = 20
train = theano.function(
    [index],
    cost,
    updates=updates,
    givens={x: shared_x[index * bs : (index + 1) * bs], y: shared_y[index * bs : (index + 1) * bs]},
)
for epoch in range(40):
    print("cost", numpy.mean([train(i) for i in range(n // bs)]))
"""


def test_mlp():
    costs = _check_decreasing(run_program(MLP))
    assert costs[-1] < 0.8 * costs[0]


LENET = """
import numpy
import theano
import theano.tensor as T
from theano.tensor.nnet import conv2d
from theano.tensor.signal import pool
from theano.tensor.signal import downsample
from theano.tensor.nnet import conv as old_conv

rng = numpy.random.RandomState(23455)


class LeNetConvPoolLayer(object):
    def __init__(self, rng, input, filter_shape, image_shape, poolsize=(2, 2), old=False):
        fan_in = numpy.prod(filter_shape[1:])
        fan_out = filter_shape[0] * numpy.prod(filter_shape[2:]) // numpy.prod(poolsize)
        W_bound = numpy.sqrt(6.0 / (fan_in + fan_out))
        self.W = theano.shared(
            numpy.asarray(
                rng.uniform(low=-W_bound, high=W_bound, size=filter_shape),
                dtype=theano.config.floatX,
            ),
            borrow=True,
        )
        b_values = numpy.zeros((filter_shape[0],), dtype=theano.config.floatX)
        self.b = theano.shared(value=b_values, borrow=True)
        if old:
            conv_out = old_conv.conv2d(
                input=input, filters=self.W, filter_shape=filter_shape, image_shape=image_shape
            )
            pooled_out = downsample.max_pool_2d(input=conv_out, ds=poolsize, ignore_border=True)
        else:
            conv_out = conv2d(
                input=input, filters=self.W, filter_shape=filter_shape, input_shape=image_shape
            )
            pooled_out = pool.pool_2d(input=conv_out, ws=poolsize, ignore_border=True)
        self.output = T.tanh(pooled_out + self.b.dimshuffle("x", 0, "x", "x"))
        self.params = [self.W, self.b]


batch_size = 10
n = 40
data_x = rng.rand(n, 1 * 12 * 12).astype(theano.config.floatX)
data_y = (data_x[:, :72].sum(axis=1) > data_x[:, 72:].sum(axis=1)).astype("int32")
x = T.matrix("x")
y = T.ivector("y")
layer0_input = x.reshape((batch_size, 1, 12, 12))
layer0 = LeNetConvPoolLayer(rng, layer0_input, (4, 1, 3, 3), (batch_size, 1, 12, 12))
layer1 = LeNetConvPoolLayer(rng, layer0.output, (6, 4, 2, 2), (batch_size, 4, 5, 5), old=True)
layer2_input = layer1.output.flatten(2)
W = theano.shared(numpy.zeros((6 * 2 * 2, 2), dtype=theano.config.floatX))
b = theano.shared(numpy.zeros((2,), dtype=theano.config.floatX))
p_y = T.nnet.softmax(T.dot(layer2_input, W) + b)
cost = -T.mean(T.log(p_y)[T.arange(y.shape[0]), y])
params = [W, b] + layer1.params + layer0.params
grads = T.grad(cost, params)
updates = [(p, p - 0.1 * g) for p, g in zip(params, grads)]
sx = theano.shared(data_x, borrow=True)
sy = theano.shared(data_y, borrow=True)
index = T.lscalar()
train = theano.function(
    [index],
    cost,
    updates=updates,
    givens={
        x: sx[index * batch_size : (index + 1) * batch_size],
        y: sy[index * batch_size : (index + 1) * batch_size],
    },
)
for epoch in range(8):
    print("cost", numpy.mean([train(i) for i in range(n // batch_size)]))
"""


def test_lenet_convnet_with_conv2d_and_pooling():
    _check_decreasing(run_program(LENET))


DA = """
import numpy
import theano
import theano.tensor as T
from theano.tensor.shared_randomstreams import RandomStreams


class dA(object):
    def __init__(self, numpy_rng, theano_rng=None, input=None, n_visible=16, n_hidden=8):
        self.n_visible = n_visible
        self.n_hidden = n_hidden
        if not theano_rng:
            theano_rng = RandomStreams(numpy_rng.randint(2 ** 30))
        initial_W = numpy.asarray(
            numpy_rng.uniform(
                low=-4 * numpy.sqrt(6.0 / (n_hidden + n_visible)),
                high=4 * numpy.sqrt(6.0 / (n_hidden + n_visible)),
                size=(n_visible, n_hidden),
            ),
            dtype=theano.config.floatX,
        )
        self.W = theano.shared(value=initial_W, name="W", borrow=True)
        self.b = theano.shared(numpy.zeros(n_hidden, dtype=theano.config.floatX), borrow=True)
        self.b_prime = theano.shared(
            numpy.zeros(n_visible, dtype=theano.config.floatX), borrow=True
        )
        self.W_prime = self.W.T
        self.theano_rng = theano_rng
        self.x = T.dmatrix(name="input") if input is None else input
        self.params = [self.W, self.b, self.b_prime]

    def get_corrupted_input(self, input, corruption_level):
        return (
            self.theano_rng.binomial(
                size=input.shape, n=1, p=1 - corruption_level, dtype=theano.config.floatX
            )
            * input
        )

    def get_hidden_values(self, input):
        return T.nnet.sigmoid(T.dot(input, self.W) + self.b)

    def get_reconstructed_input(self, hidden):
        return T.nnet.sigmoid(T.dot(hidden, self.W_prime) + self.b_prime)

    def get_cost_updates(self, corruption_level, learning_rate):
        tilde_x = self.get_corrupted_input(self.x, corruption_level)
        y = self.get_hidden_values(tilde_x)
        z = self.get_reconstructed_input(y)
        L = -T.sum(self.x * T.log(z) + (1 - self.x) * T.log(1 - z), axis=1)
        cost = T.mean(L)
        gparams = T.grad(cost, self.params)
        updates = [
            (param, param - learning_rate * gparam)
            for param, gparam in zip(self.params, gparams)
        ]
        return (cost, updates)


rng = numpy.random.RandomState(123)
theano_rng = RandomStreams(rng.randint(2 ** 30))
protos = (rng.rand(4, 16) > 0.5).astype(theano.config.floatX)
data = protos[rng.randint(0, 4, size=200)]
train_set_x = theano.shared(data, borrow=True)
index = T.lscalar()
x = T.matrix("x")
da = dA(numpy_rng=rng, theano_rng=theano_rng, input=x, n_visible=16, n_hidden=8)
cost, updates = da.get_cost_updates(corruption_level=0.3, learning_rate=0.1)
batch_size = 20
train_da = theano.function(
    [index],
    cost,
    updates=updates,
    givens={x: train_set_x[index * batch_size : (index + 1) * batch_size]},
)
for epoch in range(15):
    print("cost", numpy.mean([train_da(i) for i in range(200 // batch_size)]))
corrupt = theano.function([x], da.get_corrupted_input(x, 0.5))
a = corrupt(numpy.ones((50, 16), dtype=theano.config.floatX))
b = corrupt(numpy.ones((50, 16), dtype=theano.config.floatX))
assert set(numpy.unique(a)) <= {0.0, 1.0} and 0.3 < a.mean() < 0.7, a.mean()
assert not numpy.array_equal(a, b)  # the stream advances between calls
print("corruption ok")
"""


def test_denoising_autoencoder_with_randomstreams_binomial():
    out = run_program(DA)
    _check_decreasing(out)
    assert "corruption ok" in out


RBM = """
import numpy
import theano
import theano.tensor as T
from theano.sandbox.rng_mrg import MRG_RandomStreams as RandomStreams


class RBM(object):
    def __init__(self, input, n_visible, n_hidden, numpy_rng, theano_rng):
        initial_W = numpy.asarray(
            numpy_rng.uniform(
                low=-4 * numpy.sqrt(6.0 / (n_hidden + n_visible)),
                high=4 * numpy.sqrt(6.0 / (n_hidden + n_visible)),
                size=(n_visible, n_hidden),
            ),
            dtype=theano.config.floatX,
        )
        self.W = theano.shared(value=initial_W, name="W", borrow=True)
        self.hbias = theano.shared(numpy.zeros(n_hidden, dtype=theano.config.floatX), "hbias")
        self.vbias = theano.shared(numpy.zeros(n_visible, dtype=theano.config.floatX), "vbias")
        self.input = input
        self.theano_rng = theano_rng
        self.params = [self.W, self.hbias, self.vbias]

    def free_energy(self, v_sample):
        wx_b = T.dot(v_sample, self.W) + self.hbias
        vbias_term = T.dot(v_sample, self.vbias)
        hidden_term = T.sum(T.log(1 + T.exp(wx_b)), axis=1)
        return -hidden_term - vbias_term

    def propup(self, vis):
        pre = T.dot(vis, self.W) + self.hbias
        return [pre, T.nnet.sigmoid(pre)]

    def sample_h_given_v(self, v0_sample):
        pre_h1, h1_mean = self.propup(v0_sample)
        h1_sample = self.theano_rng.binomial(
            size=h1_mean.shape, n=1, p=h1_mean, dtype=theano.config.floatX
        )
        return [pre_h1, h1_mean, h1_sample]

    def propdown(self, hid):
        pre = T.dot(hid, self.W.T) + self.vbias
        return [pre, T.nnet.sigmoid(pre)]

    def sample_v_given_h(self, h0_sample):
        pre_v1, v1_mean = self.propdown(h0_sample)
        v1_sample = self.theano_rng.binomial(
            size=v1_mean.shape, n=1, p=v1_mean, dtype=theano.config.floatX
        )
        return [pre_v1, v1_mean, v1_sample]

    def gibbs_hvh(self, h0_sample):
        pre_v1, v1_mean, v1_sample = self.sample_v_given_h(h0_sample)
        pre_h1, h1_mean, h1_sample = self.sample_h_given_v(v1_sample)
        return [pre_v1, v1_mean, v1_sample, pre_h1, h1_mean, h1_sample]

    def get_cost_updates(self, lr=0.1, k=1):
        pre_sigmoid_ph, ph_mean, ph_sample = self.sample_h_given_v(self.input)
        chain_start = ph_sample
        (
            [pre_sigmoid_nvs, nv_means, nv_samples, pre_sigmoid_nhs, nh_means, nh_samples],
            updates,
        ) = theano.scan(
            self.gibbs_hvh,
            outputs_info=[None, None, None, None, None, chain_start],
            n_steps=k,
            name="gibbs_hvh",
        )
        chain_end = nv_samples[-1]
        cost = T.mean(self.free_energy(self.input)) - T.mean(self.free_energy(chain_end))
        gparams = T.grad(cost, self.params, consider_constant=[chain_end])
        for gparam, param in zip(gparams, self.params):
            updates[param] = param - gparam * T.cast(lr, dtype=theano.config.floatX)
        monitoring_cost = self.get_reconstruction_cost(pre_sigmoid_nvs[-1])
        return monitoring_cost, updates

    def get_reconstruction_cost(self, pre_sigmoid_nv):
        return T.mean(
            T.sum(
                self.input * T.log(T.nnet.sigmoid(pre_sigmoid_nv))
                + (1 - self.input) * T.log(1 - T.nnet.sigmoid(pre_sigmoid_nv)),
                axis=1,
            )
        ) * -1


rng = numpy.random.RandomState(123)
theano_rng = RandomStreams(rng.randint(2 ** 30))
protos = (rng.rand(3, 12) > 0.5).astype(theano.config.floatX)
data = protos[rng.randint(0, 3, size=120)]
train_set_x = theano.shared(data, borrow=True)
index = T.lscalar()
x = T.matrix("x")
rbm = RBM(input=x, n_visible=12, n_hidden=6, numpy_rng=rng, theano_rng=theano_rng)
cost, updates = rbm.get_cost_updates(lr=0.1, k=2)
batch_size = 10
train_rbm = theano.function(
    [index],
    cost,
    updates=updates,
    givens={x: train_set_x[index * batch_size : (index + 1) * batch_size]},
    name="train_rbm",
)
for epoch in range(12):
    print("cost", numpy.mean([train_rbm(i) for i in range(120 // batch_size)]))
"""


def test_rbm_with_scan_gibbs_sampling():
    costs = _check_decreasing(run_program(RBM))
    assert costs[-1] < 0.9 * costs[0]


LSTM = """
import numpy
import theano
import theano.tensor as T
from collections import OrderedDict

rng = numpy.random.RandomState(0)
dim, n_words, n_cls = 6, 12, 2
floatX = theano.config.floatX


def ortho(n):
    u, _, _ = numpy.linalg.svd(rng.randn(n, n))
    return u.astype(floatX)


def _slice(_x, n, dim):
    if _x.ndim == 3:
        return _x[:, :, n * dim : (n + 1) * dim]
    return _x[:, n * dim : (n + 1) * dim]


params = OrderedDict()
params["Wemb"] = (0.1 * rng.randn(n_words, dim)).astype(floatX)
params["lstm_W"] = numpy.concatenate([ortho(dim) for _ in range(4)], axis=1)
params["lstm_U"] = numpy.concatenate([ortho(dim) for _ in range(4)], axis=1)
params["lstm_b"] = numpy.zeros((4 * dim,), dtype=floatX)
params["U"] = (0.01 * rng.randn(dim, n_cls)).astype(floatX)
params["b"] = numpy.zeros((n_cls,), dtype=floatX)
tparams = OrderedDict((k, theano.shared(v, name=k)) for k, v in params.items())


def lstm_layer(tparams, state_below, mask):
    nsteps = state_below.shape[0]
    n_samples = state_below.shape[1]

    def _step(m_, x_, h_, c_):
        preact = T.dot(h_, tparams["lstm_U"])
        preact += x_
        i = T.nnet.sigmoid(_slice(preact, 0, dim))
        f = T.nnet.sigmoid(_slice(preact, 1, dim))
        o = T.nnet.sigmoid(_slice(preact, 2, dim))
        c = T.tanh(_slice(preact, 3, dim))
        c = f * c_ + i * c
        c = m_[:, None] * c + (1.0 - m_)[:, None] * c_
        h = o * T.tanh(c)
        h = m_[:, None] * h + (1.0 - m_)[:, None] * h_
        return h, c

    state_below = T.dot(state_below, tparams["lstm_W"]) + tparams["lstm_b"]
    rval, updates = theano.scan(
        _step,
        sequences=[mask, state_below],
        outputs_info=[
            T.alloc(numpy.asarray(0.0, dtype=floatX), n_samples, dim),
            T.alloc(numpy.asarray(0.0, dtype=floatX), n_samples, dim),
        ],
        name="lstm_layers",
        n_steps=nsteps,
    )
    return rval[0]


x = T.matrix("x", dtype="int64")
mask = T.matrix("mask", dtype=floatX)
y = T.vector("y", dtype="int64")
n_timesteps = x.shape[0]
n_samples = x.shape[1]
emb = tparams["Wemb"][x.flatten()].reshape([n_timesteps, n_samples, dim])
proj = lstm_layer(tparams, emb, mask)
proj = (proj * mask[:, :, None]).sum(axis=0)
proj = proj / mask.sum(axis=0)[:, None]
pred = T.nnet.softmax(T.dot(proj, tparams["U"]) + tparams["b"])
off = 1e-8
cost = -T.log(pred[T.arange(n_samples), y] + off).mean()
grads = T.grad(cost, wrt=list(tparams.values()))
lr = T.scalar(name="lr")
train = theano.function(
    [x, mask, y, lr],
    cost,
    updates=[(p, p - lr * g) for p, g in zip(tparams.values(), grads)],
)


def prepare_data(seqs, labels):
    lengths = [len(s) for s in seqs]
    maxlen = numpy.max(lengths)
    xx = numpy.zeros((maxlen, len(seqs))).astype("int64")
    mm = numpy.zeros((maxlen, len(seqs))).astype(floatX)
    for idx, s in enumerate(seqs):
        xx[: lengths[idx], idx] = s
        mm[: lengths[idx], idx] = 1.0
    return xx, mm, numpy.asarray(labels, dtype="int64")


seqs, labels = [], []
for i in range(32):
    label = rng.randint(2)
    length = rng.randint(2, 4 + i // 8)
    words = rng.randint(0, 6, size=length) + 6 * label
    seqs.append(list(words))
    labels.append(label)
batches = [prepare_data(seqs[i : i + 8], labels[i : i + 8]) for i in range(0, 32, 8)]
assert len({b[0].shape[0] for b in batches}) > 1  # variable lengths across batches
assert all(b[1].min() == 0 for b in batches)  # and within each batch (masked)
for epoch in range(12):
    print("cost", numpy.mean([train(xx, mm, yy, 0.5) for xx, mm, yy in batches]))
"""


def test_lstm_with_masks_over_variable_length_sequences():
    costs = _check_decreasing(run_program(LSTM))
    assert costs[-1] < 0.9 * costs[0]
