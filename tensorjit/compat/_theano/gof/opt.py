"""``theano.gof.opt``: Theano's optimizer classes over tensorjit's graph and rewrites.

Every replacement goes through tensorjit's ``FunctionGraph.replace_all_validate``, so
the DestroyHandler and plugin vetoes validate what a Theano-era optimizer does, as they
validate tensorjit's own rewrites. A ``LocalOptimizer`` is also a tensorjit
``NodeRewriter`` (``as_node_rewriter``), which is how ``register_canonicalize`` and
friends put one into tensorjit's rewrite database.

Theano 1.0's local optimizers take ``transform(node)`` (no ``fgraph``).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import theano  # noqa: F401  (likewise)
from theano.configparser import config  # noqa: F401

from tensorjit.core.graph.basic import Apply, Constant, Variable  # noqa: F401
from tensorjit.core.graph.fgraph import Feature, InconsistencyError
from tensorjit.core.graph.traversal import toposort
from tensorjit.core.rewrites.basic import NodeRewriter
from tensorjit.core.rewrites.merge import MergeRewriter

_log = logging.getLogger("theano.gof.opt")


# ---------------------------------------------------------------- global optimizers


class Optimizer:
    """Works on a whole FunctionGraph: ``optimize(fgraph)``."""

    def apply(self, fgraph) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement apply(fgraph)")

    def optimize(self, fgraph, *args, **kwargs) -> Any:
        self.add_requirements(fgraph)
        return self.apply(fgraph, *args, **kwargs)

    def __call__(self, fgraph) -> Any:
        return self.optimize(fgraph)

    def add_requirements(self, fgraph) -> None:
        pass


class SeqOptimizer(Optimizer, list):
    """Runs optimizers one after the other."""

    def __init__(self, *opts, **kwargs):
        if len(opts) == 1 and isinstance(opts[0], (list, tuple)):
            opts = opts[0]
        list.__init__(self, opts)
        self.failure_callback = kwargs.pop("failure_callback", None)

    def apply(self, fgraph) -> None:
        for opt in self:
            opt.optimize(fgraph)


class MergeOptimizer(Optimizer):
    """Merges equal constants and equal nodes on equal inputs (tensorjit's merge)."""

    def apply(self, fgraph) -> None:
        def apply_replacements(pairs, reason=None):
            try:
                fgraph.replace_all_validate(pairs, reason)
            except InconsistencyError:
                return False
            return True

        MergeRewriter().apply(fgraph, apply_replacements)


def pre_constant_merge(vars):
    """Theano merged equal constants before building a graph; tensorjit merges them in
    every function's first rewrite phase, so the variables are returned as they are."""
    return vars


def pre_greedy_local_optimizer(list_optimizations, out):
    """Apply local optimizers to the graph of ``out`` from its inputs up, without a
    FunctionGraph; returns the new ``out``."""
    memo: dict = {}

    def rebuild(var):
        if var in memo:
            return memo[var]
        node = var.owner
        if node is None:
            memo[var] = var
            return var
        inputs = [rebuild(i) for i in node.inputs]
        if any(a is not b for a, b in zip(inputs, node.inputs)):
            node = node.op.make_node(*inputs)
        result = node.outputs[var.index]
        for opt in list_optimizations:
            new = opt.transform(node)
            if new:
                result = (list(new.values()) if isinstance(new, dict) else new)[var.index]
                break
        memo[var] = result
        return result

    return rebuild(out)


# ---------------------------------------------------------------- local optimizers


class LocalOptimizer:
    """Looks at one node: ``transform(node)`` returns new outputs (a list, or a dict
    {old: new}), or False."""

    def tracks(self):
        return None

    def transform(self, node):
        raise NotImplementedError(f"{type(self).__name__} must implement transform(node)")

    def add_requirements(self, fgraph) -> None:
        pass

    def op_key(self):
        raise NotImplementedError(f"{type(self).__name__} has no op key")

    def as_node_rewriter(self) -> NodeRewriter:
        """This optimizer as a tensorjit rewriter (for the rewrite database)."""
        tracks = self.tracks()
        classes = None
        if tracks:
            classes = [t if isinstance(t, type) else type(t) for t in tracks]
        name = getattr(self, "__name__", None) or type(self).__name__
        return NodeRewriter(lambda fgraph, node: self.transform(node) or None, classes, name)

    def __str__(self) -> str:
        return getattr(self, "__name__", type(self).__name__)


class FromFunctionLocalOptimizer(LocalOptimizer):
    def __init__(self, fn, tracks=None, requirements=()):
        self.fn = fn
        self._tracks = tracks
        self.requirements = requirements
        self.__name__ = getattr(fn, "__name__", "local_optimizer")

    def transform(self, node):
        return self.fn(node)

    def tracks(self):
        return self._tracks

    def add_requirements(self, fgraph) -> None:
        for req in self.requirements:
            req(fgraph)


def local_optimizer(tracks, inplace=False, requirements=()):
    """Decorator: ``@local_optimizer([op_or_class])`` turns ``fn(node)`` into a
    LocalOptimizer."""

    def decorate(fn):
        if tracks is not None and len(tracks) == 0:
            raise ValueError("local_optimizer: use None to track every node, not []")
        return FromFunctionLocalOptimizer(fn, tracks, requirements)

    return decorate


class LocalOptGroup(LocalOptimizer):
    """The first of several local optimizers that applies."""

    def __init__(self, *optimizers, **kwargs):
        if len(optimizers) == 1 and isinstance(optimizers[0], list):
            optimizers = optimizers[0]
        self.opts = list(optimizers)

    def transform(self, node):
        for opt in self.opts:
            tracks = opt.tracks()
            if tracks and not _tracked(node, tracks):
                continue
            new = opt.transform(node)
            if new:
                return new
        return False


def _tracked(node, tracks) -> bool:
    return any(isinstance(node.op, t) if isinstance(t, type) else node.op == t for t in tracks)


class OpSub(LocalOptimizer):
    """Replaces a node applying ``op1`` by ``op2`` on the same inputs."""

    reentrant = False
    retains_inputs = True

    def __init__(self, op1, op2, transfer_tags=True):
        self.op1 = op1
        self.op2 = op2
        self.transfer_tags = transfer_tags

    def op_key(self):
        return self.op1

    def tracks(self):
        return [self.op1]

    def transform(self, node):
        if node.op != self.op1:
            return False
        repl = self.op2.make_node(*node.inputs)
        return repl.outputs

    def __str__(self) -> str:
        return f"{self.op1} -> {self.op2}"


class OpRemove(LocalOptimizer):
    """Removes a one-input, one-output node applying ``op`` (its output is its input)."""

    reentrant = False

    def __init__(self, op):
        self.op = op

    def op_key(self):
        return self.op

    def tracks(self):
        return [self.op]

    def transform(self, node):
        if node.op != self.op:
            return False
        return node.inputs

    def __str__(self) -> str:
        return f"{self.op}(x) -> x"


class PatternSub(LocalOptimizer):
    """Replaces what matches ``in_pattern`` by ``out_pattern``.

    A pattern is ``(op, sub_pattern, ...)``, a string naming a variable (the same name
    binds the same variable), a dict ``{'pattern': p, 'constraint': fn}``, or a constant
    value. Unless ``allow_multiple_clients``, a matched node below the root must have
    only one client (rewriting it would otherwise duplicate work).
    """

    def __init__(self, in_pattern, out_pattern, allow_multiple_clients=False,
                 skip_identities_fn=None, name=None, pdb=False, tracks=(), get_nodes=None,
                 values_eq_approx=None):  # fmt: skip
        self.in_pattern = in_pattern
        self.out_pattern = out_pattern
        self.allow_multiple_clients = allow_multiple_clients
        self.skip_identities_fn = skip_identities_fn
        self.values_eq_approx = values_eq_approx
        if isinstance(in_pattern, (list, tuple)):
            self.op = in_pattern[0]
        elif isinstance(in_pattern, dict):
            self.op = in_pattern["pattern"][0]
        else:
            raise TypeError("PatternSub: the input pattern must be a tuple or a dict")
        self._tracks = tracks
        if name:
            self.__name__ = name

    def op_key(self):
        return self.op

    def tracks(self):
        return self._tracks or [self.op]

    def transform(self, node, get_all_matches=False):
        if node.op != self.op:
            return False
        bindings = self._match(self.in_pattern, node.outputs[0], {}, root=True)
        if bindings is None:
            return False
        new = self._build(self.out_pattern, bindings)
        if not isinstance(new, Variable) or new.type != node.outputs[0].type:
            return False
        return [new]

    def _match(self, pattern, var, bindings, root=False):
        if isinstance(pattern, str):
            if pattern in bindings:
                return bindings if bindings[pattern] is var else None
            return {**bindings, pattern: var}
        if isinstance(pattern, dict):
            sub = self._match(pattern["pattern"], var, bindings, root)
            constraint = pattern.get("constraint", lambda expr: True)
            return sub if sub is not None and constraint(var) else None
        if isinstance(pattern, (list, tuple)):
            node = var.owner
            if node is None or node.op != pattern[0] or len(node.inputs) != len(pattern) - 1:
                return None
            if not root and not self.allow_multiple_clients and _n_clients(var) > 1:
                return None
            for sub, inp in zip(pattern[1:], node.inputs):
                bindings = self._match(sub, inp, bindings)
                if bindings is None:
                    return None
            return bindings
        if isinstance(pattern, Constant):  # matches an equal constant
            if not isinstance(var, Constant) or var.type != pattern.type:
                return None
            try:
                return bindings if bool(np.all(var.data == pattern.data)) else None
            except (TypeError, ValueError):
                return None
        if isinstance(var, Constant):  # a value in the pattern
            try:
                return bindings if bool(var.data == pattern) else None
            except (TypeError, ValueError):
                return None
        return None

    def _build(self, pattern, bindings):
        if isinstance(pattern, str):
            return bindings[pattern]
        if isinstance(pattern, (list, tuple)):
            args = [self._build(p, bindings) for p in pattern[1:]]
            return pattern[0].make_node(*args).outputs[0]
        if isinstance(pattern, Variable):
            return pattern
        return pattern

    def __str__(self) -> str:
        return f"{self.in_pattern} -> {self.out_pattern}"


def _n_clients(var) -> int:
    """How many nodes (and graph outputs) use ``var``, in the graph being optimized."""
    fgraph = _current_fgraph[0]
    if fgraph is None:
        return 1
    return len(fgraph.clients.get(var, ()))


_current_fgraph: list = [None]  # the graph a navigator is working on


# ---------------------------------------------------------------- navigators


class NavigatorOptimizer(Optimizer):
    """Applies a local optimizer to nodes of a graph, validating each replacement."""

    @staticmethod
    def warn(exc, nav, repl_pairs, local_opt, node):
        """A failure callback: log the error and go on (re-raise programming errors)."""
        if isinstance(exc, InconsistencyError):
            return
        _log.error("optimization failure due to: %s", local_opt)
        _log.error("node: %s", node)
        raise exc

    @staticmethod
    def warn_inplace(exc, nav, repl_pairs, local_opt, node):
        """Ignore InconsistencyError (an inplace candidate the DestroyHandler refused)."""
        if isinstance(exc, InconsistencyError):
            return
        return NavigatorOptimizer.warn(exc, nav, repl_pairs, local_opt, node)

    @staticmethod
    def warn_ignore(exc, nav, repl_pairs, local_opt, node):
        """Ignore every failure."""

    def __init__(self, local_opt, ignore_newtrees="auto", failure_callback=None):
        self.local_opt = local_opt
        self.ignore_newtrees = ignore_newtrees
        self.failure_callback = failure_callback

    def add_requirements(self, fgraph) -> None:
        self.local_opt.add_requirements(fgraph)

    def process_node(self, fgraph, node, lopt=None) -> bool:
        """Try ``lopt`` (default: this navigator's) on ``node``; True if it changed."""
        lopt = lopt or self.local_opt
        try:
            replacements = lopt.transform(node)
        except Exception as exc:
            if self.failure_callback is not None:
                self.failure_callback(exc, self, [], lopt, node)
                return False
            raise
        if not replacements:
            return False
        if isinstance(replacements, dict):
            pairs = list(replacements.items())
        else:
            pairs = list(zip(node.outputs, replacements))
        pairs = [(old, new) for old, new in pairs if old is not new]
        if not pairs:
            return False
        try:
            fgraph.replace_all_validate(pairs, reason=lopt)
        except Exception as exc:
            if self.failure_callback is not None:
                self.failure_callback(exc, self, pairs, lopt, node)
                return False
            raise
        return True

    def _run(self, fgraph, nodes_in_order) -> int:
        """Visit nodes (re-listing new ones unless ``ignore_newtrees``); the changes."""
        _current_fgraph[0] = fgraph
        try:
            changes = 0
            queue = list(nodes_in_order(fgraph))
            seen = set(queue)
            while queue:
                node = queue.pop(0)
                if node not in fgraph.apply_nodes:
                    continue
                if self.process_node(fgraph, node):
                    changes += 1
                    if self.ignore_newtrees is not True:
                        fresh = [n for n in nodes_in_order(fgraph) if n not in seen]
                        seen.update(fresh)
                        queue.extend(fresh)
            return changes
        finally:
            _current_fgraph[0] = None


class TopoOptimizer(NavigatorOptimizer):
    """Visits every node in topological order (``order='in_to_out'``) or reversed."""

    def __init__(self, local_opt, order="in_to_out", ignore_newtrees=False,
                 failure_callback=None):  # fmt: skip
        if order not in ("out_to_in", "in_to_out"):
            raise ValueError("order must be 'out_to_in' or 'in_to_out'")
        self.order = order
        super().__init__(local_opt, ignore_newtrees, failure_callback)

    def apply(self, fgraph, start_from=None) -> int:
        def nodes(g):
            order = toposort(g.outputs, g.inputs)
            return order if self.order == "in_to_out" else order[::-1]

        return self._run(fgraph, nodes)


class OpKeyOptimizer(NavigatorOptimizer):
    """Visits the nodes applying the local optimizer's ``op_key()``."""

    def apply(self, fgraph) -> int:
        key = self.local_opt.op_key()

        def nodes(g):
            return [n for n in toposort(g.outputs, g.inputs) if n.op == key]

        return self._run(fgraph, nodes)


def in2out(*local_opts, **kwargs):
    """A TopoOptimizer (inputs to outputs) of one or several local optimizers."""
    name = kwargs.pop("name", None)
    opt = local_opts[0] if len(local_opts) == 1 else LocalOptGroup(*local_opts)
    topo = TopoOptimizer(opt, order="in_to_out", **kwargs)
    if name:
        topo.__name__ = name
    return topo


def out2in(*local_opts, **kwargs):
    """A TopoOptimizer (outputs to inputs) of one or several local optimizers."""
    name = kwargs.pop("name", None)
    opt = local_opts[0] if len(local_opts) == 1 else LocalOptGroup(*local_opts)
    topo = TopoOptimizer(opt, order="out_to_in", **kwargs)
    if name:
        topo.__name__ = name
    return topo


class EquilibriumOptimizer(NavigatorOptimizer):
    """Applies local (and global) optimizers until none changes the graph, at most
    ``max_use_ratio`` times the node count per local optimizer."""

    def __init__(self, optimizers, failure_callback=None, ignore_newtrees=True,
                 tracks_on_change_inputs=False, max_use_ratio=None, final_optimizers=None,
                 cleanup_optimizers=None):  # fmt: skip
        super().__init__(None, ignore_newtrees, failure_callback)
        self.local_optimizers = [o for o in optimizers if isinstance(o, LocalOptimizer)]
        self.global_optimizers = [o for o in optimizers if not isinstance(o, LocalOptimizer)]
        self.final_optimizers = list(final_optimizers or [])
        self.max_use_ratio = max_use_ratio if max_use_ratio is not None else 10

    def add_requirements(self, fgraph) -> None:
        for opt in self.local_optimizers + self.global_optimizers:
            opt.add_requirements(fgraph)

    def apply(self, fgraph) -> None:
        _current_fgraph[0] = fgraph
        changes = _ChangeCounter()
        fgraph.attach_feature(changes)
        try:
            # Theano's budget: a local optimizer that has been applied more than
            # max_use_ratio times the largest node count seen stops the whole pass.
            largest = max(1, len(fgraph.apply_nodes))
            uses = dict.fromkeys(self.local_optimizers + self.global_optimizers, 0)
            while True:
                changed = False
                for opt in self.global_optimizers:
                    before = changes.count
                    opt.optimize(fgraph)
                    if changes.count != before:
                        changed = True
                        uses[opt] += 1
                        if self._maxed_out(opt, uses, largest):
                            return
                _current_fgraph[0] = fgraph
                for node in toposort(fgraph.outputs, fgraph.inputs):
                    if node not in fgraph.apply_nodes:
                        continue
                    for lopt in self.local_optimizers:
                        tracks = lopt.tracks()
                        if tracks and not _tracked(node, tracks):
                            continue
                        if self.process_node(fgraph, node, lopt):
                            uses[lopt] += 1
                            changed = True
                            largest = max(largest, len(fgraph.apply_nodes))
                            if self._maxed_out(lopt, uses, largest):
                                return
                            break
                for opt in self.final_optimizers:
                    opt.optimize(fgraph)
                if not changed:
                    return
        finally:
            _current_fgraph[0] = None
            fgraph.remove_feature(changes)

    def _maxed_out(self, opt, uses: dict, largest: int) -> bool:
        if uses[opt] <= self.max_use_ratio * largest:
            return False
        _log.error(
            "EquilibriumOptimizer max'ed out by %s: applied %d times (max_use_ratio %s)",
            opt, uses[opt], self.max_use_ratio,
        )  # fmt: skip
        return True


class _ChangeCounter(Feature):
    """Counts the input changes that stay (a rolled-back one counts back down)."""

    def __init__(self) -> None:
        self.count = 0

    def on_change_input(self, fgraph, node, i, old, new, reason=None) -> None:
        self.count += -1 if reason == "rollback" else 1
