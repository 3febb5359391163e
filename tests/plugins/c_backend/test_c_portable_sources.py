"""The C the backend generates is portable: every source a set of representative
functions builds (fused elementwise math, reductions, softmax rows, indexing, BLAS calls
and the few-column and penalised kernels, convolution and pooling, threads, the
whole-graph program, a shared device family on the host target) also compiles for
aarch64, where no x86 builtin exists and none of the x86 feature macros is defined. It
needs a cross compiler (Debian's gcc-aarch64-linux-gnu, which .ci/run installs where apt
can); without one the sources are still generated and compiled for baseline x86-64
(-march=x86-64)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import numpy as np
import pytest
from helpers.c_backend import NEEDS_C

pytestmark = NEEDS_C
CROSS = shutil.which("aarch64-linux-gnu-gcc")

# Run in a fresh process with an empty compile cache, so that every kernel is generated
# and built there; each source handed to the compiler is saved with its extra flags.
DRIVER = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tensorjit, tensorjit.tensor as T
    from tensorjit.plugins.c_backend.build import compiler

    out_dir = sys.argv[1]
    saved = []
    original = compiler._build

    def recording(source, directory, key, what, extra_flags=()):
        path = f"{out_dir}/{key}.c"  # (builds run on several threads: a name of its own)
        with open(path, "w") as f:
            f.write(source)
        saved.append({"path": path, "extension": bool(extra_flags), "what": what})
        return original(source, directory, key, what, extra_flags)

    compiler._build = recording
    rng = np.random.default_rng(0)
    for dtype in ("float32", "float64"):
        x, w = T.matrix("x", dtype=dtype), T.matrix("w", dtype=dtype)
        v = T.vector("v", dtype=dtype)
        h = T.tanh(T.dot(x, w) + v)
        special = T.erf(x) + T.log1p(T.abs(x)) + T.exp(-x) * T.sigmoid(x) + T.sqrt(T.abs(x))
        cost = T.nnet.softmax(h).sum() + T.nnet.log_softmax(h).max() + special.mean()
        cost = cost + 1e-3 * (w ** 2).sum() + h.argmax(axis=1).sum()
        gw = tensorjit.grad(cost, w)
        ws = tensorjit.shared(rng.standard_normal((30, 10)).astype(dtype), name="ws")
        step = tensorjit.function([x, v], cost, updates={ws: ws - 0.1 * tensorjit.grad(
            (T.tanh(T.dot(x, ws) + v) ** 2).sum() + 1e-3 * (ws ** 2).sum(), ws)},
            givens={w: ws})
        step(rng.standard_normal((20, 30)).astype(dtype), np.ones(10, dtype))
        i = T.lvector("i")
        g = tensorjit.function([x, i], [x[i].sum(axis=0), T.inc_subtensor(x[i], 1.0),
                                        T.arange(5, dtype=dtype) + x[0, :5]])
        g(rng.standard_normal((8, 6)).astype(dtype), np.array([1, 3]))
        img, kern = T.tensor4("img", dtype=dtype), T.tensor4("kern", dtype=dtype)
        conv = T.nnet.conv2d(img, kern)
        pooled = T.nnet.pool_2d(conv, (2, 2))
        c = tensorjit.function([img, kern], [pooled, tensorjit.grad(pooled.sum(), kern)])
        c(rng.standard_normal((2, 1, 8, 8)).astype(dtype),
          rng.standard_normal((3, 1, 3, 3)).astype(dtype))
        streams = tensorjit.tensor.random.MRG_RandomStreams(7)  # the host target's family
        tensorjit.function([], [streams.uniform((5,), dtype=dtype), streams.normal((3,))])()
        with tensorjit.config.change_flags(threads=2):
            big = T.vector("big", dtype=dtype)
            t = tensorjit.function([big], [T.exp(big) * 2, big.sum()])
            t(np.ones(1 << 21, dtype))
    json.dump(saved, sys.stdout)
    """
)


@pytest.fixture(scope="module")
def generated_sources(tmp_path_factory):
    out = tmp_path_factory.mktemp("sources")
    cache = tmp_path_factory.mktemp("cache")
    env = dict(os.environ, TENSORJIT_FLAGS=f"compiledir={cache}")
    result = subprocess.run(
        [sys.executable, "-c", DRIVER, str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    saved = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(saved) >= 10, saved  # the set builds many libraries, the program included
    assert any(s["extension"] for s in saved), "the whole-graph program was not built"
    return saved


def _compile(cc: str, source: dict, arch_flags: list[str]) -> subprocess.CompletedProcess:
    flags = ["-O2", "-std=gnu99", "-fPIC", "-fno-math-errno", "-ffp-contract=off"]
    flags += ["-fopenmp-simd", "-Werror=implicit-function-declaration", *arch_flags]
    if source["extension"]:  # the program: a CPython extension
        flags += ["-I" + sysconfig.get_paths()["include"], "-I" + np.get_include()]
    obj = Path(source["path"]).with_suffix(".o")
    return subprocess.run(
        [cc, *flags, "-c", source["path"], "-o", str(obj)], capture_output=True, text=True
    )


def _failures(cc: str, sources: list[dict], arch_flags: list[str]) -> list[str]:
    failed = []
    for source in sources:
        proc = _compile(cc, source, arch_flags)
        if proc.returncode != 0:
            failed.append(f"{source['what']} ({source['path']}):\n{proc.stderr[-1500:]}")
    return failed


@pytest.mark.skipif(
    CROSS is None,
    reason="no aarch64 cross compiler (apt-get install gcc-aarch64-linux-gnu); the "
    "sources are still compiled for baseline x86-64 by the test below",
)
def test_every_generated_source_compiles_for_aarch64(generated_sources):
    sources = generated_sources
    if _multiarch_pyconfig():
        # a Debian/Ubuntu system Python: its pyconfig.h includes the one of its own
        # architecture, which only the arm64 dev package brings; the kernels (plain C)
        # are still checked, the program (a CPython extension) only on x86-64
        sources = [s for s in sources if not s["extension"]]
    failed = _failures(CROSS, sources, [])
    assert not failed, "\n\n".join(failed)


def _multiarch_pyconfig() -> bool:
    header = Path(sysconfig.get_paths()["include"]) / "pyconfig.h"
    try:
        return "-linux-gnu/" in header.read_text()
    except OSError:
        return True


def test_every_generated_source_compiles_for_baseline_x86_64(generated_sources):
    if os.uname().machine != "x86_64":
        pytest.skip("not an x86-64 machine: the aarch64 test covers the portable code")
    failed = _failures(shutil.which("cc") or "gcc", generated_sources, ["-march=x86-64"])
    assert not failed, "\n\n".join(failed)
