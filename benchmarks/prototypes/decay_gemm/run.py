"""Builds and runs fused.c (a prototype: an L2-penalised weight's update in one pass over
the weight) against the project's decay pass (c_backend/decay.py's kernel) + OpenBLAS's
GEMM, with NumPy's OpenBLAS, on the tutorial MLP's shapes. Needs gcc and an x86-64 CPU
with AVX2 and FMA.

Run: taskset -c 0 .venv/bin/python benchmarks/prototypes/decay_gemm/run.py [n] [calls]
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


def openblas() -> tuple[Path, str]:
    """NumPy's OpenBLAS library and the name of its CBLAS sgemm."""
    libs = Path(np.__file__).parent.parent / "numpy.libs"
    for lib in sorted(libs.glob("libscipy_openblas*.so")) + sorted(libs.glob("libopenblas*.so")):
        handle = ctypes.CDLL(str(lib))
        for name in ("scipy_cblas_sgemm64_", "scipy_cblas_sgemm", "cblas_sgemm"):
            if hasattr(handle, name):
                return lib, name
    raise SystemExit(f"no OpenBLAS with a CBLAS sgemm in {libs}")


def main() -> None:
    from tensorjit.plugins.c_backend import compiler, decay

    lib, sgemm = openblas()
    source = Path(__file__).with_name("fused.c")
    with tempfile.TemporaryDirectory() as tmp:
        # Today's decay pass: the project's kernel, built with the project's flags.
        kernel = Path(tmp, "decay.c")
        kernel.write_text(decay.source()[0])
        shared = os.path.join(tmp, "libdecay.so")
        subprocess.run([*compiler.compiler_command(), *compiler.compile_flags(), str(kernel),
                        "-o", shared], check=True)  # fmt: skip
        program = os.path.join(tmp, "fused")
        flags = ["-O3", "-march=native", "-ffp-contract=off", "-fno-trapping-math"]
        subprocess.run(["gcc", *flags, f"-DCBLAS_SGEMM={sgemm}", str(source), shared,
                        str(lib), f"-Wl,-rpath,{lib.parent}:{tmp}", "-o", program],
                       check=True)  # fmt: skip
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        subprocess.run([program, *sys.argv[1:]], check=True, env=env)


if __name__ == "__main__":
    main()
