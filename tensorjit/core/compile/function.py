"""``function()``: compile symbolic inputs/outputs/updates into a Python callable."""

from __future__ import annotations

import dataclasses
import functools
import gc
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from tensorjit.core.compile.call_path import CallPath
from tensorjit.core.compile.commit import commits_last
from tensorjit.core.compile.debugmode import ReplacementRecorder, RewriteChecker, checked_kernel
from tensorjit.core.compile.lazy import lazy_schedule
from tensorjit.core.compile.linker import link
from tensorjit.core.compile.mode import Mode, get_mode
from tensorjit.core.compile.profiling import ProfileStats
from tensorjit.core.compile.program import ProgramVM
from tensorjit.core.config import config
from tensorjit.core.devices import HOST, default_device
from tensorjit.core.diagnostics import TensorjitRuntimeWarning, TensorjitWarning
from tensorjit.core.graph.basic import Constant, Variable, use_compiler
from tensorjit.core.graph.fgraph import (
    OUTPUT,
    Feature,
    FunctionGraph,
    InconsistencyError,
    MissingInputError,
)
from tensorjit.core.graph.traversal import ancestors, clone_replace, graph_inputs, toposort
from tensorjit.core.hooks import get_plugin_system
from tensorjit.core.kernel_selection import BackendChoice, CompileError
from tensorjit.core.memory.copy_op import deep_copy
from tensorjit.core.memory.destroy_handler import DestroyHandler, destroyed_inputs
from tensorjit.core.memory.io import In, Out
from tensorjit.core.memory.plan import MemoryPlan, protected_inputs
from tensorjit.core.memory.shared import SharedVariable
from tensorjit.core.memory.transfer_op import transfer
from tensorjit.core.rewrites.db import RewriteQuery
from tensorjit.core.rewrites.runner import RewriteStats, run_phases
from tensorjit.core.rewrites.transfer import InternalOutputs, host_nodes_of_device_function


class UnusedInputError(ValueError):
    """An explicit input does not influence any output or update."""


class PluginVeto(Feature):
    """Lets plugins veto substitutions through ``tensorjit_validate_replacement``."""

    def __init__(self, hook):
        self.hook = hook

    def on_validate(self, fgraph, replacements, reason) -> None:
        self.hook(fgraph=fgraph, replacements=list(replacements), reason=reason)


def _pairs(mapping: Mapping | Sequence | None, what: str) -> list[tuple[Any, Any]]:
    if mapping is None:
        return []
    if isinstance(mapping, Mapping):
        return list(mapping.items())
    pairs = list(mapping)
    for item in pairs:
        if not (isinstance(item, tuple) and len(item) == 2):
            raise TypeError(f"{what} must be a dict or a list of (variable, value) pairs")
    return pairs


