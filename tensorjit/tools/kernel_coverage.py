"""Which Table 1 ops get a kernel from a backend (``python -m tensorjit info --kernels``).

Each probe of ``tensorjit.tools.table1_probes`` is compiled and rewritten exactly as
``function()`` would for ``FAST_RUN.with_backends(backend, "python")``, then every node
of the rewritten graph asks ``choose_kernel`` which kernel it would get. Selection only
decides (a kernel factory, which for C compiles code, is never called), so the report
needs no C compiler run and takes about a second.
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass, field
from typing import TextIO

from tensorjit.core.compile.function import function
from tensorjit.core.compile.mode import FAST_RUN, Mode
from tensorjit.core.config import config
from tensorjit.core.devices import HOST
from tensorjit.core.graph.basic import Apply
from tensorjit.core.hooks import get_plugin_system
from tensorjit.core.rewrites.transfer import scalar_on_host

COVERED = "covered"
PARTIAL = "partial"
NOT_COVERED = "not covered"
VIEW = "view"  # nothing but views: no kernel needed, counts as covered
ERROR = "error"


@dataclass(frozen=True)
class NodeReport:
    op: str  # str(node.op) with its input dtypes, e.g. "Elemwise{exp}(float64)"
    op_class: str
    kernel: str
    backend: str
    view: bool


@dataclass
class ProbeResult:
    name: str
    section: str
    backend: str
    status: str
    nodes: list[NodeReport] = field(default_factory=list)
    error: str | None = None

    @property
    def missing(self) -> list[str]:
        """Computing nodes that fall back to another backend."""
        return [n.op for n in self.nodes if not n.view and n.backend != self.backend]

    @property
    def views(self) -> list[str]:
        return [n.op for n in self.nodes if n.view]


def _is_view(node: Apply) -> bool:
    """A node that only aliases its input (DimShuffle, Reshape, basic Subtensor, Split),
    only reads its input's shape (Shape) or copies between devices (a transfer): it
    computes nothing, so it needs no kernel."""
    op = node.op
    return (bool(op.view_map) and not op.destroy_map) or op.metadata_only or op.device_generic


def _describe(node: Apply) -> str:
    dtypes = ", ".join(str(getattr(i.type, "dtype", i.type)) for i in node.inputs)
    return f"{node.op}({dtypes})"


def _mode_for(backend: str) -> Mode:
    """FAST_RUN running the rewrites that ``(backend, "python")`` would run, but linking
    Python kernels only: function() then builds no kernel of ``backend``. Tags are sets,
    so adding the Python backend's own tags afterwards (function() does) changes nothing."""
    registry = get_plugin_system().registries.backends
    query = FAST_RUN.query
    if backend != "python":
        spec = registry.backends[backend]
        query = query.including(*spec.requires_tags).excluding(*spec.excludes_tags)
    return Mode(f"kernel-coverage-{backend}", query, backends=("python",))


def coverage(backend: str) -> list[ProbeResult]:
    """One result per Table 1 probe: does ``backend`` give a kernel to every computing
    node of its rewritten graph? Raises ValueError if ``backend`` can not run here."""
    from tensorjit.tools.table1_probes import PROBES

    registry = get_plugin_system().registries.backends
    if backend not in registry.backends:
        raise ValueError(f"unknown backend {backend!r}; registered: {sorted(registry.backends)}")
    reason = registry.unavailable_reason(backend)
    if reason is not None:
        raise ValueError(f"backend {backend!r} is unavailable: {reason}")
    device = registry.backends[backend].device
    mode = _mode_for(backend)
    if device != HOST:
        # Placement needs the device's backend in the mode: its kernels are built (a
        # device compiles quickly) and each node reports the kernel it was linked with.
        mode = Mode(f"kernel-coverage-{backend}", mode.query, backends=(backend, "python"))
    source = get_plugin_system().kernel_source
    backends = source.backends_for((backend, "python"), device)
    results = []
    for probe in PROBES:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # probe-specific notes are noise here
                inputs, outputs = probe.build()
                with config.change_flags(device=device):
                    f = function(inputs, outputs, mode=mode, on_unused_input="ignore")
        except Exception as exc:  # one broken probe must not hide the others
            results.append(ProbeResult(probe.name, probe.section, backend, ERROR, error=repr(exc)))
            continue
        nodes = []
        for node in f.kernels:  # the nodes in the order the VM runs them
            kernel = f.kernels[node] if device != HOST else source.choose_kernel(node, backends)
            nodes.append(
                NodeReport(
                    _describe(node),
                    type(node.op).__name__,
                    kernel.name,
                    kernel.backend,
                    _is_view(node) or (device != HOST and scalar_on_host(node)),
                )
            )
        computing = [n for n in nodes if not n.view]
        ours = [n for n in computing if n.backend == backend]
        if not computing:
            status = VIEW
        elif len(ours) == len(computing):
            status = COVERED
        elif ours:
            status = PARTIAL
        else:
            status = NOT_COVERED
        results.append(ProbeResult(probe.name, probe.section, backend, status, nodes))
    return results


def summary(backend: str, results: list[ProbeResult]) -> str:
    n_ok = sum(r.status in (COVERED, VIEW) for r in results)
    pct = 100.0 * n_ok / len(results) if results else 0.0
    return f"{backend}: {n_ok} of {len(results)} Table 1 ops fully covered ({pct:.1f}%)"


def print_report(
    backend: str, results: list[ProbeResult], out: TextIO | None = None, detail: bool = True
) -> None:
    """Per Table 1 section, each probe's status and the nodes lacking a kernel."""
    out = out or sys.stdout  # looked up per call, so that captured output works
    if detail:
        print(
            f"backend {backend}: Table 1 ops whose computing nodes all get a {backend} kernel "
            "(views need none)",
            file=out,
        )
        section = None
        for r in results:
            if r.section != section:
                section = r.section
                print(f"  {section}", file=out)
            line = f"    {r.name:<26} {r.status:<12}"
            if r.error:
                line += f" {r.error}"
            if r.missing:
                line += f" missing: {'; '.join(dict.fromkeys(r.missing))}"
            if r.views:
                line += f" views: {'; '.join(dict.fromkeys(r.views))}"
            print(line.rstrip(), file=out)
    print(summary(backend, results), file=out)


def report(out: TextIO | None = None) -> None:
    """The coverage report of every available backend, and the names left out."""
    out = out or sys.stdout
    from tensorjit.tools.table1_probes import SKIPPED

    registry = get_plugin_system().registries.backends
    names = sorted(registry.backends, key=lambda b: -registry.backends[b].priority)
    for name in names:
        reason = registry.unavailable_reason(name)
        if reason is not None:
            print(f"{name}: unavailable ({reason})", file=out)
            continue
        # Every op has Op.perform: the Python backend's detail would list no gaps.
        print_report(name, coverage(name), out, detail=name != "python")
    print("not probed (not ops computed at run time):", file=out)
    for name, why in SKIPPED.items():
        print(f"  {name:<12} {why}", file=out)
