"""Whole-graph programs: a function whose nodes all have C kernels runs as one C call.

``whole_graph(plan)`` (the C backend's ``Backend.whole_graph``) turns a function's
schedule into the tables that ``program.c`` runs: one slot per value, one ``Step`` per
node (steps.py: its kind, the addresses of the node's compiled kernel, its uniform entry
points, see kernels.py, and the slots freed after it) and the output slots. ``program.c`` is
compiled once per machine (cached like the kernels), so a new function costs no extra
compilation beyond its kernels. Covered: elementwise (fused, broadcast, strided and in
place), reductions, dimshuffle and basic-indexing views, the BLAS kernels of dot,
gemm/gemv and ger, the row kernels (softmax, log_softmax, argmax, the cross-entropy's
class selection and its gradient), alloc, shape, reshape and shape vectors, and any
plugin's native step (native.py). Any other host node that updates
nothing in place (a random draw, a scan, an op only Op.perform runs, a case a step above
does not cover) becomes a *Python step*: the program calls the node's own kernel, so
one such node no longer splits the function into segments run by the per-node VM. A
graph with an uncovered in-place node keeps the VM and its segments.
"""

from __future__ import annotations

import contextlib
import functools
import pathlib
import re
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from tensorjit.core.compile.commit import commit_plan
from tensorjit.core.compile.program import GraphPlan, Program
from tensorjit.core.compile.vm import explained
from tensorjit.core.config import config
from tensorjit.core.devices import HOST
from tensorjit.core.diagnostics import TensorjitRuntimeWarning
from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.kernel_selection import node_device
from tensorjit.core.registries import Kernel
from tensorjit.plugins.c_backend.build import compiler, threads
from tensorjit.plugins.c_backend.build.caches import (
    row_block_bytes,
    row_group_min_bytes,
    stream_min_bytes,
)
from tensorjit.plugins.c_backend.generators import indexing, kernels, rowwise
from tensorjit.plugins.c_backend.linalg import blas, penalised
from tensorjit.plugins.c_backend.whole_graph import native, steps
from tensorjit.plugins.c_backend.whole_graph.steps import ANY_OBJECT, Step, StepKind
from tensorjit.plugins.cstyle import indexing as index_rules
from tensorjit.tensor.blas import Gemm
from tensorjit.tensor.math import Dot
from tensorjit.tensor.subtensor import AdvancedSubtensor
from tensorjit.tensor.type import TensorType

MAX_DIMS, MAX_OPERANDS = 16, 64  # TJ_MAXDIM and TJ_MAXOPS in program.c


class Unsupported(Exception):
    """The graph has a node or value the program does not run."""


def whole_graph(plan: GraphPlan) -> Program | None:
    """One C program for ``plan``, or None if some node or value is not covered (or C
    extensions can not be built here: no Python headers)."""
    if compiler.extension_unavailable_reason() is not None:
        return None
    try:
        tables = _Tables(plan)
    except Unsupported:
        return None
    try:
        interpreter = _interpreter()
    except compiler.CCompileError as exc:
        warnings.warn(
            f"whole-graph programs are disabled: {exc}", TensorjitRuntimeWarning, stacklevel=2
        )
        return None
    return interpreter.make(*tables.arguments())


_LOCAL_INCLUDE = re.compile(r'^#include "([\w.]+)".*$', re.MULTILINE)
# Included files generated from the step kinds' table (steps.py) and the shared indexing
# rules (cstyle/indexing.py).
_GENERATED = {
    "step_kinds.h": steps.c_declarations,
    "step_dispatch.h": steps.c_dispatch,
    "index_rules.h": index_rules.c_macros,
}


@functools.cache  # read once per process, not per compiled function
def _source(name: str) -> str:
    """A C file of this package with its local ``#include "..."`` lines replaced by the
    files' text (or the generated text), so the compile cache's key covers every line
    that is compiled."""
    if name in _GENERATED:
        return _GENERATED[name]()
    text = pathlib.Path(__file__).with_name(name).read_text()
    return _LOCAL_INCLUDE.sub(lambda match: _source(match.group(1)), text)


RUNNER = "the whole-graph program runner"


