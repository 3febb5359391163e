"""Run Theano 1.0.5's own tests, unchanged, against ``tensorjit.compat``.

::

    python -m tensorjit.tools.theano_suite            # the default modules
    python -m tensorjit.tools.theano_suite --sdist Theano-1.0.5.tar.gz -- -x -k shared

Theano's sdist comes from the package registry (``pip download theano==1.0.5``, cached
under ``~/.cache/tensorjit/theano-suite``) or ``--sdist``. Nothing of it enters the
project: the test modules are extracted into a temporary directory, next to a
``conftest.py`` that installs the compat layer and shims for the few ``nose`` helpers the
tests import. Prints passed/failed/errors/skipped per module; exits 0 when the run
completed (failures are the report, not an error of the runner), 2 when the sdist can
not be had.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

VERSION = "1.0.5"
MODULES = (
    "theano/gof/tests/test_destroyhandler.py",
    "theano/gof/tests/test_fg.py",
    "theano/gof/tests/test_toolbox.py",
    "theano/gof/tests/test_opt.py",
    "theano/compile/tests/test_function.py",
    "theano/compile/tests/test_function_module.py",
    "theano/compile/tests/test_shared.py",
    "theano/tensor/tests/test_sharedvar.py",
)
#: Data files some modules read next to themselves.
DATA = ("theano/gof/tests/test_fg_old_crash.pkl",)
CACHE = Path.home() / ".cache" / "tensorjit" / "theano-suite"

NOSE_SHIM = {
    "nose/__init__.py": "from . import plugins, tools  # noqa: F401\n",
    "nose/plugins/__init__.py": "from . import attrib, skip  # noqa: F401\n",
    "nose/plugins/skip.py": "from unittest import SkipTest  # noqa: F401\n",
    "nose/plugins/attrib.py": (
        "def attr(*args, **kwargs):\n    def mark(fn):\n        return fn\n    return mark\n"
    ),
    "nose/tools.py": (
        "import unittest\n"
        "_case = unittest.TestCase()\n"
        "assert_raises = _case.assertRaises\n"
        "assert_equal = _case.assertEqual\n"
        "assert_true = _case.assertTrue\n"
        "assert_false = _case.assertFalse\n"
        "\n"
        "def raises(*exceptions):\n"
        "    def decorate(fn):\n"
        "        def wrapper(*args, **kwargs):\n"
        "            with _case.assertRaises(exceptions):\n"
        "                fn(*args, **kwargs)\n"
        "        wrapper.__name__ = fn.__name__\n"
        "        return wrapper\n"
        "    return decorate\n"
    ),
}
CONFTEST = """\
import sys
from pathlib import Path

import numpy

# NumPy 2 removed the aliases Theano-era code still uses (np.float, np.int, ...): the
# tests get them back here, in this process only.
for _alias, _builtin in (("float", float), ("int", int), ("bool", bool), ("complex", complex),
                         ("object", object), ("str", str)):
    if _alias not in numpy.__dict__:
        setattr(numpy, _alias, _builtin)

sys.path.insert(0, str(Path(__file__).with_name("_shims")))
import tensorjit.compat

tensorjit.compat.install()
"""


def fetch_sdist(cache: Path = CACHE) -> Path:
    """Theano's sdist from the cache, else downloaded there with pip."""
    found = sorted(cache.glob(f"Theano-{VERSION}.tar.gz"))
    if found:
        return found[0]
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", f"theano=={VERSION}", "--no-deps",
         "--no-binary", ":all:", "-q", "-d", str(cache)],
        check=True,
    )  # fmt: skip
    return next(cache.glob(f"Theano-{VERSION}.tar.gz"))


def extract(sdist: Path, modules: tuple[str, ...], target: Path) -> list[Path]:
    """The test modules (and their data) as flat files in ``target``: outside any
    ``theano`` package, so that ``import theano`` finds the compat layer."""
    written = []
    with tarfile.open(sdist) as archive:
        root = f"Theano-{VERSION}/"
        for member in (*modules, *DATA):
            source = archive.extractfile(root + member)
            if source is None:
                raise FileNotFoundError(f"{member} is not in {sdist}")
            if member in modules:
                flat = target / member.removeprefix("theano/").replace("/tests/", "_")
            else:  # data a module reads next to itself
                flat = target / Path(member).name
            flat.parent.mkdir(parents=True, exist_ok=True)
            flat.write_bytes(source.read())
            if member in modules:
                written.append(flat)
    for name, text in NOSE_SHIM.items():
        path = target / "_shims" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (target / "conftest.py").write_text(CONFTEST)
    return written


def counts(junit: Path) -> dict[str, dict[str, int]]:
    """passed/failed/errors/skipped per test file, from pytest's JUnit XML."""
    table: dict[str, dict[str, int]] = {}
    for case in ET.parse(junit).iter("testcase"):
        # A module that fails to import is one case without a class name.
        module = (case.get("classname") or case.get("name") or "?").split(".")[0]
        row = table.setdefault(module, dict.fromkeys(("passed", "failed", "errors", "skipped"), 0))
        if case.find("failure") is not None:
            row["failed"] += 1
        elif case.find("error") is not None:
            row["errors"] += 1
        elif case.find("skipped") is not None:
            row["skipped"] += 1
        else:
            row["passed"] += 1
    return table


def ensure_six() -> None:
    """Theano's tests import ``six``; install it into this environment if missing."""
    try:
        import six  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "six"], check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sdist", type=Path, help="Theano-1.0.5.tar.gz (default: download)")
    parser.add_argument("--module", action="append", help="a module path in the sdist")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (after --)")
    args = parser.parse_args(argv)
    try:
        sdist = args.sdist or fetch_sdist()
        ensure_six()
    except (subprocess.CalledProcessError, StopIteration) as exc:
        print(f"Theano {VERSION}'s sdist or six could not be had: {exc}", file=sys.stderr)
        return 2
    modules = tuple(args.module or MODULES)
    with tempfile.TemporaryDirectory(prefix="theano-suite-") as tmp:
        target = Path(tmp)
        files = extract(sdist, modules, target)
        junit = target / "junit.xml"
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "--continue-on-collection-errors", "--rootdir",
             str(target), f"--junitxml={junit}", "-o", "junit_family=xunit1",
             *map(str, files), *args.pytest_args],
            cwd=target,
        )  # fmt: skip
        if not junit.exists():
            print("pytest wrote no report", file=sys.stderr)
            return 1
        table = counts(junit)
    print(f"\nTheano {VERSION}'s tests against tensorjit.compat")
    print(f"{'module':40} {'passed':>7} {'failed':>7} {'errors':>7} {'skipped':>8}")
    total = dict.fromkeys(("passed", "failed", "errors", "skipped"), 0)
    for module, row in sorted(table.items()):
        print(f"{module:40} {row['passed']:7} {row['failed']:7} {row['errors']:7} "
              f"{row['skipped']:8}")  # fmt: skip
        for key in total:
            total[key] += row[key]
    print(f"{'total':40} {total['passed']:7} {total['failed']:7} {total['errors']:7} "
          f"{total['skipped']:8}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
