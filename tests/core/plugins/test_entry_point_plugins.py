"""Third-party plugins discovered through real entry points.

The fixture distributions in tests/fixtures/ are built and installed with pip into a
temporary directory; a fresh interpreter with that directory on its path then finds them
through importlib.metadata, exactly as after ``pip install tensorjit-cube``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.fixtures import install_fixture


@pytest.fixture(scope="module")
def cube_site(tmp_path_factory) -> Path:
    return install_fixture("tensorjit_cube_plugin", tmp_path_factory.mktemp("cube_site"))


@pytest.fixture(scope="module")
def broken_site(tmp_path_factory) -> Path:
    return install_fixture("tensorjit_broken_plugin", tmp_path_factory.mktemp("broken_site"))


def _run(code: str, site: Path, **env_extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(env_extra)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True
    )


def test_third_party_op_and_kernel_are_found_and_used(cube_site):
    result = _run(
        """
        import numpy as np
        import tensorjit
        import tensorjit.tensor as T
        from tensorjit.core.hooks import get_plugin_system
        from tensorjit_cube import Cube, cube
        from tensorjit_cube.plugin import KERNEL_CALLS

        system = get_plugin_system()
        assert "cube" in system.plugin_names(), system.plugin_names()
        assert system.entry_points["cube"] == "tensorjit-cube 1.2.3"
        assert Cube in system.registries.ops.families["cube"]

        x = T.vector("x")
        f = tensorjit.function([x], cube(x) + 1)
        (node,) = [n for n in f.fgraph.apply_nodes if isinstance(n.op, Cube)]
        assert f.kernels[node].name == "cube:multiply-kernel", f.kernels[node]
        value = np.array([1.0, -2.0, 3.0])
        np.testing.assert_allclose(f(value), value ** 3 + 1)
        assert KERNEL_CALLS[0] == 1

        g = tensorjit.function([x], tensorjit.grad(cube(x).sum(), x))
        np.testing.assert_allclose(g(value), 3 * value ** 2)
        print("OK")
        """,
        cube_site,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("OK")


def test_info_lists_the_third_party_plugin(cube_site):
    result = _run("from tensorjit.__main__ import main; main(['info'])", cube_site)
    assert result.returncode == 0, result.stderr
    assert "cube" in result.stdout and "tensorjit-cube 1.2.3" in result.stdout
    assert "tensorjit_register_kernels" in result.stdout
    assert "python" in result.stdout and "available" in result.stdout


def test_blocklisted_plugin_is_not_loaded(cube_site):
    result = _run(
        """
        from tensorjit.core.hooks import get_plugin_system
        system = get_plugin_system()
        assert "cube" not in system.plugin_names()
        assert system.blocked == ["cube"]
        print("OK")
        """,
        cube_site,
        TENSORJIT_FLAGS="plugins_blocklist=cube",
    )
    assert result.returncode == 0, result.stderr


def test_autoload_can_be_disabled(cube_site):
    result = _run(
        """
        from tensorjit.core.hooks import get_plugin_system
        assert get_plugin_system().plugin_names() == ["core"]
        print("OK")
        """,
        cube_site,
        TENSORJIT_DISABLE_PLUGIN_AUTOLOAD="1",
    )
    assert result.returncode == 0, result.stderr


def test_a_plugin_that_fails_to_import_is_a_clear_error(broken_site):
    result = _run(
        """
        import tensorjit
        tensorjit.shared(1.0)
        """,
        broken_site,
    )
    assert result.returncode != 0
    assert "PluginLoadError" in result.stderr
    assert "'broken'" in result.stderr and "tensorjit-broken 0.0.1" in result.stderr
    assert "tensorjit_missing_dependency" in result.stderr


def test_info_says_why_a_backend_is_unavailable(cube_site):
    result = _run(
        """
        from tensorjit.core.devices import ArrayKind
        from tensorjit.core.hooks import hookimpl, register_plugin
        from tensorjit.core.registries import Backend
        from tensorjit.__main__ import main

        class AccelArrays(ArrayKind):
            device = "accel"

        class Accelerator:
            @hookimpl
            def tensorjit_register_backends(self, registry):
                registry.add(Backend("fake-accel", "accel", 50,
                                     lambda: "no fake accelerator is attached",
                                     description="test backend", plugin="accel",
                                     array_kind=AccelArrays()))

        register_plugin(Accelerator(), "accel")
        main(["info"])
        """,
        cube_site,
    )
    assert result.returncode == 0, result.stderr
    assert "fake-accel" in result.stdout
    assert "unavailable: no fake accelerator is attached" in result.stdout


def test_cache_command_lists_and_clears_the_compile_cache(tmp_path):
    import io

    from tensorjit.__main__ import cache
    from tensorjit.core.config import config

    cache_dir = tmp_path / "cache"
    (cache_dir / "c_backend").mkdir(parents=True, mode=0o700)
    os.chmod(cache_dir, 0o700)
    key = "ab" * 32
    (cache_dir / "c_backend" / f"{key}.so").write_bytes(b"x" * 10)
    (cache_dir / "c_backend" / f"{key}.c").write_text("int x;")
    (cache_dir / "c_backend" / "notes.txt").write_text("the user's own file")
    stale = cache_dir / "c_backend" / ".build-0123456789abcdef-x"
    stale.mkdir()
    os.utime(stale, (1, 1))  # a build directory a killed compile left behind
    with config.change_flags(compiledir=str(cache_dir)):
        out = io.StringIO()
        cache("list", out)
        assert "3 files" in out.getvalue() and f"{key}.so" in out.getvalue()
        out = io.StringIO()
        cache("clear", out)
        assert "c: removed 4 files" in out.getvalue(), out.getvalue()
        assert "1 files it did not write left alone" in out.getvalue()
        assert sorted(os.listdir(cache_dir / "c_backend")) == ["notes.txt"]
