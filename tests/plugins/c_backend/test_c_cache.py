"""The C backend's on-disk cache, compile errors, and the unavailable-compiler path."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from helpers.c_backend import NEEDS_C

import tensorjit
from tensorjit.plugins.c_backend.build import compiler

# Compiles one fused kernel, checks its value, prints what the cache did.
SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tensorjit, tensorjit.tensor as T
    from tensorjit.plugins.c_backend.build import compiler

    tensorjit.config.whole_graph = False  # one cache entry: the kernel's (no program,
    tensorjit.config.threads = 1  # no thread pool)
    a, b = T.vector("a"), T.vector("b")
    mode = tensorjit.FAST_RUN.with_backends("c", "python")
    f = tensorjit.function([a, b], 2 * a + 3 * b, mode=mode)
    x = np.arange(5.0)
    assert np.allclose(f(x, x), 5 * x)
    names = [k.name for k in f.kernels.values()]
    print(json.dumps({"stats": compiler.stats, "kernels": names}))
    """
)


def run_script(tmp_path, compiledir, script=SCRIPT, env_extra=None, check=True, timeout=300):
    path = tmp_path / "script.py"
    path.write_text(script)
    env = dict(os.environ, TENSORJIT_FLAGS=f"compiledir={compiledir}")
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, str(path)],
        capture_output=True,
        text=True,
        env=env,
        check=check,
        timeout=timeout,
    )


def result(proc):
    return json.loads(proc.stdout.strip().splitlines()[-1])


def entries(directory):
    names = os.listdir(os.path.join(directory, "c_backend"))
    return sorted(n for n in names if n.endswith(".so")), names


@NEEDS_C
def test_hit_in_new_process_and_corrupt_entry_rebuilt(tmp_path):
    cache = tmp_path / "cache"
    first = result(run_script(tmp_path, cache))
    assert first["kernels"] == ["c:elemwise"]
    assert first["stats"]["built"] == 1
    second = result(run_script(tmp_path, cache))
    assert second["stats"] == {"built": 0, "loaded": 1, "memory_hits": 0}
    (so,), _ = entries(cache)
    (cache / "c_backend" / so).write_bytes(b"not a shared library")
    third = result(run_script(tmp_path, cache))
    assert third["stats"]["built"] == 1  # the corrupt entry was rebuilt
    assert entries(cache)[0] == [so]