def prebuild_entries() -> list[tuple]:
    """The program runner as an entry for ``compiler.prebuild``, when functions may
    become programs: built alongside the kernels instead of after them."""
    if not config.whole_graph or compiler.extension_unavailable_reason() is not None:
        return []
    return [(_source("program.c"), RUNNER, compiler.extension_flags())]


def _interpreter() -> Any:
    source = _source("program.c")
    module = compiler.load_extension(source, "tj_program", what=RUNNER)
    threads.attach_setter(module, module.set_parallel)  # (row blocks split over the pool)
    return module


def _explaining(run: Any, node: Apply, kernel_name: str) -> Any:
    """``run`` (a node's kernel), its errors told with the node's story as the per-node
    VM tells them."""

    def python_step(inputs: list, cells: list) -> None:
        try:
            run(inputs, cells)
        except Exception as exc:
            if getattr(exc, "tensorjit_explained", False):
                raise
            raise explained(exc, node, kernel_name, inputs) from None

    return python_step


def _typenum(var: Variable) -> int:
    return np.dtype(var.type.dtype).num


def _static(var: Variable) -> list[int]:
    return [-1 if n is None else int(n) for n in var.type.shape]


def _check_tensor(var: Variable) -> None:
    if not isinstance(var.type, TensorType) or var.type.ndim > MAX_DIMS or var.type.device != HOST:
        raise Unsupported(f"{var}: {var.type}")


