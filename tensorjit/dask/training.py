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
from tensorjit.core.graph.traversal import clone_replace
from tensorjit.core.memory.shared import SharedVariable
from tensorjit.dask.shipping import Shipped, ship

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


def _shard_gradient(fn: Shipped, data: tuple, lo: int, hi: int, params: tuple) -> tuple:
    values = fn.function(*(d[lo:hi] for d in data), *params)
    return hi - lo, float(values[0]), [np.asarray(v) for v in values[1:]]


def _local_round(fn: Shipped, data: tuple, spans: list[tuple[int, int]], state: tuple) -> tuple:
    state = tuple(state)
    costs, rows = [], 0
    for lo, hi in spans:
        values = fn.function(*(d[lo:hi] for d in data), *state)
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
        if not workers:
            raise RuntimeError("the Dask cluster has no workers")
        self.n_shards = n_shards or len(workers)
        self._workers = workers
        rule = updates or sgd(learning_rate)
        stand_ins = {p: p.type() for p in self.params}
        for p, s in stand_ins.items():
            s.name = f"{p.name or 'param'}_value"
        grads = grad(cost, self.params)

        if local_steps == 1:
            # Workers: cost and gradients of a slice, the parameters given as inputs.
            worker_outputs, _ = clone_replace([cost, *grads], stand_ins)
            self._worker_fn = ship(
                function(
                    [*self.inputs, *stand_ins.values()],
                    worker_outputs,
                    mode=mode,
                    name="shard_gradient",
                )
            )
            # Driver: the update rule applied to combined gradients.
            grad_inputs = [g.type() for g in grads]
            self._apply = function(
                grad_inputs, [], updates=rule(self.params, grad_inputs), mode=mode
            )
            self.state = list(self.params)
        else:
            pairs = rule(self.params, grads)
            self.state = [s for s, _ in pairs]
            for p in self.params:
                if p not in self.state:
                    raise ValueError(f"the update rule does not update parameter {p.describe()}")
            state_ins = {s: stand_ins[s] if s in stand_ins else s.type() for s in self.state}
            step_outputs, _ = clone_replace([cost, *(u for _, u in pairs)], state_ins, strict=False)
            self._worker_fn = ship(
                function(
                    [*self.inputs, *state_ins.values()],
                    step_outputs,
                    mode=mode,
                    name="local_sgd_steps",
                )
            )

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
        self.stats.bytes_to_workers += _nbytes(state) * len(shards)
        n = len(shards)
        if self.local_steps == 1:
            first = [spans[s][batches[0]] for s in range(n)]
            futures = self.client.map(
                _shard_gradient, [self._worker_fn] * n, shards,
                [lo for lo, _ in first], [hi for _, hi in first], [state_future] * n,
                pure=False, retries=self.retries,
            )  # fmt: skip
        else:
            futures = self.client.map(
                _local_round, [self._worker_fn] * n, shards,
                [[spans[s][b] for b in batches] for s in range(n)], [state_future] * n,
                pure=False, retries=self.retries,
            )  # fmt: skip
        return self.client.gather(futures)

    def _combine(self, results: list, n_batches: int) -> None:
        """Rows-weighted (or plain) sums in shard order: deterministic, whichever worker
        computed which shard."""
        total_rows = sum(rows for rows, _, _ in results)
        for _, _, arrays in results:
            self.stats.bytes_from_workers += _nbytes(arrays)
        by_rows = [rows / total_rows for rows, _, _ in results]
        if self.local_steps == 1:
            weights = by_rows if self.cost_is_mean else [1.0] * len(results)
            self.stats.costs.append(sum(w * cost for w, (_, cost, _) in zip(weights, results)))
            self._apply(*_weighted_sums(weights, [arrays for _, _, arrays in results]))
        else:
            for b in range(n_batches):
                self.stats.costs.append(sum(w * c[b] for w, (_, c, _) in zip(by_rows, results)))
            averaged = _weighted_sums(by_rows, [state for _, _, state in results])
            for shared, value in zip(self.state, averaged):
                shared.set_value(np.asarray(value, dtype=shared.type.dtype))
        self.stats.steps += n_batches
        self.stats.rounds += 1
        self.stats.examples += total_rows


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


def _is_lost_work(exc: BaseException) -> bool:
    """Errors that mean work or data went away with a worker, not a failing function."""
    names = {type(e).__name__ for e in (exc, exc.__cause__, exc.__context__) if e is not None}
    lost = {"KilledWorker", "FutureCancelledError", "CancelledError", "CommClosedError"}
    return bool(names & lost) or "lost" in str(exc).lower()
