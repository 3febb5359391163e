"""Installing the fixture distributions of tests/fixtures/ as a user would, with pip."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def install_fixture(fixture: str, target: Path) -> Path:
    """Build and install ``tests/fixtures/<fixture>`` into ``target`` with pip (from a
    copy, so the build never writes into the source tree)."""
    source = target.parent / f"{target.name}-src"
    shutil.copytree(FIXTURES / fixture, source)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(source),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return target
