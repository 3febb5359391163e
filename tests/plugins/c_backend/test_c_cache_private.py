"""The compile cache runs only code this user built: a directory another user can write
is refused, files are private whatever the umask, and a damaged or swapped entry is
rebuilt instead of loaded (tensorjit/plugins/disk_cache.py)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap

import pytest
from helpers.c_backend import NEEDS_C

# One kernel; the formula is an argument so that two scripts make different entries.
SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tensorjit, tensorjit.tensor as T
    from tensorjit.plugins.c_backend.build import compiler

    tensorjit.config.whole_graph = False  # one cache entry: the kernel's (no program,
    tensorjit.config.threads = 1  # no thread pool)
    a, b = T.vector("a"), T.vector("b")
    k = float(sys.argv[1])
    mode = tensorjit.FAST_RUN.with_backends("c", "python")
    f = tensorjit.function([a, b], k * a + 3 * b, mode=mode)
    x = np.arange(5.0)
    ok = bool(np.allclose(f(x, x), (k + 3) * x))
    names = [kn.name for kn in f.kernels.values()]
    print(json.dumps({"stats": compiler.stats, "kernels": names, "ok": ok}))
    """
)


def run(tmp_path, compiledir, k=2.0, umask=None):
    path = tmp_path / "script.py"
    path.write_text(SCRIPT)
    env = dict(os.environ, TENSORJIT_FLAGS=f"compiledir={compiledir}")
    proc = subprocess.run(
        [sys.executable, str(path), str(k)],
        capture_output=True,
        text=True,
        env=env,
        preexec_fn=None if umask is None else (lambda: os.umask(umask)),
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def entry(cache):
    (so,) = [n for n in os.listdir(cache / "c_backend") if n.endswith(".so")]
    return cache / "c_backend" / so


@NEEDS_C
def test_a_cache_other_users_can_write_is_not_used(tmp_path):
    # A planted library under the right name (and matching metadata) in a directory
    # others can write must never be loaded: it computes 10*a + 3*b, not 2*a + 3*b.
    planted_from = tmp_path / "attacker"
    run(tmp_path, planted_from, k=10.0)
    victim = tmp_path / "victim"
    first, _ = run(tmp_path, victim, k=2.0)
    assert first["ok"] and first["stats"]["built"] == 1
    good = entry(victim)
    bad = entry(planted_from)
    shutil.copyfile(bad, good)
    shutil.copyfile(bad.with_suffix(".meta"), good.with_suffix(".meta"))
    meta = json.loads(good.with_suffix(".meta").read_text())
    meta["key"] = good.stem
    good.with_suffix(".meta").write_text(json.dumps(meta))
    os.chmod(victim / "c_backend", 0o777)
    result, stderr = run(tmp_path, victim, k=2.0)
    assert result["ok"], "the planted library ran"
    assert result["stats"]["built"] == 1 and result["stats"]["loaded"] == 0
    assert "can be written by other users" in stderr and "is not used" in stderr


@NEEDS_C
def test_a_symlink_owned_by_another_user_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    try:
        os.lchown(link, 12345, 12345)
    except PermissionError:
        pytest.skip("changing a link's owner needs root (the refusal is the same code)")
    result, stderr = run(tmp_path, link)
    assert result["ok"] and result["kernels"] == ["c:elemwise"]
    assert "symbolic link owned by another user" in stderr
    assert not os.listdir(real)  # nothing was written through the link


@NEEDS_C
def test_a_cache_owned_by_another_user_is_refused(tmp_path):
    cache = tmp_path / "theirs"
    cache.mkdir(mode=0o700)
    try:
        os.chown(cache, 12345, 12345)
    except PermissionError:
        pytest.skip("giving a directory to another user needs root")
    result, stderr = run(tmp_path, cache)
    assert result["ok"] and "owned by another user" in stderr


@NEEDS_C
@pytest.mark.parametrize("damage", ["swapped", "truncated", "a directory", "no metadata"])
def test_a_damaged_entry_is_set_aside_and_rebuilt(tmp_path, damage):
    other = tmp_path / "other"
    run(tmp_path, other, k=10.0)
    cache = tmp_path / "cache"
    run(tmp_path, cache)
    so = entry(cache)
    if damage == "swapped":  # another kernel's valid library under this entry's name
        shutil.copyfile(entry(other), so)
    elif damage == "truncated":
        so.write_bytes(so.read_bytes()[:1000])
    elif damage == "a directory":
        so.unlink()
        so.mkdir()
    else:
        so.with_suffix(".meta").unlink()
    result, stderr = run(tmp_path, cache)
    assert result["ok"]
    assert result["stats"]["built"] == 1 and result["stats"]["loaded"] == 0
    assert "was set aside and is rebuilt" in stderr
    assert so.is_file() and (so.parent / f"{so.name}.damaged").exists()
    again, _ = run(tmp_path, cache)
    assert again["stats"] == {"built": 0, "loaded": 1, "memory_hits": 0}


@NEEDS_C
def test_a_lock_that_is_a_directory_and_bad_compiler_notes_are_rebuilt(tmp_path):
    cache = tmp_path / "cache"
    run(tmp_path, cache)
    so = entry(cache)
    so.unlink()
    so.with_suffix(".lock").unlink()
    so.with_suffix(".lock").mkdir()
    (cache / "c_backend" / "compilers.json").write_text("[1, 2, 3]")
    result, _ = run(tmp_path, cache)
    assert result["ok"] and result["kernels"] == ["c:elemwise"]
    assert result["stats"]["built"] == 1
    assert isinstance(json.loads((cache / "c_backend" / "compilers.json").read_text()), dict)


@NEEDS_C
def test_cache_files_are_private_whatever_the_umask(tmp_path):
    cache = tmp_path / "cache"
    result, _ = run(tmp_path, cache, umask=0)
    assert result["ok"]
    for path in (cache, cache / "c_backend"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    for path in (cache / "c_backend").iterdir():
        mode = stat.S_IMODE(path.stat().st_mode)
        assert not mode & 0o077, f"{path.name} has mode {mode:o}"


@NEEDS_C
def test_clearing_waits_for_a_compile_of_the_same_entry(tmp_path):
    import fcntl
    import threading
    import time

    from tensorjit.plugins import disk_cache

    cache = tmp_path / "cache"
    run(tmp_path, cache)
    so = entry(cache)
    directory = str(so.parent)
    fd = disk_cache.open_lock(str(so.with_suffix(".lock")))
    fcntl.flock(fd, fcntl.LOCK_EX)  # a compile of this entry is in progress
    done: list = []
    clearing = threading.Thread(target=lambda: done.append(disk_cache.clear(directory)))
    clearing.start()
    time.sleep(0.3)
    assert clearing.is_alive() and so.exists()  # it waits for the compile to finish
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
    clearing.join(10)
    assert done and not so.exists()
    again, _ = run(tmp_path, cache)
    assert again["ok"] and again["stats"]["built"] == 1


def test_a_compile_that_times_out_leaves_no_compiler_process(tmp_path):
    # The driver's children (cc1) must die with it: the whole process group is killed.
    import os
    import time

    from tensorjit.plugins.c_backend.build import compiler

    marker = tmp_path / "child.pid"
    script = f"sleep 60 & echo $! > {marker}; wait"
    start = time.monotonic()
    proc = compiler._run_compiler(["sh", "-c", script], timeout=1)
    assert proc.returncode == -1 and "timed out" in proc.stderr
    assert time.monotonic() - start < 30
    child = int(marker.read_text())
    time.sleep(0.2)
    try:
        os.kill(child, 0)
    except ProcessLookupError:
        return
    with open(f"/proc/{child}/stat") as stat:  # a zombie awaiting its reaper is dead too
        assert stat.read().split()[2] == "Z"
