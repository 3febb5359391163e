"""How many threads the C backend's kernels (and its BLAS) use: config ``threads``.

The worker pool (thread_pool.c) is built once per machine, like a kernel, and every kernel
library's ``tj_parallel`` pointer is set to it when the library is loaded (``attach``;
the whole-graph program's runner is given it the same way, ``attach_setter``).
``config.threads`` applies at once to every kernel, compiled or not: "auto" is the number
of cores this process may run on (its CPU affinity); a number also sets the threads of the
BLAS the products call (NumPy's OpenBLAS, which NumPy's own products share).
"""

from __future__ import annotations

import ctypes
import functools
import os
import pathlib
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from tensorjit.core.config import config
from tensorjit.core.diagnostics import TensorjitRuntimeWarning
from tensorjit.plugins.c_backend.build import compiler

_POOL_CDEF = (
    "int tj_pool_parallel(void *, void *, int64_t, int64_t, int64_t);\n"
    "int tj_pool_set_threads(int);\n"
    "int tj_pool_blas_guard(void *, void *, int);\n"
    "void tj_pool_blas_count(void *, int);\n"
    "int tj_pool_blas_threads(void *);\n"
)
_lock = threading.Lock()
_pool: tuple[Any, Any] | None = None
_pool_failed = False
# what to call with the address of one of the pool's symbols, per library attached (by
# id) and symbol
_libraries: dict[tuple[int, str], Callable[[int], None]] = {}
_pointed: set[tuple[int, str]] = set()  # keys of those given their address


def available_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def thread_count() -> int:
    """Threads per kernel under the current config."""
    chosen = config.threads
    return available_cores() if chosen == "auto" else int(chosen)


def _load_pool() -> tuple[Any, Any] | None:
    global _pool, _pool_failed
    if _pool is not None or _pool_failed:
        return _pool
    with _lock:
        if _pool is None and not _pool_failed:
            source = (pathlib.Path(__file__).parent / "thread_pool.c").read_text()
            try:
                pool = compiler.load(source, _POOL_CDEF, ("tj_pool_parallel",), "thread pool")
            except (compiler.CCompileError, compiler.CompilerUnavailable, OSError) as exc:
                _pool_failed = True
                warnings.warn(
                    f"C kernels run on one thread: {exc}", TensorjitRuntimeWarning, stacklevel=3
                )
                return None
            pool[1].tj_pool_set_threads(thread_count())
            _pool = pool
    return _pool


def attach(ffi: Any, lib: Any) -> None:
    """Point a kernel library's ``tj_parallel`` at the pool (and its ``tj_blas_guard``,
    where it has one: linalg/blas_threads.py); while one thread is wanted and no pool is
    built, the library runs serially (and no pool is built) until config ``threads``
    asks for more."""
    # the guard first: a library with the pool but not yet its guard would set the BLAS
    # count for split products by itself, unguarded
    if hasattr(lib, "tj_blas_guard"):
        attach_setter(
            lib,
            lambda address: setattr(
                lib, "tj_blas_guard", ffi.cast("int (*)(void *, void *, int)", address)
            ),
            "tj_pool_blas_guard",
        )
    signature = "int (*)(void *, void *, int64_t, int64_t, int64_t)"
    attach_setter(lib, lambda address: setattr(lib, "tj_parallel", ffi.cast(signature, address)))


def attach_setter(
    owner: Any, setter: Callable[[int], None], symbol: str = "tj_pool_parallel"
) -> None:
    """``setter(address)`` is called with the address of the pool's ``symbol`` once
    there is a pool (now, or when config ``threads`` first asks for more than one), once
    per ``owner`` and symbol."""
    with _lock:
        if (id(owner), symbol) in _libraries:
            return
        _libraries[(id(owner), symbol)] = setter
    if _pool is not None or thread_count() > 1:
        _point_all()


def _point_all() -> None:
    """Every library attached so far gets the pool (built now if need be)."""
    pool = _load_pool()
    if pool is None:
        return
    pool_ffi, pool_lib = pool
    with _lock:
        waiting = [(k[1], _libraries[k]) for k in _libraries.keys() - _pointed]
        waiting.sort(key=lambda item: item[0] != "tj_pool_blas_guard")  # (see attach)
        _pointed.update(_libraries)
    for symbol, setter in waiting:
        setter(int(pool_ffi.cast("uintptr_t", pool_ffi.addressof(pool_lib, symbol))))


def _apply(_value: object = None) -> None:
    """config ``threads`` changed: the pool (built now if needed), every kernel library
    loaded so far and the BLAS follow."""
    count = thread_count()
    with _lock:  # not between _load_pool's build and its own set
        if _pool is not None:
            _pool[1].tj_pool_set_threads(count)
    if count > 1:
        _point_all()
    if config.threads != "auto":
        if _blas_before[0] is None:
            _blas_before[0] = _blas_threads_settled() or available_cores()
        set_blas_threads(count)
    elif _blas_before[0] is not None:  # back to auto: the BLAS's own count again
        set_blas_threads(_blas_before[0])
        _blas_before[0] = None


_blas_before: list[int | None] = [None]  # the BLAS's count before config set one


def blas_threads() -> int | None:
    """The threads of the BLAS the products call (None if it does not say)."""
    from tensorjit.plugins.c_backend.linalg import blas

    getter = _blas_function(blas.provider().where, "get")
    return None if getter is None else int(getter())


def _blas_threads_settled() -> int | None:
    """The BLAS's threads once the split products in flight (which set them to one for
    their call, thread_pool.c's guard) have put back the count they found."""
    from tensorjit.plugins.c_backend.linalg import blas

    getter = _blas_function(blas.provider().where, "get")
    if getter is None or _pool is None:
        return blas_threads()
    pool_ffi, pool_lib = _pool
    address = ctypes.cast(getter, ctypes.c_void_p).value
    return int(pool_lib.tj_pool_blas_threads(pool_ffi.cast("void *", address)))


