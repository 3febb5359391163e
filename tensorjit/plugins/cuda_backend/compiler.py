"""CUDA C++ source to PTX, without a GPU: nvcc where installed, else NVRTC (the
``nvidia-cuda-nvrtc`` wheel, or a libnvrtc on the loader path).

PTX is cached on disk in ``<compiledir>/cuda`` (private to this user, as the C backend's
cache: the driver runs what it loads) under the SHA-256 of the source, the virtual
architecture (``compute_90``), the compiler and its version, and the options. The driver
turns PTX into the GPU's code when a module is loaded (and caches that itself).
"""

from __future__ import annotations

import ctypes
import glob
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from functools import cache

# --fmad=false: both compilers fuse a multiply and an add into one fma by default, even
# across statements, which rounds once where NumPy (and the host's -ffp-contract=off)
# rounds twice: an elementwise a * b + c, an arange's start + i * step would differ.
OPTIONS = ("-std=c++17", "--fmad=false")
# The oldest architecture CUDA 12 and 13 both target: PTX for it loads on any newer GPU.
DEFAULT_ARCH = "compute_75"
_LOCK = threading.Lock()


class CudaCompileError(RuntimeError):
    """The compiler rejected a kernel: its log and the numbered source."""


class NoCudaCompiler(RuntimeError):
    """Neither nvcc nor NVRTC is installed."""


@dataclass(frozen=True)
class Compiler:
    kind: str  # "nvcc" or "nvrtc"
    path: str  # nvcc's path, or the NVRTC library's
    version: str

    def describe(self) -> str:
        return f"{self.kind} {self.version} ({self.path})"


def _nvcc() -> Compiler | None:
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    path = shutil.which("nvcc") or shutil.which(os.path.join(home, "bin", "nvcc"))
    if path is None:
        return None
    try:
        text = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"release ([\d.]+), V([\d.]+)", text.stdout)
    return Compiler("nvcc", path, found.group(2) if found else text.stdout.strip()[-40:])


def wheel_libraries(pattern: str) -> list[str]:
    """Libraries matching ``pattern`` in NVIDIA's wheels (the ``nvidia`` namespace
    package: ``nvidia/cu13/lib`` for CUDA 13's, ``nvidia/<name>/lib`` before)."""
    try:
        import nvidia
    except ImportError:
        return []
    found = []
    for root in getattr(nvidia, "__path__", []):
        found += sorted(glob.glob(os.path.join(root, "*", "lib", pattern)))
    return found


def _nvrtc_candidates() -> list[str]:
    return wheel_libraries("libnvrtc.so*") + ["libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"]


@cache
def _nvrtc_library() -> tuple[ctypes.CDLL, str] | None:
    for name in _nvrtc_candidates():
        try:
            return ctypes.CDLL(name), name
        except OSError:
            continue
    return None


def _nvrtc() -> Compiler | None:
    loaded = _nvrtc_library()
    if loaded is None:
        return None
    lib, name = loaded
    major, minor = ctypes.c_int(), ctypes.c_int()
    if lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) != 0:
        return None
    return Compiler("nvrtc", name, f"{major.value}.{minor.value}")


def compiler() -> Compiler:
    """The compiler ``config.cuda_compiler`` chooses (found once per choice)."""
    from tensorjit.core.config import config

    return _compiler(config.cuda_compiler)


@cache
def _compiler(choice: str) -> Compiler:
    found = {"nvcc": _nvcc, "nvrtc": _nvrtc}.get(choice, lambda: _nvcc() or _nvrtc())()
    if found is None:
        wanted = {
            "nvcc": "nvcc is not on PATH (nor in $CUDA_HOME/bin)",
            "nvrtc": "NVRTC is not installed (pip install nvidia-cuda-nvrtc)",
        }
        raise NoCudaCompiler(
            f"no CUDA compiler (config.cuda_compiler={choice}): "
            + "; ".join(v for k, v in wanted.items() if choice in (k, "auto"))
        )
    return found


