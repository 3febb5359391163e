"""Random streams: RandomStreams (NumPy generators) and MRG_RandomStreams (MRG31k3p)."""

import copy
import pickle
import warnings

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.graph.traversal import graph_inputs
from tensorjit.tensor.random import (
    A1p72,
    A1p134,
    A2p72,
    A2p134,
    MRG31k3p,
    MRG_RandomStreams,
    MRGSample,
    RandomGeneratorSharedVariable,
    RandomGeneratorType,
    RandomStreams,
    RandomVariable,
    copy_generator,
)


def draw(outputs, stream, inputs=(), mode=None, **kwargs):
    """Compile with explicit updates: those of the stream's states the outputs read."""
    outs = outputs if isinstance(outputs, list) else [outputs]
    used = set(graph_inputs(outs))
    updates = [(s, new) for s, new in stream.updates() if s in used]
    return tensorjit.function(list(inputs), outputs, updates=updates, mode=mode, **kwargs)


# ====================================================================== RandomStreams
def test_uniform_statistics_and_bounds():
    rs = RandomStreams(123)
    x = draw(rs.uniform((40000,), low=-1.0, high=3.0), rs)()
    assert x.shape == (40000,) and x.dtype == np.float64
    assert x.min() >= -1.0 and x.max() < 3.0
    assert abs(x.mean() - 1.0) < 0.03
    assert abs(x.var() - 16.0 / 12.0) < 0.03


def test_normal_statistics():
    rs = RandomStreams(7)
    x = draw(rs.normal((200, 200), avg=2.0, std=0.5), rs)()
    assert x.shape == (200, 200)
    assert abs(x.mean() - 2.0) < 0.01
    assert abs(x.std() - 0.5) < 0.01


def test_binomial_statistics_and_dtype():
    rs = RandomStreams(3)
    x = draw(rs.binomial((30000,), n=10, p=0.3), rs)()
    assert x.dtype == np.int64
    assert x.min() >= 0 and x.max() <= 10
    assert abs(x.mean() - 3.0) < 0.05
    assert abs(x.var() - 2.1) < 0.08
    bern = draw(rs.binomial((5000,), p=0.8, dtype="int8"), rs)()
    assert bern.dtype == np.int8 and set(np.unique(bern)) == {0, 1}
    assert abs(bern.mean() - 0.8) < 0.03
    # One trial draws a uniform below p (a faster path): p may differ per column.
    cols = draw(rs.binomial((20000, 2), p=np.array([0.1, 0.9])), rs)()
    assert cols.dtype == np.int64 and set(np.unique(cols)) == {0, 1}
    np.testing.assert_allclose(cols.mean(axis=0), [0.1, 0.9], atol=0.015)


def test_random_integers_include_high_and_integers_exclude_it():
    rs = RandomStreams(5)
    closed = draw(rs.random_integers((3000,), low=-2, high=2), rs)()
    assert closed.dtype == np.int64
    assert set(np.unique(closed)) == {-2, -1, 0, 1, 2}
    half_open = draw(rs.integers((3000,), 4, 7), rs)()
    assert set(np.unique(half_open)) == {4, 5, 6}
    from_zero = draw(rs.integers((3000,), 3), rs)()
    assert set(np.unique(from_zero)) == {0, 1, 2}


def test_choice_and_permutation():
    rs = RandomStreams(11)
    without = rs.choice((6,), a=6, replace=False)
    from_vector = rs.choice((4000,), a=np.array([1.5, 2.5, 3.5]), p=[0.1, 0.1, 0.8])
    perm = rs.permutation(8)
    f = draw([without, from_vector, perm], rs)
    for _ in range(3):
        w, v, p = f()
        assert w.dtype == np.int64 and sorted(w) == list(range(6))
        assert v.dtype == np.float64 and set(np.unique(v)) <= {1.5, 2.5, 3.5}
        assert abs(np.mean(v == 3.5) - 0.8) < 0.03
        assert p.shape == (8,) and sorted(p) == list(range(8))
    assert perm.type.shape == (8,)


