"""The Theano test-suite runner on a stand-in sdist: extracts the modules outside any
``theano`` package, installs the compat layer for them and counts results per module."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from tensorjit.tools import theano_suite

MODULE = "theano/gof/tests/test_standin.py"
TESTS = b"""
from nose.plugins.skip import SkipTest
import theano
import theano.tensor as T


def test_compat_is_what_theano_imports():
    x, y = T.dscalars("xy")
    f = theano.function([x, y], x * y)
    assert f(2.0, 3.0) == 6.0
    assert theano.__version__.endswith("+tensorjit")


def test_a_failure_is_counted():
    assert False


def test_a_skip_is_counted():
    raise SkipTest("stand-in")
"""


def _sdist(tmp_path: Path) -> Path:
    path = tmp_path / "Theano-1.0.5.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for name, data in ((MODULE, TESTS), (theano_suite.DATA[0], b"")):
            info = tarfile.TarInfo(f"Theano-1.0.5/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def test_runner_reports_pass_fail_skip_per_module(tmp_path, capsys):
    code = theano_suite.main(["--sdist", str(_sdist(tmp_path)), "--module", MODULE])
    out = capsys.readouterr().out
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("gof_test_standin"))
    assert row.split()[1:] == ["1", "1", "0", "1"]
