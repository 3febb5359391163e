"""debugprint (indented tree with ids) and pprint (infix) of tensor graphs and functions."""

import io
import re

import pytest

import tensorjit
import tensorjit.tensor as T

ID = r"\[id ([A-Z]+)\]"


def ids_of(text, label):
    """The ids printed on the lines of ``text`` that start (after the tree prefix) with label."""
    found = []
    for line in text.splitlines():
        m = re.match(r"^[ |]*" + re.escape(label) + r" " + ID, line)
        if m:
            found.append(m.group(1))
    return found


# ---------------------------------------------------------------- debugprint
def test_debugprint_variable_tree_with_ids():
    x = T.dmatrix("x")
    y = T.dmatrix("y")
    text = tensorjit.debugprint(x + T.exp(y), file="str")
    assert isinstance(text, str)
    lines = text.splitlines()
    assert lines == [
        "add [id A]",
        " |x [id B]",
        " |exp [id C]",
        "   |y [id D]",
    ]


def test_debugprint_shared_subtree_printed_once():
    x = T.dmatrix("x")
    y = T.dmatrix("y")
    z = T.exp(y)
    text = tensorjit.debugprint((x + z) * z, file="str")
    # exp appears twice with one id; its input y is printed only under the first
    assert len(ids_of(text, "exp")) == 2
    assert len(set(ids_of(text, "exp"))) == 1
    assert len(ids_of(text, "y")) == 1
    assert len(ids_of(text, "x")) == 1
    assert ids_of(text, "mul") == ["A"]
    # every id names exactly one thing
    pairs = set(re.findall(r"([^\s|]+) " + ID, text))
    assert len({i for _, i in pairs}) == len(pairs)
    assert text.splitlines()[-1] == " |exp [id D]"


def test_debugprint_distinct_equal_nodes_get_distinct_ids_until_compiled():
    y = T.dvector("y")
    out = T.exp(y) + T.exp(y)  # two separate (but equal) nodes
    text = tensorjit.debugprint(out, file="str")
    assert len(set(ids_of(text, "exp"))) == 2
    # the compiled function merges them: one exp node, printed twice with one id
    f = tensorjit.function([y], out, mode=tensorjit.FAST_RUN.excluding("fusion"))
    ftext = tensorjit.debugprint(f, file="str")
    assert len(ids_of(ftext, "exp")) == 2
    assert len(set(ids_of(ftext, "exp"))) == 1
    assert len(ids_of(ftext, "y")) == 1


def test_debugprint_compiled_function():
    x = T.dmatrix("x")
    y = T.dmatrix("y")
    z = T.exp(y)
    f = tensorjit.function(
        [x, y], [(x + z) * z, z.sum()], mode=tensorjit.FAST_RUN.excluding("fusion")
    )
    text = tensorjit.debugprint(f, file="str")
    first = text.splitlines()[0]
    assert re.match(r"^mul(_inplace\{\d\})? \[id A\]", first)
    # every node of the compiled graph is shown with the kernel chosen for it
    assert len(f.kernels) == 4  # mul, add, exp (merged), sum
    for node, kernel in f.kernels.items():
        pattern = re.escape(str(node.op)) + r" \[id [A-Z]+\] " + re.escape(f"[{kernel.name}]")
        assert re.search(pattern, text)
    # both outputs are roots; the second reuses exp's id and does not repeat its inputs
    assert re.search(r"^sum\{axis=\(0, 1\)\} \[id [A-Z]+\]", text, re.M)
    exp_ids = ids_of(text, "exp")
    assert len(set(exp_ids)) == 1 and len(exp_ids) == 3
    assert len(ids_of(text, "y")) == 1


def test_debugprint_function_graph_after_a_rewrite():
    """Theano programs rewrite a FunctionGraph by hand and print it (merge, then
    debugprint(g)): the merged node is printed once, with one id for both uses."""
    from tensorjit.core.graph.fgraph import FunctionGraph
    from tensorjit.core.rewrites.merge import MergeRewriter

    x1, x2 = T.dmatrix("x1"), T.dmatrix("x2")
    g = FunctionGraph([x1, x2], [T.dot(x1, x2) + T.dot(x1, x2)])
    assert len(set(ids_of(tensorjit.debugprint(g, file="str"), "Dot"))) == 2
    MergeRewriter().apply(g, lambda pairs, reason=None: g.replace_all_validate(pairs, reason))
    text = tensorjit.debugprint(g, file="str")
    assert text.splitlines()[0].startswith("add [id A]")
    dot_ids = ids_of(text, "Dot")
    assert len(dot_ids) == 2 and len(set(dot_ids)) == 1
    assert len(ids_of(text, "x1")) == 1  # the second use does not repeat its inputs


def test_debugprint_constant_and_unnamed_input():
    v = T.dscalar()
    text = tensorjit.debugprint(v * 3.0, file="str")
    lines = text.splitlines()
    assert lines[0] == "mul [id A]"
    assert lines[1] == " |<input> [id B]"
    assert lines[2] == " |3.0 [id C]"


def test_debugprint_named_intermediate_and_types():
    x = T.fvector("x")
    h = T.tanh(x)
    h.name = "h"
    text = tensorjit.debugprint(h.sum(), file="str", print_type=True)
    assert "tanh [id B] 'h' <float32 vector>" in text
    assert "x [id C] <float32 vector>" in text
    assert text.splitlines()[0] == "sum{axis=(0,)} [id A] <float32 scalar>"


def test_debugprint_depth_limits_the_tree():
    x = T.dscalar("x")
    out = T.exp(T.log(x + 1))
    full = tensorjit.debugprint(out, file="str")
    assert len(full.splitlines()) == 5  # exp, log, add, x, 1
    shallow = tensorjit.debugprint(out, file="str", depth=1)
    assert shallow.splitlines() == ["exp [id A]", " |log [id B]"]


