"""``python -m tensorjit.testing.conformance BACKEND [--covers K1,K2] [pytest args]``:
the conformance suite on one backend, in this process's terminal."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from tensorjit.testing.conformance import environment, pytest_command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tensorjit.testing.conformance")
    parser.add_argument("backend", help="a registered backend: c, opencl, cuda, a plugin's")
    parser.add_argument(
        "--covers",
        default=None,
        help="the kernels the backend claims, comma-separated (default: all)",
    )
    args, pytest_args = parser.parse_known_args(argv)
    covers = None if args.covers is None else [k for k in args.covers.split(",") if k]
    env = dict(os.environ, **environment(args.backend, covers))
    return subprocess.call([*pytest_command(), *pytest_args], env=env)


if __name__ == "__main__":
    sys.exit(main())