class Function:
    """A compiled function. Call it with NumPy values (or a device's values for inputs
    typed on that device); it returns NumPy values, except for
    ``Out(y, return_internal_type=True)`` outputs computed on a device.

    ``maker`` facts are kept for introspection: ``fgraph`` (the rewritten graph),
    ``kernels`` (node -> kernel chosen), ``rewrite_stats``; ``memory`` is its memory
    plan (core/memory/plan.py), which every call path follows.
    """

    def __init__(
        self,
        inputs: list[In],
        outputs: list[Out],
        unpack_single: bool,
        updates: list[tuple[SharedVariable, Variable]],
        shared_inputs: list[SharedVariable],
        fgraph: FunctionGraph,
        mode: Mode,
        name: str | None,
        stats: RewriteStats,
        checker: RewriteChecker | None = None,
        profile: bool = False,
    ):
        self.inputs = inputs
        self.outputs = outputs
        self.unpack_single = unpack_single
        self.fgraph = fgraph
        self.mode = mode
        self.name = name
        self.rewrite_stats = stats
        self.shared_inputs = shared_inputs
        label = f"compiled function {name!r}" if name else "compiled function"
        memory = MemoryPlan(inputs, outputs, fgraph, shared_inputs, [s for s, _ in updates], label)
        self.memory = memory
        #: Theano's ``f.trust_input``: calls skip the checks and conversions of
        #: arguments, which must then be exactly of the inputs' types, all given.
        self.trust_input = False
        #: With ``function(inputs, {name: output})``: the names, sorted; calls return a
        #: dict.
        self.output_keys: list | None = None
        self._construction: dict[str, Any] = {}  # function()'s arguments, for copy()

        order = commits_last(fgraph, fgraph.toposort())
        lazy_blocks: list = []
        if any(n.op.lazy_branches is not None for n in order):
            ordered = fgraph.get_feature(DestroyHandler).orderings(fgraph)
            pinned = set(ordered) | {n for before in ordered.values() for n in before}
            order, lazy_blocks = lazy_schedule(fgraph, order, pinned)
        choice = fgraph.get_feature(BackendChoice)
        backends = choice.backends
        kernels = choice.source.choose_kernels(order, backends)
        if mode.debug:
            kernels = [checked_kernel(k) for k in kernels]
        self.kernels = dict(zip(order, kernels))
        linking = time.perf_counter()
        self.vm, program = link(order, kernels, memory, backends, lazy_blocks, mode.debug)
        self._profile = ProfileStats(name, stats, enabled=profile)
        self._profile.compile_seconds["linking and kernels"] = time.perf_counter() - linking
        #: the call path: filter -> run (program or VM) -> commit (core/compile/call_path.py)
        self.calls = CallPath(memory, self.vm, program, checker, self._profile, unpack_single)
        self._run = self.calls.run  # (calls.timed once profiling)
        if profile:
            self._start_profiling(order, kernels, program)

    def _start_profiling(self, order: list, kernels: list, program: Any) -> None:
        """Time what runs: the VM's steps, and the whole-graph program if there is one
        (the call path times whole calls)."""
        vm = self.vm.vm if isinstance(self.vm, ProgramVM) else self.vm
        # Calls run the program only through the direct path or a ProgramVM (not when an
        # Out(borrow=True) keeps them on the VM).
        whole = self.calls.direct is not None or isinstance(self.vm, ProgramVM)
        self._profile.describe_schedule(order, kernels, vm.segments, whole)
        self._profile.instrument(vm)
        if whole:
            timed = self._profile.timed_program(program)
            self.calls.use_program(timed)
            if isinstance(self.vm, ProgramVM):
                self.vm.program = timed
        self._run = self.calls.timed

    # ---------------------------------------------------------------- Theano's API
    @property
    def maker(self) -> FunctionMaker:
        """What built this function: ``fgraph`` (the rewritten graph: its
        ``toposort()`` shows what the rewrites did), ``inputs``, ``outputs``, ``mode``."""
        return FunctionMaker(self.fgraph, self.inputs, self.outputs, self.mode)

    @property
    def container(self) -> InputMap:
        """``f.container[x]``: the Container holding input ``x``'s default (by variable,
        name or position; a shared variable gives its own storage's container)."""
        return InputMap(self, lambda container: container)

    @property
    def value(self) -> InputMap:
        """``f.value[x]``: input ``x``'s default value (``f[x]`` for short)."""
        return InputMap(self, lambda container: container.value)

    @property
    def defaults(self) -> list[tuple[bool, bool, Any]]:
        """Theano's ``f.defaults``: per input, (required, updated, default value)."""
        return [
            (container.value is None, inp.update is not None, container.value)
            for inp, container in zip(self.inputs, self.memory.containers)
        ]

    def __getitem__(self, key: Any) -> Any:
        return self.container[key].value

    def __setitem__(self, key: Any, value: Any) -> None:
        self.container[key].value = value

    def find_container(self, key: Any) -> Any:
        """The container of the input that ``key`` (variable, name or index) names."""
        containers = self.memory.containers
        if isinstance(key, int) and not isinstance(key, bool):
            return containers[key]
        if isinstance(key, SharedVariable):
            return key.container
        for inp, container in zip(self.inputs, containers):
            if key is inp.variable or (isinstance(key, str) and key == inp.name):
                return container
        names = [inp.name or inp.variable.describe() for inp in self.inputs]
        raise KeyError(f"{key!r} is not an input of this function; inputs: {names}")

    def copy(
        self,
        share_memory: bool = False,
        swap: Mapping | None = None,
        delete_updates: bool = False,
        name: str | None = None,
        profile: Any = None,
    ) -> Function:
        """A new function computing the same thing, compiled again (kernels come from
        the compile cache). ``share_memory``: the copy shares this one's input defaults
        (else it gets copies of the mutable ones); ``swap``: {shared: other shared}
        uses other shared variables in their place (their updates too);
        ``delete_updates``: the copy updates nothing. ``profile``: whether the copy records
        a run-time profile (default: as this function)."""
        made = dict(self._construction)
        if not made:
            raise TypeError("this function was not built by function(); it can not be copied")
        inputs = []
        for inp, container in zip(self.inputs, self.memory.containers):
            if share_memory:
                value: Any = container
            elif inp.mutable and container.value is not None:
                value = inp.variable.type.copy_value(container.value)
            else:
                value = container.value
            inputs.append(dataclasses.replace(inp, value=value))
        swap = dict(swap or {})
        updates = [] if delete_updates else [(swap.get(s, s), u) for s, u in made["updates"]]
        givens = list(made["givens"]) + list(swap.items())
        profiled = self._profile.enabled if profile is None else bool(profile)
        return _rebuild_function(
            inputs, made["outputs"], updates, givens, self.mode, name or self.name,
            made["accept_inplace"], made["rebuild_strict"], profile=profiled,
        )  # fmt: skip

    def __repr__(self) -> str:
        inputs = ", ".join(
            f"{inp.name or inp.variable}: {inp.variable.type}" for inp in self.inputs
        )
        n_out = self.memory.n_outputs
        n_upd = len(self.memory.updated_shared)
        runs = "one whole-graph program" if self.calls.program is not None else "per node"
        if self.calls.program is None and getattr(self.vm, "segment_nodes", False):
            runs = f"per node, {self.vm.segment_nodes} nodes in program segments"
        return (
            f"<tensorjit Function {self.name or '<unnamed>'}({inputs}) -> {n_out} output"
            f"{'s' if n_out != 1 else ''}, {n_upd} update{'s' if n_upd != 1 else ''}; "
            f"{len(self.kernels)} nodes, {runs}>"
        )

    def __copy__(self) -> Function:
        return self.copy()

    def __reduce__(self) -> tuple:
        """Pickles what built the function (its graph, mode, input defaults and the
        shared variables it uses, with their values); unpickling compiles it again,
        with kernels from the compile cache."""
        made = self._construction
        if not made:
            raise TypeError("this function was not built by function(); it can not be pickled")
        inputs = [
            dataclasses.replace(inp, value=container)
            for inp, container in zip(self.inputs, self.memory.containers)
        ]
        arguments = (inputs, made["outputs"], made["updates"], made["givens"], self.mode)
        flags = (made["accept_inplace"], made["rebuild_strict"], self.trust_input)
        return (_rebuild_function, (*arguments, self.name, *flags, self._profile.enabled))

    @property
    def profile(self) -> ProfileStats:
        """Compile phases and which rewrites fired (``applied``); with ``profile=True``
        also run time per node, op class and program: ``f.profile.report()``."""
        return self._profile

    def free(self) -> None:
        """Release the buffers the function keeps for reuse between calls."""
        self.vm.free()
        for var in self.fgraph.outputs:
            if var.owner is not None:  # never an input's, a shared variable's or a constant's
                self.vm.storage[var][0] = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        outputs = self._run(args, kwargs, self.trust_input)  # core/compile/call_path.py
        if self.output_keys is None:
            return outputs
        return dict(zip(self.output_keys, outputs))  # (the per-node path: see function())

    def program_loop(self) -> Any:
        """The ``loop`` of this function's whole-graph program (see
        core/compile/program.py) when it has one and updates nothing; else None."""
        return self.calls.loop()

    def call_trusted(
        self, values: Sequence[Any], returned: Sequence[int] | None = None
    ) -> list[Any]:
        """A fast path for internal callers such as loops: ``values`` are already of the
        inputs' types (one per input, no defaults or keywords) and the caller copies the
        outputs it keeps before the next call (they are not copied here). ``returned``:
        the positions of the values that may be (views of) this function's earlier
        outputs (a loop's carried state); None: any value may be."""
        if self.calls.checker is not None or len(values) != self.calls.n_inputs:
            return self(*values)
        return self.calls.trusted(values, returned)