def test_debugprint_to_stdout_and_to_a_file(capsys):
    x = T.dscalar("x")
    out = T.sin(x)
    assert tensorjit.debugprint(out) is None
    printed = capsys.readouterr().out
    assert printed == "sin [id A]\n |x [id B]\n"
    buf = io.StringIO()
    assert tensorjit.debugprint(out, file=buf) is None
    assert buf.getvalue() == printed


def test_debugprint_list_of_variables():
    x = T.dvector("x")
    a = x * 2
    text = tensorjit.debugprint([a, a + 1], file="str")
    assert text.splitlines()[0] == "mul [id A]"
    assert re.search(r"^add \[id [A-Z]+\]$", text, re.M)
    assert len(ids_of(text, "mul")) == 2 and len(set(ids_of(text, "mul"))) == 1


def test_debugprint_deep_graph_does_not_hit_the_recursion_limit():
    x = T.dscalar("x")
    out = x
    for _ in range(3000):
        out = out + 1.0
    text = tensorjit.debugprint(out, file="str")
    assert len(text.splitlines()) == 3000 * 2 + 1
    assert len(ids_of(text, "x")) == 1
    assert text.splitlines()[3000].lstrip(" |") == "x [id " + ids_of(text, "x")[0] + "]"


def test_debugprint_rejects_other_objects():
    with pytest.raises(TypeError, match=r"a list of them, a FunctionGraph or a function"):
        tensorjit.debugprint(42, file="str")
    with pytest.raises(TypeError, match=r"debugprint/pprint take a Variable"):
        tensorjit.pprint("x + y")


# ---------------------------------------------------------------- pprint
@pytest.mark.parametrize(
    "build, expected",
    [
        (lambda x, y, v: x + T.exp(y), "(x + exp(y))"),
        (lambda x, y, v: (x - y) * x, "((x - y) * x)"),
        (lambda x, y, v: -(x - y), "-(x - y)"),
        (lambda x, y, v: x / y // x % y, "(((x / y) // x) % y)"),
        (lambda x, y, v: x**y, "(x ** y)"),
        (lambda x, y, v: (x > y) & (x < y), "((x > y) & (x < y))"),
        (lambda x, y, v: (x >= y) | ~(x <= y), "((x >= y) | ~(x <= y))"),
        (lambda x, y, v: x + v, "(x + v)"),
        (lambda x, y, v: T.dot(x, v), "dot(x, v)"),
        (lambda x, y, v: x.T, "x.T"),
        (lambda x, y, v: x[1:3, ::2], "x[1:3, ::2]"),
        (lambda x, y, v: v[0], "v[0]"),
        (lambda x, y, v: abs(x), "abs(x)"),
        (lambda x, y, v: T.tanh(T.log(x)), "tanh(log(x))"),
        (lambda x, y, v: T.maximum(x, y), "maximum(x, y)"),
        (lambda x, y, v: T.switch(x > y, x, y), "switch((x > y), x, y)"),
        (lambda x, y, v: x.shape, "x.shape"),
    ],
)
def test_pprint_infix(build, expected):
    x = T.dmatrix("x")
    y = T.dmatrix("y")
    v = T.dvector("v")
    assert tensorjit.pprint(build(x, y, v)) == expected


def test_pprint_constants_and_unnamed_inputs():
    x = T.dvector("x")
    assert tensorjit.pprint(x * 2.0) == "(x * 2.0)"
    assert tensorjit.pprint(T.fmatrix() + T.frow("r")) == "(<float32 matrix> + r)"


def test_pprint_named_intermediates_are_used_by_name():
    x = T.dvector("x")
    y = T.dvector("y")
    h = x + y
    h.name = "h"
    assert tensorjit.pprint(h * T.exp(h)) == "(h * exp(h))"
    # at the top, a named variable is still shown with its definition
    assert tensorjit.pprint(h) == "(x + y)"


def test_pprint_list_and_compiled_function():
    x = T.dvector("x")
    y = T.dvector("y")
    assert tensorjit.pprint([x + 1.0, T.exp(y)]) == "(x + 1.0)\nexp(y)"
    f = tensorjit.function([x, y], [x * y, T.exp(y)])
    assert tensorjit.pprint(f) == "(x * y)\nexp(y)"
    assert tensorjit.pp is tensorjit.pprint


def test_pprint_deep_graph():
    x = T.dscalar("x")
    out = x
    for _ in range(2000):
        out = T.exp(out)
    text = tensorjit.pprint(out)
    assert text == "exp(" * 2000 + "x" + ")" * 2000


def test_pprint_symbolic_and_negative_slices():
    x = T.dvector("x")
    m = T.dmatrix("m")
    i = T.lscalar("i")
    j = T.lscalar("j")
    assert tensorjit.pprint(x[i:j]) == "x[i:j]"
    assert tensorjit.pprint(x[::-1]) == "x[::-1]"
    assert tensorjit.pprint(m[i, ::j]) == "m[i, ::j]"
    assert tensorjit.pprint(m[1:, -1]) == "m[1:, -1]"


def test_pprint_keeps_explicit_new_axes_visible():
    # Left-padding for broadcasting may be left implicit inside an elementwise expression,
    # but a user's own new axis changes the result's rank and must show in the rendering.
    x = T.dvector("x")
    assert tensorjit.pprint(x[None, 1:]) != tensorjit.pprint(x[1:])
    assert tensorjit.pprint(x.dimshuffle("x", 0)) != "x"
    m = T.dmatrix("m")
    assert tensorjit.pprint(T.dot(x.dimshuffle("x", 0), m)) != tensorjit.pprint(T.dot(x, m))
