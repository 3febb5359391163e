"""What a non-editable install carries: every C source the package reads at run time
(the worker pool, the whole-graph program) is package data, so ``pip install .`` and a
wheel work as the editable install of the tests does. Checked in a real wheel built
from a clean copy of the project's files."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT_FILES = ["pyproject.toml", "README.md", "LICENSE", "tensorjit"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """A wheel of the working tree's project files, built from a clean copy (an
    editable install's egg-info would otherwise list the data files for it)."""
    tree = tmp_path_factory.mktemp("tree")
    listing = ["git", "ls-files", "-co", "--exclude-standard", *PROJECT_FILES]
    names = subprocess.run(listing, cwd=ROOT, capture_output=True, text=True, check=True)
    for name in names.stdout.split():
        if (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / name, tree / name)
    out = tmp_path_factory.mktemp("wheel")
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    result = subprocess.run(
        [*build, "-w", str(out), str(tree)], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (path,) = out.glob("tensorjit-*.whl")
    with zipfile.ZipFile(path) as archive:
        return set(archive.namelist())


def test_every_c_source_of_the_package_is_in_the_wheel(wheel):
    sources = {path.relative_to(ROOT).as_posix() for path in (ROOT / "tensorjit").rglob("*.c")}
    assert sources, "the package has C sources"
    missing = sorted(sources - wheel)
    assert not missing, f"C sources missing from the wheel (pyproject package-data): {missing}"


def test_the_conformance_suite_is_in_the_wheel(wheel):
    assert "tensorjit/testing/conformance/test_rowwise.py" in wheel
    assert "tensorjit/testing/conformance/conftest.py" in wheel
