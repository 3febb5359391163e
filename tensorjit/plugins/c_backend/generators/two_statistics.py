"""The entries of kernels that give two statistics per group of x along one axis
(Moments: generators/moments.py, MaxExpSum: generators/max_exp_sum.py).

Such a kernel writes ``tj_reduce_serial(n..., x, inputs..., out, out2, st...)``: the
reduced axis last, x's byte strides, the other inputs one element each, both outputs
C-contiguous of x's dtype. This module gives its first line, and the entries around it:
``tj_reduce`` (parts of the first kept axis over the pool), the uniform
``tj_reduce_u(n, pointers, out, strides)`` of whole-graph programs (pointers: the inputs,
then out2, the kernel's pointer after its operands; strides: x's) and their cdef.
"""

from __future__ import annotations

from collections.abc import Sequence

from tensorjit.plugins.c_backend.build import parallel


def serial_signature(ndim: int, inputs: Sequence[str]) -> str:
    """The first line of ``tj_reduce_serial`` (``inputs``: x's name first)."""
    shape = "".join(f"int64_t n{a}, " for a in range(ndim))
    pointers = "".join(f"char *{name}, " for name in inputs)
    strides = "".join(f", int64_t st_{a}" for a in range(ndim))
    return f"static void tj_reduce_serial({shape}{pointers}char *out, char *out2{strides}) {{"


def entries(t: str, n_kept: int, inputs: Sequence[str], grain: int) -> tuple[list[str], str]:
    """(C lines of ``tj_reduce`` and ``tj_reduce_u``, cdef) for a kernel of C type ``t``
    keeping ``n_kept`` axes; parts get at least ``grain`` elements of x each."""
    ndim = n_kept + 1
    params = [("int64_t", f"n{a}") for a in range(ndim)]
    params += [("char *", name) for name in inputs] + [("char *", "out"), ("char *", "out2")]
    params += [("int64_t", f"st_{a}") for a in range(ndim)]
    if n_kept:
        row_bytes = " * ".join([f"(int64_t)sizeof({t})"] + [f"n{a}" for a in range(1, n_kept)])
        per_item = " * ".join(f"n{a}" for a in range(1, ndim))
        steps = {inputs[0]: "st_0", "out": row_bytes, "out2": row_bytes}
        lines = [parallel.split_outer("tj_reduce", params, "n0", steps, per_item, grain)]
    else:
        typed = ", ".join(f"{t_} {n}" for t_, n in params)
        names = ", ".join(n for _, n in params)
        lines = [f"void tj_reduce({typed}) {{ tj_reduce_serial({names}); }}"]
    lengths, x_strides = [f"n[{a}]" for a in range(ndim)], [f"s[{a}]" for a in range(ndim)]
    pointers = [f"p[{j}]" for j in range(len(inputs))]
    call = ", ".join([*lengths, *pointers, "out", f"p[{len(inputs)}]", *x_strides])
    lines.append(
        "void tj_reduce_u(const int64_t *n, char **p, char *out, const int64_t *s) "
        f"{{ tj_reduce({call}); }}"
    )
    pointer_decl = "char *, " * (len(inputs) + 1) + "char *"
    cdef = parallel.CDEF
    cdef += f"void tj_reduce({'int64_t, ' * ndim}{pointer_decl}{', int64_t' * ndim});\n"
    cdef += "void tj_reduce_u(const int64_t *, char **, char *, const int64_t *);\n"
    return lines, cdef