@NEEDS_C
def test_concurrent_builds_of_one_kernel(tmp_path):
    cache = tmp_path / "cache"
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, TENSORJIT_FLAGS=f"compiledir={cache}")
    procs = [
        subprocess.Popen(
            [sys.executable, str(script)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outputs]
    built = [json.loads(out.strip().splitlines()[-1])["stats"]["built"] for out, _ in outputs]
    assert sorted(built) == [0, 1]  # one process built it, the other waited and loaded it
    sos, names = entries(cache)
    assert len(sos) == 1
    assert not [n for n in names if n.startswith(".build-")]  # no temporary left behind


@NEEDS_C
def test_in_process_memory_cache(tmp_path):
    source = "int tj_answer(void) { return 42; }\n"
    with tensorjit.config.change_flags(compiledir=str(tmp_path)):
        _, lib = compiler.load(source, "int tj_answer(void);", ("tj_answer",), "answer")
        hits = compiler.stats["memory_hits"]
        _, again = compiler.load(source, "int tj_answer(void);", ("tj_answer",), "answer")
    assert lib.tj_answer() == 42 and again is lib
    assert compiler.stats["memory_hits"] == hits + 1


@NEEDS_C
def test_compile_error_names_source_and_message(tmp_path):
    source = "int tj_broken(void) { return undeclared_name; }\n"
    with tensorjit.config.change_flags(compiledir=str(tmp_path)):
        with pytest.raises(compiler.CCompileError) as info:
            compiler.load(source, "int tj_broken(void);", ("tj_broken",), "a broken kernel")
    message = str(info.value)
    assert "a broken kernel" in message and "undeclared_name" in message
    kept = message.split("generated source: ")[1].splitlines()[0]
    assert open(kept).read() == source


def test_registration_does_not_probe_the_compiler(tmp_path):
    script = textwrap.dedent(
        """
        import tensorjit
        from tensorjit.core.hooks import get_plugin_system
        from tensorjit.plugins.c_backend.build import compiler
        system = get_plugin_system()
        assert "c" in system.registries.backends.backends
        print(compiler._identities == {})
        """
    )
    proc = run_script(tmp_path, tmp_path / "cache", script)
    assert proc.stdout.strip() == "True"


def test_missing_compiler_reason_and_python_kernels(tmp_path):
    env = {"CC": "/nonexistent/bin/cc"}
    info = subprocess.run(
        [sys.executable, "-m", "tensorjit", "info"],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, **env),
    ).stdout
    (line,) = [ln for ln in info.splitlines() if ln.strip().startswith("c ")]
    assert "unavailable: C compiler '/nonexistent/bin/cc' (from $CC) was not found" in line
    script = textwrap.dedent(
        """
        import numpy as np
        import tensorjit, tensorjit.tensor as T
        a = T.vector("a")
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            f = tensorjit.function([a], T.exp(a) + 1)  # the default mode asks for C first
            assert [k.name for k in f.kernels.values()] == ["perform"]
            assert np.allclose(f(np.zeros(3)), 2.0)
            mode = tensorjit.FAST_RUN.with_backends("c", "python")
            g = tensorjit.function([a], a + 1, mode=mode)
            h = tensorjit.function([a], a * 2, mode=mode)
        assert [k.name for k in g.kernels.values()] == ["perform"]
        assert np.allclose(g(np.zeros(3)), 1.0) and np.allclose(h(np.ones(3)), 2.0)
        assert len(caught) == 1  # one warning, not one per function
        print(caught[0].message)
        """
    )
    proc = run_script(tmp_path, tmp_path / "cache", script, env_extra=env)
    assert "backend 'c' is unavailable (C compiler '/nonexistent/bin/cc'" in proc.stdout
    assert "its kernels are not used" in proc.stdout
    assert not (tmp_path / "cache" / "c_backend").exists()


@NEEDS_C
def test_cflags_from_config_make_their_own_entries(tmp_path):
    import tensorjit.tensor as T

    a = T.vector("a")
    # cache_dir is another name for compiledir (as in TENSORJIT_FLAGS=cache_dir=...)
    with tensorjit.config.change_flags(cache_dir=str(tmp_path), cflags="-DTJ_TEST_FLAG=1"):
        f = tensorjit.function([a], a + 1)
        assert compiler.compile_flags()[-1] == "-DTJ_TEST_FLAG=1"
    np.testing.assert_array_equal(f(np.arange(3.0)), [1.0, 2.0, 3.0])
    # Keys of their own (not the default flags' entries): the kernel and the program runner.
    assert len(entries(tmp_path)[0]) == 2


@NEEDS_C
def test_bad_cflags_give_the_compiler_message_and_the_source(tmp_path):
    with tensorjit.config.change_flags(compiledir=str(tmp_path), cflags="-fno-such-tj-flag"):
        with pytest.raises(compiler.CCompileError) as info:
            compiler.load("int tj_x(void) { return 1; }\n", "int tj_x(void);", ("tj_x",), "x")
    message = str(info.value)
    assert "-fno-such-tj-flag" in message and "generated source: " in message


def test_cc_from_config_names_the_missing_compiler(tmp_path):
    script = textwrap.dedent(
        """
        import warnings
        import numpy as np
        import tensorjit, tensorjit.tensor as T
        a = T.vector("a")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            f = tensorjit.function([a], a + 1)
        assert np.allclose(f(np.zeros(2)), 1.0)
        print(caught[0].message)
        """
    )
    flags = f"compiledir={tmp_path / 'cache'},cc=/nonexistent/tj-cc -O1"
    proc = run_script(tmp_path, None, script, env_extra={"TENSORJIT_FLAGS": flags})
    assert "C compiler '/nonexistent/tj-cc' (from config 'cc') was not found" in proc.stdout


@NEEDS_C
def test_a_functions_kernels_are_built_together_before_loading(tmp_path, monkeypatch):
    import tensorjit.tensor as T

    batches, real = [], compiler.prebuild
    compiler.clear_memory_cache()  # earlier tests may have loaded the same kernels
    monkeypatch.setattr(compiler, "prebuild", lambda s: batches.append(real(s)) or batches[-1])
    a = T.matrix("a")
    outputs = [T.exp(a) + 1, T.sin(a) * 2, a.sum(axis=0), T.argmax(a, axis=1)]
    with tensorjit.config.change_flags(compiledir=str(tmp_path)):
        f = tensorjit.function([a], outputs)
    # One batch: the four kernels and the program runner, by parallel compiler runs.
    assert batches == [5]
    assert len(entries(tmp_path)[0]) == 5
    assert f.calls.program is not None
    value = np.arange(6.0).reshape(2, 3)
    got = f(value)
    np.testing.assert_allclose(got[0], np.exp(value) + 1)
    np.testing.assert_array_equal(got[3], [2, 2])


# Holds every entry lock of a cache, then stops itself (SIGSTOP) as a process stopped
# in the middle of a compile would: its locks stay held.
HOLD_LOCKS = textwrap.dedent(
    """
    import fcntl, os, signal, sys
    directory = sys.argv[1]
    held = []
    for name in os.listdir(directory):
        if name.endswith(".lock"):
            fd = os.open(os.path.join(directory, name), os.O_RDWR)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.pwrite(fd, f"{os.getpid()}\\n".encode(), 0)
            held.append(fd)
    print(len(held), flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)
    """
)


@NEEDS_C
def test_a_stopped_lock_holder_does_not_block_a_compile_forever(tmp_path):
    import signal

    cache = tmp_path / "cache"
    run_script(tmp_path, cache)  # makes the entry (and its lock file)
    directory = cache / "c_backend"
    for name in os.listdir(directory):
        if name.endswith((".so", ".meta")):
            os.remove(directory / name)  # the next compile must build, under the lock
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCKS, str(directory)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert int(holder.stdout.readline()) >= 1
        proc = run_script(
            tmp_path,
            cache,
            env_extra={"TENSORJIT_FLAGS": f"compiledir={cache},compile_lock_timeout=1"},
            timeout=60,  # before: it waited for the stopped holder forever
        )
        assert result(proc)["stats"]["built"] == 1  # built, and the value checked
        assert f"held for more than 1 s by process {holder.pid} (state: T" in proc.stderr
        assert not [n for n in os.listdir(directory) if n.endswith(".so")]  # not installed
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()


@NEEDS_C
@pytest.mark.parametrize(
    ("failing", "error"),
    [("install", errno.ENOSPC), ("open_lock", errno.EROFS)],
    ids=["full", "read-only"],
)
def test_a_full_or_read_only_cache_degrades_to_a_private_directory(
    tmp_path, monkeypatch, failing, error
):
    from tensorjit.plugins import disk_cache

    cache = tmp_path / "cache"
    real = getattr(disk_cache, failing)

    def refuse_in_the_cache(path, *args):
        if str(path).startswith(str(cache)):
            raise OSError(error, os.strerror(error))
        return real(path, *args)

    monkeypatch.setattr(disk_cache, failing, refuse_in_the_cache)
    source = f"int tj_degraded(void) {{ return {error}; }}\n"  # not in any cache yet
    with tensorjit.config.change_flags(compiledir=str(cache)):
        disk_cache.forget_checked()
        with pytest.warns(RuntimeWarning, match=r"can not take new entries .*instead"):
            _, lib = compiler.load(source, "int tj_degraded(void);", ("tj_degraded",), "x")
        assert lib.tj_degraded() == error
        assert not str(compiler.cache_dir()).startswith(str(cache))  # for the process
    disk_cache.forget_checked()
