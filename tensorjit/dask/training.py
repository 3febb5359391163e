"""Data-parallel training on a Dask cluster.

The data set is cut once into one shard per worker: for every minibatch, each shard holds
its slice of that minibatch's rows. Shards are Dask tasks that carry their rows, so the
scheduler can rebuild one on another worker if its worker dies (lineage, not a scatter).

Synchronous SGD (``local_steps=1``): per minibatch, each worker runs a compiled gradient
function on its slice, with the parameters as explicit inputs; the driver sums the
gradients weighted by rows (a mean cost's gradient is the rows-weighted mean of the slices'
gradients) and applies the update rule, compiled as the single-process function would
apply it. Local SGD (``local_steps=k``): each worker applies the update rule on its own
slices for k minibatches, then the driver averages the workers' training state (parameters
and any optimizer state), weighted by rows.

Parameters are broadcast to the workers once per round (when they have changed); a step
whose tasks or inputs were lost with a worker is recomputed by Dask (rescheduling, and
retries), or resubmitted from the driver's unchanged state.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import dask
import numpy as np

from tensorjit.core.compile.function import function
from tensorjit.core.gradient import grad
from tensorjit.core.graph.basic import Variable
from tensorjit.core.graph.traversal import clone_replace, graph_inputs
from tensorjit.core.memory.shared import SharedVariable
from tensorjit.dask.shipping import Shipped, ship

# How long a trainer made on a cluster without workers waits for one to join (a cluster
# just started, or a nanny restarting a lost worker).
WORKER_WAIT_SECONDS = 30

UpdateRule = Callable[[list[SharedVariable], list[Variable]], list[tuple[SharedVariable, Any]]]


def sgd(learning_rate: float) -> UpdateRule:
    """Plain SGD: ``p <- p - learning_rate * g``."""

    def rule(params: list[SharedVariable], grads: list[Variable]) -> list[tuple]:
        return [(p, p - learning_rate * g) for p, g in zip(params, grads)]

    return rule


@dataclass
class TrainingStats:
    """What a ``fit`` moved and how long it took (bytes are array payloads, measured from
    the arrays sent and received, not counting Dask's own framing)."""

    steps: int = 0
    rounds: int = 0
    examples: int = 0
    seconds: float = 0.0
    bytes_to_workers: int = 0
    bytes_from_workers: int = 0
    resubmitted_rounds: int = 0
    costs: list[float] = field(default_factory=list)
    #: Wall time of each round (submit, compute on the workers, combine, update).
    round_seconds: list[float] = field(default_factory=list)

    @property
    def bytes_per_step(self) -> float:
        return (self.bytes_to_workers + self.bytes_from_workers) / max(self.steps, 1)


def _nbytes(values: Sequence[Any]) -> int:
    return int(sum(v.nbytes if hasattr(v, "nbytes") else np.asarray(v).nbytes for v in values))


def _hold(rows: Any) -> Any:
    """A shard's data as a task result (the task carries it: Dask can rebuild it)."""
    return rows


def _shard_gradient(
    fn: Shipped, data: tuple, spans: list[tuple[int, int]], state: tuple, others: tuple
) -> tuple:
    [(lo, hi)] = spans
    values = fn.function(*(d[lo:hi] for d in data), *state, *others)
    return hi - lo, float(values[0]), [np.asarray(v) for v in values[1:]]


def _local_round(
    fn: Shipped, data: tuple, spans: list[tuple[int, int]], state: tuple, others: tuple
) -> tuple:
    state = tuple(state)
    costs, rows = [], 0
    for lo, hi in spans:
        values = fn.function(*(d[lo:hi] for d in data), *state, *others)
        costs.append(float(values[0]))
        state = tuple(np.asarray(v) for v in values[1:])
        rows += hi - lo
    return rows, costs, list(state)


class DataParallelTrainer:
    """Train ``params`` to reduce ``cost`` over a data set, data-parallel on a Dask
    cluster (``client``: a ``distributed.Client``).

    ``inputs``: the symbolic inputs the data feeds (one array per input in ``fit``, rows
    first). ``updates``: an update rule ``(params, grads) -> [(shared, new value), ...]``
    (default ``sgd(learning_rate)``), the same one a single-process
    ``function(inputs, cost, updates=rule(params, grad(cost, params)))`` would use.
    ``cost_is_mean``: the cost is a mean over the minibatch's rows (plus terms that do not
    depend on the data), so slice gradients are combined weighted by rows; with False it
    is a sum and they are added. ``local_steps``: 1 for synchronous SGD, k > 1 for local
    SGD that averages the workers' state every k minibatches.
    """

    def __init__(
        self,
        cost: Variable,
        params: Sequence[SharedVariable],
        inputs: Sequence[Variable],
        client: Any,
        *,
        updates: UpdateRule | None = None,
        learning_rate: float = 0.01,
        cost_is_mean: bool = True,
        local_steps: int = 1,
        n_shards: int | None = None,
        retries: int = 2,
        mode: Any = None,
    ):
        if local_steps < 1:
            raise ValueError(f"local_steps must be at least 1, got {local_steps}")
        self.client = client
        self.params = list(params)
        self.inputs = list(inputs)
        self.cost_is_mean = cost_is_mean
        self.local_steps = local_steps
        self.retries = retries
        self.stats = TrainingStats()
        workers = sorted(client.scheduler_info()["workers"])
        if not workers:  # starting, or restarting after one was lost: wait for one
            try:
                client.wait_for_workers(1, timeout=WORKER_WAIT_SECONDS)
            except TimeoutError:
                raise RuntimeError(
                    f"the Dask cluster has no workers (none joined in {WORKER_WAIT_SECONDS} s)"
                ) from None
            workers = sorted(client.scheduler_info()["workers"])
        self.n_shards = n_shards or len(workers)
        self._workers = workers
        rule = updates or sgd(learning_rate)
        grads = grad(cost, self.params)
        if local_steps == 1:
            # Workers: cost and gradients of a slice; the driver applies the rule.
            outputs = [cost, *grads]
            self.state = list(self.params)
            grad_inputs = [g.type() for g in grads]
            self._apply = function(
                grad_inputs, [], updates=rule(self.params, grad_inputs), mode=mode
            )
        else:
            # Workers: k steps of the rule on their slices, then the state is averaged.
            pairs = rule(self.params, grads)
            self.state = [s for s, _ in pairs]
            for p in self.params:
                if p not in self.state:
                    raise ValueError(f"the update rule does not update parameter {p.describe()}")
            outputs = [cost, *(u for _, u in pairs)]
        # The training state, and every other shared variable the graph reads, are
        # explicit inputs of the worker function: sent when they change, never frozen.
        state_ins = {s: s.type() for s in self.state}
        for s, stand_in in state_ins.items():
            stand_in.name = f"{s.name or 'state'}_value"
        others = [
            v for v in graph_inputs(outputs) if isinstance(v, SharedVariable) and v not in state_ins
        ]
        other_ins = {v: v.type() for v in others}
        self.others = others
        worker_outputs, _ = clone_replace(outputs, {**state_ins, **other_ins}, strict=False)
        self._worker_fn = ship(
            function(
                [*self.inputs, *state_ins.values(), *other_ins.values()],
                worker_outputs,
                mode=mode,
                name="shard_gradient" if local_steps == 1 else "local_sgd_steps",
            )
        )
        self._others_sent: list[np.ndarray] | None = None
        self._others_future: Any = None

    # -- data ---------------------------------------------------------------------------

    def _shards(self, data: Sequence[Any], batch_size: int) -> tuple[list, list]:
        """Per shard: a future of its rows of every minibatch, and per minibatch the
        (lo, hi) span of those rows inside the shard."""
        n = len(data[0])
        for d, var in zip(data, self.inputs):
            if len(d) != n:
                raise ValueError(
                    f"the data for {var.describe()} has {len(d)} rows, the first input's has {n}"
                )
        self._empty_data = tuple(_no_rows(d) for d in data)
        rows: list[list[np.ndarray]] = [[] for _ in range(self.n_shards)]
        spans: list[list[tuple[int, int]]] = [[] for _ in range(self.n_shards)]
        filled = [0] * self.n_shards
        for start in range(0, n, batch_size):
            stop = min(start + batch_size, n)
            for s, part in enumerate(np.array_split(np.arange(start, stop), self.n_shards)):
                rows[s].append(part)
                spans[s].append((filled[s], filled[s] + len(part)))
                filled[s] += len(part)
        futures = []
        with warnings.catch_warnings():
            # The shards travel inside their tasks on purpose: that is their lineage.
            warnings.filterwarnings("ignore", message=".*[Ll]arge.*")
            for s in range(self.n_shards):
                index = np.concatenate(rows[s])
                pieces = tuple(_take_rows(d, index) for d in data)
                where = {
                    "workers": [self._workers[s % len(self._workers)]],
                    "allow_other_workers": True,
                }
                if any(_is_dask(p) for p in pieces):
                    futures.append(self.client.compute(dask.delayed(_hold)(pieces), **where))
                else:
                    futures.append(self.client.submit(_hold, pieces, pure=False, **where))
                self.stats.bytes_to_workers += _nbytes(pieces)
        return futures, spans

    # -- training -----------------------------------------------------------------------

    def fit(
        self,
        *data: Any,
        batch_size: int,
        epochs: int = 1,
        callback: Callable[[int], None] | None = None,
    ) -> TrainingStats:
        """Train over ``data`` (NumPy or Dask arrays, one per input, rows first) in
        minibatches of ``batch_size`` rows, in order, for ``epochs`` passes.
        ``callback(step)`` runs on the driver after each round. Returns ``self.stats``."""
        if len(data) != len(self.inputs):
            raise TypeError(f"fit takes one array per input ({len(self.inputs)}), got {len(data)}")
        started = time.perf_counter()
        shards, spans = self._shards(data, batch_size)
        n_batches = len(spans[0])
        for _ in range(epochs):
            for first in range(0, n_batches, self.local_steps):
                batches = range(first, min(first + self.local_steps, n_batches))
                self._round(shards, spans, batches)
                if callback is not None:
                    callback(self.stats.steps)
        self.stats.seconds += time.perf_counter() - started
        return self.stats

    def _round(self, shards: list, spans: list, batches: range) -> None:
        started = time.perf_counter()
        for attempt in range(self.retries + 1):
            try:
                results = self._submit_round(shards, spans, batches)
                break
            except Exception as exc:  # noqa: BLE001 - lost workers surface as many types
                if attempt == self.retries or not _is_lost_work(exc):
                    raise
                self.stats.resubmitted_rounds += 1
        self._combine(results, len(batches))
        self.stats.round_seconds.append(time.perf_counter() - started)

    def _submit_round(self, shards: list, spans: list, batches: range) -> list:
        # One scatter to one worker (the others fetch it from there when their task needs
        # it) and one map: each extra message to the scheduler costs Dask's batching
        # interval (~10 ms), more than a small model's whole step.
        state = tuple(np.asarray(s.get_value(borrow=True)) for s in self.state)
        [state_future] = self.client.scatter([state], hash=False)
        others_future = self._other_values()
        if self.local_steps == 1:
            work = [(s, [spans[s][batches[0]]]) for s in range(len(shards))]
        else:
            work = [(s, [spans[s][b] for b in batches]) for s in range(len(shards))]
        work = [(s, [(lo, hi) for lo, hi in todo if hi > lo]) for s, todo in work]
        work = [(s, todo) for s, todo in work if todo]  # a shard with no rows this round
        self.stats.bytes_to_workers += _nbytes(state) * min(len(work), len(self._workers))
        task = _shard_gradient if self.local_steps == 1 else _local_round
        futures = self.client.map(
            task,
            [self._worker_fn] * len(work),
            [shards[s] for s, _ in work],
            [todo for _, todo in work],
            [state_future] * len(work),
            [others_future] * len(work),
            pure=False,
            retries=self.retries,
        )
        return self.client.gather(futures)

    def _on_no_rows(self) -> tuple:
        """Cost and gradients on zero rows (what a sum-cost's data-free terms give),
        computed here with the workers' function."""
        state = [s.get_value(borrow=True) for s in self.state]
        others = [v.get_value(borrow=True) for v in self.others]
        values = self._worker_fn.function(*self._empty_data, *state, *others)
        cost, grads = float(values[0]), [np.asarray(v) for v in values[1:]]
        if not (np.isfinite(cost) and all(np.isfinite(g).all() for g in grads)):
            raise ValueError(
                "cost_is_mean=False: the cost of zero rows is not finite, so its data-free "
                "terms can not be separated; is the cost a mean (cost_is_mean=True)?"
            )
        return 0, cost, grads

    def _other_values(self) -> Any:
        """The future of the other shared variables' values, scattered again only when
        one of them changed since it was last sent."""
        values = [np.asarray(v.get_value(borrow=True)) for v in self.others]
        sent = self._others_sent
        if sent is None or any(not np.array_equal(a, b) for a, b in zip(values, sent)):
            [self._others_future] = self.client.scatter([tuple(values)], hash=False)
            self._others_sent = [v.copy() for v in values]
            self.stats.bytes_to_workers += _nbytes(values) * len(self._workers)
        return self._others_future

    def _combine(self, results: list, n_batches: int) -> None:
        """Rows-weighted (or plain) sums in shard order: deterministic, whichever worker
        computed which shard."""
        total_rows = sum(rows for rows, _, _ in results)
        for _, _, arrays in results:
            self.stats.bytes_from_workers += _nbytes(arrays)
        by_rows = [rows / total_rows for rows, _, _ in results]
        if self.local_steps == 1:
            weights = by_rows if self.cost_is_mean else [1.0] * len(results)
            per_shard = [arrays for _, _, arrays in results]
            cost = sum(w * c for w, (_, c, _) in zip(weights, results))
            if not self.cost_is_mean and len(results) > 1:
                # Each slice's sum-cost carries the terms that do not depend on the data
                # (a regulariser) once: keep them once in all.
                _, empty_cost, empty = self._on_no_rows()
                weights = weights + [1.0 - len(results)]
                per_shard = per_shard + [empty]
                cost += (1.0 - len(results)) * empty_cost
            self.stats.costs.append(cost)
            self._apply(*_weighted_sums(weights, per_shard))
        else:
            for b in range(n_batches):
                self.stats.costs.append(sum(w * c[b] for w, (_, c, _) in zip(by_rows, results)))
            averaged = _weighted_sums(by_rows, [state for _, _, state in results])
            for shared, value in zip(self.state, averaged):
                shared.set_value(np.asarray(value, dtype=shared.type.dtype))
        self.stats.steps += n_batches
        self.stats.rounds += 1
        self.stats.examples += total_rows


def _no_rows(array: Any) -> np.ndarray:
    rows = array[:0]
    return np.asarray(rows.compute() if _is_dask(rows) else rows)


def _weighted_sums(weights: list[float], per_shard: list[list[np.ndarray]]) -> list[np.ndarray]:
    """Element i of the result: sum over shards of weight * per_shard[shard][i]."""
    sums = []
    for i in range(len(per_shard[0])):
        total = weights[0] * per_shard[0][i]
        for w, arrays in zip(weights[1:], per_shard[1:]):
            total = total + w * arrays[i]
        sums.append(total)
    return sums


def _take_rows(array: Any, index: np.ndarray) -> Any:
    if _is_dask(array):  # stays lazy: the shard's task computes only these rows
        return array[index]
    return np.ascontiguousarray(np.asarray(array)[index])


def _is_dask(value: Any) -> bool:
    return hasattr(value, "__dask_graph__")


_LOST_WORK = {"KilledWorker", "FutureCancelledError", "CancelledError", "CommClosedError"}


def _is_lost_work(exc: BaseException | None) -> bool:
    """Errors that mean work or data went away with a worker (Dask's own exception
    types, anywhere in the cause chain), not a failing function."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if type(exc).__name__ in _LOST_WORK:
            return True
        exc = exc.__cause__ or exc.__context__
    return False
