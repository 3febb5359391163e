"""Fault and stress test of the C backend's compile cache.

``python -m tensorjit.tools.cache_stress [--workers 6] [--rounds 4] [--kernels 8]``

Each round starts ``--workers`` processes on one fresh cache directory. Every worker
compiles the same pool of kernels (in its own random order, so they race for the same
entries) and checks each result against NumPy. Meanwhile the round kills some workers
at random moments (SIGKILL: in the middle of a compile, a cache write or a lock), and
between rounds it damages random cache files: truncates or swaps shared objects,
garbles their metadata, puts a directory where a lock file goes, leaves a stale build
directory. A last round of workers must then compute every kernel correctly.

It prints each round's "passed / failed / killed" and a final line
"N passed, M failed"; a failed worker (an exception, a wrong value) is a defect. The
exit status is 0 only when no worker failed and the last round computed everything.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKER = r"""
import json, random, sys
import numpy as np
import tensorjit, tensorjit.tensor as T

tensorjit.config.whole_graph = False  # one cache entry per kernel: many small builds
n_kernels, seed = int(sys.argv[1]), int(sys.argv[2])
order = list(range(n_kernels))
random.Random(seed).shuffle(order)
a, b = T.vector("a"), T.vector("b")
mode = tensorjit.FAST_RUN.with_backends("c", "python")
x, y = np.linspace(-1, 1, 7), np.linspace(2, 3, 7)
for k in order:
    f = tensorjit.function([a, b], a * (k + 2) + b ** 2 - k, mode=mode)
    got = f(x, y)
    want = x * (k + 2) + y ** 2 - k
    if not np.allclose(got, want) or [v.name for v in f.kernels.values()] != ["c:elemwise"]:
        print(json.dumps({"wrong": k}))
        sys.exit(3)
print(json.dumps({"ok": len(order)}))
"""


def _run_round(
    cache: Path, workers: int, kernels: int, kill: bool, rng: random.Random
) -> tuple[int, int, int, list[str]]:
    env = dict(os.environ, TENSORJIT_FLAGS=f"compiledir={cache}")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(kernels), str(rng.randrange(10**9))],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(workers)
    ]
    killed = set()
    if kill:
        for k, proc in enumerate(procs):
            if rng.random() < 0.5:
                time.sleep(rng.uniform(0.0, 1.5))
                proc.kill()
                killed.add(k)
    passed, failed, n_killed, errors = 0, 0, 0, []
    for k, proc in enumerate(procs):
        out, err = proc.communicate(timeout=600)
        if k in killed and proc.returncode < 0:
            n_killed += 1  # (a worker that finished before its kill counts as run)
            continue
        if proc.returncode == 0 and '"ok"' in out:
            passed += 1
        else:
            failed += 1
            errors.append((out + err).strip()[-600:])
    return passed, failed, n_killed, errors


def _damage(cache: Path, rng: random.Random) -> list[str]:
    """Random harm to the cache's entries; what was done."""
    directory = cache / "c_backend"
    if not directory.is_dir():
        return []
    done = []
    sos = sorted(directory.glob("*.so"))
    metas = sorted(directory.glob("*.meta"))
    if sos:
        victim = rng.choice(sos)
        victim.write_bytes(victim.read_bytes()[: rng.randrange(1, 2000)])
        done.append(f"truncated {victim.name[:12]}")
    if len(sos) >= 2:
        one, two = rng.sample(sos, 2)
        data_one, data_two = one.read_bytes(), two.read_bytes()
        one.write_bytes(data_two)
        two.write_bytes(data_one)
        done.append(f"swapped {one.name[:12]} and {two.name[:12]}")
    if metas:
        victim = rng.choice(metas)
        victim.write_text(rng.choice(["[1, 2]", "{", "", '{"size": "x"}']))
        done.append(f"garbled {victim.name[:12]}")
    locks = sorted(directory.glob("*.lock"))
    if locks:
        victim = rng.choice(locks)
        victim.unlink()
        victim.mkdir()
        done.append(f"made a directory of {victim.name[:12]}")
    stale = directory / f".build-{rng.randrange(16**8):08x}-stale"
    stale.mkdir(exist_ok=True)
    old = time.time() - 3600
    os.utime(stale, (old, old))
    done.append("left a stale build directory")
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--kernels", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    cache = Path(tempfile.mkdtemp(prefix="tensorjit-stress-"))
    total_passed = total_failed = total_killed = 0
    try:
        for round_no in range(1, args.rounds + 1):
            passed, failed, killed, errors = _run_round(
                cache, args.workers, args.kernels, kill=True, rng=rng
            )
            total_passed, total_failed = total_passed + passed, total_failed + failed
            total_killed += killed
            harm = _damage(cache, rng)
            print(
                f"round {round_no}: {passed} passed, {failed} failed, {killed} killed; "
                f"then {'; '.join(harm) or 'nothing to damage yet'}"
            )
            for error in errors:
                print("  failure:", error.replace("\n", "\n    "))
        passed, failed, _, errors = _run_round(
            cache, args.workers, args.kernels, kill=False, rng=rng
        )
        total_passed, total_failed = total_passed + passed, total_failed + failed
        print(f"final round (no kills): {passed} passed, {failed} failed")
        for error in errors:
            print("  failure:", error.replace("\n", "\n    "))
        complete = failed == 0 and passed == args.workers
        print(json.dumps({"passed": total_passed, "failed": total_failed, "killed": total_killed}))
        print(
            f"{total_passed} passed, {total_failed} failed ({total_killed} killed on "
            f"purpose); every kernel correct at the end: {complete}"
        )
        return 0 if total_failed == 0 and complete else 1
    finally:
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