def _check_device(device: str, system: Any) -> None:
    """``config.device`` must name a device some backend plugin registered."""
    known = system.registries.backends.devices()
    if device not in known:
        raise ValueError(
            f"config.device is {device!r}, but no installed backend provides that device "
            f"(known devices: {', '.join(known)}); install or enable the plugin of a "
            f"{device} backend, or set device to one of these (python -m tensorjit info "
            "lists backends and why one is unavailable)"
        )


def _as_in(item: Any) -> In:
    if isinstance(item, In):
        return item
    if isinstance(item, Variable):
        return In(item)
    raise TypeError(f"function inputs must be Variables or In(...), got {item!r}")


def _as_out(item: Any) -> Out:
    if isinstance(item, Out):
        return item
    if isinstance(item, Variable):
        return Out(item)
    raise TypeError(
        f"function outputs must be Variables or Out(...), got {type(item).__name__} {item!r}"
    )


def _cyclic_gc_paused(fn):
    """Compiling creates many objects and no garbage cycles worth collecting; Python's
    cyclic collector would rescan the whole growing heap again and again (superlinear
    compile time), so it waits until compilation ends."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    return wrapper


@_cyclic_gc_paused
def function(
    inputs: Sequence[Variable | In],
    outputs: Any = None,
    updates: Mapping | Sequence | None = None,
    givens: Mapping | Sequence | None = None,
    mode: str | Mode | None = None,
    name: str | None = None,
    on_unused_input: str | None = None,
    allow_input_downcast: bool | None = None,
    accept_inplace: bool = False,
    no_default_updates: bool | Sequence[SharedVariable] = False,
    rebuild_strict: bool = True,
    profile: bool | None = None,
) -> Function:
    """Compile a callable computing ``outputs`` from ``inputs``.

    Shared variables used by the graph are implicit inputs. ``updates`` (dict or list of
    (shared, expression) pairs) are stored after all outputs are computed. ``givens``
    substitutes variables in the graph before compiling. Graphs built by hand with
    inplace ops need ``accept_inplace=True``; such ops then work on copies of values they
    may not destroy (inputs that are not ``In(x, mutable=True)``, constants, ...).
    Shared variables with a ``default_update`` are updated by it unless
    ``no_default_updates=True`` or an explicit update is given. ``profile`` (default
    ``config.profile``): record run time per node, op class and program
    (``f.profile.report()``).
    """
    compile_started = time.perf_counter()
    profile = config.profile if profile is None else bool(profile)
    on_unused_input = on_unused_input or config.on_unused_input
    if on_unused_input not in ("raise", "warn", "ignore"):
        raise ValueError(
            f"on_unused_input must be 'raise', 'warn' or 'ignore', got {on_unused_input!r}"
        )
    if not isinstance(inputs, (list, tuple)):
        raise TypeError(f"function inputs must be a list of Variables, got {type(inputs).__name__}")
    ins = [_as_in(i) for i in inputs]
    if allow_input_downcast is not None:  # never modify the caller's In objects
        ins = [
            dataclasses.replace(i, allow_downcast=allow_input_downcast)
            if i.allow_downcast is None
            else i
            for i in ins
        ]
    for inp in ins:
        if isinstance(inp.variable, SharedVariable):
            raise TypeError(
                f"shared variable {inp.variable.describe()} can not be an explicit input: "
                "its value is used implicitly (use givens to substitute it)"
            )
        if isinstance(inp.variable, Constant):
            raise TypeError(f"constant {inp.variable.describe()} can not be a function input")
    seen_inputs: set[Variable] = set()
    for inp in ins:
        if inp.variable in seen_inputs:
            raise ValueError(f"input {inp.variable.describe()} is given twice")
        seen_inputs.add(inp.variable)

    output_keys = None
    if isinstance(outputs, Mapping):  # {name: output}: calls return a dict, keys sorted
        output_keys = sorted(outputs)
        outputs = [outputs[k] for k in output_keys]
    unpack_single = False
    if outputs is None:
        outs: list[Out] = []
    elif isinstance(outputs, (list, tuple)):
        outs = [_as_out(o) for o in outputs]
    else:
        outs = [_as_out(outputs)]
        unpack_single = True

    update_pairs = _normalize_updates(updates)
    if no_default_updates is not True:
        skip = set(no_default_updates or ())  # a list names the variables to leave alone
        _add_default_updates(update_pairs, [o.variable for o in outs], skip)
    given_pairs = _normalize_givens(givens, rebuild_strict)
    explicit = {inp.variable for inp in ins}
    for old, _ in given_pairs:
        if old in explicit:
            raise RuntimeError(
                f"givens replaces {old.describe()}, an explicit input of the function: "
                "pass the replacement's inputs instead"
            )

    # Inputs with an owner cut the graph there: substitute a fresh root variable.
    replace: dict[Variable, Variable] = dict(given_pairs)
    roots = []
    for inp in ins:
        var = inp.variable
        if var.owner is not None:
            root = var.type.make_variable(var.name)
            root.created_at = var.created_at
            replace[var] = root
            var = root
        roots.append(var)

    input_updates = []
    for inp in ins:
        if inp.update is not None:
            try:
                input_updates.append(inp.variable.type.filter_update(inp.update))
            except TypeError as exc:
                raise TypeError(f"In({inp.variable.describe()}).update: {exc}") from None
    # A device value is returned as a host array unless Out(return_internal_type=True).
    out_vars = [o.variable if o.return_internal_type else transfer(o.variable, HOST) for o in outs]
    targets = out_vars + [u for _, u in update_pairs] + input_updates
    new_targets, _ = (
        clone_replace(targets, replace, strict=rebuild_strict) if replace else (targets, {})
    )

    _check_inputs(ins, roots, new_targets, on_unused_input)
    used_shared = [v for v in graph_inputs(new_targets) if isinstance(v, SharedVariable)]
    shared_inputs: list[SharedVariable] = []
    for var in used_shared + [s for s, _ in update_pairs]:
        if var not in shared_inputs:
            shared_inputs.append(var)

    if not accept_inplace:
        _refuse_inplace_ops(new_targets, roots)
    system = get_plugin_system()
    n_out = len(outs)
    fgraph = FunctionGraph([*roots, *shared_inputs], new_targets)
    fg_shared = fgraph.inputs[len(roots) :]
    update_index = {
        fg_shared[shared_inputs.index(s)]: n_out + k for k, (s, _) in enumerate(update_pairs)
    }
    handler = DestroyHandler(protected_inputs(ins, fgraph, set(update_index)), update_index)
    fgraph.attach_feature(handler)
    fgraph.attach_feature(PluginVeto(system.pm.hook.tensorjit_validate_replacement))
    if accept_inplace:
        protect_hand_built_destroyers(fgraph, handler)
    mode_obj = get_mode(mode)
    # Placement only moves nodes to devices their inputs live on or to the default one:
    # only those devices' backends are asked whether they can run (lazily, once).
    device = default_device()
    devices = {device} | {v.type.device for v in fgraph.inputs}
    devices |= {v.type.device for v in fgraph.variables if isinstance(v, Constant)}
    _check_device(device, system)
    source = system.kernel_source
    backends = source.backends_for(mode_obj.backends, device, devices)
    fgraph.attach_feature(BackendChoice(backends, device, source))
    internal = [k for k, o in enumerate(outs) if o.return_internal_type]
    if internal:
        fgraph.attach_feature(InternalOutputs(internal))
    recorder = ReplacementRecorder() if mode_obj.debug else None
    if recorder is not None:
        fgraph.attach_feature(recorder)
    stats = RewriteStats()
    query = mode_obj.query.without(*config.excluded_rewrites).including("transfer")
    for backend in backends:
        # A backend may need some rewrite families and be unable to run others.
        query = query.including(*backend.requires_tags).excluding(*backend.excludes_tags)
    rewriting = time.perf_counter()
    run_phases(fgraph, system.registries.rewrites.query(query), stats)
    rewrite_seconds = time.perf_counter() - rewriting
    if config.profile_rewrites:
        print(f"rewrites of function {name or '<unnamed>'}:\n{stats.report()}")
    _check_host_nodes(fgraph, name)
    checker = None
    if recorder is not None:
        fgraph.remove_feature(recorder)
        checker = RewriteChecker(fgraph.inputs, recorder, _compile_unrewritten)
    made = Function(
        ins,
        outs,
        unpack_single,
        update_pairs,
        shared_inputs,
        fgraph,
        mode_obj,
        name,
        stats,
        checker,
        profile,
    )
    linked = made._profile.compile_seconds
    made._profile.compile_seconds = {
        "graph": rewriting - compile_started,
        "rewrites": rewrite_seconds,
        **linked,
    }
    made.output_keys = output_keys
    if output_keys is not None:
        made.calls.call_by_name()  # its calls build a dict from the list
    made._construction = {
        "outputs": outputs if output_keys is None else dict(zip(output_keys, outputs)),
        "updates": update_pairs,
        "givens": given_pairs,
        "accept_inplace": accept_inplace,
        "rebuild_strict": rebuild_strict,
    }
    return made


def _rebuild_function(
    inputs, outputs, updates, givens, mode, name, accept_inplace, rebuild_strict,
    trust_input=False, profile=False,
) -> Function:  # fmt: skip
    """Compile again what built a function (``copy()``, and unpickling)."""
    made = function(
        inputs,
        outputs,
        updates=updates,
        givens=givens,
        mode=mode,
        name=name,
        on_unused_input="ignore",
        accept_inplace=accept_inplace,
        no_default_updates=True,  # the default updates are among ``updates``
        rebuild_strict=rebuild_strict,
        profile=profile,
    )
    made.trust_input = trust_input
    return made


@dataclasses.dataclass(frozen=True)
class FunctionMaker:
    """Theano's ``f.maker``: what a compiled function was built from."""

    fgraph: FunctionGraph
    inputs: list[In]
    outputs: list[Out]
    mode: Mode