def test_same_seed_same_draws_and_reseeding():
    def first_two_calls(rs):
        f = draw([rs.uniform((4,)), rs.normal((2, 2))], rs)
        return f(), f()

    a1, a2 = first_two_calls(RandomStreams(42))
    b1, b2 = first_two_calls(RandomStreams(42))
    for x, y in zip(a1 + a2, b1 + b2):
        np.testing.assert_array_equal(x, y)
    c1, _ = first_two_calls(RandomStreams(43))
    assert not np.array_equal(a1[0], c1[0])

    rs = RandomStreams(42)
    f = draw([rs.uniform((4,)), rs.normal((2, 2))], rs)
    first = f()
    f()
    rs.seed(42)
    again = f()
    for x, y in zip(first, again):
        np.testing.assert_array_equal(x, y)
    rs.seed(1000)
    assert not np.array_equal(f()[0], first[0])
    rs.seed()  # None: the construction seed
    np.testing.assert_array_equal(f()[0], first[0])


def test_calls_draw_new_numbers_and_two_streams_differ():
    for mode in ("FAST_RUN", "FAST_COMPILE", "DebugMode"):
        rs = RandomStreams(9)
        a = rs.uniform((5,))
        b = rs.uniform((5,))  # same op, same size: must not be merged into one draw
        f = draw([a, b], rs, mode=mode)
        a1, b1 = f()
        a2, b2 = f()
        assert not np.array_equal(a1, b1), mode
        assert not np.array_equal(a1, a2), mode
        assert not np.array_equal(b1, b2), mode
        assert len(rs.updates()) == 2


def test_same_sample_used_twice_is_one_draw():
    rs = RandomStreams(2)
    u = rs.uniform((6,))
    d = draw(u - u, rs)()
    np.testing.assert_array_equal(d, np.zeros(6))


def test_default_update_attribute():
    rs = RandomStreams(1)
    u = rs.uniform((3,))
    ((state, new_state),) = rs.updates()
    assert isinstance(state, RandomGeneratorSharedVariable)
    assert state.default_update is new_state
    assert new_state.owner is u.owner and isinstance(u.owner.op, RandomVariable)
    assert u.owner.inputs[0] is state
    assert isinstance(state.get_value(), np.random.Generator)


def test_function_applies_default_updates_without_explicit_updates():
    rs = RandomStreams(21)
    u = rs.uniform((4,))
    m = MRG_RandomStreams(21)
    v = m.uniform((4,), nstreams=2)
    f = tensorjit.function([], [u, v])
    (u1, v1), (u2, v2) = f(), f()
    assert not np.array_equal(u1, u2)
    assert not np.array_equal(v1, v2)


def test_state_is_not_modified_in_place_and_update_advances_it():
    rs = RandomStreams(4)
    u = rs.uniform((3,))
    ((state, _),) = rs.updates()
    before = state.get_value()
    no_update = tensorjit.function([], u, no_default_updates=True)
    x1, x2 = no_update(), no_update()
    np.testing.assert_array_equal(x1, x2)  # the op reads its state, never mutates it
    assert RandomGeneratorType().values_eq(before, state.get_value(borrow=True))
    with_update = draw(u, rs)
    np.testing.assert_array_equal(with_update(), x1)
    assert not RandomGeneratorType().values_eq(before, state.get_value(borrow=True))
    assert not np.array_equal(with_update(), x1)


@pytest.mark.parametrize(
    "bits",
    [np.random.PCG64, np.random.PCG64DXSM, np.random.MT19937, np.random.Philox, np.random.SFC64],
)
def test_a_generator_copy_continues_the_stream_on_its_own(bits):
    original = np.random.Generator(bits(7))
    original.random(5)
    copy = copy_generator(original)
    assert copy is not original and copy.bit_generator is not original.bit_generator
    assert type(copy.bit_generator) is bits
    np.testing.assert_array_equal(copy.random(9), original.random(9))
    copy.random(3)  # drawing from one leaves the other where it was
    np.testing.assert_array_equal(copy_generator(original).random(4), original.random(4))
    # Copies of copies spawn the children the original seed gives (no wrapper chain).
    again = copy_generator(copy_generator(copy))
    spawned = [g.random() for g in again.spawn(2)]
    assert spawned == [g.random() for g in np.random.Generator(bits(7)).spawn(2)]
    assert again.bit_generator.seed_seq.entropy == 7


