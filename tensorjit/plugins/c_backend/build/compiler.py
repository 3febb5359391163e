"""Compiling generated C into shared libraries, cached on disk, loaded with cffi.

An entry of the cache is ``<compiledir>/c_backend/<key>.so`` (with the source beside it
as ``<key>.c`` and its size and hash in ``<key>.meta``), where ``key`` hashes the
source, the compiler's path and version, the flags, NumPy's ABI version and tensorjit's
version (and the CPU, for flags such as -march=native). Each entry is built in a
temporary directory of the cache and moved into place with ``os.replace`` while holding
a lock on ``<key>.lock`` (one lock per key, so unrelated builds never wait on each other
and two processes never build the same entry twice). The directory must be private to
this user, and an entry is verified against its metadata before it is loaded; a damaged
one is set aside and rebuilt (disk_cache.py).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tensorjit.core.diagnostics import TensorjitRuntimeWarning, logger
from tensorjit.plugins import disk_cache

# -fno-trapping-math: gcc may then if-convert selects whose arms do arithmetic (which
# could raise FP flags that nothing reads; values do not change), so loops calling the
# branch-free exp/log/tanh of codegen vectorise. -ffp-contract=off: no fused multiply-add
# unless the source asks (NumPy rounds a * b + c twice). -fopenmp-simd: the elementwise
# loops' "omp simd" marks (codegen.SIMD), no OpenMP runtime. -march=native on x86-64 Linux:
# AVX2/AVX-512 make those loops 2-4x faster than SSE2 (so the cache key names the CPU;
# cflags="-march=x86-64" overrides it).
_NATIVE = platform.machine() in ("x86_64", "AMD64") and sys.platform.startswith("linux")
CFLAGS = (
    ("-O3", "-std=gnu99", "-fPIC", "-shared", "-fwrapv", "-fno-math-errno")
    + ("-fno-trapping-math", "-ffp-contract=off", "-fopenmp-simd")
    + (("-march=native",) if _NATIVE else ())
)
LIBS = ("-lm", "-lpthread")
CODEGEN_VERSION = "3"  # bump when the generated code's conventions or the entry layout change


class CompilerUnavailable(RuntimeError):
    """No usable C compiler (or cffi) on this machine."""


class CCompileError(RuntimeError):
    """The C compiler rejected generated code; the message names the kept source."""


# What this process did, for tests and `info`: entries built, loaded from disk, reused.
stats = {"built": 0, "loaded": 0, "memory_hits": 0}
_loaded: dict[str, tuple[Any, Any]] = {}
_ffis: dict[str, Any] = {}
_thread_lock = threading.Lock()
_stats_lock = threading.Lock()
_identities: dict[tuple[str, ...], tuple[tuple[str, ...], str]] = {}


def compiler_command() -> list[str]:
    """The compiler's argv prefix: config ``cc`` if set, else ``$CC``, else ``cc``, else
    ``gcc``."""
    from tensorjit.core.config import config

    if config.cc.strip():
        argv, origin = shlex.split(config.cc), "from config 'cc'"
    elif os.environ.get("CC", "").strip():
        argv, origin = shlex.split(os.environ["CC"]), "from $CC"
    else:
        found = next((n for n in ("cc", "gcc") if shutil.which(n)), None)
        if found is None:
            raise CompilerUnavailable("no C compiler found: neither 'cc' nor 'gcc' is on PATH")
        argv, origin = [found], "on PATH"
    path = shutil.which(argv[0])
    if path is None:
        raise CompilerUnavailable(f"C compiler {argv[0]!r} ({origin}) was not found")
    return [path, *argv[1:]]


def compile_flags() -> tuple[str, ...]:
    """The fixed flags, then config ``cflags`` (which may override them, e.g. -O2)."""
    from tensorjit.core.config import config

    return CFLAGS + tuple(shlex.split(config.cflags))


def compiler_identity() -> tuple[tuple[str, ...], str]:
    """(argv, first line of ``--version``); each compiler is run once per process, and
    not at all while the cache remembers the version of this very binary."""
    argv = tuple(compiler_command())
    known = _identities.get(argv)
    if known is None:
        version = _remembered_version(argv)
        if version is not None:
            known = _identities[argv] = (argv, version)
    if known is None:
        try:
            proc = subprocess.run([*argv, "--version"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError) as exc:
            raise CompilerUnavailable(f"C compiler {argv[0]!r} does not run: {exc}") from None
        if proc.returncode != 0:
            raise CompilerUnavailable(
                f"C compiler {argv[0]!r} does not run: '--version' exited with "
                f"{proc.returncode}: {proc.stderr.strip()[:200]}"
            )
        lines = (proc.stdout or proc.stderr).strip().splitlines()
        known = _identities[argv] = (argv, lines[0] if lines else "unknown version")
        _remember_version(argv, known[1])
    return known


def _binary_stamp(argv: tuple[str, ...]) -> str:
    # The resolved binary's path, size and modification time: a reinstalled or
    # upgraded compiler gets a new stamp, so its version is asked again.
    real = os.path.realpath(argv[0])
    st = os.stat(real)
    return f"{' '.join(argv)}|{real}|{st.st_size}|{st.st_mtime_ns}"


def _versions_path() -> str:
    return os.path.join(cache_dir(), "compilers.json")


def _remembered_version(argv: tuple[str, ...]) -> str | None:
    try:
        with open(_versions_path()) as f:
            known = json.load(f)
        version = known.get(_binary_stamp(argv)) if isinstance(known, dict) else None
    except (OSError, ValueError):
        return None
    return version if isinstance(version, str) else None


def _remember_version(argv: tuple[str, ...], version: str) -> None:
    try:
        try:
            with open(_versions_path()) as f:
                known = json.load(f)
        except (OSError, ValueError):
            known = {}
        if not isinstance(known, dict):
            known = {}  # a damaged file is replaced, never trusted
        known[_binary_stamp(argv)] = version
        # Readers see the old file or the new one.
        disk_cache.write_private(_versions_path(), json.dumps(known).encode())
    except OSError:
        pass  # a read-only cache only costs the next process one '--version' run


def unavailable_reason() -> str | None:
    """None if cffi imports and a C compiler runs, else why not (the backend's check)."""
    try:
        import cffi  # noqa: F401
    except ImportError as exc:
        return f"cffi is not importable ({exc}); install it with 'pip install cffi'"
    try:
        import fcntl  # noqa: F401
    except ImportError:
        return "the on-disk kernel cache needs fcntl (POSIX)"
    try:
        compiler_identity()
    except CompilerUnavailable as exc:
        return str(exc)
    return None


def _numpy_abi() -> str:
    import numpy as np

    try:
        from numpy._core._multiarray_umath import _get_ndarray_c_version

        return f"{np.__version__}/{_get_ndarray_c_version()}"
    except ImportError:  # pragma: no cover - older NumPy layouts
        return np.__version__


def _tensorjit_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tensorjit")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


def cache_key(source: str, extra_flags: tuple[str, ...] = ()) -> str:
    argv, cc_version = compiler_identity()
    parts = [
        source,
        " ".join(argv),
        cc_version,
        " ".join(compile_flags() + extra_flags + LIBS),
        _numpy_abi(),
        _tensorjit_version(),
        CODEGEN_VERSION,
        _native_cpu(compile_flags()),
    ]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _native_cpu(flags: tuple[str, ...]) -> str:
    # Code for "native" (-march=native, -mcpu=native) runs only on CPUs like this one.
    return cpu_identity() if any(f.endswith("=native") for f in flags) else ""


@functools.cache
def cpu_identity() -> str:
    """This CPU's vendor, model and feature flags (the first processor's in Linux's
    /proc/cpuinfo), else the machine and processor names ``platform`` gives."""
    fields = {"vendor_id", "cpu family", "model", "model name", "stepping", "flags"}
    fields |= {"Features", "CPU implementer", "CPU architecture", "CPU variant", "CPU part"}
    found = []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break  # the end of the first processor
                name, _, value = line.partition(":")
                if name.strip() in fields:
                    found.append(f"{name.strip()}: {value.strip()}")
    except OSError:
        pass
    return "\n".join(found) or f"{platform.machine()} {platform.processor()}"


def cpu_flags() -> set[str]:
    """This CPU's feature flags (``cpu_identity``'s ``flags`` line; empty where Linux's
    /proc/cpuinfo does not give them)."""
    for line in cpu_identity().splitlines():
        if line.startswith("flags:"):
            return set(line.partition(":")[2].split())
    return set()


def cache_dir() -> str:
    """The private directory of the kernel cache (see disk_cache.private_dir)."""
    from tensorjit.core.config import config

    root = config.compiledir
    return disk_cache.private_dir(root, os.path.join(root, "c_backend"))


@contextlib.contextmanager
def _key_lock(path: str) -> Iterator[bool]:
    """Hold the entry's lock: yields True once held, or False when another process has
    held it longer than ``config.compile_lock_timeout`` (a stopped process keeps its
    lock: a warning names it, and the caller compiles without the cache)."""
    import fcntl

    from tensorjit.core.config import config

    fd = disk_cache.open_lock(path)
    try:
        deadline, pause = time.monotonic() + config.compile_lock_timeout, 0.01
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    _warn_lock_held(path, fd, config.compile_lock_timeout)
                    yield False
                    return
                time.sleep(pause)
                pause = min(pause * 2, 0.5)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)  # who holds it, for the warning
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _warn_lock_held(path: str, fd: int, timeout: float) -> None:
    try:
        holder = os.pread(fd, 32, 0).decode().strip() or "unknown"
    except (OSError, UnicodeDecodeError):
        holder = "unknown"
    state = ""
    try:
        with open(f"/proc/{int(holder)}/status") as f:
            state = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("State:")), "")
    except (OSError, ValueError):
        pass
    warnings.warn(
        f"the compile cache lock {path} has been held for more than {timeout:g} s by "
        f"process {holder}{f' (state: {state})' if state else ''}; compiling in a private "
        "temporary directory instead (config compile_lock_timeout)",
        TensorjitRuntimeWarning,
        stacklevel=4,
    )