class InputMap:
    """``f.container`` / ``f.value``: inputs looked up by variable, name or position."""

    def __init__(self, function: Function, read: Any):
        self._function = function
        self._read = read

    def __getitem__(self, key: Any) -> Any:
        return self._read(self._function.find_container(key))

    def __setitem__(self, key: Any, value: Any) -> None:
        self._function.find_container(key).value = value

    def __contains__(self, key: Any) -> bool:
        try:
            self._function.find_container(key)
        except KeyError:
            return False
        return True


def _compile_unrewritten(inputs: list[Variable], outputs: list[Variable]) -> Function:
    """A plain (no rewrites, Op.perform) function, for DebugMode's rewrite checks."""
    return function(
        [In(v, mutable=True) for v in inputs],
        outputs,
        # Only the placement pass (every mode has it): device values reach host kernels
        # through transfers.
        mode=Mode("unrewritten", RewriteQuery(), backends=("python",)),
        on_unused_input="ignore",
        accept_inplace=True,
    )


def _check_host_nodes(fgraph: FunctionGraph, name: str | None) -> None:
    """Config ``assert_no_cpu_op``: a device function's nodes that run on the host."""
    if config.assert_no_cpu_op == "ignore":
        return
    found = host_nodes_of_device_function(fgraph, default_device())
    if not found:
        return
    listed = "; ".join(
        f"{node.op} (created at {node.outputs[0].created_at or 'unknown'})" for node in found
    )
    message = (
        f"function {name or '<unnamed>'}: {len(found)} node(s) run on the host although the "
        f"function uses a device (config.assert_no_cpu_op={config.assert_no_cpu_op!r}): "
        f"{listed}"
    )
    if config.assert_no_cpu_op == "raise":
        raise CompileError(message)
    warnings.warn(message, TensorjitRuntimeWarning, stacklevel=4)


