"""Launch plans on a device: Python time, launches and time per call, plans on and off.

Each workload is compiled twice in the same process, with ``config.device_launch_plans``
on and off, and the two are called alternately (rounds of ``--calls`` calls each, the
queue finished after every call). Per call:

- **launches**: kernel launches the runtime enqueued (plans on: the replayed ones);
- **Python us**: wall time of the call outside the driver's calls (kernel enqueues and
  copies between host and device): what tensorjit's Python costs per call;
- **call us**: the whole call, the device's work included (on PoCL the kernels run on
  the same cores, so this is not what a GPU would show).

Workloads: the paper's MLP SGD step (784-500-10, minibatch 60, float32) in its two forms
(a host minibatch passed each step; the data set in shared variables sliced by an index,
``givens``), ``a + 1`` on 10 elements with the value on the device in and out, and
from and to the host, and benchmarks/lenet_devices.py's LeNet step with its
convolutions and pooling on the host (PoCL's default) and on the device.

Run: taskset -c 0,1 .venv/bin/python benchmarks/launch_plans.py [--calls 200] [--rounds 3]
     [--device opencl|cuda] [--only LABEL]
(``--device cuda`` on a GPU machine: the driver calls timed are the CUDA runtime's
launches and copies.)
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from _competitors import limit_threads

limit_threads(1)

import numpy as np  # noqa: E402
from opencl import mlp_step  # noqa: E402

import tensorjit  # noqa: E402
import tensorjit.tensor as T  # noqa: E402
from tensorjit import Out  # noqa: E402
from tensorjit.core.config import config  # noqa: E402
from tensorjit.tensor.type import TensorType  # noqa: E402


class DriverClock:
    """Counts launches and the time spent inside the driver's calls (the device
    runtime's launches and its copies between host and device); ``finish()`` waits for
    the device."""

    def __init__(self, device: str) -> None:
        self.seconds = 0.0
        self.launches = 0
        if device == "cuda":
            from tensorjit.plugins.cuda_backend.runtime import Runtime, runtime

            timed: list[tuple[Any, str]] = [(Runtime, "to_device"), (Runtime, "to_host")]
            self.finish: Callable[[], None] = lambda: runtime().synchronize()
        else:
            import pyopencl

            from tensorjit.plugins.opencl_backend.runtime import Runtime, runtime

            timed = [(pyopencl, "enqueue_copy")]
            self.finish = lambda: runtime().queue.finish()
        for owner, name in [(Runtime, "enqueue"), *timed]:
            setattr(owner, name, self._timed(getattr(owner, name), name == "enqueue"))

    def _timed(self, call: Callable, launch: bool) -> Callable:
        def timed(*args: Any, **kwargs: Any) -> Any:
            self.launches += launch
            start = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        return timed


def measure(clock: DriverClock, call: Callable[[int], Any], calls: int) -> tuple[float, ...]:
    """Medians per call: launches, Python us, call us."""
    launches, python, total = [], [], []
    for i in range(calls):
        clock.seconds, clock.launches = 0.0, 0
        start = time.perf_counter()
        call(i)
        returned = time.perf_counter()
        clock.finish()
        end = time.perf_counter()
        launches.append(clock.launches)
        python.append(returned - start - clock.seconds)
        total.append(end - start)
    return (float(np.median(launches)), np.median(python) * 1e6, np.median(total) * 1e6)


def plus_one(device: str, where: str) -> Callable[[int], Any]:
    from tensorjit.core.hooks import get_plugin_system

    with config.change_flags(device=device):
        if where == "device":
            a = TensorType("float32", (None,), device=device)("a")
            f = tensorjit.function([a], Out(a + 1, return_internal_type=True))
            kind = get_plugin_system().registries.backends.array_kind(device)
            value = kind.from_host(np.ones(10, "float32"))
            return lambda i: f(value)
        a = T.vector("a", dtype="float32")
        f = tensorjit.function([a], a + 1)
        host = np.ones(10, "float32")
        return lambda i: f(host)


def lenet(device: str, schedule: str) -> Callable[[int], Any]:
    """benchmarks/lenet_devices.py's step (batch 64, 28x28) on the device."""
    from tensorjit.testing.models import lenet_parameters, lenet_step

    rng = np.random.default_rng(0)
    step = lenet_step(device, lenet_parameters(rng, (6, 16), 28), schedule)
    x = rng.standard_normal((64, 1, 28, 28)).astype("float32")
    y = rng.integers(0, 10, 64).astype("int32")
    return lambda i: step(x, y)


def mlp(device: str, form: str) -> Callable[[int], Any]:
    step = mlp_step("float32", device, form)
    return lambda i: step(i % 100)


# label -> workload(device): a call of step i
WORKLOADS: dict[str, Callable[[str], Callable[[int], Any]]] = {
    "MLP step, givens": lambda device: mlp(device, "givens"),
    "MLP step, host minibatch": lambda device: mlp(device, "minibatch"),
    "a+1, 10 elements, device in/out": lambda device: plus_one(device, "device"),
    "a+1, 10 elements, host in/out": lambda device: plus_one(device, "host"),
    "LeNet step (conv/pool: auto)": lambda device: lenet(device, "auto"),
    "LeNet step (conv/pool on the device)": lambda device: lenet(device, "groups"),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="", help="workloads whose label contains this")
    parser.add_argument("--device", default="opencl", choices=("opencl", "cuda"))
    args = parser.parse_args()
    clock = DriverClock(args.device)
    print(f"device {args.device}")
    print("per call, medians; plans off -> on (each round alternates the two functions)")
    print(f"{'workload':<34} {'launches':>11} {'Python us':>15} {'call us':>15}")
    for label, build in WORKLOADS.items():
        if args.only not in label:
            continue
        calls = {}
        for plans in (False, True):
            with config.change_flags(device_launch_plans=plans):
                calls[plans] = build(args.device)
            for i in range(5):
                calls[plans](i)  # compile, record, warm
        rows: dict[bool, list[tuple[float, ...]]] = {False: [], True: []}
        for _ in range(args.rounds):
            for plans in (False, True):
                rows[plans].append(measure(clock, calls[plans], args.calls))
        off, on = (np.median(np.array(rows[p]), axis=0) for p in (False, True))
        print(
            f"{label:<34} {off[0]:4.0f} -> {on[0]:4.0f} {off[1]:6.0f} -> {on[1]:6.0f} "
            f"{off[2]:6.0f} -> {on[2]:6.0f}"
        )


if __name__ == "__main__":
    main()