def test_a_copied_generator_spawns_pickles_and_copies_like_a_deep_copy():
    original = np.random.default_rng(9)
    copy1 = copy_generator(original)
    expected = [g.random() for g in copy.deepcopy(original).spawn(2)]
    assert [g.random() for g in copy1.spawn(2)] == expected
    assert original.bit_generator.seed_seq.n_children_spawned == 0  # left alone
    again = copy_generator(copy1)  # continues from copy1's two children
    assert [g.random() for g in again.spawn(1)] == [
        g.random() for g in copy.deepcopy(copy1).spawn(1)
    ]
    for clone in (copy.deepcopy(again), pickle.loads(pickle.dumps(again))):
        np.testing.assert_array_equal(clone.random(3), copy_generator(again).random(3))


def test_a_bit_generator_that_can_not_be_rebuilt_is_deep_copied():
    class IntSeeded(np.random.PCG64):  # a third party's: takes integer seeds only
        def __init__(self, seed=None):
            if seed is not None and not isinstance(seed, int):
                raise TypeError("an integer seed")
            super().__init__(seed)

    original = np.random.Generator(IntSeeded(3))
    copy = copy_generator(original)
    assert type(copy.bit_generator) is IntSeeded and copy is not original
    np.testing.assert_array_equal(copy.random(4), original.random(4))


def test_symbolic_size_and_shapes():
    rs = RandomStreams(8)
    n = T.lscalar("n")
    m = T.iscalar("m")  # int32: cast to int64
    x = rs.normal((n, 3))
    y = rs.uniform((n, m))
    assert x.type.shape == (None, 3) and y.type.shape == (None, None)
    for mode in ("FAST_RUN", "FAST_COMPILE"):
        f = draw([x, y, x.shape, y.shape], rs, inputs=[n, m], mode=mode)
        xv, yv, xs, ys = f(4, 2)
        assert xv.shape == (4, 3) and yv.shape == (4, 2)
        np.testing.assert_array_equal(xs, [4, 3])
        np.testing.assert_array_equal(ys, [4, 2])
    size_vec = T.stack([n, 2])
    z = rs.uniform(size_vec)
    assert draw(z, rs, inputs=[n])(5).shape == (5, 2)
    assert rs.uniform(7).type.shape == (7,)
    assert rs.uniform(()).type.shape == ()
    assert draw(rs.uniform(()), rs)().shape == ()


def test_size_none_broadcasts_parameters():
    rs = RandomStreams(0)
    low = T.vector("low")
    u = rs.uniform(low=low, high=low + 1.0)
    out = draw(u, rs, inputs=[low])(np.array([0.0, 10.0, 20.0]))
    assert out.shape == (3,)
    assert np.all((out >= [0, 10, 20]) & (out < [1, 11, 21]))
    assert rs.normal(avg=np.zeros((2, 3))).type.shape == (2, 3)


def test_dtypes():
    rs = RandomStreams(0)
    assert rs.uniform((2,), dtype="float32").dtype == "float32"
    assert rs.normal((2,)).dtype == tensorjit.config.floatX
    with tensorjit.config.change_flags(floatX="float32"):
        assert rs.uniform((2,)).dtype == "float32"
    assert rs.random_integers((2,), 0, 5, dtype="int16").dtype == "int16"
    f = draw([rs.uniform((3,), dtype="float32"), rs.random_integers((3,), 0, 5, dtype="int16")], rs)
    a, b = f()
    assert a.dtype == np.float32 and b.dtype == np.int16


def test_random_ops_are_not_constant_folded_nor_differentiable():
    rs = RandomStreams(0)
    u = rs.uniform((3,))
    assert RandomVariable.constant_folding is False
    assert not u.owner.op.destroy_map
    mu = T.scalar("mu")
    sample = rs.normal((3,), avg=mu)
    with pytest.raises(tensorjit.gradient.NullGradError):
        tensorjit.grad(sample.sum(), mu)