def set_blas_threads(count: int) -> bool:
    """Set the threads of the BLAS the products call; False if it has no such switch."""
    from tensorjit.plugins.c_backend.linalg import blas

    setter = _blas_function(blas.provider().where, "set")
    if setter is None:
        return False
    if _pool is None:
        setter(count)
    else:  # after the products in flight, whose parts have the count at one
        pool_ffi, pool_lib = _pool
        address = ctypes.cast(setter, ctypes.c_void_p).value
        pool_lib.tj_pool_blas_count(pool_ffi.cast("void *", address), count)
    return True


def _blas_libraries(where: str) -> list[pathlib.Path]:
    """The library at ``where``, or, for SciPy's capsules, SciPy's bundled OpenBLAS."""
    path = pathlib.Path(where)
    if path.exists():
        return [path]
    import scipy

    root = pathlib.Path(scipy.__file__).parent
    return sorted((root.parent / "scipy.libs").glob("libscipy_openblas*"))


def _blas_symbol(where: str, names: Sequence[str]) -> Any:
    """The first of ``names`` exported by the BLAS at ``where`` (a ctypes function), or
    None."""
    for lib_path in _blas_libraries(where):
        try:
            lib = ctypes.CDLL(str(lib_path))
        except OSError:
            continue
        for name in names:
            fn = getattr(lib, name, None)
            if fn is not None:
                return fn
    return None


@functools.cache
def blas_local_threads_setter(where: str) -> int:
    """The address of OpenBLAS's ``openblas_set_num_threads_local`` (0.3.27 and later:
    the thread count of the calling thread's products; 0 returns to the library's own)
    in the BLAS at ``where``, or 0 where it has none. Kernels that make many small
    products (convolution.py's, one per image) run them on one BLAS thread."""
    names = ("openblas_set_num_threads_local", "scipy_openblas_set_num_threads_local64_")
    fn = _blas_symbol(where, names)
    return 0 if fn is None else ctypes.cast(fn, ctypes.c_void_p).value or 0


def blas_thread_controls(where: str) -> tuple[int, int, int]:
    """The addresses (0 where missing) of OpenBLAS's per-thread count setter, and of
    its library-wide setter and getter, in the BLAS at ``where``: a kernel whose parts
    each make small products sets its products to one thread with the first, or, in a
    BLAS without it (NumPy 2.5's scipy-openblas64), the library's count for the call."""
    address = [
        0 if fn is None else ctypes.cast(fn, ctypes.c_void_p).value or 0
        for fn in (_blas_function(where, "set"), _blas_function(where, "get"))
    ]
    return (blas_local_threads_setter(where), *address)


# OpenBLAS's cores with AVX-512 kernels (DYNAMIC_ARCH builds' names).
AVX512_CORES = ("SkylakeX", "Cooperlake", "SapphireRapids")


@functools.cache
def blas_core(where: str) -> str | None:
    """The kernels OpenBLAS chose for this CPU (``openblas_get_corename``: "Haswell",
    "SkylakeX", "Zen"...) in the BLAS at ``where``, or None where it does not say."""
    names = ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename")
    fn = _blas_symbol(where, [*names, "openblas_get_corename"])
    if fn is None:
        return None
    fn.argtypes, fn.restype = [], ctypes.c_char_p
    value = fn()
    return value.decode() if value else None


def avx512_hint(core: str | None, cpu_flags: set[str], chosen_by: str | None) -> str | None:
    """Advice when this CPU has AVX-512 but OpenBLAS runs other kernels: its products are
    then much slower than they could be (benchmarks/RESULTS.md), and only the
    environment can change that, before the library loads. ``chosen_by`` is
    ``OPENBLAS_CORETYPE`` from the environment (None when unset): a machine may set it
    on purpose, where an older OpenBLAS's own choice computes wrong results."""
    wanted = {"avx512f", "avx512bw", "avx512vl", "avx512dq"}
    if core is None or core in AVX512_CORES or not wanted <= cpu_flags:
        return None
    if chosen_by is not None:
        return (
            f"this CPU has AVX-512 but OpenBLAS runs its {core} kernels because the "
            f"environment sets OPENBLAS_CORETYPE={chosen_by}; without it (where the "
            "OpenBLAS in use is known to be sound on this CPU) its AVX-512 ones would run"
        )
    return (
        f"this CPU has AVX-512 but OpenBLAS runs its {core} kernels (it does not know the "
        "CPU): OPENBLAS_CORETYPE=SkylakeX in the environment (before Python starts) "
        "selects its AVX-512 ones"
    )


@functools.cache
def _blas_function(where: str, verb: str) -> Any:
    """OpenBLAS's ``<verb>_num_threads`` in the library at ``where`` (or, for SciPy's
    capsules, in SciPy's bundled OpenBLAS); NumPy's scipy-openblas64 and SciPy's
    scipy-openblas32 export prefixed names."""
    names = [f"scipy_openblas_{verb}_num_threads64_", f"scipy_openblas_{verb}_num_threads"]
    fn = _blas_symbol(where, [*names, f"openblas_{verb}_num_threads"])
    if fn is not None:
        fn.argtypes = [ctypes.c_int] if verb == "set" else []
        fn.restype = None if verb == "set" else ctypes.c_int
    return fn


config.watch("threads", _apply)
if config.threads != "auto":  # set (TENSORJIT_FLAGS or code) before this module loaded
    _apply()