def _refuse_inplace_ops(targets: list[Variable], roots: list[Variable]) -> None:
    for node in toposort(targets, roots):
        if node.op.destroy_map:
            raise TypeError(
                f"the graph contains the inplace op {node.op} (created at "
                f"{node.outputs[0].created_at or 'unknown'}); inplace ops are introduced by "
                "the inplace rewrite, pass accept_inplace=True to compile a graph built "
                "with them by hand"
            )


def protect_hand_built_destroyers(fgraph: FunctionGraph, handler: DestroyHandler) -> None:
    """Give a hand-built destroyer a private copy of a value it may not destroy.

    A value keeps its meaning for everyone else: the destroyer works on a copy when the
    value is an input that is not mutable, a constant, shared storage outside its own
    update, a value another node destroys, a value the function returns, a value it also
    reads through another input, or a value read by a node that depends on the
    destroyer (which therefore can not run first).
    """
    owner_of_root: dict[Variable, Any] = {}
    for node in toposort(fgraph.outputs, fgraph.inputs):
        for i in destroyed_inputs(node):
            var = node.inputs[i]
            root = handler.root(var)
            readers, returned = handler._readers(node)
            needs_copy = (
                isinstance(root, Constant)
                or root in handler.protected
                or root in owner_of_root
                or (root in handler.update_outputs and not handler._is_own_update(node, root))
                or bool(returned)
                or handler.reads_destroyed_through_alias(node, i) is not None
                or _reaches(fgraph, node, readers)
            )
            if not needs_copy:
                owner_of_root[root] = node
                try:
                    fgraph.toposort()  # with orderings: would running it here need a cycle?
                except InconsistencyError:
                    del owner_of_root[root]
                    needs_copy = True
            if needs_copy:
                fgraph.change_node_input(node, i, deep_copy(var), reason="protect_input")
    handler.on_validate(fgraph, [], "accept_inplace")