def test_dropout_mask_gradient():
    rs = RandomStreams(17)
    x = T.vector("x")
    mask = rs.binomial((6,), p=0.5, dtype="float64")
    cost = (x * mask).sum()
    g = tensorjit.grad(cost, x)
    f = draw([mask, g, cost], rs, inputs=[x])
    for _ in range(3):
        m, gv, c = f(np.arange(6.0))
        np.testing.assert_array_equal(gv, m)
        assert c == pytest.approx(np.dot(m, np.arange(6.0)))


def test_bad_sizes():
    rs = RandomStreams(0)
    with pytest.raises(TypeError, match="integer"):
        rs.uniform((2.5,))
    with pytest.raises(ValueError, match="unknown length"):
        rs.uniform(T.lvector("s"))
    with pytest.raises(ValueError, match=">= 0"):
        rs.uniform((-1,))


# ====================================================================== MRG31k3p
M1 = 2**31 - 1
M2 = 2**31 - 21069


def reference_mrg31k3p(state, n):
    """The recurrence of L'Ecuyer & Touzin, step by step in plain Python integers.

    state = (x1[n-1], x1[n-2], x1[n-3], x2[n-1], x2[n-2], x2[n-3]).
    """
    x1 = [state[2], state[1], state[0]]  # oldest first
    x2 = [state[5], state[4], state[3]]
    out = []
    for _ in range(n):
        new1 = (2**22 * x1[-2] + (2**7 + 1) * x1[-3]) % M1
        new2 = (2**15 * x2[-1] + (2**15 + 1) * x2[-3]) % M2
        x1.append(new1)
        x2.append(new2)
        z = (new1 - new2) % M1
        out.append((z if z > 0 else M1) / 2**31)
    final = (x1[-1], x1[-2], x1[-3], x2[-1], x2[-2], x2[-3])
    return out, final


def test_mrg_constants_match_the_paper():
    assert MRG31k3p.M1 == 2**31 - 1 and MRG31k3p.M2 == 2**31 - 21069
    # The jump-ahead matrices published with the generator (as in Theano's rng_mrg).
    assert A1p72 == (
        (1516919229, 758510237, 499121365),
        (1884998244, 1516919229, 335398200),
        (601897748, 1884998244, 358115744),
    )
    assert A2p72 == (
        (1228857673, 1496414766, 954677935),
        (1133297478, 1407477216, 1496414766),
        (2002613992, 1639496704, 1407477216),
    )
    assert A1p134[0] == (1702500920, 1849582496, 1656874625)
    assert A2p134[0] == (796789021, 1464208080, 607337906)
    # A ** (2 ** 3) is eight steps of the recurrence.
    state = [12345, 23456, 34567, 45678, 56789, 67890]
    _, after8 = reference_mrg31k3p(state, 8)
    a1 = MRG31k3p.mat_pow2(MRG31k3p.A1, 3, M1)
    a2 = MRG31k3p.mat_pow2(MRG31k3p.A2, 3, M2)
    jumped = MRG31k3p.mat_vec(a1, state[:3], M1) + MRG31k3p.mat_vec(a2, state[3:], M2)
    assert tuple(jumped) == after8


def test_mrg_uniform_matches_reference_recurrence_exactly():
    mrg = MRG_RandomStreams(12345)
    u = mrg.uniform((4, 5), nstreams=1)
    f = draw(u, mrg)
    expected, _ = reference_mrg31k3p([12345] * 6, 40)
    first, second = f(), f()  # the second call continues the same substream
    assert first.dtype == np.float64 and first.shape == (4, 5)
    assert first.ravel().tolist() == expected[:20]
    assert second.ravel().tolist() == expected[20:]