@cache
def _architectures(used: Compiler) -> tuple[int, ...]:
    """The virtual architectures ``used`` can target (75, 80, ...)."""
    if used.kind == "nvcc":
        done = subprocess.run([used.path, "--list-gpu-arch"], capture_output=True, text=True)
        return tuple(sorted(int(n) for n in re.findall(r"compute_(\d+)", done.stdout)))
    lib, _ = _nvrtc_library()
    count = ctypes.c_int()
    if lib.nvrtcGetNumSupportedArchs(ctypes.byref(count)) != 0:
        return ()
    archs = (ctypes.c_int * count.value)()
    lib.nvrtcGetSupportedArchs(archs)
    return tuple(sorted(archs))


def supported_arch(wanted: str) -> str:
    """``wanted`` (``compute_90``), or the newest architecture the compiler knows below
    it: PTX for an older architecture runs on newer GPUs (the driver compiles it), while
    a compiler older than the GPU rejects the GPU's own."""
    known = _architectures(compiler())
    number = int(wanted.removeprefix("compute_"))
    if not known or number in known:
        return wanted
    older = [n for n in known if n <= number]
    return f"compute_{max(older) if older else min(known)}"


def numbered(source: str) -> str:
    return "\n".join(f"{k + 1:4d} {line}" for k, line in enumerate(source.splitlines()))


def _with_nvcc(path: str, source: str, arch: str) -> str:
    with tempfile.TemporaryDirectory(prefix="tensorjit-cuda-") as tmp:
        cu, ptx = os.path.join(tmp, "kernel.cu"), os.path.join(tmp, "kernel.ptx")
        with open(cu, "w") as f:
            f.write(source)
        cmd = [path, "-ptx", f"-arch={arch}", *OPTIONS, "-o", ptx, cu]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise CudaCompileError(
                f"nvcc failed ({' '.join(cmd)}):\n{done.stderr.strip()}\n{numbered(source)}"
            )
        with open(ptx) as f:
            return f.read()


def _with_nvrtc(source: str, arch: str) -> str:
    lib, _ = _nvrtc_library()
    program = ctypes.c_void_p()
    status = lib.nvrtcCreateProgram(
        ctypes.byref(program), source.encode(), b"kernel.cu", 0, None, None
    )
    if status != 0:
        raise CudaCompileError(f"nvrtcCreateProgram failed with status {status}")
    try:
        options = [f"--gpu-architecture={arch}".encode(), *(o.encode() for o in OPTIONS)]
        array = (ctypes.c_char_p * len(options))(*options)
        status = lib.nvrtcCompileProgram(program, len(options), array)
        if status != 0:
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetProgramLog(program, log)
            raise CudaCompileError(
                f"NVRTC failed:\n{log.value.decode(errors='replace')}\n{numbered(source)}"
            )
        size = ctypes.c_size_t()
        lib.nvrtcGetPTXSize(program, ctypes.byref(size))
        ptx = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetPTX(program, ptx)
        return ptx.value.decode()
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(program))


def cache_dir() -> str:
    from tensorjit.core.config import config
    from tensorjit.plugins import disk_cache

    root = os.path.abspath(os.path.expanduser(config.compiledir))
    return disk_cache.private_dir(root, os.path.join(root, "cuda"))


def cache_key(source: str, arch: str, used: Compiler) -> str:
    text = "\0".join([source, arch, used.kind, used.version, *OPTIONS])
    return hashlib.sha256(text.encode()).hexdigest()


def compile_ptx(source: str, arch: str = DEFAULT_ARCH) -> str:
    """The PTX of ``source`` for virtual architecture ``arch`` (cached on disk)."""
    from tensorjit.plugins import disk_cache

    used = compiler()
    path = os.path.join(cache_dir(), cache_key(source, arch, used) + ".ptx")
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        pass
    if used.kind == "nvcc":
        ptx = _with_nvcc(used.path, source, arch)
    else:
        with _LOCK:  # an NVRTC program is not shared, but keep the log reads ordered
            ptx = _with_nvrtc(source, arch)
    disk_cache.write_private(path, ptx.encode())
    return ptx


def entry_names(ptx: str) -> set[str]:
    """The kernels a PTX module defines (``.entry`` names)."""
    return set(re.findall(r"\.entry\s+([A-Za-z_][A-Za-z0-9_]*)", ptx))