class _Tables:
    """The arguments of ``program.c``'s ``make`` for one plan."""

    def __init__(self, plan: GraphPlan):
        self.slots: dict[Variable, int] = {}
        self.inputs = [self._any_spec(v) for v in plan.inputs]
        self.shared = [self._any_spec(v) for v, _ in plan.shared]
        self.cells = [cell for _, cell in plan.shared]
        self.const_slots: list[int] = []
        self.consts: list[np.ndarray] = []
        self.keep: list[Any] = []  # kernel libraries: their code must outlive the program
        last_use = {var: k for k, node in enumerate(plan.nodes) for var in node.inputs}
        for k, node in enumerate(plan.nodes):
            for out in node.outputs:
                last_use.setdefault(out, k)
        wanted = set(plan.outputs)
        self.roots: dict[Variable, Variable] = {}  # value -> the buffer it lives in
        self.computed = {out for node in plan.nodes for out in node.outputs}
        self.kernel_of = dict(zip(plan.nodes, plan.kernels))
        self.steps: list[Step] = []
        self.notes = []
        for k, (node, kernel) in enumerate(zip(plan.nodes, plan.kernels)):
            step = self._step(node, kernel)
            if step.kind != StepKind.PYTHON:
                step.fallback = self._fallback(node, kernel)
            # Inputs die too: a loop hands its carries over (program.c), and a carry
            # whose slot dies at a BLAS update can then be updated in place.
            dead = [
                self.slots[v]
                for v in (*node.inputs, *node.outputs)
                if v in self.slots and last_use[v] == k and v not in wanted
            ]
            step.free = sorted(set(dead))
            self.steps.append(step)
            created = node.outputs[0].created_at or "unknown"
            self.notes.append(
                f"while computing {node.op} [kernel {kernel.name}], node created at {created}"
            )
        self.outputs = [self._slot(v) for v in plan.outputs]
        # All-or-nothing calls (core/compile/commit.py): program.c checks these kinds.
        kinds = {node: step.kind for node, step in zip(plan.nodes, self.steps)}
        checked = steps.checked_kinds()
        commits = commit_plan(
            plan.nodes,
            lambda node: kinds[node] in checked,
            lambda node: (
                kinds[node] not in (StepKind.PYTHON, StepKind.NATIVE)
                and self.kernel_of[node].cannot_fail(node)
            ),
        )
        snapshots = [
            (k, self.slots[root])
            for k, roots in sorted(commits.snapshots.items())
            for root in roots
        ]
        # A failed call copies saved values back into their slots: those stay alive.
        kept = {slot for _, slot in snapshots}
        for step in self.steps:
            step.free = [slot for slot in step.free if slot not in kept]
        prechecks = [
            (k, [(self.slots[v], self.slots[commits.stand_ins[v]])
                 for v in plan.nodes[k].inputs if v in commits.stand_ins])
            for k in commits.prechecks
        ]  # fmt: skip
        self.commit = (commits.first, prechecks, snapshots)

    def arguments(self) -> tuple:
        return (
            len(self.slots),
            self.inputs,
            self.shared,
            self.cells,
            self.const_slots,
            self.consts,
            self.steps,
            self.outputs,
            tuple(self.notes),
            tuple(self.keep),
            stream_min_bytes(),
            self.commit,
            (row_block_bytes(), row_group_min_bytes()),
        )

    def _value_spec(self, var: Variable) -> tuple[int, int, list[int]]:
        _check_tensor(var)
        self.slots[var] = len(self.slots)
        return (self.slots[var], _typenum(var), _static(var))

    def _any_spec(self, var: Variable) -> tuple[int, int, list[int]]:
        """An input's or shared variable's spec. A value of another type than a tensor
        (a generator state, a sparse matrix) is passed unchecked to the Python and native
        steps that read it: its type filtered it (when set, or on the cells' path: the
        program says it does not take such arguments unfiltered)."""
        if isinstance(var.type, TensorType):
            return self._value_spec(var)
        self.slots[var] = len(self.slots)
        return (self.slots[var], ANY_OBJECT, [])

    def _slot(self, var: Variable) -> int:
        """The slot of a value an earlier step, an input or a constant provides."""
        if var in self.slots:
            return self.slots[var]
        if not isinstance(var, Constant):
            raise Unsupported(f"{var} is neither computed nor an input")
        _check_tensor(var)
        value = var.data
        if not (
            type(value) is np.ndarray
            and value.dtype == var.type.numpy_dtype
            and value.ndim == var.type.ndim
        ):
            raise Unsupported(f"constant {var} holds {type(value).__name__}")
        self.slots[var] = len(self.slots)
        self.const_slots.append(self.slots[var])
        self.consts.append(value)
        return self.slots[var]

    def _new_slot(self, var: Variable) -> int:
        _check_tensor(var)
        self.slots[var] = len(self.slots)
        return self.slots[var]

    def _root(self, var: Variable) -> Variable:
        return self.roots.get(var, var)

    def _not_computed(self, root: Variable) -> int:
        """1 when a buffer is not one this program computed (an input's, a shared
        variable's, or, for a segment of a larger function, an earlier node's): a step
        writing into it overwrites a value the call did not create here."""
        return int(root not in self.computed)

    def _step(self, node: Apply, kernel: Kernel) -> Step:
        """The node's step, from its kernel's spec (core/registries.py); a node its
        kernel has no C step for (Op.perform, another backend's kernel, a case the C
        step does not cover) runs as a Python step."""
        spec = kernel.spec
        if spec is not None and spec.step is not None and spec.backend == "c":
            with contextlib.suppress(Unsupported):
                return spec.step(self, node, kernel.plan)
        return self.python(node, kernel)

    def python(self, node: Apply, kernel: Kernel) -> Step:
        """A step calling the node's own kernel with its input values and one cell per
        output (``kernel.factory(node)``, the per-node VM's contract)."""
        ops, outs = self._own_values_step(node, f"kernel {kernel.name}")
        thunk = _explaining(kernel.factory(node), node, kernel.name)
        return Step(StepKind.PYTHON, outs[0][0], ops=ops, thunk=thunk, outs=outs)

    def native(self, node: Apply, native_step: native.NativeStep) -> Step:
        """A plugin's C function run by the program itself (native.py, native.h); its
        operands may be of any type."""
        ops, outs = self._own_values_step(node, f"native {native_step.function}")
        module, addresses = native.load(
            native_step.source, (native_step.function,), native_step.what
        )
        self.keep.append(module)
        return Step(
            StepKind.NATIVE, outs[0][0], fns=[addresses[native_step.function]], ops=ops, outs=outs
        )

    def _own_values_step(self, node: Apply, what: str) -> tuple[list[int], list[tuple]]:
        """The operand slots (any value) and output slots of a step whose kernel makes
        its own values (a Python or native step): (slot, typenum or ANY_OBJECT, ndim)
        per output. Only host nodes that overwrite nothing: an in-place update must be
        one the program can order, check and undo (commit.py). Its views keep their
        buffer's root, so a later in-place step through one is seen as overwriting it."""
        op = node.op
        if op.destroy_map or not node.outputs or node_device(node) != HOST:
            raise Unsupported(f"{op} [{what}]: not a host step without updates")
        if max(len(node.inputs), len(node.outputs)) > MAX_OPERANDS:
            raise Unsupported(f"{op}: {len(node.inputs)} inputs, {len(node.outputs)} outputs")
        ops = [self._python_operand(v) for v in node.inputs]
        outs = []
        for j, out in enumerate(node.outputs):
            viewed = node.op.view_map.get(j)
            self.roots.pop(out, None)  # (a C step that gave up may have set one)
            if viewed:
                self.roots[out] = self._root(node.inputs[viewed[0]])
            if isinstance(out.type, TensorType):
                outs.append((self._new_slot(out), _typenum(out), out.type.ndim))
            else:
                self.slots[out] = len(self.slots)
                outs.append((self.slots[out], ANY_OBJECT, 0))
        return ops, outs

    def _fallback(self, node: Apply, kernel: Kernel) -> tuple[Callable[[list], list], list[int]]:
        """A C step's way out when it declines after the call ran a Python step or
        overwrote a value it did not save (the per-node path can not rerun the call
        then): the node's own per-node kernel, built on first use, raises the error the
        per-node path would, or computes the value the step would not."""
        slots = [self._python_operand(v) for v in node.inputs]
        built: list = []

        def run_node(values: list) -> list:
            if not built:
                built.append(_explaining(kernel.factory(node), node, kernel.name))
            cells = [[None] for _ in node.outputs]
            built[0](values, cells)
            return [cell[0] for cell in cells]

        return (run_node, slots)

    def _python_operand(self, var: Variable) -> int:
        """The slot of an input handed to Python (a Python step, a fallback): any
        value, constants of any type too. A constant C steps could not read (not an
        exact array of its type) gets a slot of its own, which no C step reads."""
        if var in self.slots or not isinstance(var, Constant):
            return self._slot(var)
        if isinstance(var.type, TensorType):
            with contextlib.suppress(Unsupported):
                return self._slot(var)
        key = ("object constant", var)
        if key not in self.slots:
            self.slots[key] = len(self.slots)  # type: ignore[index]
            self.const_slots.append(self.slots[key])  # type: ignore[index]
            self.consts.append(var.data)
        return self.slots[key]  # type: ignore[index]

    def decline(self, node: Apply) -> Step:
        raise Unsupported(f"{node.op}: no C program step (it runs as a Python step)")

    def _load(self, node: Apply, symbols: tuple[str, ...], source: str, cdef: str) -> list:
        return self._addresses(*compiler.load(source, cdef, symbols, what=str(node.op)), symbols)

    def _addresses(self, ffi: Any, lib: Any, names: Any) -> list[int]:
        """The addresses of ``lib``'s functions ``names`` (``lib`` is kept loaded)."""
        self.keep.append(lib)
        return [int(ffi.cast("uintptr_t", getattr(lib, name))) for name in names]

    def elemwise(self, node: Apply, plan: kernels.ElemwisePlan) -> Step:
        kinds, bcast, source, cdef, flat = plan
        out = node.outputs[0]
        ndim = out.type.ndim
        operands = [i for i, kind in enumerate(kinds) if kind != "const"]
        if len(operands) + len(node.outputs) > MAX_OPERANDS or any(len(b) != ndim for b in bcast):
            raise Unsupported(f"{node.op}: {len(operands)} operands")
        if flat:
            functions = ("tj_contig_u", "tj_strided_u", "tj_contig_stream_u", "tj_strided_stream_u")
            entries = self._load(node, functions, source, cdef)
        else:  # (program.c calls the strided entries when the flat ones are NULL)
            functions = ("tj_strided_u", "tj_strided_stream_u")
            strided, streams = self._load(node, functions, source, cdef)
            entries = [0, strided, 0, streams]
        ops = [self._slot(node.inputs[i]) for i in operands]
        masks = [sum(1 << a for a, b in enumerate(bcast[i]) if b) for i in operands]
        full = [int(kinds[i] == "full") for i in operands]
        target = -1
        destroys = 0
        # Written in place: output -> input (Elemwise: output 0; a MultiOutputElemwise:
        # its pairs, each output's pointer then its input's buffer)
        multi = len(node.outputs) > 1
        pairs = (
            node.op.inplace if multi else [] if node.op.inplace is None else [(0, node.op.inplace)]
        )
        for k, i in pairs:
            root = self._root(node.inputs[i])
            self.roots[node.outputs[k]] = root
            destroys |= self._not_computed(root)
        if pairs and not multi:
            target = operands.index(node.op.inplace)
        slot = self._new_slot(out)
        # Outputs after the first (a MultiOutputElemwise) are the kernel's pointers
        # after the first output's.
        outs = [(self._new_slot(v), _typenum(v), v.type.ndim) for v in node.outputs[1:]]
        targets = []
        if outs:
            outs.insert(0, (slot, _typenum(out), ndim))
            into = dict(pairs)
            targets = [operands.index(into[k]) if k in into else -1 for k in range(len(outs))]
        return Step(StepKind.ELEMWISE, slot, _typenum(out), ndim, ops=ops, fns=entries,
                    bcast=masks, full=full, target=target, dims=_static(out),
                    destroys=destroys, outs=outs, targets=targets)  # fmt: skip

    def reduce(self, node: Apply, plan: kernels.ReducePlan) -> Step:
        kept, bcast, operands, source, cdef = plan
        out = node.outputs[0]
        if out.type.ndim != len(kept):
            raise Unsupported(f"{node.op} keeps its reduced axes")
        if len(node.outputs) > 2 or any(v.type != out.type for v in node.outputs):
            raise Unsupported(f"{node.op}: outputs of different types")
        if len(operands) > MAX_OPERANDS:
            raise Unsupported(f"{node.op}: {len(operands)} operands")
        (fn,) = self._load(node, ("tj_reduce_u",), source, cdef)
        axes = kept + list(node.op.axis)
        needs_elements = int(node.op.kind in ("max", "min"))
        ops = [self._slot(node.inputs[i]) for i in operands]
        masks = [sum(1 << a for a, b in enumerate(pattern) if b) for pattern in bcast]
        # An operand broadcast everywhere (one element) gives no length.
        full = [int(not all(pattern)) for pattern in bcast]
        mapped = [node.inputs[i] for i in operands]
        static = [-1] * len(axes)
        for a in range(len(axes)):
            lengths = {v.type.shape[a] for v, b in zip(mapped, bcast) if not b[a]}
            known = [n for n in lengths if n is not None]
            static[a] = known[0] if known else (1 if not lengths else -1)
        slot = self._new_slot(out)
        # A second output (Moments' m2s, of the first's shape and type) is the kernel's
        # pointer after the operands.
        outs = [(self._new_slot(v), _typenum(v), v.type.ndim) for v in node.outputs[1:]]
        if outs:
            outs.insert(0, (slot, _typenum(out), out.type.ndim))
        return Step(StepKind.REDUCE, slot, _typenum(out), len(kept), ops=ops, fns=[fn],
                    bcast=masks, full=full, dims=static, axes=axes, n_kept=len(kept),
                    needs_elements=needs_elements, outs=outs)  # fmt: skip

    def dimshuffle(self, node: Apply, plan: object = None) -> Step:
        op = node.op
        out = node.outputs[0]
        x = self._slot(node.inputs[0])
        self.roots[out] = self._root(node.inputs[0])
        axes = [-1 if d == "x" else int(d) for d in op.new_order]
        slot = self._new_slot(out)
        return Step(StepKind.DIMSHUFFLE, slot, _typenum(out), len(axes), ops=[x], bcast=[0],
                    full=[1], axes=axes, dropped=list(op.dropped))  # fmt: skip

    def _index_codes(self, node: Apply, indices: list[Variable]) -> list[int]:
        """Per indexed axis of a basic index (Subtensor's entries): 0 for an integer,
        else 8 | 1 (start) | 2 (stop) | 4 (step) for a slice (program.c's codes)."""
        for index in indices:
            _check_tensor(index)
            if index.type.ndim != 0 or np.dtype(index.type.dtype).kind not in "iu":
                raise Unsupported(f"{node.op}: index {index}")
        return [0 if e == "i" else 8 | sum(1 << p for p, f in enumerate(e[1:]) if f)
                for e in node.op.entries]  # fmt: skip

    def subtensor(self, node: Apply, plan: object = None) -> Step:
        x, *indices = node.inputs
        out = node.outputs[0]
        codes = self._index_codes(node, indices)
        ops = [self._slot(v) for v in node.inputs]
        self.roots[out] = self._root(x)
        slot = self._new_slot(out)
        return Step(StepKind.SUBTENSOR, slot, _typenum(out), out.type.ndim, ops=ops, axes=codes)

    def inc_subtensor(self, node: Apply, plan: object = None) -> Step:
        """An in-place IncSubtensor/SetSubtensor (a scan gradient's rows added into a
        zero buffer); a copying one runs as a Python step."""
        op = node.op
        if not op.inplace:
            raise Unsupported(f"{op}: not in place")
        x, y, *indices = node.inputs
        _check_tensor(y)
        out = node.outputs[0]
        codes = self._index_codes(node, indices)
        ops = [self._slot(v) for v in node.inputs]
        root = self.roots[out] = self._root(x)
        destroys = self._not_computed(root)
        slot = self._new_slot(out)
        return Step(StepKind.INC_SUBTENSOR, slot, _typenum(out), out.type.ndim, ops=ops,
                    target=0, axes=codes, n_kept=int(op.set_instead_of_inc),
                    destroys=destroys)  # fmt: skip

    def blas(self, node: Apply, plan: object = None) -> Step:
        op = node.op
        out = node.outputs[0]
        if type(op) is not Dot:
            for scalar in node.inputs[1:2] + node.inputs[4:]:  # alpha (and Gemm's beta)
                if scalar.type.dtype not in blas.DTYPES:
                    raise Unsupported(f"{op}: {scalar} of dtype {scalar.type.dtype}")
        p = blas.DTYPES[out.type.dtype][0]
        names = [f"tj_{name}_{p}" for name in ("gemm", "gemv", "ger", "dot")]  # TJ_FN_* order
        fns = self._addresses(*blas.library(), names)
        ops = [self._slot(v) for v in node.inputs]
        target, destroys = -1, 0
        if op.inplace:
            target = 0
            root = self.roots[out] = self._root(node.inputs[0])
            destroys = self._not_computed(root)
        kind = {Dot: StepKind.DOT, Gemm: StepKind.GEMM}.get(type(op), StepKind.GER)
        slot = self._new_slot(out)
        return Step(kind, slot, _typenum(out), out.type.ndim, ops=ops, fns=fns, target=target,
                    destroys=destroys)  # fmt: skip

    def penalised(self, node: Apply, plan: object = None) -> Step:
        """PenalisedGemm: operands as Gemm's; its second output (the sum) goes in
        ``axes``, the sum's dtype in ``n_kept`` (program.c's tj_penalised)."""
        z, alpha, x, y, beta = node.inputs
        updated, squares = node.outputs
        for scalar in (alpha, beta):
            if scalar.type.dtype not in blas.DTYPES:
                raise Unsupported(f"{node.op}: {scalar} of dtype {scalar.type.dtype}")
        fns = self._addresses(*blas.library(), [penalised.function_name(z.type.dtype)])
        ops = [self._slot(v) for v in node.inputs]
        target, destroys = -1, 0
        if node.op.inplace:
            target = 0
            root = self.roots[updated] = self._root(z)
            destroys = self._not_computed(root)
        slot = self._new_slot(updated)
        total = self._new_slot(squares)
        return Step(StepKind.PENALISED, slot, _typenum(updated), updated.type.ndim, ops=ops,
                    fns=fns, target=target, axes=[total], n_kept=_typenum(squares),
                    destroys=destroys)  # fmt: skip

    def rowwise(self, node: Apply, plan: object = None) -> Step:
        axis, rows, checks_classes, source, cdef = rowwise.program_plan(node)
        (fn,) = self._load(node, ("tj_rows_u",), source, cdef)
        out = node.outputs[0]
        # The first operand gives the shape; the kernel's inputs follow.
        ops = [self._slot(node.inputs[0])]
        ops += [self._slot(node.inputs[i]) for i in rowwise.kernel_inputs(node)]
        slot = self._new_slot(out)
        return Step(StepKind.ROWWISE, slot, _typenum(out), out.type.ndim, ops=ops, fns=[fn],
                    full=[int(r) for r in rows], axes=[axis],
                    needs_elements=int(checks_classes))  # fmt: skip

    def alloc(self, node: Apply, plan: object = None) -> Step:
        value, *shape = node.inputs
        for length in shape:
            _check_tensor(length)
            if length.type.ndim != 0 or np.dtype(length.type.dtype).kind not in "iu":
                raise Unsupported(f"{node.op}: length {length}")
        out = node.outputs[0]
        ops = [self._slot(v) for v in node.inputs]
        slot = self._new_slot(out)
        return Step(StepKind.ALLOC, slot, _typenum(out), out.type.ndim, ops=ops, dims=_static(out))

    def arange(self, node: Apply, plan: object = None) -> Step:
        return self._integer_vector(node, StepKind.ARANGE, [])

    def _integer_vector(self, node: Apply, kind: StepKind, dims: list[int]) -> Step:
        """The step of ``kind`` making an int64 or int32 vector from integer scalars
        (ARange's bounds, MakeVector's entries)."""
        out = node.outputs[0]
        if out.type.dtype not in ("int64", "int32"):
            raise Unsupported(f"{node.op}: dtype {out.type.dtype}")
        for v in node.inputs:
            _check_tensor(v)
            if v.type.ndim != 0 or np.dtype(v.type.dtype).kind not in "iu":
                raise Unsupported(f"{node.op}: operand {v}")
        ops = [self._slot(v) for v in node.inputs]
        slot = self._new_slot(out)
        return Step(kind, slot, _typenum(out), 1, ops=ops, dims=dims)

    def indexing(self, node: Apply, plan: object = None) -> Step:
        """``x[rows, cols]`` and its inc/set (program.c's pair steps); other indexing
        keeps the per-node kernels."""
        if not indexing.pair_indexed(node):
            raise Unsupported(f"{node.op}: only two index vectors on a matrix")
        op, out = node.op, node.outputs[0]
        if out.type.dtype not in indexing.PAIR_DTYPES:
            raise Unsupported(f"{node.op}: dtype {out.type.dtype}")
        ops = [self._slot(v) for v in node.inputs]
        if isinstance(op, AdvancedSubtensor):
            slot = self._new_slot(out)
            return Step(StepKind.PAIR_TAKE, slot, _typenum(out), 1, ops=ops)
        value = node.inputs[1]
        if value.type.ndim > 1 or value.type.dtype != out.type.dtype:
            raise Unsupported(f"{node.op}: value {value}")
        target, destroys = -1, 0
        if op.inplace:
            target = 0
            root = self.roots[out] = self._root(node.inputs[0])
            destroys = self._not_computed(root)
        # n_kept: the value may broadcast (its type says one element); axes[0]: set.
        broadcasts = int(value.type.ndim == 0 or value.type.shape == (1,))
        slot = self._new_slot(out)
        return Step(StepKind.PAIR_SCATTER, slot, _typenum(out), 2, ops=ops, target=target,
                    axes=[int(op.set_instead_of_inc)], n_kept=broadcasts,
                    destroys=destroys)  # fmt: skip

    def reshape(self, node: Apply, plan: object = None) -> Step:
        """A view of the input, or of a C-ordered copy of it when it is not C-contiguous
        (as NumPy's reshape); a shape that does not fit is declined (the node's own
        kernel raises NumPy's error)."""
        x, shape = node.inputs
        _check_tensor(x)
        if np.dtype(shape.type.dtype) not in (np.dtype("int64"), np.dtype("int32")):
            raise Unsupported(f"{node.op}: a shape of dtype {shape.type.dtype}")
        out = node.outputs[0]
        ops = [self._slot(x), self._slot(shape)]
        self.roots[out] = self._root(x)
        slot = self._new_slot(out)
        return Step(
            StepKind.RESHAPE, slot, _typenum(out), out.type.ndim, ops=ops, dims=_static(out)
        )

    def make_vector(self, node: Apply, plan: object = None) -> Step:
        """Integer scalars into an int64 or int32 vector (the shapes of Reshape, Alloc)."""
        return self._integer_vector(node, StepKind.MAKE_VECTOR, [len(node.inputs)])

    def shape(self, node: Apply, plan: object = None) -> Step:
        out = node.outputs[0]
        ops = [self._slot(node.inputs[0])]
        slot = self._new_slot(out)
        return Step(StepKind.SHAPE, slot, _typenum(out), 1, ops=ops)