def test_mrg_substreams_interleave_and_streams_are_jumped():
    mrg = MRG_RandomStreams(777)
    u = mrg.uniform((7,), nstreams=3)
    v = mrg.uniform((2,), nstreams=1)
    got_u, got_v = draw([u, v], mrg)()
    base = [777] * 6
    sub = [base]
    for _ in range(2):
        prev = sub[-1]
        sub.append(MRG31k3p.mat_vec(A1p72, prev[:3], M1) + MRG31k3p.mat_vec(A2p72, prev[3:], M2))
    per_sub = [reference_mrg31k3p(s, 3)[0] for s in sub]
    expected_u = [per_sub[i % 3][i // 3] for i in range(7)]  # element i: substream i % 3
    assert got_u.tolist() == expected_u
    second_stream = MRG31k3p.mat_vec(A1p134, base[:3], M1) + MRG31k3p.mat_vec(A2p134, base[3:], M2)
    assert got_v.tolist() == reference_mrg31k3p(second_stream, 2)[0]


def test_mrg_normal_is_box_muller_of_the_stream():
    mrg = MRG_RandomStreams(4321)
    z = mrg.normal((5,), nstreams=1)
    got = draw(z, mrg)()
    u, _ = reference_mrg31k3p([4321] * 6, 6)
    u1, u2 = np.array(u[:3]), np.array(u[3:])
    r = np.sqrt(-2 * np.log(u1))
    expected = np.concatenate([r * np.cos(2 * np.pi * u2), r * np.sin(2 * np.pi * u2)])[:5]
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_mrg_identical_across_modes_and_compiles():
    def calls(mode):
        mrg = MRG_RandomStreams(2024)
        outs = [
            mrg.uniform((3, 4), low=-1.0, high=1.0),
            mrg.normal((5,), avg=1.0, std=3.0),
            mrg.binomial((6,), p=0.4),
        ]
        f = draw(outs, mrg, mode=mode)
        return [f() for _ in range(3)]

    fast_run = calls("FAST_RUN")
    fast_compile = calls("FAST_COMPILE")
    debug = calls("DebugMode")
    for a, b, c in zip(fast_run, fast_compile, debug):
        for x, y, w in zip(a, b, c):
            np.testing.assert_array_equal(x, y)
            np.testing.assert_array_equal(x, w)
    assert not np.array_equal(fast_run[0][0], fast_run[1][0])


def test_mrg_statistics_and_dtypes():
    mrg = MRG_RandomStreams(99)
    u32 = mrg.uniform((50000,), dtype="float32")
    n = mrg.normal((50000,), avg=-1.0, std=2.0)
    b = mrg.binomial((50000,), p=0.25)
    b3 = mrg.binomial((20000,), n=3, p=0.5, dtype="int32")
    uv, nv, bv, b3v = draw([u32, n, b, b3], mrg)()
    assert uv.dtype == np.float32 and 0.0 < uv.min() and uv.max() < 1.0
    assert abs(uv.mean() - 0.5) < 0.01 and abs(uv.var() - 1 / 12) < 0.005
    assert abs(nv.mean() + 1.0) < 0.05 and abs(nv.std() - 2.0) < 0.05
    assert bv.dtype == np.int64 and set(np.unique(bv)) == {0, 1}
    assert abs(bv.mean() - 0.25) < 0.01
    assert b3v.dtype == np.int32 and set(np.unique(b3v)) == {0, 1, 2, 3}
    assert abs(b3v.mean() - 1.5) < 0.03


def test_mrg_reseed_symbolic_size_and_updates():
    mrg = MRG_RandomStreams(5)
    k = T.lscalar("k")
    u = mrg.uniform((k, 2), nstreams=4)
    assert isinstance(u.owner.op, MRGSample) and MRGSample.constant_folding is False
    ((state, new_state),) = mrg.updates()
    assert state.default_update is new_state
    f = draw(u, mrg, inputs=[k])
    first = f(3)
    assert first.shape == (3, 2)
    assert not np.array_equal(f(3), first)
    mrg.seed(5)
    np.testing.assert_array_equal(f(3), first)
    mrg.seed()  # the construction seed again
    np.testing.assert_array_equal(f(3), first)
    mrg.seed(6)
    assert not np.array_equal(f(3), first)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mrg.uniform((k,))
    assert any("substreams" in str(w.message) for w in caught)


def test_mrg_bad_seeds():
    with pytest.raises(ValueError):
        MRG_RandomStreams(0)
    with pytest.raises(ValueError):
        MRG_RandomStreams(M2)
    with pytest.raises(ValueError):
        MRG_RandomStreams([0, 0, 0, 1, 2, 3])
    with pytest.raises(ValueError, match="size"):
        MRG_RandomStreams(1).uniform(None)