def _try_load(path: str, cdef: str, symbols: tuple[str, ...]) -> tuple[Any, Any] | None:
    """(ffi, lib) for the library at ``path``; None if it is missing or unusable."""
    if not os.path.exists(path):
        return None
    ffi = _ffis.get(cdef)
    if ffi is None:  # parsing declarations is the slow part of loading: once per text
        import cffi

        ffi = _ffis[cdef] = cffi.FFI()
        ffi.cdef(cdef)
    try:
        lib = ffi.dlopen(path)
        for name in symbols:
            getattr(lib, name)
    except (OSError, AttributeError):
        return None
    return ffi, lib


def _run_compiler(cmd: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    """Run the compiler in its own process group: on a timeout the whole group is
    killed (killing only the driver left cc1 running for hours, holding gigabytes)."""
    try:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
    except OSError as exc:
        return subprocess.CompletedProcess(cmd, -1, "", str(exc))
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return subprocess.CompletedProcess(cmd, -1, "", f"timed out after {timeout:g} seconds")
    except BaseException:  # interrupted: leave no compiler behind
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _build(
    source: str, directory: str, key: str, what: str, extra_flags: tuple[str, ...] = ()
) -> None:
    argv, _ = compiler_identity()
    logger.debug("compiling %s (cache entry %s in %s)", what, key[:16], directory)
    tmp = tempfile.mkdtemp(prefix=f".build-{key[:16]}-", dir=directory)
    try:
        c_path = os.path.join(tmp, "kernel.c")
        so_path = os.path.join(tmp, "kernel.so")
        with open(c_path, "w") as f:
            f.write(source)
        cmd = [*argv, *compile_flags(), *extra_flags, "-o", so_path, c_path, *LIBS]
        proc = _run_compiler(cmd)
        if proc.returncode != 0:
            kept = os.path.join(directory, f"{key}.failed.c")
            disk_cache.write_private(kept, source.encode())
            raise CCompileError(
                f"C compilation of {what} failed (exit status {proc.returncode}).\n"
                f"  generated source: {kept}\n"
                f"  command: {shlex.join(cmd)}\n"
                f"  compiler output:\n{(proc.stderr or proc.stdout).rstrip()}"
            )
        disk_cache.install(directory, key, so_path, c_path)  # the entry appears whole
        _after_install(directory)
        with _stats_lock:
            stats["built"] += 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load(source: str, cdef: str, symbols: tuple[str, ...], what: str) -> tuple[Any, Any]:
    """(ffi, lib) for ``source``: from memory, from the disk cache, or compiled now.
    A library declaring ``tj_parallel`` (parallel.py) gets the worker pool."""
    ffi, lib = _load_entry(source, what, lambda path: _try_load(path, cdef, symbols))
    # Imported with the first kernel of any kind: config threads reaches the BLAS too.
    from tensorjit.plugins.c_backend.build import threads

    if "tj_parallel" in cdef:
        threads.attach(ffi, lib)
    return ffi, lib


def extension_flags() -> tuple[str, ...]:
    """Include flags for C that uses the Python and NumPy C APIs (a CPython extension)."""
    import sysconfig

    import numpy as np

    return ("-I" + sysconfig.get_paths()["include"], "-I" + np.get_include())


def extension_unavailable_reason() -> str | None:
    """None if C extensions can be built here, else why not (no Python headers)."""
    import sysconfig

    header = os.path.join(sysconfig.get_paths()["include"], "Python.h")
    if not os.path.exists(header):
        return f"the Python C headers are not installed ({header} is missing)"
    return unavailable_reason()


def load_extension(source: str, module: str, what: str) -> Any:
    """The CPython extension module ``module`` (its ``PyInit_<module>`` is in
    ``source``), cached like kernels and imported without entering ``sys.modules``."""
    return _load_entry(
        source, what, lambda path: _try_import(path, module), extra_flags=extension_flags()
    )


def _try_import(path: str, module: str) -> Any:
    import importlib.machinery
    import importlib.util

    if not os.path.exists(path):
        return None
    loader = importlib.machinery.ExtensionFileLoader(module, path)
    spec = importlib.util.spec_from_file_location(module, path, loader=loader)
    try:
        ext = importlib.util.module_from_spec(spec)
        loader.exec_module(ext)
    except ImportError:
        return None
    return ext


def _load_entry(source: str, what: str, try_load: Any, extra_flags: tuple[str, ...] = ()) -> Any:
    """What ``try_load(path)`` makes of the cache entry of ``source``: from memory, from
    the disk cache, or compiled now (under the entry's lock; a corrupt entry is rebuilt)."""
    key = cache_key(source, extra_flags)
    found = _loaded.get(key)
    if found is not None:
        stats["memory_hits"] += 1
        return found
    with _thread_lock:
        found = _loaded.get(key)
        if found is not None:
            return found
        directory = cache_dir()
        found = _load_verified(directory, key, try_load)
        if found is None:
            try:
                found = _build_entry(source, what, try_load, extra_flags, directory, key)
            except OSError as exc:
                if exc.errno not in CACHE_UNUSABLE:
                    raise
                # A full or read-only cache: this process compiles privately instead.
                private = disk_cache.abandon(directory, exc.strerror or str(exc))
                found = _build_entry(source, what, try_load, extra_flags, private, key)
        else:
            stats["loaded"] += 1
        _loaded[key] = found
        return found


# Errors of a cache that can not take new entries (the build then goes elsewhere).
CACHE_UNUSABLE = {errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EACCES, errno.EPERM}


def _build_entry(
    source: str, what: str, try_load: Any, extra_flags: tuple[str, ...], directory: str, key: str
) -> Any:
    """Build entry ``key`` in ``directory`` under its lock (unless another process built
    it meanwhile; a damaged entry is set aside first) and load it."""
    so_path = os.path.join(directory, f"{key}.so")
    with _key_lock(os.path.join(directory, f"{key}.lock")) as locked:
        if not locked:  # a stuck holder: build privately, outside the cache
            directory = disk_cache.temporary_private_dir()
            so_path = os.path.join(directory, f"{key}.so")
        state = disk_cache.check_entry(directory, key)  # another process built it?
        found = try_load(so_path) if state == "ok" else None
        if found is None:  # missing, damaged or unloadable: (re)build
            if state is not None:
                disk_cache.set_aside(so_path, "it does not load" if state == "ok" else state)
            _build(source, directory, key, what, extra_flags)
            found = try_load(so_path)
            if found is None:
                raise CCompileError(f"C kernel for {what} was built but does not load: {so_path}")
    return found


def _load_verified(directory: str, key: str, try_load: Any) -> Any:
    """What ``try_load`` makes of entry ``key`` if it matches its metadata, else None."""
    if disk_cache.check_entry(directory, key) != "ok":
        return None
    found = try_load(os.path.join(directory, f"{key}.so"))
    if found is not None:
        disk_cache.mark_used(directory, key)
    return found


_installs = [0]  # entries this process added: the cache is pruned every PRUNE_EVERY
PRUNE_EVERY = 200


def _after_install(directory: str) -> None:
    """Keep the cache under ``config.cache_max_bytes`` (checked at the first entry a
    process adds and every PRUNE_EVERY after: listing a large cache costs time)."""
    from tensorjit.core.config import config

    _installs[0] += 1
    limit = config.cache_max_bytes
    if limit and (_installs[0] - 1) % PRUNE_EVERY == 0:
        removed, freed, kept = disk_cache.prune(directory, limit)
        if removed:
            logger.info(
                "compile cache %s: evicted %d least recently used entries (%d bytes), "
                "%d bytes kept (config cache_max_bytes)", directory, removed, freed, kept,
            )  # fmt: skip


def prebuild(sources: list[tuple]) -> int:
    """Build the cache entries of these (source, what) or (source, what, extra flags)
    entries that are neither loaded nor on disk, several compiler processes at once;
    returns how many were built. A build that fails here is left to ``load``, which
    reports it."""
    directory = cache_dir()
    todo: dict[str, tuple[str, str, tuple[str, ...]]] = {}
    for source, what, *flags in sources:
        extra_flags = tuple(flags[0]) if flags else ()
        key = cache_key(source, extra_flags)
        if key not in _loaded and key not in todo:
            if disk_cache.check_entry(directory, key) != "ok":
                todo[key] = (source, what, extra_flags)
    if len(todo) < 2:
        return 0  # load() builds a single entry just as fast

    def build(item: tuple[str, tuple[str, str, tuple[str, ...]]]) -> int:
        key, (source, what, extra_flags) = item
        with _key_lock(os.path.join(directory, f"{key}.lock")) as locked:
            if not locked:
                return 0  # load() builds it outside the cache
            state = disk_cache.check_entry(directory, key)
            if state == "ok":
                return 0  # another process built it meanwhile
            if state is not None:
                disk_cache.set_aside(os.path.join(directory, f"{key}.so"), state)
            try:
                _build(source, directory, key, what, extra_flags)
            except (CCompileError, OSError):
                return 0  # load() reports it, or builds where the cache can not take it
            return 1

    # The longest builds first (the program runner), so they do not finish last alone.
    order = sorted(todo.items(), key=lambda item: -len(item[1][0]))
    workers = min(len(todo), os.cpu_count() or 1, 8)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return sum(pool.map(build, order))


def clear_memory_cache() -> None:
    """Forget loaded modules (the disk cache stays); later loads read the disk again."""
    _loaded.clear()


class HostCCompiler:
    """The C backend's compiler part (``Backend.compiler``): gcc (or ``config.cc``)
    through cffi, with the private on-disk cache of this module. Plugins that add C
    kernels to the C backend build them through it."""

    name = "host C (cffi)"

    @staticmethod
    def unavailable_reason() -> str | None:
        return unavailable_reason()

    @staticmethod
    def load(source: str, cdef: str, symbols: tuple[str, ...], what: str) -> tuple[Any, Any]:
        """``(ffi, lib)`` of ``source`` compiled (or found in the cache)."""
        return load(source, cdef, symbols, what)

    @staticmethod
    def clear_cache() -> tuple[str, int, int]:
        """Remove the cache's own files (see disk_cache.clear): (directory, removed,
        left alone)."""
        directory = cache_dir()
        return (directory, *disk_cache.clear(directory))

    @staticmethod
    def prune_cache(max_bytes: int) -> tuple[str, int, int, int]:
        """Evict least recently used entries down to ``max_bytes`` (see disk_cache.prune):
        (directory, entries removed, bytes freed, bytes kept)."""
        directory = cache_dir()
        return (directory, *disk_cache.prune(directory, max_bytes))

    @staticmethod
    def prebuild(sources: list[tuple]) -> int:
        """Build these ``(source, what[, flags])`` entries in parallel ahead of use."""
        return prebuild(sources)


HOST_C_COMPILER = HostCCompiler()
