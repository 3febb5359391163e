"""Set-up shared by the benchmarks that compare against PyTensor and JAX.

Nothing here imports NumPy at module level: the thread limits must be in the environment
before NumPy (and its OpenBLAS) is first imported, so a script does

    from _competitors import limit_threads, threads_from_argv
    limit_threads(threads_from_argv())
    import numpy as np  # noqa: E402

PyTensor installed from PyPI finds no BLAS to link its C code against
(``config.blas__ldflags`` is empty), so its C backend computes products through NumPy
from Python. NumPy's and SciPy's wheels bundle OpenBLAS builds whose symbols carry a
``scipy_`` prefix (``scipy_dgemm_64_`` with 64-bit integers in NumPy's, ``scipy_dgemm_``
in SciPy's); :func:`setup_pytensor_blas` compiles a small shared library defining the
plain Fortran names (``dgemm_``) that forward to the one tensorjit uses (NumPy's when
there is one), and points ``blas__ldflags`` at it. It must run before
``import pytensor``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

THREAD_VARS = (
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "NUMBA_NUM_THREADS",
)

FORWARDER_NAME = "tjbench_blas"


def threads_from_argv(argv: list[str] | None = None, default: int = 1) -> int:
    """The value of ``--threads`` in the command line, read before the script's own
    argument parsing (which happens after NumPy is imported)."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--threads", type=int, default=default)
    known, _ = pre.parse_known_args(sys.argv[1:] if argv is None else argv)
    return known.threads


def limit_threads(n: int) -> None:
    """Every BLAS / OpenMP / Numba / XLA thread pool of this process (and of the
    subprocesses it starts) gets ``n`` threads, and the process ``n`` cores. Call before
    importing NumPy."""
    if "numpy" in sys.modules:
        if all(os.environ.get(var) == str(n) for var in THREAD_VARS):
            return  # already limited (a benchmark importing another's functions)
        raise RuntimeError("limit_threads() must run before NumPy is imported")
    for var in THREAD_VARS:
        os.environ[var] = str(n)
    # XLA's CPU client runs work on threads of its own whatever the flags below say
    # (jax 0.10 used 1.7 cores with them): the process is held to n cores instead, so
    # every implementation gets the same hardware.
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if 0 < n < len(cpus):
        os.sched_setaffinity(0, cpus[:n])
    xla = os.environ.get("XLA_FLAGS", "")
    if "intra_op_parallelism_threads" not in xla:
        eigen = "false" if n == 1 else "true"
        extra = f"--xla_cpu_multi_thread_eigen={eigen} intra_op_parallelism_threads={n}"
        os.environ["XLA_FLAGS"] = f"{xla} {extra}".strip()


def thread_report() -> str:
    """The cores this process may use, and what the loaded BLAS libraries say about
    their threads (threadpoolctl if installed, else the environment variables)."""
    cores = f"cores {sorted(os.sched_getaffinity(0))}; " if hasattr(os, "sched_getaffinity") else ""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        env = ", ".join(f"{v}={os.environ.get(v, '')}" for v in THREAD_VARS[:3])
        return f"{cores}threadpoolctl not installed; {env}"
    parts = [cores.rstrip("; ")] if cores else []
    for pool in threadpool_info():
        lib = Path(pool.get("filepath", "?")).parent.name + "/" + Path(pool["filepath"]).name
        kernels = f", {pool['architecture']} kernels" if pool.get("architecture") else ""
        parts.append(f"{pool['internal_api']} {lib}: {pool['num_threads']} thread(s){kernels}")
    return "; ".join(parts) or "no thread pool loaded"


def cache_dir() -> Path:
    """Where the benchmarks keep what they build (the BLAS forwarder)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = Path(base) / "tensorjit-bench"
    path.mkdir(parents=True, exist_ok=True)
    return path


def scipy_openblas() -> Path | None:
    """The OpenBLAS bundled in SciPy's wheel (LP64: 32-bit integers, ``scipy_`` names)."""
    spec = importlib.util.find_spec("scipy")
    if spec is None or spec.origin is None:
        return None
    libs = Path(spec.origin).parent.parent / "scipy.libs"
    candidates = sorted(p for p in libs.glob("libscipy_openblas*.so*") if "64_" not in p.name)
    return candidates[0] if candidates else None