def _reaches(fgraph: FunctionGraph, node: Any, targets: set) -> bool:
    """Whether any of ``targets`` depends on ``node``'s outputs."""
    if not targets:
        return False
    seen: set = set()
    stack = list(node.outputs)
    while stack:
        var = stack.pop()
        for client, _ in fgraph.clients.get(var, ()):
            if client in targets:
                return True
            if client != OUTPUT and client not in seen:
                seen.add(client)
                stack.extend(client.outputs)
    return False


def _add_default_updates(update_pairs: list, outputs: list[Variable], skip: set) -> None:
    """Shared variables the graph reads that carry a ``default_update`` (e.g. random
    states) get that update unless the user gave one or listed them in ``skip``
    (Theano's behaviour)."""
    updated = {s for s, _ in update_pairs} | skip
    while True:
        added = False
        targets = outputs + [u for _, u in update_pairs]
        # An op that carries shared state inside (a loop) says so: the states it reads
        # are updated by what it returns, not by their default update.
        for node in toposort(targets):
            if node.op.skip_default_updates:
                updated.update(v for v in node.inputs if isinstance(v, SharedVariable))
        for var in graph_inputs(targets):
            default = getattr(var, "default_update", None)
            if isinstance(var, SharedVariable) and default is not None and var not in updated:
                update_pairs.extend(_normalize_updates([(var, default)]))
                updated.add(var)
                added = True
        if not added:
            return