# Fortran BLAS routines PyTensor's C ops call (Gemm, Dot22, CGemv, CGer, dot products)
# and a few more level-1 ones, as (name without precision letter, return, parameters).
_ROUTINES = [
    (
        "gemm",
        "void",
        "const char *ta, const char *tb, const int *m, const int *n, const int *k, "
        "const T *alpha, const T *a, const int *lda, const T *b, const int *ldb, "
        "const T *beta, T *c, const int *ldc",
    ),
    (
        "gemv",
        "void",
        "const char *t, const int *m, const int *n, const T *alpha, const T *a, "
        "const int *lda, const T *x, const int *incx, const T *beta, T *y, const int *incy",
    ),
    (
        "ger",
        "void",
        "const int *m, const int *n, const T *alpha, const T *x, const int *incx, "
        "const T *y, const int *incy, T *a, const int *lda",
    ),
    ("dot", "T", "const int *n, const T *x, const int *incx, const T *y, const int *incy"),
    (
        "axpy",
        "void",
        "const int *n, const T *alpha, const T *x, const int *incx, T *y, const int *incy",
    ),
    ("scal", "void", "const int *n, const T *alpha, T *x, const int *incx"),
    ("copy", "void", "const int *n, const T *x, const int *incx, T *y, const int *incy"),
    ("swap", "void", "const int *n, T *x, const int *incx, T *y, const int *incy"),
]


def _forwarder_source(ilp64: bool) -> str:
    """Plain Fortran names (``dgemm_``, 32-bit integers, as PyTensor's C code calls them)
    forwarding to the prefixed OpenBLAS routines; for an ILP64 OpenBLAS the integers
    are widened on the way."""
    lines = ["/* Plain Fortran BLAS names forwarding to a prefixed OpenBLAS. */"]
    for letter, ctype in (("s", "float"), ("d", "double")):
        for name, ret, params in _ROUTINES:
            params_c = params.replace("T ", f"{ctype} ")
            ret_c = ctype if ret == "T" else ret
            names = [p.strip().split("*")[-1].strip() for p in params.split(",")]
            ret_kw = "return " if ret_c != "void" else ""
            if not ilp64:
                target = f"scipy_{letter}{name}_"
                lines.append(f"extern {ret_c} {target}({params_c});")
                body = f"{ret_kw}{target}({', '.join(names)});"
            else:
                target = f"scipy_{letter}{name}_64_"
                wide = params_c.replace("const int *", "const long long *")
                lines.append(f"extern {ret_c} {target}({wide});")
                ints = [n for p, n in zip(params.split(","), names) if "int *" in p]
                locals_ = " ".join(f"const long long {n}64 = *{n};" for n in ints)
                args = ", ".join(f"&{n}64" if n in ints else n for n in names)
                body = f"{locals_} {ret_kw}{target}({args});"
            lines.append(f"{ret_c} {letter}{name}_({params_c}) {{ {body} }}")
    return "\n".join(lines) + "\n"


def build_blas_forwarder() -> tuple[Path, Path]:
    """Compile (once, cached) ``lib<FORWARDER_NAME>.so`` forwarding ``dgemm_`` etc. to the
    OpenBLAS tensorjit uses (NumPy's bundled one, else SciPy's); returns (the
    forwarder's directory, the OpenBLAS it links)."""
    from tensorjit.plugins.c_backend.linalg import blas  # imports NumPy: after limit_threads()

    used = blas.provider()
    ilp64 = used.ilp64
    target = Path(used.where) if used.name == "numpy" else scipy_openblas()
    if target is None:
        raise RuntimeError("no bundled OpenBLAS found (numpy.libs/, scipy.libs/)")
    source = _forwarder_source(ilp64)
    key = hashlib.sha256((source + str(target)).encode()).hexdigest()[:12]
    directory = cache_dir() / f"blasfwd-{key}"
    lib = directory / f"lib{FORWARDER_NAME}.so"
    if not lib.exists():
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "forward.c").write_text(source)
        tmp = directory / f"lib{FORWARDER_NAME}.so.{os.getpid()}"
        cmd = [
            "gcc", "-shared", "-fPIC", "-O2", str(directory / "forward.c"), "-o", str(tmp),
            f"-L{target.parent}", f"-l:{target.name}", f"-Wl,-rpath,{target.parent}",
            "-Wl,--no-undefined",
        ]  # fmt: skip
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        tmp.replace(lib)
    return directory, target


def setup_pytensor_blas(compiledir: str | None = None) -> str:
    """Point PyTensor's C BLAS at the forwarder (via PYTENSOR_FLAGS; call before
    ``import pytensor``). Returns a line saying what was linked, or why not."""
    if "pytensor" in sys.modules:
        raise RuntimeError("setup_pytensor_blas() must run before PyTensor is imported")
    flags = []
    try:
        directory, target = build_blas_forwarder()
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or exc
        message = f"no BLAS for PyTensor's C code: {detail}"
    else:
        ldflags = f"-L{directory} -l{FORWARDER_NAME} -Wl,-rpath,{directory}"
        flags.append(f'blas__ldflags="{ldflags}"')
        message = f"blas__ldflags={ldflags} (forwards to {target})"
    if compiledir is not None:
        flags.append(f"compiledir={compiledir}")
    if flags:
        old = os.environ.get("PYTENSOR_FLAGS", "")
        os.environ["PYTENSOR_FLAGS"] = ",".join(([old] if old else []) + flags)
    return message


def forwarder_loaded() -> bool:
    """Whether a module PyTensor compiled has loaded the forwarder into this process."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return False
    return f"lib{FORWARDER_NAME}.so" in maps


BLAS_OPS = ("Gemm", "Dot22", "Dot22Scalar", "CGemv", "CGer", "Gemv", "Ger", "Dot", "Dense")


def pytensor_blas_nodes(fn) -> list[str]:
    """The product ops in a compiled PyTensor function's graph, each marked "C" where its
    VM runs compiled C code for it (a thunk with a ``cthunk``), "py" where it runs the
    Op's Python ``perform``."""
    vm = getattr(fn, "vm", None)
    thunks = dict(zip(getattr(vm, "nodes", []), getattr(vm, "thunks", [])))
    names = []
    for node in fn.maker.fgraph.toposort():
        name = type(node.op).__name__
        if any(name.startswith(b) for b in BLAS_OPS):
            thunk = thunks.get(node)
            kind = "?" if thunk is None else ("C" if hasattr(thunk, "cthunk") else "py")
            names.append(f"{node.op} ({kind})")
    return names


def _busy_seconds() -> float | None:
    """CPU seconds all processes have spent busy since boot (Linux /proc/stat)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, *rest = (int(f) for f in fields)
    steal = rest[0] if rest else 0
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


class CpuWitness:
    """How much CPU other processes used while a benchmark ran: timings on a shared
    2-core machine mean little if something else was busy at the same time."""

    def __init__(self) -> None:
        import time

        self._clock = time.perf_counter
        self.start = (self._clock(), _busy_seconds(), _own_seconds())

    def report(self) -> str:
        wall0, busy0, own0 = self.start
        busy1 = _busy_seconds()
        if busy0 is None or busy1 is None:
            return "CPU used by other processes: unknown (no /proc/stat)"
        wall = self._clock() - wall0
        others = max(0.0, (busy1 - busy0) - (_own_seconds() - own0))
        return (
            f"CPU used by other processes during the run: {others:.1f} core-s in {wall:.0f} s "
            f"({100 * others / wall:.0f}% of one core; {os.cpu_count()} cores)"
        )


def whole_graph_program(fn: Any) -> Any:
    """A compiled tensorjit function's whole-graph program, or None (its call path's;
    checkouts before the call path kept it on the function)."""
    calls = getattr(fn, "calls", None)
    return calls.program if calls is not None else getattr(fn, "_program", None)