def _normalize_updates(updates) -> list[tuple[SharedVariable, Variable]]:
    pairs = []
    seen: set[Variable] = set()
    for shared, value in _pairs(updates, "updates"):
        if not isinstance(shared, SharedVariable):
            raise TypeError(
                f"updates: only shared variables can be updated, got "
                f"{shared.describe() if isinstance(shared, Variable) else repr(shared)}"
            )
        if shared in seen:
            raise ValueError(f"updates: {shared.describe()} is updated twice")
        seen.add(shared)
        try:
            value = shared.type.filter_update(value)
        except TypeError as exc:
            raise TypeError(
                f"updates: the update of shared variable {shared.describe()}: {exc}"
            ) from None
        pairs.append((shared, value))
    return pairs


def _normalize_givens(givens, strict: bool = True) -> list[tuple[Variable, Variable]]:
    pairs = []
    for old, new in _pairs(givens, "givens"):
        if not isinstance(old, Variable):
            raise TypeError(f"givens: keys must be Variables, got {old!r}")
        if not strict and isinstance(new, Variable):
            pairs.append((old, new))  # rebuild_strict=False: another type is allowed
            continue
        try:
            new = old.type.filter_variable(new)
        except TypeError as exc:
            raise TypeError(f"givens: replacement for {old.describe()}: {exc}") from None
        pairs.append((old, new))
    return pairs


def _check_inputs(
    ins: list[In], roots: list[Variable], targets: list[Variable], on_unused_input: str
) -> None:
    reachable = set(ancestors(targets, roots))
    for inp, root in zip(ins, roots):
        if root not in reachable:
            msg = (
                f"input {inp.variable.describe()} is not used to compute any output or update "
                "(pass on_unused_input='warn' or 'ignore' to allow this)"
            )
            if on_unused_input == "raise":
                raise UnusedInputError(msg)
            if on_unused_input == "warn":
                warnings.warn(msg, TensorjitWarning, stacklevel=4)
    root_set = set(roots)
    for var in graph_inputs(targets, roots):
        if var in root_set or isinstance(var, (Constant, SharedVariable)):
            continue
        raise MissingInputError(
            f"the outputs depend on {var.describe()}, which is not among the function's "
            f"inputs ({', '.join(v.describe() for v in roots) or 'none'})"
        )


use_compiler(function)  # Variable.eval compiles with this function
